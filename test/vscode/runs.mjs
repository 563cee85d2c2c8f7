// The configurations ("runs") in which Forge's extension tests are run. Each run
// is a separate code-server + extension host; the suite runs the test files of
// `test/vscode/suite/runs/<name>/` in the run <name>, and every other test file
// in the run `main`. Add a run here and a folder there to test another
// configuration.

import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * @typedef {object} VsCodeTestRun
 * @property {string} name
 * @property {string} description
 * @property {boolean} trusted                  open the workspace trusted, or in restricted mode
 * @property {Record<string, string>} env       extra environment of code-server, and so of the extension host
 * @property {{ opencode: 'global' | 'none' }} [installedVsix]  test the packaged forge.vsix installed with
 *   code-server's --install-extension into an empty extensions folder, code-server under bubblewrap with the
 *   checkout hidden (test/vscode/installed-extension.mjs); `opencode: 'global'` puts only the global install of
 *   scripts/prereqs/opencode-global.sh on PATH, `'none'` no opencode at all
 * @property {Record<string, unknown>} [settings]  user settings on top of the harness's quiet ones (run-host.mjs)
 * @property {boolean} [multiRoot]              open the workspace folder through a `.code-workspace` file (a multi-root
 *   workspace), so that tests may add folders: VS Code refuses to turn a single-folder window into a workspace under test
 * @property {(ctx: { workspaceFolder: string, runDir: string }) => Promise<{ env?: Record<string, string>, teardown?: () => Promise<void> | void, extensionDevelopmentPath?: string }>} [setup]
 *   runs before code-server starts, after the workspace (a fresh git repository unless --workspace)
 *   exists: may add files to it or start helpers (e.g. a scripted model server) whose
 *   address it returns as environment; `teardown` runs after code-server stopped; `extensionDevelopmentPath`
 *   makes the run load another build of the extension (a copy the setup made) instead of the checkout.
 */

/** @type {VsCodeTestRun[]} */
export const vscodeTestRuns = [
  {
    name: 'main',
    description: 'trusted fresh git repository',
    trusted: true,
    // Proves that the environment of a run reaches the extension host (harness.test.ts).
    env: { FORGE_VSCODE_ENV_PROBE: 'reaches-the-extension-host' },
  },
  {
    name: 'workspace',
    description: 'trusted fresh git repository opened as a multi-root workspace (.code-workspace file)',
    trusted: true,
    multiRoot: true,
    env: {},
  },
  {
    name: 'windows',
    description: 'trusted fresh git repository, with a second workbench window on it (several windows, one data folder)',
    trusted: true,
    env: {},
    // Both windows' extension hosts must use one Forge data folder: it is given to code-server,
    // whose environment both inherit (the tests' environment would reach only the first).
    async setup({ runDir }) {
      const dataDir = join(runDir, 'forge-data');
      mkdirSync(dataDir, { recursive: true });
      return { env: { FORGE_DATA_DIR: dataDir } };
    },
  },
  {
    name: 'chat',
    description: 'trusted fresh git repository with the chat features on (the harness turns them off elsewhere): the @forge participant',
    trusted: true,
    env: {},
    settings: { 'chat.disableAIFeatures': false },
    // VS Code's chat view sends nothing to a participant until some language model exists: a test-only
    // stub provides one (test/vscode/fixtures/lm-stub). Forge never uses it; the tests check that.
    // code-server loads one extension under development, so the stub is installed as a user extension.
    async setup({ runDir }) {
      installUserExtension(runDir, join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'lm-stub'));
      return {};
    },
  },
  {
    name: 'nochat',
    description: 'trusted fresh git repository, Forge built so that its `vscode` API has no `chat` (a VS Code build without the chat API)',
    trusted: true,
    env: {},
    async setup({ runDir }) {
      return { extensionDevelopmentPath: extensionWithoutChatApi(runDir) };
    },
  },
  {
    name: 'untrusted',
    description: 'fresh git repository opened in restricted mode (workspace not trusted)',
    trusted: false,
    env: {},
  },
  // Last: packaging the VSIX rebuilds dist/ for production (minified, no source maps).
  {
    name: 'vsix',
    description: 'the packaged forge.vsix installed into a fresh profile, checkout hidden, opencode only on PATH (global npm install)',
    trusted: true,
    installedVsix: { opencode: 'global' },
    env: {},
  },
  {
    name: 'vsix-no-opencode',
    description: 'the packaged forge.vsix installed into a fresh profile, checkout hidden, no opencode anywhere',
    trusted: true,
    installedVsix: { opencode: 'none' },
    env: {},
  },
];

/**
 * Installs the unpacked extension `dir` into the run's user extensions folder (code-server's
 * --extensions-dir, `<runDir>/extensions`), as `--install-extension` would: the folder and its
 * entry in extensions.json.
 * @param {string} runDir
 * @param {string} dir
 */
function installUserExtension(runDir, dir) {
  const { publisher, name, version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const extensionsDir = join(runDir, 'extensions');
  const folder = `${publisher}.${name}-${version}`;
  cpSync(dir, join(extensionsDir, folder), { recursive: true });
  const entry = {
    identifier: { id: `${publisher}.${name}` },
    version,
    location: { $mid: 1, path: join(extensionsDir, folder), scheme: 'file' },
    relativeLocation: folder,
    metadata: { installedTimestamp: Date.now(), source: 'vsix', pinned: true },
  };
  writeFileSync(join(extensionsDir, 'extensions.json'), JSON.stringify([entry]));
}

/** The marker line extensionWithoutChatApi puts first in the copy's dist/extension.cjs (the tests look for it). */
export const NO_CHAT_API_MARKER = '/* forge-test: vscode.chat hidden */';

/**
 * A copy of the built extension whose `require('vscode')` returns the API without `chat`, as a
 * VS Code build without the chat API would: the checkout's files linked, dist/extension.cjs
 * copied with one line in front that wraps `require`.
 * @param {string} runDir
 */
function extensionWithoutChatApi(runDir) {
  const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const copy = join(runDir, 'forge-without-chat');
  mkdirSync(join(copy, 'dist'), { recursive: true });
  for (const entry of ['package.json', 'package.nls.json', 'l10n', 'media', 'container', 'README.md', 'CHANGELOG.md', 'LICENSE']) {
    if (existsSync(join(repo, entry))) symlinkSync(join(repo, entry), join(copy, entry));
  }
  for (const file of readdirSync(join(repo, 'dist'))) {
    if (file !== 'extension.cjs') symlinkSync(join(repo, 'dist', file), join(copy, 'dist', file));
  }
  const wrap =
    `${NO_CHAT_API_MARKER} var require = ((real) => Object.assign((id) => { if (id !== 'vscode') return real(id); const api = { ...real('vscode') }; delete api.chat; return api; }, real))(require);\n`;
  writeFileSync(join(copy, 'dist', 'extension.cjs'), wrap + readFileSync(join(repo, 'dist', 'extension.cjs'), 'utf8'));
  return copy;
}

/** @param {string} name */
export function vscodeTestRun(name) {
  const run = vscodeTestRuns.find((r) => r.name === name);
  if (!run) throw new Error(`Unknown VS Code test run "${name}"; known runs: ${vscodeTestRuns.map((r) => r.name).join(', ')} (test/vscode/runs.mjs).`);
  return run;
}
