#!/usr/bin/env node
// Sandbox overhead against the host, measured in the same run: per-command cost of each
// available driver through Forge's exec API and through the opencode shims (what agents
// use), typical agent commands (`git status` in a linked git worktree, `rg` over a small
// tree), what a loop pays before its first agent command runs (sandbox start with its
// probe, shim generation, first command), create/remove, and the memory a running
// command keeps resident (PSS, RSS). Medians; host and sandbox samples alternate so load
// from other processes hits both alike. Prints a table.
//
//   node bench/sandbox.mjs [--runs 20] [--lifecycle 5] [--drivers docker,podman,bwrap,msb]
//   node bench/sandbox.mjs --git-checkpoint [--runs 40]   (Forge's hardened git per checkpoint only)
//                          [--joins overlapped,before-exec[,none]] [--quick] [--timeout S]
//
// bwrap's exec API starts each sandbox's next bwrap ahead of its command (bwrap-driver.ts); the
// row "no launch ahead" is the same sandbox through a runtime that starts bwrap when asked. Both
// exec rows (and their host samples) pause 50 ms before each sample, as between a loop's checks.
// bwrap is measured once per cgroup join strategy (cgroup.ts), both in the same run; the note
// says which one this host picks. Its `cgroup join alone` row is a bash writing its own pid into
// the sandbox's `cgroup.procs` files (what before-exec adds to each command, unhidden). `none`
// adds bwrap without any cgroup (limits not enforced): what the sandbox costs without a join.
// --quick (what `npm test` runs): docker, podman and bwrap, 2 samples, 1 lifecycle.
// Docker is reached through DOCKER_HOST, or the private daemon of scripts/prereqs/docker.sh
// when its socket exists. Drivers that are not available are listed as skipped (under CI=true
// the run fails instead).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, stringArg } from './bench-common.mjs';

const bench = benchRun('bench:sandbox', { timeoutS: 3600, quickTimeoutS: 300 });
bench.step('load the modules');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sandbox = await import(path.join(root, 'src/core/sandbox/index.ts'));
const { runCommand } = await import(path.join(root, 'src/core/sandbox/process.ts'));
const { SandboxCgroups, readCgroupJoinFacts } = await import(path.join(root, 'src/core/sandbox/cgroup.ts'));

const arg = stringArg;
const RUNS = bench.quick ? 2 : Number(arg('runs', '20'));
const LIFECYCLE = bench.quick ? 1 : Number(arg('lifecycle', '5'));
const DRIVERS = arg('drivers', bench.quick ? 'docker,podman,bwrap' : 'docker,podman,bwrap,msb').split(',');
const JOINS = arg('joins', 'overlapped,before-exec').split(',');
for (const j of JOINS) if (!['overlapped', 'before-exec', 'none'].includes(j)) throw new Error(`--joins takes overlapped, before-exec and/or none, not ${j}`);
/** What is measured: each driver, bwrap once per cgroup join strategy. */
const VARIANTS = DRIVERS.flatMap((driver) => (driver === 'bwrap' ? JOINS.map((join) => ({ driver, join, label: `bwrap/${join}` })) : [{ driver, label: driver }]));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const loadAtStart = loadavg();
/** What decides the join strategy here (cgroup.ts): expedited RCU grace periods, favordynmods per cgroup mount. */
const joinFacts = () => {
  const facts = readCgroupJoinFacts();
  return `rcu_expedited ${facts.rcuExpedited ? 1 : 0}, favordynmods on ${facts.cgroupMountOptions.filter((o) => o.includes('favordynmods')).length} of ${facts.cgroupMountOptions.length} cgroup mounts`;
};

const privateSock = path.join(root, '.cache', 'docker', 'run', 'docker.sock');
const engineEnv = { ...process.env };
if (!engineEnv.DOCKER_HOST && existsSync(privateSock)) engineEnv.DOCKER_HOST = `unix://${privateSock}`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
// `--git-checkpoint`: only the hardened-git section at the end of this file.
if (process.argv.includes('--git-checkpoint')) {
  await benchHardenedCheckpoint(Math.max(RUNS, 40));
  process.exit(0);
}

function spawnTimed(program, args, options = {}) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(program, args, { stdio: ['ignore', 'ignore', 'pipe'], ...options });
    let err = '';
    child.stderr.on('data', (b) => (err += b));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(ms(t0)) : reject(new Error(`${program} ${args.join(' ')} exited ${code}: ${err}`))));
  });
}

