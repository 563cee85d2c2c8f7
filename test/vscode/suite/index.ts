// Entry of Forge's extension tests, loaded by the VS Code extension host through
// `extensionTestsPath` (code-server harness `test/vscode/run-host.mjs`, or
// @vscode/test-electron via `test/vscode/run-electron.mjs`). `build-suite.mjs`
// bundles it to out/vscode-suite/index.cjs and every `*.test.ts` next to it to
// out/vscode-suite/**/*.test.cjs; this module finds those compiled files at run
// time and runs them with mocha.
//
// Runs: files under `runs/<name>/` belong to the run named <name> (a separate
// extension host started in another configuration, e.g. an untrusted
// workspace); every other test file belongs to the run named `main`. The run
// name comes from the harness (FORGE_VSCODE_HARNESS).
import Mocha from 'mocha';
import { readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { harnessInfo } from './support/harness';

export async function run(): Promise<void> {
  const info = harnessInfo();
  const suiteDir = __dirname;
  const files = findTestFiles(suiteDir).filter((file) => runOfTestFile(relative(suiteDir, file)) === info.run);
  if (files.length === 0) {
    throw new Error(`No compiled test file for the run "${info.run}" under ${suiteDir}; run test/vscode/build-suite.mjs first.`);
  }
  const mocha = new Mocha({
    ui: 'bdd',
    reporter: 'spec',
    color: false,
    // Generous: extension tests drive real opencode sessions and git repositories.
    timeout: 120_000,
    ...(process.env.FORGE_VSCODE_GREP ? { grep: process.env.FORGE_VSCODE_GREP } : {}),
  });
  for (const file of files) mocha.addFile(file);
  console.log(`[vscode suite] run "${info.run}": ${files.length} test file(s)`);
  const failures = await new Promise<number>((resolve) => mocha.run(resolve));
  if (failures > 0) throw new Error(`${failures} VS Code extension test(s) failed in the run "${info.run}".`);
}

function findTestFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.cjs'))
    .map((name) => join(dir, name))
    .sort();
}

function runOfTestFile(relativePath: string): string {
  const parts = relativePath.split(sep);
  return parts[0] === 'runs' && parts.length > 2 && parts[1] ? parts[1] : 'main';
}
