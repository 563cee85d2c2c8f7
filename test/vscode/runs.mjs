// The configurations ("runs") in which Forge's extension tests are run. Each run
// is a separate code-server + extension host; the suite runs the test files of
// `test/vscode/suite/runs/<name>/` in the run <name>, and every other test file
// in the run `main`. Add a run here and a folder there to test another
// configuration.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

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
 * @property {boolean} [multiRoot]              open the workspace folder through a `.code-workspace` file (a multi-root
 *   workspace), so that tests may add folders: VS Code refuses to turn a single-folder window into a workspace under test
 * @property {(ctx: { workspaceFolder: string, runDir: string }) => Promise<{ env?: Record<string, string>, teardown?: () => Promise<void> | void }>} [setup]
 *   runs before code-server starts, after the workspace (a fresh git repository unless --workspace)
 *   exists: may add files to it or start helpers (e.g. a scripted model server) whose
 *   address it returns as environment; `teardown` runs after code-server stopped.
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

/** @param {string} name */
export function vscodeTestRun(name) {
  const run = vscodeTestRuns.find((r) => r.name === name);
  if (!run) throw new Error(`Unknown VS Code test run "${name}"; known runs: ${vscodeTestRuns.map((r) => r.name).join(', ')} (test/vscode/runs.mjs).`);
  return run;
}
