import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { WorkspaceError } from './workspace-error';

/**
 * Longest data folder accepted. Worktrees live at
 * `<dataDir>/worktrees/<48-char name>/<the repository's own paths>`, so the data
 * folder must leave room below the platform's path limit: Windows' classic
 * MAX_PATH is 260, Linux/macOS PATH_MAX is 1024–4096.
 */
export const MAX_DATA_DIR_LENGTH = { win32: 120, other: 1024 } as const;

export interface ResolveDataDirOptions {
  homeDir?: string;
  platform?: NodeJS.Platform;
}

type Env = Readonly<Record<string, string | undefined>>;

const nonEmpty = (value: string | undefined): value is string => value !== undefined && value.trim() !== '';

/**
 * Forge's data folder: `FORGE_DATA_DIR`, else `$XDG_DATA_HOME/forge` (a relative
 * XDG_DATA_HOME is ignored, as the XDG spec says), else `%LOCALAPPDATA%\forge`
 * on Windows, else `~/.local/share/forge`. Does no I/O; `ensureDataDir` checks
 * that it can be written.
 */
export function resolveDataDir(env: Env, options: ResolveDataDirOptions = {}): string {
  const platform = options.platform ?? process.platform;
  const pathApi = platform === 'win32' ? path.win32 : path.posix;
  const limit = platform === 'win32' ? MAX_DATA_DIR_LENGTH.win32 : MAX_DATA_DIR_LENGTH.other;

  let dataDir: string;
  if (nonEmpty(env.FORGE_DATA_DIR)) {
    if (!pathApi.isAbsolute(env.FORGE_DATA_DIR)) {
      throw new WorkspaceError(
        'data_dir_invalid',
        `FORGE_DATA_DIR is "${env.FORGE_DATA_DIR}", a relative path. Set it to an absolute path, e.g. FORGE_DATA_DIR=${pathApi.join(options.homeDir ?? homedir(), '.local', 'share', 'forge')}.`,
      );
    }
    dataDir = env.FORGE_DATA_DIR;
  } else if (nonEmpty(env.XDG_DATA_HOME) && pathApi.isAbsolute(env.XDG_DATA_HOME)) {
    dataDir = pathApi.join(env.XDG_DATA_HOME, 'forge');
  } else if (platform === 'win32' && nonEmpty(env.LOCALAPPDATA) && pathApi.isAbsolute(env.LOCALAPPDATA)) {
    dataDir = pathApi.join(env.LOCALAPPDATA, 'forge');
  } else {
    const home = options.homeDir ?? homedir();
    if (!nonEmpty(home) || !pathApi.isAbsolute(home)) {
      throw new WorkspaceError(
        'data_dir_invalid',
        'Cannot find a home folder for Forge\'s data. Set FORGE_DATA_DIR to an absolute, writable folder.',
      );
    }
    dataDir = pathApi.join(home, '.local', 'share', 'forge');
  }

  dataDir = pathApi.resolve(dataDir);
  if (dataDir.length > limit) {
    throw new WorkspaceError(
      'data_dir_too_long',
      `Forge's data folder path is ${dataDir.length} characters long (limit ${limit}, to leave room for worktrees/<loop-name>/ and the repository's files): ${dataDir}. Set FORGE_DATA_DIR to a shorter absolute path.`,
    );
  }
  return dataDir;
}

/**
 * `mkdir -p` one level at a time. Node's `mkdir({ recursive: true })` spins
 * forever under procfs (`/proc/...` answers ENOENT for every level), so a
 * mistyped FORGE_DATA_DIR would hang Forge instead of failing.
 */
async function makeFolders(dir: string): Promise<void> {
  const missing: string[] = [];
  let current = dir;
  for (;;) {
    try {
      const info = await stat(current);
      if (!info.isDirectory()) {
        throw Object.assign(new Error(`${current} is not a folder`), { code: 'ENOTDIR' });
      }
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      const parent = path.dirname(current);
      if (parent === current) break;
      missing.unshift(current);
      current = parent;
    }
  }
  for (const folder of missing) {
    try {
      await mkdir(folder);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/**
 * Creates `<dataDir>/worktrees` and proves the folder is writable with a probe
 * file, so an unusable data folder fails before any loop is created.
 */
export async function ensureDataDir(dataDir: string): Promise<void> {
  const worktreesDir = path.join(dataDir, 'worktrees');
  const probe = path.join(dataDir, `.write-probe-${process.pid}-${Math.random().toString(36).slice(2)}`);
  try {
    await makeFolders(worktreesDir);
    await writeFile(probe, '');
    await rm(probe, { force: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    if (code === 'ENAMETOOLONG') {
      throw new WorkspaceError(
        'data_dir_too_long',
        `Forge's data folder path is too long for this file system: ${dataDir}. Set FORGE_DATA_DIR to a shorter absolute path.`,
        { cause: error },
      );
    }
    throw new WorkspaceError(
      'data_dir_unwritable',
      `Forge cannot write to its data folder ${dataDir} (${code}). Make it writable, or set FORGE_DATA_DIR to a writable absolute path.`,
      { cause: error },
    );
  }
}