/** Medians of `host` and `sandboxed`, sampled alternately after one warm-up of each. */
// pauseMs: an idle pause before each sample (both sides alike), as between a loop's checks; without
// it the samples follow each other back to back.
// Exec API samples come after this idle pause (both sides): Forge's exec callers (the start's probe,
// the gate's checks) run seconds apart, which is what a launch started ahead uses.
const EXEC_PAUSE_MS = 50;

async function timePair(hostFn, sandboxFn, { pauseMs = 0 } = {}) {
  const pause = () => (pauseMs > 0 ? new Promise((r) => setTimeout(r, pauseMs)) : undefined);
  await hostFn();
  await sandboxFn();
  const h = [];
  const s = [];
  for (let i = 0; i < RUNS; i++) {
    await pause();
    h.push(await hostFn());
    await pause();
    s.push(await sandboxFn());
  }
  return { host: median(h), sandbox: median(s) };
}

// ---- memory: PSS and RSS of a command's whole process tree while it runs ----------------
function childrenOf() {
  const byParent = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!byParent.has(ppid)) byParent.set(ppid, []);
      byParent.get(ppid).push(Number(d));
    } catch {
      // exited meanwhile
    }
  }
  return byParent;
}
function treeMemory(pid) {
  const byParent = childrenOf();
  const pids = [];
  const walk = (p) => {
    pids.push(p);
    for (const c of byParent.get(p) ?? []) walk(c);
  };
  walk(pid);
  let pss = 0;
  let rss = 0;
  const names = [];
  for (const p of pids) {
    try {
      const rollup = readFileSync(`/proc/${p}/smaps_rollup`, 'utf8');
      pss += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      rss += Number(/^Rss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0);
      names.push(readFileSync(`/proc/${p}/comm`, 'utf8').trim());
    } catch {
      // exited meanwhile
    }
  }
  return { processes: names.length, names, pssMb: pss / 1024, rssMb: rss / 1024 };
}
/** Starts `program args` running `sleep`, waits until `sleep` runs in its tree, measures the tree, then kills it. */
async function memoryWhileRunning(program, args, options) {
  const child = spawn(program, args, { stdio: 'ignore', detached: true, ...options });
  try {
    for (let i = 0; i < 200; i++) {
      await new Promise((r) => setTimeout(r, 25));
      const m = treeMemory(child.pid);
      if (m.names.includes('sleep')) {
        await new Promise((r) => setTimeout(r, 100));
        return treeMemory(child.pid);
      }
    }
    throw new Error(`${program}: sleep never started`);
  } finally {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone
    }
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
  }
}

// ---- fixtures: a git repository with a linked worktree holding a small source tree ---------
const tmpRoot = path.join(root, '.cache', 'bench-tmp');
mkdirSync(tmpRoot, { recursive: true });
// Its real path: a container's bind mount names the worktree by it, while a shell started in it
// reports its real path as $PWD (a checkout whose .cache is a symbolic link, as in a git worktree
// sharing another's, failed every docker command: "chdir to cwd … no such file or directory").
const base = mkdtempSync(path.join(realpathSync(tmpRoot), 'sandbox-'));
bench.cleanup(() => rmSync(base, { recursive: true, force: true }));
bench.step('make the fixture repository and worktree');
const mainRepo = path.join(base, 'repo');
const worktreeDir = path.join(base, 'wt');
const git = (cwd, ...args) => execFileSync('git', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
mkdirSync(mainRepo);
git(mainRepo, 'init', '-q', '-b', 'main');
const TREE_DIRS = 20;
const TREE_FILES = 15;
for (let d = 0; d < TREE_DIRS; d++) {
  mkdirSync(path.join(mainRepo, 'src', `mod${d}`), { recursive: true });
  for (let f = 0; f < TREE_FILES; f++) {
    const lines = Array.from({ length: 80 }, (_, i) => `export const value${i} = ${d * 1000 + f * 100 + i}; // line ${i}${i === 40 && f % 5 === 0 ? ' needle' : ''}`);
    writeFileSync(path.join(mainRepo, 'src', `mod${d}`, `file${f}.ts`), `${lines.join('\n')}\n`);
  }
}
git(mainRepo, 'add', '-A');
git(mainRepo, '-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', 'commit', '-qm', 'initial');
git(mainRepo, 'worktree', 'add', '-q', '-b', 'bench', worktreeDir);
writeFileSync(path.join(worktreeDir, 'src', 'mod0', 'file0.ts'), 'changed\n');
const gitCommonDir = path.join(mainRepo, '.git');
const RG_ARGS = ['-n', 'needle', '.'];
const hostRg = (() => {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(path.join(dir, 'rg'))) return path.join(dir, 'rg');
  return null;
})();

