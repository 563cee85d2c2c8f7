#!/usr/bin/env node
// Forge's extension tests in a real VS Code extension host, in one command:
// installs what is missing (scripts/prereqs/vscode-host.sh), bundles the suite
// (test/vscode/build-suite.mjs), then runs each configured run
// (test/vscode/runs.mjs) in its own code-server + Chromium
// (test/vscode/run-host.mjs). Exit code: 0 when every run passed, else the
// first failing run's code (1 = a test failed, 124 = time-out, 2 = harness).
//
//   node scripts/vscode-test.mjs [--run NAME]… [--grep REGEXP] [--env NAME=VALUE]…
//        [--workspace DIR] [--trusted|--untrusted] [--timeout-ms N] [--keep-run-dir]
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function fail(message, code = 2) {
  process.stderr.write(`vscode-test: ${message}\n`);
  process.exit(code);
}

const { cliOptions, runOptionsFromCli, runVsCodeTests } = await import('../test/vscode/run-host.mjs');
const { vscodeTestRuns, vscodeTestRun } = await import('../test/vscode/runs.mjs');

let values;
let runOptions;
try {
  ({ values } = parseArgs({ options: { ...cliOptions, run: { type: 'string', multiple: true } }, allowPositionals: false }));
  runOptions = runOptionsFromCli({ ...values, run: undefined });
  for (const name of values.run ?? []) vscodeTestRun(name);
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
const runs = values.run?.length ? values.run : vscodeTestRuns.map((r) => r.name);

const prereq = spawnSync('bash', [join(root, 'scripts/prereqs/vscode-host.sh')], { stdio: 'inherit' });
if (prereq.status !== 0) fail(`scripts/prereqs/vscode-host.sh failed (exit ${prereq.status ?? prereq.signal}).`, prereq.status || 2);

// A fresh clone has no build yet; `npm test` builds before it calls this script.
const { main } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
if (main && !existsSync(join(root, main)) && !runOptions.extensionDevelopmentPath) {
  process.stdout.write(`vscode-test: ${main} is missing: building the extension (node esbuild.mjs)\n`);
  const build = spawnSync(process.execPath, [join(root, 'esbuild.mjs')], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) fail(`building the extension failed (exit ${build.status ?? build.signal}).`);
}

const { buildSuite } = await import('../test/vscode/build-suite.mjs');
try {
  const { testFiles } = await buildSuite();
  process.stdout.write(`vscode-test: suite bundled (${testFiles.length} test file(s)); runs: ${runs.join(', ')}\n`);
} catch (error) {
  fail(`bundling the suite failed: ${error instanceof Error ? error.message : error}`);
}

const results = [];
for (const run of runs) {
  const result = await runVsCodeTests({ ...runOptions, run });
  results.push({ run, ...result });
}

process.stdout.write('\nvscode-test summary:\n');
for (const { run, exitCode, wallMs, peakRssBytes } of results) {
  process.stdout.write(
    `  ${exitCode === 0 ? 'passed' : `FAILED (exit ${exitCode})`}  ${run}  ${(wallMs / 1000).toFixed(1)} s, peak ${(peakRssBytes / 2 ** 20).toFixed(0)} MiB\n`,
  );
}
const failed = results.find((r) => r.exitCode !== 0);
process.exit(failed ? failed.exitCode : 0);
