#!/usr/bin/env node
// A ready worktree on a real npm project (issue 27's benchmark): how long a loop waits before its
// coder's first prompt, and how much disk each loop adds, per way of giving the worktree the
// project's dependencies — measured in one run, medians, load noted.
//
// The project: a generated npm package depending on real registry packages (full run: 12 of them,
// node_modules ≥ 150 MB and ≥ 15 000 files; --quick: uvu only), installed once into
// .cache/bench-worktree/ with its lockfile and kept there. The user's checkout is a git repository
// with package.json and package-lock.json tracked and node_modules installed (hard links of the
// cached install, as `npm ci` would have left it).
//
// Rows:
// - `npm ci`, warm cache: a clean copy of the tracked files, `npm ci --prefer-offline` with the
//   bench's npm cache already holding every package (what installing costs at best);
// - `cp -a node_modules`: copying the checkout's folder; reflink (`cp --reflink=always`): tried,
//   reported as unsupported where the file system has none;
// - Forge, reuse (the default, `forge.worktree.dependencies` "reuse"): `forge run` of the demo plan
//   on the checkout, from spawning the CLI to the engine's debug line "prompt accepted" for the
//   coder's first session; the worktree's size then, beyond its tracked files, plus the loop's
//   folder of installed dependencies (`<dataDir>/worktree-deps/<loop>`), is the extra disk;
// - Forge, install (`forge.worktree.dependencies` "install"): the same with `npm ci` in the setup
//   phase (network on, Forge's package cache, warm after the first run);
// - Forge, no dependencies: the same repository without its lockfile (nothing to prepare), the
//   baseline the rows above are compared with: "ready worktree" = row − baseline.
// Runs alternate between the Forge modes. The loop is cancelled (SIGINT, as Ctrl-C) once the first
// prompt was accepted; every folder and process it made is removed.
//
//   node bench/worktree.mjs [--forge-runs 3] [--npm-runs 3] [--quick] [--timeout S] [--no-sandbox]
//
// Targets (issue 27): with an unchanged lockfile a ready worktree in ≤ 2 s and ≤ 10 % of a warm
// `npm ci`, and ≤ 5 % of node_modules' size in extra disk per loop.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, lstatSync, rmSync, writeFileSync, copyFileSync, renameSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchRun, flagArg, isolatedOpencodeEnvironment, loadNow, median, numberArg } from './bench-common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bench = benchRun('bench:worktree', { timeoutS: 3600, quickTimeoutS: 600 });
const FORGE_RUNS = numberArg('forge-runs', bench.quick ? 1 : 3);
const NPM_RUNS = numberArg('npm-runs', bench.quick ? 1 : 3);
const NO_SANDBOX = flagArg('no-sandbox');

// Real packages whose install together passes 150 MB and 15 000 files (full run); uvu is the test runner.
const FULL_DEPENDENCIES = {
  uvu: '0.5.6',
  typescript: '5.6.3',
  'date-fns': '2.30.0',
  rxjs: '7.8.1',
  lodash: '4.17.21',
  '@babel/core': '7.26.0',
  '@babel/preset-env': '7.26.0',
  eslint: '8.57.1',
  webpack: '5.96.1',
  jest: '29.7.0',
  prettier: '3.3.3',
  'core-js': '3.39.0',
};
const QUICK_DEPENDENCIES = { uvu: '0.5.6' };
const dependencies = bench.quick ? QUICK_DEPENDENCIES : FULL_DEPENDENCIES;

