/**
 * Finding an installed opencode outside Forge's own node_modules: the VSIX does not carry the
 * ~100 MB opencode binary, so an installed extension uses the user's: `opencode` on PATH,
 * else in the folders global installs usually go to (an editor started from the desktop often
 * has a shorter PATH than the user's shell, without nvm's or npm's user prefix).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

export interface OpencodeLookupOptions {
  /** Environment whose PATH (and npm, nvm, pnpm variables) is searched; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Folders searched after PATH; default `globalBinFolders(env)`. */
  extraFolders?: readonly string[];
  platform?: NodeJS.Platform;
}

/** The executable's file name on `platform`. */
export function opencodeExecutableName(platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? 'opencode.exe' : 'opencode';
}

/**
 * Folders global installs of opencode usually land in, besides PATH: npm's global prefix (from
 * `npm_config_prefix`, `~/.npm-global`, the running Node's own prefix), nvm's current bin
 * folder, pnpm's and bun's global folders, and opencode's own install script's folder.
 */
export function globalBinFolders(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string[] {
  const home = env.HOME || env.USERPROFILE || homedir();
  const folders: string[] = [];
  const npmBin = (prefix: string) => (platform === 'win32' ? prefix : join(prefix, 'bin'));
  for (const prefix of [env.npm_config_prefix, env.NPM_CONFIG_PREFIX]) if (prefix) folders.push(npmBin(prefix));
  if (platform === 'win32') {
    if (env.APPDATA) folders.push(join(env.APPDATA, 'npm'), join(env.APPDATA, 'npm', 'node_modules', 'opencode-ai', 'bin'));
  } else {
    folders.push(join(home, '.npm-global', 'bin'), '/usr/local/bin', '/opt/homebrew/bin');
  }
  if (env.NVM_BIN) folders.push(env.NVM_BIN);
  if (env.PNPM_HOME) folders.push(env.PNPM_HOME);
  folders.push(join(home, '.bun', 'bin'), join(home, '.opencode', 'bin'));
  // The Node running Forge's CLI: `npm i -g` puts binaries beside it (not so in an editor, whose Node is its own).
  folders.push(dirname(process.execPath));
  return [...new Set(folders)];
}

/**
 * The first executable opencode on the PATH of `env`, then in the extra folders; undefined
 * when there is none.
 */
export function findOpencodeOnPath(options: OpencodeLookupOptions = {}): string | undefined {
  const env = options.env ?? process.env;
  const platform = options.platform ?? process.platform;
  const name = opencodeExecutableName(platform);
  const pathFolders = (env.PATH ?? env.Path ?? '').split(platform === 'win32' ? ';' : delimiter).filter((f) => f !== '');
  for (const folder of [...pathFolders, ...(options.extraFolders ?? globalBinFolders(env, platform))]) {
    const candidate = join(folder, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** What to tell the user when no opencode binary is found anywhere. */
export function opencodeNotFoundMessage(lookedIn: readonly string[] = []): string {
  const where = lookedIn.length > 0 ? ` (looked for the opencode-ai package from ${lookedIn.join(', ')}, then for "opencode" on PATH and in the global npm folders)` : '';
  return `Forge could not find the opencode binary${where}. Install it with \`npm i -g opencode-ai\`, or set forge.opencode.binaryPath to an opencode binary.`;
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
