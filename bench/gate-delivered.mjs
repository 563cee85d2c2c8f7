#!/usr/bin/env node
// The gate verifies the delivered work (issue 27 item 6): what establishing it costs per gate,
// through Forge's own worktree service and hardened git, on generated repositories of --files
// tracked files (1 KiB each, 50 per folder), in a loop worktree with one uncommitted change:
//   in-place  stage + write-tree + `git status --ignored` proves the worktree holds nothing
//             else: the checks run in the worktree (the common case when nothing is ignored);
//   checkout  the same, then an ignored file is found: commit-tree + a detached throw-away
//             worktree of the delivered tree, removed after (what a worktree with ignored
//             files, e.g. node_modules or build output, costs); the sandbox start over it is
//             extra (bench/sandbox.mjs: bwrap needs none per check run, docker a container).
// Medians over --runs rounds after one warm-up, the two interleaved; load from /proc/loadavg.
//
//   node bench/gate-delivered.mjs [--runs 7] [--files 200,5000]
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { createWorktreeService } = await import(path.join(root, 'src/core/workspace/worktree-service.ts'));

const argOf = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Math.max(1, Number(argOf('runs', '7')));
const SIZES = argOf('files', '200,5000').split(',').map(Number);
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const log = { debug() {}, info() {}, warn() {}, error: console.error };
const loadAtStart = loadavg();

for (const files of SIZES) {
  const base = mkdtempSync(path.join(tmpdir(), 'forge-bench-delivered-'));
  const repo = path.join(base, 'repo');
  mkdirSync(repo);
  const git = (...args) => execFileSync('git', args, { cwd: repo, stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  writeFileSync(path.join(repo, '.gitignore'), 'ignored.js\n');
  for (let i = 0; i < files; i++) {
    const dir = path.join(repo, 'src', `d${Math.floor(i / 50)}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `f${i}.js`), `// ${i}\n${'x'.repeat(1000)}\n`);
  }
  git('add', '-A');
  git('-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', 'base');
  const service = createWorktreeService({ dataDir: path.join(base, 'data'), log });
  const { worktreeDir } = await service.createWorktree({ repoPath: repo, loopName: 'bench' });
  writeFileSync(path.join(worktreeDir, 'src', 'd0', 'f0.js'), 'changed\n');
  const times = { 'in-place': [], checkout: [] };
  for (let round = -1; round < RUNS; round++) {
    for (const mode of ['in-place', 'checkout']) {
      const ignored = path.join(worktreeDir, 'ignored.js');
      if (mode === 'checkout') writeFileSync(ignored, 'hidden\n');
      else rmSync(ignored, { force: true });
      const started = performance.now();
      const delivered = await service.deliveredWork(worktreeDir, 'bench');
      if (delivered.kind !== mode) throw new Error(`expected ${mode}, got ${delivered.kind}`);
      if (delivered.kind === 'checkout') await delivered.dispose();
      if (round >= 0) times[mode].push(performance.now() - started);
    }
  }
  const inPlace = median(times['in-place']);
  const checkout = median(times.checkout);
  console.log(`${files} files: in-place ${inPlace.toFixed(1)} ms, checkout ${checkout.toFixed(1)} ms (×${(checkout / inPlace).toFixed(1)}), medians of ${RUNS}`);
  rmSync(base, { recursive: true, force: true });
}
console.log(`load average: ${loadAtStart} at start, ${loadavg()} at end (${(await import('node:os')).cpus().length} cores)`);