const cacheRoot = path.join(root, '.cache', 'bench-worktree');
const npmCache = path.join(cacheRoot, 'npm-cache');
const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'Forge Bench', GIT_AUTHOR_EMAIL: 'bench@forge.invalid', GIT_COMMITTER_NAME: 'Forge Bench', GIT_COMMITTER_EMAIL: 'bench@forge.invalid' };
const ms = (t0) => performance.now() - t0;
const s = (x) => (Number.isFinite(x) ? `${(x / 1000).toFixed(2)} s` : '—');
const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** Bytes and entries under a folder, links not followed (what it holds on disk, hard links counted once per folder walk). */
function usage(dir) {
  let bytes = 0;
  let entries = 0;
  const seen = new Set();
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      const st = lstatSync(p);
      entries += 1;
      if (st.isDirectory()) walk(p);
      else if (!seen.has(`${st.dev}:${st.ino}`)) {
        seen.add(`${st.dev}:${st.ino}`);
        bytes += st.blocks * 512;
      }
    }
  };
  if (existsSync(dir)) walk(dir);
  return { bytes, entries };
}

const packageJson = (deps) => JSON.stringify({ name: 'bench-project', version: '1.0.0', private: true, scripts: { test: 'uvu tests' }, devDependencies: deps }, null, 2) + '\n';

/** The installed project (package.json, package-lock.json, node_modules), made once per dependency set. */
function installedProject() {
  const key = createHash('sha256').update(JSON.stringify(dependencies)).digest('hex').slice(0, 12);
  const dir = path.join(cacheRoot, `project-${key}`);
  if (existsSync(path.join(dir, 'node_modules', '.package-lock.json'))) return dir;
  bench.step(`install the project's ${Object.keys(dependencies).length} package(s) from the registry into ${path.relative(root, dir)} (once)`, 'npm install');
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  writeFileSync(path.join(tmp, 'package.json'), packageJson(dependencies));
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--cache', npmCache], { cwd: tmp, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`npm install of the bench project failed (exit ${r.status}): ${r.stderr.slice(-2000)}`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

/** The user's checkout: tracked package files and a test, node_modules installed (hard links of the cached install). */
function makeCheckout(work, project, { lockfile }) {
  const repo = path.join(work, lockfile ? 'checkout' : 'checkout-no-deps');
  mkdirSync(path.join(repo, 'tests'), { recursive: true });
  writeFileSync(path.join(repo, 'README.md'), '# bench project\n');
  writeFileSync(path.join(repo, '.gitignore'), 'node_modules/\n');
  writeFileSync(path.join(repo, 'tests', 'add.test.js'), "const { test } = require('uvu');\nconst assert = require('uvu/assert');\ntest('adds', () => assert.is(1 + 1, 2));\ntest.run();\n");
  if (lockfile) {
    copyFileSync(path.join(project, 'package.json'), path.join(repo, 'package.json'));
    copyFileSync(path.join(project, 'package-lock.json'), path.join(repo, 'package-lock.json'));
    execFileSync('cp', ['-al', path.join(project, 'node_modules'), path.join(repo, 'node_modules')]);
  } else {
    writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'bench-project', version: '1.0.0', private: true }, null, 2) + '\n');
  }
  for (const args of [['init', '-q', '-b', 'main'], ['add', '-A'], ['commit', '-q', '-m', 'initial commit']]) execFileSync('git', args, { cwd: repo, env: gitEnv });
  return repo;
}

function trackedBytes(repo) {
  let bytes = 0;
  for (const f of execFileSync('git', ['ls-files', '-z'], { cwd: repo, encoding: 'utf8' }).split('\0').filter(Boolean)) bytes += lstatSync(path.join(repo, f)).blocks * 512;
  return bytes;
}

