#!/usr/bin/env node
// Every benchmark of bench/ in its quick mode (one short iteration, no warm-up), one after the
// other: what `npm test` runs so that a benchmark that no longer runs to its end fails CI. The
// figures are printed, never judged: speed is read from full runs (`npm run bench:*`). Each
// benchmark has its own overall time-out and names the step it waited in; this prints how long
// each took and, at the end, which failed.
//
//   node scripts/bench-quick.mjs [name …]   (names: storage opencode loop sandbox gate shell process ui parallel worktree)
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BENCHES = [
  ['storage', 'bench/storage.mjs'],
  ['opencode', 'bench/opencode.mjs'],
  ['loop', 'bench/loop-overhead.mjs'],
  ['sandbox', 'bench/sandbox.mjs'],
  ['gate', 'bench/gate.mjs'],
  ['shell', 'bench/shell.mjs'],
  ['process', 'bench/process-spawn.mjs'],
  ['ui', 'bench/ui-scale.mjs'],
  ['parallel', 'bench/parallel.mjs'],
  ['worktree', 'bench/worktree.mjs'],
];
const asked = process.argv.slice(2);
const unknown = asked.filter((a) => !BENCHES.some(([n]) => n === a));
if (unknown.length) {
  process.stderr.write(`bench-quick: unknown benchmark(s) ${unknown.join(', ')} (known: ${BENCHES.map(([n]) => n).join(', ')})\n`);
  process.exit(2);
}
const failed = [];
const took = [];
const t0 = Date.now();
for (const [name, file] of BENCHES) {
  if (asked.length && !asked.includes(name)) continue;
  process.stdout.write(`\n--- bench:${name} --quick\n`);
  const t = Date.now();
  const r = spawnSync(process.execPath, [join(root, file), '--quick'], { cwd: root, stdio: 'inherit' });
  const seconds = (Date.now() - t) / 1000;
  took.push(`bench:${name} ${seconds.toFixed(0)} s`);
  if (r.status !== 0) failed.push(`bench:${name} (exit ${r.status ?? r.signal})`);
}
process.stdout.write(`\nbenchmarks, quick mode: ${took.join(', ')}; ${((Date.now() - t0) / 1000).toFixed(0)} s in all\n`);
if (failed.length) {
  process.stderr.write(`benchmarks that did not run to their end: ${failed.join(', ')} (their last lines above say in which step, waiting for what)\n`);
  process.exit(1);
}
