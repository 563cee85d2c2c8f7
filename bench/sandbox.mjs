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
//
// Docker is reached through DOCKER_HOST, or the private daemon of scripts/prereqs/docker.sh
// when its socket exists. Drivers that are not available are listed as skipped.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sandbox = await import(path.join(root, 'src/core/sandbox/index.ts'));
const { runCommand } = await import(path.join(root, 'src/core/sandbox/process.ts'));
const { SandboxCgroups } = await import(path.join(root, 'src/core/sandbox/cgroup.ts'));

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Number(arg('runs', '20'));
const LIFECYCLE = Number(arg('lifecycle', '5'));
const DRIVERS = arg('drivers', 'docker,podman,bwrap,msb').split(',');
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const loadAtStart = loadavg();

const privateSock = path.join(root, '.cache', 'docker', 'run', 'docker.sock');
const engineEnv = { ...process.env };
if (!engineEnv.DOCKER_HOST && existsSync(privateSock)) engineEnv.DOCKER_HOST = `unix://${privateSock}`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

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
async function timePair(hostFn, sandboxFn) {
  await hostFn();
  await sandboxFn();
  const h = [];
  const s = [];
  for (let i = 0; i < RUNS; i++) {
    h.push(await hostFn());
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
const base = mkdtempSync(path.join(tmpRoot, 'sandbox-'));
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
  hostMemory = await memoryWhileRunning('bash', ['-c', 'sleep 30'], inWorktree);
  for (const driver of DRIVERS) {
    const runtime = sandbox.createSandboxRuntime(driver, { dataDir: path.join(base, 'data'), env: engineEnv });
    const availability = await runtime.checkAvailable();
    if (!availability.available) {
      results.push({ driver, skipped: availability.reason });
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
    for (let i = 0; i < LIFECYCLE; i++) {
      const fresh = sandbox.createSandboxRuntime(driver, { dataDir: path.join(base, 'data'), env: engineEnv });
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
    for (let i = 0; i < LIFECYCLE; i++) {
      let t0 = process.hrtime.bigint();
      await runtime.create(spec(name));
      creates.push(ms(t0));
      t0 = process.hrtime.bigint();
      await runtime.remove(name);
      removes.push(ms(t0));
    }

    await runtime.create(spec(name));
    const settings = await runtime.readSettings(name);
    const handle = { loopName: 'bench', name, driver, settings, runtime };
    const shims = await sandbox.prepareOpencodeSandbox(handle, { shimRoot: path.join(base, 'shims') });
    ops.set('`true`, exec API', await timePair(host.trueThroughRunner, async () => {
      const t0 = process.hrtime.bigint();
      const r = await runtime.exec(name, 'true');
      if (r.exitCode !== 0) throw new Error(`${driver} exec failed: ${r.stderr}`);
      return ms(t0);
    }));
    const shimTrue = await timePair(host.true, () => spawnTimed(shims.shellShimPath, ['-c', 'true'], inWorktree));
    ops.set('`true`, shell shim', shimTrue);
    ops.set('first command of a loop', { host: shimTrue.host, sandbox: median(firsts) });
    ops.set('`git status`, shell shim', await timePair(host.git, () => spawnTimed(shims.shellShimPath, ['-c', 'git status'], inWorktree)));
    if (hostRg) ops.set(`\`rg ${RG_ARGS.join(' ')}\`, rg shim`, await timePair(host.rg, () => spawnTimed(shims.ripgrepShimPath, RG_ARGS, inWorktree)));
    const memory = await memoryWhileRunning(shims.shellShimPath, ['-c', 'sleep 30'], inWorktree);
    await runtime.remove(name);
    results.push({
      driver,
      ops,
      create: median(creates),
      remove: median(removes),
      memory,
      note: [
        settings.unenforcedLimits.length ? `limits not enforced: ${settings.unenforcedLimits.join('; ')}` : '',
        driver === 'bwrap' ? `cgroup join: ${new SandboxCgroups().joinStrategy()}` : '',
      ].filter(Boolean).join('; '),
    });
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}

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
console.log(`load average (1/5/15 min) at start: ${loadAtStart}; at the end: ${loadavg()}; ${os.cpus().length} cores`);
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

// Issue 26: what the file tool guard adds to each opencode file tool call (bench/file-tool-guard-cost.mjs).
if (DRIVERS.includes('bwrap')) {
  const { fileToolGuardCost } = await import('./file-tool-guard-cost.mjs');
  for (const line of await fileToolGuardCost({ root, runs: RUNS * 5, env: engineEnv })) console.log(line);
}