const work = mkdtempSync(path.join(root, '.cache', 'bench-tmp', 'worktree-'));
const live = new Set();
bench.cleanup(() => {
  for (const c of live) {
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  rmSync(work, { recursive: true, force: true });
});

bench.step('build dist/ when missing');
const cli = path.join(root, 'dist', 'cli.mjs');
if (!existsSync(cli)) execFileSync(process.execPath, [path.join(root, 'esbuild.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
const project = installedProject();
const nodeModules = usage(path.join(project, 'node_modules'));
bench.step('make the checkouts');
const withDeps = makeCheckout(work, project, { lockfile: true });
const noDeps = makeCheckout(work, project, { lockfile: false });

// `npm ci` with a warm cache, in a clean copy of the tracked files.
bench.step(`npm ci --prefer-offline, warm cache, ${NPM_RUNS} time(s) after one warm-up`, 'npm ci');
const npmCi = [];
for (let i = 0; i <= NPM_RUNS; i++) {
  const dir = path.join(work, `npm-ci-${i}`);
  mkdirSync(dir);
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(path.join(withDeps, f), path.join(dir, f));
  const t0 = performance.now();
  const r = spawnSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--cache', npmCache], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm ci failed (exit ${r.status}): ${r.stderr.slice(-2000)}`);
  if (i > 0 || bench.quick) npmCi.push(ms(t0));
  rmSync(dir, { recursive: true, force: true });
  if (bench.quick) break;
}

bench.step('cp -a node_modules, and a reflink copy where the file system has one');
const copies = [];
for (let i = 0; i < (bench.quick ? 1 : NPM_RUNS); i++) {
  const dest = path.join(work, `copy-${i}`);
  const t0 = performance.now();
  execFileSync('cp', ['-a', path.join(withDeps, 'node_modules'), dest]);
  copies.push(ms(t0));
  rmSync(dest, { recursive: true, force: true });
}
let reflink;
{
  const dest = path.join(work, 'reflink');
  const t0 = performance.now();
  const r = spawnSync('cp', ['-a', '--reflink=always', path.join(withDeps, 'node_modules'), dest], { encoding: 'utf8' });
  reflink = r.status === 0 ? { ms: ms(t0), disk: usage(dest).bytes } : { unsupported: (r.stderr.split('\n')[0] ?? '').trim() };
  rmSync(dest, { recursive: true, force: true });
}

// Forge: `forge run` to the coder's first prompt accepted, per mode.
const MODES = {
  'no dependencies': { repo: noDeps, settings: {} },
  reuse: { repo: withDeps, settings: { 'forge.worktree.dependencies': 'reuse' } },
  install: { repo: withDeps, settings: { 'forge.worktree.dependencies': 'install' } },
};
bench.step("seed opencode's plugin install in the bench's home");
const { register } = await import('tsx/esm/api');
register();
const { seedOpencodeConfigDependencies } = await import(path.join(root, 'test/support/opencode-config-seed.ts'));
const { env: baseEnv } = await isolatedOpencodeEnvironment(path.join(work, 'machine'), seedOpencodeConfigDependencies);
const plan = path.join(work, 'plan.md');
copyFileSync(path.join(root, 'scripts/demo/plan.md'), plan);
// One data folder for every run, as a user's: Forge's package cache in it stays warm between runs.
const dataDir = path.join(work, 'data');
const tag = randomBytes(2).toString('hex');

/** One `forge run`: ms to the first prompt accepted, and the worktree's size beyond its tracked files then. */
async function forgeRun(mode, i) {
  const { repo, settings } = MODES[mode];
  const name = `wt-${mode.replace(/\W+/g, '')}-${tag}-${i}`;
  const args = [cli, 'run', plan, '--name', name, '--repo', repo, '--data-dir', dataDir, '--no-handover', ...(NO_SANDBOX ? ['--no-sandbox'] : [])];
  bench.waiting(`forge run ${name} (${mode}) to have its first prompt accepted`);
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { cwd: repo, env: { ...baseEnv, FORGE_SETTINGS: JSON.stringify(settings) }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const tail = [];
  const accepted = new Promise((resolve) => {
    let buf = '';
    const onData = (chunk) => {
      buf += chunk.toString('utf8');
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const l of lines) {
        tail.push(l);
        if (tail.length > 40) tail.shift();
        if (new RegExp(`^debug \\[loop ${name}\\] prompt accepted`).test(l)) resolve(ms(t0));
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => resolve({ exit: code }));
  });
  const result = await accepted;
  if (typeof result !== 'number') throw new Error(`forge run (${mode}) ended (exit ${result.exit}) before its first prompt was accepted:\n${tail.join('\n')}`);
  const worktree = path.join(dataDir, 'worktrees', name);
  // Beyond the tracked files: what the worktree holds, and the loop's installed folders, which Forge keeps outside it.
  const extra = Math.max(0, usage(worktree).bytes - trackedBytes(repo)) + usage(path.join(dataDir, 'worktree-deps', name)).bytes;
  bench.waiting(`forge run ${name} to end after its cancel (SIGINT)`);
  process.kill(-child.pid, 'SIGINT');
  const ended = await Promise.race([new Promise((r) => child.once('exit', () => r(true))), new Promise((r) => setTimeout(() => r(false), 30_000))]);
  if (!ended) process.kill(-child.pid, 'SIGKILL');
  live.delete(child);
  return { ms: result, extra };
}

// --quick runs reuse and install once each (both paths of the setup phase), without the baseline.
const modesRun = Object.keys(MODES).filter((m) => !bench.quick || m !== 'no dependencies');
const samples = Object.fromEntries(Object.keys(MODES).map((m) => [m, { ms: [], extra: [] }]));
// One warm-up run per mode (not counted) outside quick mode: opencode's first start, Forge's package cache.
const rounds = bench.quick ? 1 : FORGE_RUNS + 1;
for (let round = 0; round < rounds; round++) {
  for (const mode of modesRun) {
    bench.step(`Forge, ${mode}: round ${round + 1} of ${rounds}${!bench.quick && round === 0 ? ' (warm-up, not counted)' : ''}`, `forge run to its first prompt`);
    const r = await forgeRun(mode, round);
    if (bench.quick || round > 0) {
      samples[mode].ms.push(r.ms);
      samples[mode].extra.push(r.extra);
    }
  }
}
bench.done();
rmSync(work, { recursive: true, force: true });

const base = median(samples['no dependencies'].ms);
const npm = median(npmCi);
console.log(`A ready worktree, ${Object.keys(dependencies).length} real package(s): node_modules ${mb(nodeModules.bytes)}, ${nodeModules.entries} entries; medians of ${bench.quick ? 1 : FORGE_RUNS} Forge run(s) per mode (alternating, after a warm-up) and ${npmCi.length} npm ci run(s)`);
console.log(`load average at the end: ${loadNow()}; ${os.cpus().length} cores; sandbox: ${NO_SANDBOX ? 'off' : 'default'}${bench.quick ? '; QUICK MODE: not representative' : ''}`);
console.log('| way | to first prompt | ready worktree (− baseline) | share of warm npm ci | extra disk per loop | share of node_modules |');
console.log('|---|---|---|---|---|---|');
for (const mode of modesRun) {
  const t = median(samples[mode].ms);
  const extra = median(samples[mode].extra);
  const isBase = mode === 'no dependencies';
  const ready = t - base;
  const readyCells = isBase ? ['baseline', '—'] : Number.isFinite(base) ? [s(ready), `${((ready / npm) * 100).toFixed(1)} %`] : ['— (no baseline in quick mode)', '—'];
  console.log(`| Forge, ${mode} | ${s(t)} | ${readyCells.join(' | ')} | ${mb(extra)} | ${((extra / nodeModules.bytes) * 100).toFixed(1)} % |`);
}
console.log(`| npm ci, warm cache | — | ${s(npm)} | 100 % | ${mb(nodeModules.bytes)} | 100 % |`);
console.log(`| cp -a node_modules | — | ${s(median(copies))} | ${((median(copies) / npm) * 100).toFixed(1)} % | ${mb(nodeModules.bytes)} | 100 % |`);
console.log(reflink.unsupported ? `| reflink copy | unsupported here: ${reflink.unsupported} | | | | |` : `| reflink copy | — | ${s(reflink.ms)} | ${((reflink.ms / npm) * 100).toFixed(1)} % | ${mb(reflink.disk)} | |`);
console.log('Targets (issue 27): reuse ready in ≤ 2 s and ≤ 10 % of a warm npm ci; extra disk per loop ≤ 5 % of node_modules.');