const limits = { cpus: 1, memoryMb: 512, pids: 256 };
const image = process.env.FORGE_SANDBOX_TEST_IMAGE ?? 'forge-sandbox:test';
const inWorktree = { cwd: worktreeDir, env: engineEnv };
const host = {
  true: () => spawnTimed('bash', ['-c', 'true'], inWorktree),
  // The exec API's baseline goes through the same runner as the exec API itself (piped
  // stdio, own process group), so the ratio is the sandbox's cost and not the runner's.
  trueThroughRunner: async () => {
    const t0 = process.hrtime.bigint();
    const r = await runCommand('bash', ['-c', 'true'], inWorktree);
    if (r.exitCode !== 0) throw new Error(`host runCommand failed: ${r.stderr}`);
    return ms(t0);
  },
  git: () => spawnTimed('bash', ['-c', 'git status'], inWorktree),
  rg: () => spawnTimed(hostRg, RG_ARGS, inWorktree),
};

const results = []; // { driver, skipped?, ops: Map(op -> { host, sandbox }), memory, note }
let hostMemory;
try {
  bench.step('host: memory of a running command');
  hostMemory = await memoryWhileRunning('bash', ['-c', 'sleep 30'], inWorktree);
  for (const { driver, join, label } of VARIANTS) {
    // launchAhead: false is the bwrap driver without its launch started ahead (every exec starts bwrap then).
    const makeRuntime = (launchAhead = true) =>
      join === 'none'
        ? new sandbox.BwrapRuntime({ stateDir: path.join(base, 'data', 'sandboxes-none'), cgroups: new SandboxCgroups({ root: path.join(base, 'no-cgroup-fs') }), launchAhead })
        : join
          ? new sandbox.BwrapRuntime({ stateDir: path.join(base, 'data', 'sandboxes'), cgroupJoin: join, launchAhead })
          : sandbox.createSandboxRuntime(driver, { dataDir: path.join(base, 'data'), env: engineEnv });
    const runtime = makeRuntime();
    bench.step(`${label}: availability`, `${driver}'s availability probe`);
    const availability = await runtime.checkAvailable();
    if (!availability.available) {
      bench.unavailable(`driver ${driver}`, availability.reason);
      results.push({ driver: label, skipped: availability.reason });
      continue;
    }
    const ops = new Map();
    const extra = driver === 'bwrap' ? {} : { image };
    const spec = (name) => ({ name, worktreeDir, gitCommonDir, network: false, limits, ...extra });

    // What a loop pays before its first agent command: the manager's start (availability,
    // create, probe command), the shims, then the first command through the shell shim.
    // Each sample is a fresh runtime (as in a new `forge run` process) and a fresh sandbox;
    // its ratio is against the host `true` below.
    const firsts = [];
    bench.step(`${label}: first command of a loop, ${LIFECYCLE} time(s)`, 'sandbox start, shims and the first command');
    for (let i = 0; i < LIFECYCLE; i++) {
      const fresh = makeRuntime();
      const manager = new sandbox.SandboxManager({ runtime: fresh, prefix: `fbench${process.pid}-`, isLoopRunning: () => false });
      const loopName = `first${i}`;
      await host.true();
      const t0 = process.hrtime.bigint();
      const handle = await manager.start({ loopName, worktreeDir, gitCommonDir, network: false, limits, ...extra });
      const shims = await sandbox.prepareOpencodeSandbox(handle, { shimRoot: path.join(base, 'shims') });
      await spawnTimed(shims.shellShimPath, ['-c', 'true'], inWorktree);
      firsts.push(ms(t0));
      await manager.stop(loopName);
    }

    const name = `forge-bench-${driver}-${process.pid}`;
    await runtime.remove(name).catch(() => undefined);
    const creates = [];
    const removes = [];
    bench.step(`${label}: create/remove, ${LIFECYCLE} time(s)`);
    for (let i = 0; i < LIFECYCLE; i++) {
      let t0 = process.hrtime.bigint();
      await runtime.create(spec(name));
      creates.push(ms(t0));
      t0 = process.hrtime.bigint();
      await runtime.remove(name);
      removes.push(ms(t0));
    }

    bench.step(`${label}: commands, ${RUNS} alternating host/sandbox samples each`, 'the commands');
    await runtime.create(spec(name));
    const settings = await runtime.readSettings(name);
    const handle = { loopName: 'bench', name, driver, settings, runtime };
    const shims = await sandbox.prepareOpencodeSandbox(handle, { shimRoot: path.join(base, 'shims') });
    ops.set('`true`, exec API', await timePair(host.trueThroughRunner, async () => {
      const t0 = process.hrtime.bigint();
      const r = await runtime.exec(name, 'true');
      if (r.exitCode !== 0) throw new Error(`${driver} exec failed: ${r.stderr}`);
      return ms(t0);
    }, { pauseMs: EXEC_PAUSE_MS }));
    if (driver === 'bwrap') {
      // The same sandbox through a runtime that starts bwrap when a command comes (how every exec ran before issue 30).
      const whenAsked = makeRuntime(false);
      ops.set('`true`, exec API, no launch ahead', await timePair(host.trueThroughRunner, async () => {
        const t0 = process.hrtime.bigint();
        const r = await whenAsked.exec(name, 'true');
        if (r.exitCode !== 0) throw new Error(`${driver} exec failed: ${r.stderr}`);
        return ms(t0);
      }, { pauseMs: EXEC_PAUSE_MS }));
    }
    const shimTrue = await timePair(host.true, () => spawnTimed(shims.shellShimPath, ['-c', 'true'], inWorktree));
    ops.set('`true`, shell shim', shimTrue);
    ops.set('first command of a loop', { host: shimTrue.host, sandbox: median(firsts) });
    ops.set('`git status`, shell shim', await timePair(host.git, () => spawnTimed(shims.shellShimPath, ['-c', 'git status'], inWorktree)));
    if (hostRg) ops.set(`\`rg ${RG_ARGS.join(' ')}\`, rg shim`, await timePair(host.rg, () => spawnTimed(shims.ripgrepShimPath, RG_ARGS, inWorktree)));
    if (join && join !== 'none') {
      // The join before-exec makes in line, alone: a bash writing its own pid into the sandbox's cgroup.procs files.
      const procsFiles = JSON.parse(readFileSync(path.join(base, 'data', 'sandboxes', `${name}.json`), 'utf8')).procsFiles ?? [];
      if (procsFiles.length > 0) {
        const joinOnly = `${procsFiles.map((f) => `echo $$ > '${f}'`).join(' && ')}`;
        ops.set(`cgroup join alone (${procsFiles.length} cgroup.procs)`, await timePair(host.true, () => spawnTimed('bash', ['-c', joinOnly], inWorktree)));
      }
    }
    bench.step(`${label}: memory of a running command`);
    const memory = await memoryWhileRunning(shims.shellShimPath, ['-c', 'sleep 30'], inWorktree);
    await runtime.remove(name);
    results.push({
      driver: label,
      ops,
      create: median(creates),
      remove: median(removes),
      memory,
      note: [
        settings.unenforcedLimits.length ? `limits not enforced: ${settings.unenforcedLimits.join('; ')}` : '',
        join === 'none' ? 'no cgroup: limits not enforced (what bwrap costs without a join)' : join ? `cgroup join ${join}; this host picks ${new SandboxCgroups().joinStrategy()} (${joinFacts()})` : '',
      ].filter(Boolean).join('; '),
    });
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}

bench.done();
const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const measured = results.filter((r) => !r.skipped);
const header = ['operation', 'host ms', ...measured.flatMap((r) => [`${r.driver} ms`, `${r.driver} ×host`])];
const opNames = [...new Set(measured.flatMap((r) => [...r.ops.keys()]))];
const table = opNames.map((op) => {
  const hostMs = measured.map((r) => r.ops.get(op)?.host).find((x) => x !== undefined);
  return [op, f(hostMs), ...measured.flatMap((r) => {
    const o = r.ops.get(op);
    return o ? [f(o.sandbox), f(o.sandbox / o.host)] : ['-', '-'];
  })];
});
table.push(['create (engine)', '-', ...measured.flatMap((r) => [f(r.create), '-'])]);
table.push(['remove (engine)', '-', ...measured.flatMap((r) => [f(r.remove), '-'])]);
const mem = (m) => `${f(m.pssMb)}/${f(m.rssMb)}`;
table.push(['running command PSS/RSS MB', mem(hostMemory), ...measured.flatMap((r) => [mem(r.memory), `${r.memory.processes} proc`])]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((l) => String(l[i]).length)));
const fmt = (cells) => cells.map((c, i) => String(c).padEnd(widths[i] ?? 0)).join('  ');
console.log(`Sandbox overhead against the host, same run: median of ${RUNS} alternating host/sandbox samples (after one warm-up each);`);
console.log(`first command, create and remove: median of ${LIFECYCLE}. Figures grow with load.`);
console.log(`load average (1/5/15 min) at start: ${loadAtStart}; at the end: ${loadavg()}; ${os.cpus().length} cores${bench.quick ? '; QUICK MODE: not representative' : ''}`);
console.log(
  hostRg
    ? `rg: ${hostRg} (${execFileSync(hostRg, ['--version'], { encoding: 'utf8' }).split('\n')[0]}), over ${TREE_DIRS * TREE_FILES} files`
    : 'rg: not found on PATH, so the rg row is skipped (install ripgrep, e.g. `apt-get install -y ripgrep`: opencode\'s search tools run `rg` from PATH)',
);
console.log(fmt(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const l of table) console.log(fmt(l));
console.log(`running command = \`sleep\` through bash on the host, through the shell shim in a sandbox; processes: host ${hostMemory.names.join(', ')}${measured.map((r) => `; ${r.driver} ${r.memory.names.join(', ')}`).join('')}`);
for (const r of results) if (r.skipped) console.log(`${r.driver}: skipped: ${r.skipped}`);
for (const r of results) if (r.note) console.log(`note (${r.driver}): ${r.note}`);

// ── Forge's hardened git per checkpoint commit (issue 26) ─────────────────────────────────
// A checkpoint is `git add -A` + `git commit` in a loop worktree. Today's plain git against the
// hardened runner (git dir named explicitly, command-running settings off, drivers emptied)
// plus the `.git` file check it makes per checkpoint; alternating samples, median and p95.
async function benchHardenedCheckpoint(runs) {
  const { createGitRunner } = await import(path.join(root, 'src/core/workspace/git-runner.ts'));
  const { createWorktreeGitDirs } = await import(path.join(root, 'src/core/workspace/worktree-git-dirs.ts'));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'forge-bench-git-'));
  try {
    const repo = path.join(dir, 'repo');
    const git = (cwd, ...a) => execFileSync('git', a, { cwd, stdio: 'ignore' });
    mkdirSync(repo);
    git(repo, 'init', '-q');
    for (let i = 0; i < 200; i++) writeFileSync(path.join(repo, `f${i}.txt`), `file ${i}\n`);
    git(repo, 'add', '-A');
    git(repo, '-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-qm', 'base');
    const worktreesRoot = path.join(dir, 'worktrees');
    const runners = {};
    for (const kind of ['plain', 'hardened']) {
      const wt = path.join(worktreesRoot, kind);
      git(repo, 'worktree', 'add', '-q', '-b', `b-${kind}`, wt);
      const dirs = createWorktreeGitDirs({ loopWorktreesRoot: async () => worktreesRoot });
      if (kind === 'hardened') await dirs.register(wt, path.join(repo, '.git'));
      runners[kind] = { wt, dirs, git: kind === 'hardened' ? createGitRunner({ worktreeTarget: dirs.targetFor }) : createGitRunner() };
    }
    const config = ['user.name=b', 'user.email=b@b', 'core.abbrev=40', 'maintenance.auto=false'];
    let n = 0;
    const checkpoint = async (kind) => {
      const r = runners[kind];
      writeFileSync(path.join(r.wt, `f${n % 200}.txt`), `change ${n++}\n`);
      const t0 = process.hrtime.bigint();
      if (kind === 'hardened') await r.dirs.restoreGitFile(r.wt);
      await r.git.ok(r.wt, ['add', '-A', '--verbose', '--', '.']);
      await r.git.ok(r.wt, ['commit', '--no-status', '-m', `c${n}`, '--', '.'], { config });
      return ms(t0);
    };
    await checkpoint('plain');
    await checkpoint('hardened');
    const samples = { plain: [], hardened: [] };
    for (let i = 0; i < runs; i++) for (const kind of ['plain', 'hardened']) samples[kind].push(await checkpoint(kind));
    const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.95) - 1)];
    const [pm, hm] = [median(samples.plain), median(samples.hardened)];
    console.log(`\nhardened git per checkpoint commit (add -A + commit, 200-file worktree, ${runs} alternating samples; load ${loadavg()}):`);
    console.log(`  plain git    median ${pm.toFixed(1)} ms  p95 ${p95(samples.plain).toFixed(1)} ms`);
    console.log(`  hardened git median ${hm.toFixed(1)} ms  p95 ${p95(samples.hardened).toFixed(1)} ms  (${(((hm - pm) / pm) * 100).toFixed(1)} % on the median; target ≤ 10 %)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
await benchHardenedCheckpoint(bench.quick ? 5 : Math.max(RUNS, 40));
// Issue 26: what the file tool guard adds to each opencode file tool call (bench/file-tool-guard-cost.mjs).
if (DRIVERS.includes('bwrap')) {
  const { fileToolGuardCost } = await import('./file-tool-guard-cost.mjs');
  for (const line of await fileToolGuardCost({ root, runs: RUNS * 5, env: engineEnv })) console.log(line);
}
