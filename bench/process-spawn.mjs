#!/usr/bin/env node
// What a process costs through Forge's one process runner (src/core/process/process-runner.ts)
// and through execa, against a bare node:child_process spawn, in the same run: a spawn of `true`
// (own process group, piped stdio, time-out, output cap) and a `git status` in a small repository
// (through the git runner). Samples alternate so load from other processes hits all alike; medians.
// execa is measured only while it is installed (issue 28 removed it: it cost more than 5 %).
//
//   node bench/process-spawn.mjs [--runs 60] [--quick]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, loadNow, median, numberArg } from './bench-common.mjs';

const bench = benchRun('bench:process', { timeoutS: 900, quickTimeoutS: 120 });
bench.step('load the modules');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { runProcess } = await import(path.join(root, 'src/core/process/process-runner.ts'));
const { createGitRunner } = await import(path.join(root, 'src/core/workspace/git-runner.ts'));
const { execa } = await import('execa').catch(() => ({ execa: null }));

/** node:child_process with nothing around it: the floor both runners are measured against. */
const bare = (program, args, options) =>
  new Promise((resolve, reject) => {
    const child = spawn(program, args, options);
    const out = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', () => undefined);
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8') }));
    child.stdin?.end();
  });

const RUNS = bench.quick ? 3 : numberArg('runs', 60);
const repo = mkdtempSync(path.join(os.tmpdir(), 'forge-bench-process-'));
bench.cleanup(() => rmSync(repo, { recursive: true, force: true }));
execFileSync('git', ['init', '-q', repo]);
writeFileSync(path.join(repo, 'a.txt'), 'a\n');
execFileSync('git', ['-C', repo, 'add', '.']);
execFileSync('git', ['-C', repo, '-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-qm', 'a']);
const git = createGitRunner();

const contenders = {
  'true: bare spawn': () => bare('true', [], { detached: true, stdio: ['pipe', 'pipe', 'pipe'] }),
  'true: process-runner': () => runProcess('true', [], { processGroup: true, timeoutMs: 30_000 }),
  'git status: bare spawn': () => bare('git', ['status', '--porcelain'], { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] }),
  'git status: git-runner': () => git.run(repo, ['status', '--porcelain']),
};
if (execa) {
  contenders['true: execa'] = () => execa('true', [], { detached: true, stdin: 'pipe', timeout: 30_000, maxBuffer: 16 * 1024 * 1024, reject: false, stripFinalNewline: false });
  contenders['git status: execa'] = () => execa('git', ['status', '--porcelain'], { cwd: repo, stdin: 'ignore', reject: false, stripFinalNewline: false });
} else process.stderr.write('bench:process: execa is not installed (issue 28 removed it, see CHANGELOG): the runners are measured against a bare spawn only\n');
const samples = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
const loadBefore = loadNow();
bench.step('warm up');
for (const fn of Object.values(contenders)) for (let i = 0; i < 3; i++) await fn();
bench.step(`${RUNS} alternating samples`);
for (let i = 0; i < RUNS; i++) {
  const order = Object.keys(contenders);
  if (i % 2) order.reverse();
  for (const k of order) {
    const t = performance.now();
    await contenders[k]();
    samples[k].push(performance.now() - t);
  }
}
console.log(`bench:process  runs ${RUNS}  load before ${loadBefore}  after ${loadNow()}  cpus ${os.cpus().length}`);
const med = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)]));
for (const [k, m] of Object.entries(med)) console.log(`${k.padEnd(34)} median ${m.toFixed(2)} ms`);
const ratio = (a, b) => (med[a] === undefined ? 'n/a' : `${((med[a] / med[b] - 1) * 100).toFixed(1)} %`);
console.log(`process-runner vs bare spawn (true):        ${ratio('true: process-runner', 'true: bare spawn')}`);
console.log(`git-runner vs bare spawn (git status):      ${ratio('git status: git-runner', 'git status: bare spawn')}`);
console.log(`execa vs process-runner (true):             ${ratio('true: execa', 'true: process-runner')}`);
console.log(`execa vs git-runner (git status):           ${ratio('git status: execa', 'git status: git-runner')}`);
rmSync(repo, { recursive: true, force: true });
bench.done();
