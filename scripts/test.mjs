#!/usr/bin/env node
// `npm test`: installs what the tests need when it is missing, then runs every suite:
// typecheck, the engine tests (mocha, real opencode/git/sql.js/sandboxes) and the
// extension tests in a real VS Code extension host. Uses only Node built-ins so it
// can run on a fresh clone before `npm ci`.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const only = (name) => args.length === 0 || args.includes(name);

// `npm test` hands its children the outer npm's variables (npm_node_execpath and friends); a
// nested npm would run install scripts on that Node instead of the one a prerequisite chose.
const childEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_(node_execpath|execpath|lifecycle_)/.test(k) && k !== 'NODE'));

function step(title, cmd, cmdArgs, opts = {}) {
  process.stdout.write(`\n=== ${title}\n`);
  const r = spawnSync(cmd, cmdArgs, { cwd: root, stdio: 'inherit', env: childEnv, ...opts });
  if (r.status !== 0) {
    process.stderr.write(`\nnpm test: "${title}" failed (exit ${r.status ?? r.signal}).\n`);
    process.exit(r.status || 1);
  }
}

if (!existsSync(join(root, 'node_modules/.package-lock.json'))) {
  // Not `npm ci`: the registry serves only this platform's opencode binary package, so the lock
  // cannot list the other platforms' optional packages, and `npm ci` would call it out of sync.
  step('install npm dependencies', 'npm', ['install', '--no-audit', '--no-fund']);
}

// Each prerequisite script installs and starts what it names when missing, and fails
// (never skips) when it cannot: under CI=true a missing prerequisite fails the run.
const prereqDir = join(root, 'scripts/prereqs');
for (const f of readdirSync(prereqDir).filter((f) => f.endsWith('.sh')).sort()) {
  step(`prerequisite ${f}`, 'bash', [join(prereqDir, f)]);
}

if (only('typecheck')) step('typecheck', 'npx', ['tsc', '-p', 'tsconfig.json', '--noEmit']);
step('build', 'node', ['esbuild.mjs']);
if (only('core')) step('engine tests (mocha)', 'npx', ['mocha']);
// Every benchmark in its quick mode: one that no longer runs to its end fails here (figures printed, not judged).
if (only('bench')) step('benchmarks, quick mode (scripts/bench-quick.mjs)', 'node', ['scripts/bench-quick.mjs']);
if (only('vscode') && existsSync(join(root, 'scripts/vscode-test.mjs'))) {
  step('extension tests in a real VS Code extension host', 'node', ['scripts/vscode-test.mjs']);
}
process.stdout.write('\nnpm test: all suites passed.\n');
