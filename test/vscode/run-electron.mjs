#!/usr/bin/env node
// The same extension-test suite under desktop VS Code through @vscode/test-electron,
// for machines where VS Code can be downloaded (or is installed: pass its
// executable with --vscode PATH). Not used on the Forge build machine, which
// cannot reach update.code.visualstudio.com: there scripts/vscode-test.mjs runs
// the suite in code-server instead.
//
//   node test/vscode/build-suite.mjs && node test/vscode/run-electron.mjs [--run main|untrusted] [--vscode PATH]
//
// The one line that matters:
//   runTests({ extensionDevelopmentPath: ROOT, extensionTestsPath: ROOT/out/vscode-suite/index.cjs, launchArgs: [WORKSPACE], extensionTestsEnv: { FORGE_VSCODE_HARNESS } })
import { runTests } from '@vscode/test-electron';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createGitWorkspace, writeWorkspaceFile } from './run-host.mjs';
import { vscodeTestRun } from './runs.mjs';

const root = realpathSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));
const { values } = parseArgs({ options: { run: { type: 'string' }, vscode: { type: 'string' } } });
const run = vscodeTestRun(values.run ?? 'main');
const { publisher, name } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

const runDir = mkdtempSync(join(tmpdir(), `forge-vscode-electron-${run.name}-`));
const workspaceFolder = createGitWorkspace(join(runDir, 'workspace'));
const workspaceFile = run.multiRoot ? writeWorkspaceFile(runDir, workspaceFolder) : null;
const userDataDir = join(runDir, 'user-data');
mkdirSync(join(userDataDir, 'User'), { recursive: true });
writeFileSync(
  join(userDataDir, 'User/settings.json'),
  JSON.stringify({
    'workbench.startupEditor': 'none',
    ...(run.trusted ? {} : { 'security.workspace.trust.enabled': true, 'security.workspace.trust.startupPrompt': 'never' }),
  }),
);

let exitCode = 1;
try {
  exitCode = await runTests({
    ...(values.vscode ? { vscodeExecutablePath: values.vscode } : {}),
    extensionDevelopmentPath: root,
    extensionTestsPath: join(root, 'out/vscode-suite/index.cjs'),
    launchArgs: [workspaceFile ?? workspaceFolder, '--user-data-dir', userDataDir, '--disable-extensions', ...(run.trusted ? ['--disable-workspace-trust'] : [])],
    extensionTestsEnv: {
      ...run.env,
      FORGE_VSCODE_HARNESS: JSON.stringify({
        run: run.name,
        host: 'electron',
        workspaceFolder,
        workspaceFile,
        extensionId: `${publisher}.${name}`,
        extensionPath: root,
        trusted: run.trusted,
        extraEnv: Object.keys(run.env),
        controlUrl: null,
      }),
    },
  });
} catch (error) {
  // TestRunFailedError carries the tests' exit code.
  if (typeof error?.code === 'number') exitCode = error.code;
  process.stderr.write(`run-electron: ${error instanceof Error ? error.message : error}\n`);
} finally {
  rmSync(runDir, { recursive: true, force: true });
}
process.exit(exitCode);
