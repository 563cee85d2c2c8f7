// Runs whose extension under test is the packaged forge.vsix as a user installs it
// (runs.mjs: `installedVsix`), not the checkout:
//  - the VSIX is packaged once per process (`node scripts/package-vsix.mjs`), or taken from
//    FORGE_VSIX;
//  - code-server's `--install-extension` installs it into the run's fresh, empty extensions
//    folder (fresh user data too);
//  - the extension host needs an extensionDevelopmentPath to run tests: a stub extension with no
//    code (`forge-tests.vsix-test-host`) in the run folder, so the only Forge is the installed one;
//    the bundled suite is copied next to it;
//  - code-server runs under bubblewrap with the checkout hidden (empty tmpfs over the repository,
//    its node_modules and its .cache, wherever the symbolic links point): Node 24 and code-server
//    are bound read-only into the run folder, and so is the global opencode prefix
//    (scripts/prereqs/opencode-global.sh) when the run wants one, whose bin/ is then the only
//    opencode on PATH. HOME is a fresh folder, so no opencode of the user's home is found.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The stub extension the extension host is started with, so that it runs the tests. */
export const TEST_HOST_ID = 'forge-tests.vsix-test-host';

let packaging;

/** forge.vsix: FORGE_VSIX when set, else `node scripts/package-vsix.mjs` once per process. */
export function packagedVsix(repoRoot, say) {
  packaging ??= (async () => {
    const given = process.env.FORGE_VSIX;
    if (given) {
      if (!existsSync(given)) throw new Error(`FORGE_VSIX=${given} does not exist.`);
      say(`using the packaged ${given} (FORGE_VSIX)`);
      return realpathSync(given);
    }
    say('packaging forge.vsix (node scripts/package-vsix.mjs)');
    const result = spawnSync(process.execPath, [join(repoRoot, 'scripts/package-vsix.mjs')], { cwd: repoRoot, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`node scripts/package-vsix.mjs failed (exit ${result.status ?? result.signal}):\n${(result.stdout + result.stderr).slice(-4000)}`);
    return join(repoRoot, 'forge.vsix');
  })();
  return packaging;
}

/**
 * Installs `vsix` into `<runDir>/extensions` with code-server's own installer and prepares what
 * the harness needs to start code-server on it with the checkout out of reach.
 * @returns {{ extensionId: string, extensionPath: string, extensionsDir: string, testHostPath: string,
 *   testsPath: string, hiddenPaths: string[], opencodeBin: string | null, launch: (codeServerArgs: string[]) => { command: string, args: string[] }, env: Record<string, string> }}
 */
export function installVsix({ repoRoot, vsix, runDir, node24, nodeHome, codeServerDir, codeServerEntry, suiteDir, opencode, say }) {
  const extensionsDir = join(runDir, 'extensions');
  const userDataDir = join(runDir, 'user-data');
  mkdirSync(extensionsDir, { recursive: true });
  mkdirSync(userDataDir, { recursive: true });
  if (readdirSync(extensionsDir).length > 0) throw new Error(`${extensionsDir} is not empty before the install.`);
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  const extensionId = `${manifest.publisher}.${manifest.name}`;

  let opencodePrefix = null;
  if (opencode === 'global') {
    const prereq = spawnSync('bash', [join(repoRoot, 'scripts/prereqs/opencode-global.sh')], { stdio: 'inherit' });
    opencodePrefix = join(repoRoot, '.cache/opencode-global');
    if (prereq.status !== 0 || !existsSync(join(opencodePrefix, 'bin/opencode'))) {
      throw new Error(`no global opencode in ${opencodePrefix}: run scripts/prereqs/opencode-global.sh (it installs opencode-ai there with npm).`);
    }
  }

  const started = Date.now();
  execFileSync(node24, [codeServerEntry, '--install-extension', vsix, '--extensions-dir', extensionsDir, '--user-data-dir', userDataDir], {
    stdio: 'pipe',
    env: { ...process.env, XDG_CONFIG_HOME: join(runDir, 'xdg-config'), XDG_DATA_HOME: join(runDir, 'xdg-data'), XDG_CACHE_HOME: join(runDir, 'xdg-cache') },
  });
  const installed = readdirSync(extensionsDir).filter((name) => name.toLowerCase().startsWith(`${extensionId.toLowerCase()}-`));
  if (installed.length !== 1) throw new Error(`code-server --install-extension left ${JSON.stringify(readdirSync(extensionsDir))} in ${extensionsDir}, not one ${extensionId}-<version> folder.`);
  const extensionPath = join(extensionsDir, installed[0]);
  say(`installed ${vsix} (${(statSync(vsix).size / 1024).toFixed(0)} KiB) into ${extensionPath} in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // The extension under development: no code, only there so that the extension host runs tests.
  const testHostPath = join(runDir, 'vsix-test-host');
  mkdirSync(testHostPath, { recursive: true });
  const [publisher, name] = TEST_HOST_ID.split('.');
  writeFileSync(join(testHostPath, 'package.json'), JSON.stringify({ name, publisher, version: '0.0.0', engines: { vscode: '*' } }, null, 2));
  const testsDir = join(runDir, 'vscode-suite');
  cpSync(suiteDir, testsDir, { recursive: true });

  // Tools the sandboxed code-server needs, bound read-only where the checkout is not.
  const tools = join(runDir, 'tools');
  // opencode's plugin install the tests seed fresh opencode homes with (test/support/opencode-config-seed.ts).
  const seeds = join(repoRoot, '.cache/opencode-config-deps');
  const binds = [
    [nodeHome, join(tools, 'node')],
    [codeServerDir, join(tools, 'code-server')],
    ...(opencodePrefix ? [[realpathSync(opencodePrefix), join(tools, 'opencode-global')]] : []),
    ...(opencodePrefix && existsSync(seeds) ? [[realpathSync(seeds), join(tools, 'opencode-config-deps')]] : []),
  ];
  for (const [, to] of binds) mkdirSync(to, { recursive: true });
  const candidates = [repoRoot, join(repoRoot, 'node_modules'), join(repoRoot, '.cache')].filter((p) => existsSync(p)).map((p) => realpathSync(p));
  // The checkouts the links point into (a worktree whose node_modules is the main checkout's) go too.
  for (const p of [...candidates]) if (existsSync(join(p, '..', 'package.json'))) candidates.push(realpathSync(join(p, '..')));
  // A folder inside another hidden one is hidden with it.
  const hiddenPaths = [...new Set(candidates)].filter((p, _, all) => !all.some((q) => q !== p && p.startsWith(q + '/')));
  const sandboxedNode = join(tools, 'node', node24.slice(nodeHome.length));
  const sandboxedEntry = join(tools, 'code-server', codeServerEntry.slice(codeServerDir.length));
  const opencodeBin = opencodePrefix ? join(tools, 'opencode-global', 'bin') : null;
  // A user's global npm folder reaches the editor through the login shell's profile (VS Code's
  // server resolves the shell environment for the extension host), not only through the
  // server's own PATH: both are given.
  const home = join(runDir, 'home');
  mkdirSync(home, { recursive: true });
  if (opencodeBin) {
    const profile = `case ":$PATH:" in *":${opencodeBin}:"*) ;; *) PATH="${opencodeBin}:$PATH"; export PATH ;; esac\n`;
    for (const file of ['.profile', '.bashrc']) writeFileSync(join(home, file), profile);
  }
  return {
    extensionId,
    extensionPath,
    extensionsDir,
    testHostPath,
    testsPath: join(testsDir, 'index.cjs'),
    hiddenPaths: [...new Set(hiddenPaths)],
    opencodeBin,
    launch: (args) => ({
      command: 'bwrap',
      args: [
        '--dev-bind', '/', '/',
        ...[...new Set(hiddenPaths)].flatMap((p) => ['--tmpfs', p]),
        ...binds.flatMap(([from, to]) => ['--ro-bind', from, to]),
        '--chdir', runDir,
        '--die-with-parent',
        '--',
        sandboxedNode,
        sandboxedEntry,
        ...args,
      ],
    }),
    // What a user's shell would give: system folders, plus the global opencode when there is one.
    env: {
      PATH: [...(opencodeBin ? [opencodeBin] : []), '/usr/local/bin', '/usr/bin', '/bin'].join(':'),
      HOME: home,
      ...(opencodePrefix && existsSync(seeds) ? { FORGE_TEST_OPENCODE_SEEDS: join(tools, 'opencode-config-deps') } : {}),
    },
  };
}

/** Environment variables of npm, nvm and pnpm that would point the installed extension at folders of this machine's. */
export function withoutPackageManagerEnv(env) {
  const clean = { ...env };
  for (const name of Object.keys(clean)) {
    if (/^npm_/i.test(name) || name === 'NVM_BIN' || name === 'NVM_DIR' || name === 'PNPM_HOME' || name === 'BUN_INSTALL') delete clean[name];
  }
  return clean;
}
