#!/usr/bin/env node
// Issue 26: what Forge's file tool guard (src/core/opencode/file-guard-server.ts) adds to each of
// opencode's file tool calls, against no protection. Per call the guard does what opencode's
// Forge plugin asks of it: a `begin` request (freeze the loop's bwrap sandbox, follow the paths'
// links, answer), the tool's own I/O, an `end` request (thaw). Measured: the I/O alone (a 20 KB
// read, no protection), the guard without a freezer (an unconfined loop), and the guard freezing a
// real bwrap sandbox in which a background job keeps running. Samples alternate; median and p95.
//
//   node bench/file-tool-guard-cost.mjs [--runs 200]     (bench/sandbox.mjs runs it too)
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** Returns printable lines; skips (one line saying why) where bwrap or a freezable cgroup is missing. */
export async function fileToolGuardCost({ root, runs = 200, env = process.env }) {
  const sandbox = await import(path.join(root, 'src/core/sandbox/index.ts'));
  const { startFileGuardServer } = await import(path.join(root, 'src/core/opencode/file-guard-server.ts'));
  const tmpRoot = path.join(root, '.cache', 'bench-tmp');
  mkdirSync(tmpRoot, { recursive: true });
  // The real path: bwrap binds the worktree by the path it is given (a linked .cache would not resolve inside).
  const dir = realpathSync(mkdtempSync(path.join(tmpRoot, 'file-guard-')));
  const wt = path.join(dir, 'wt');
  mkdirSync(path.join(wt, 'src'), { recursive: true });
  execFileSync('git', ['init', '-q', wt]);
  writeFileSync(path.join(wt, 'src', 'a.ts'), 'export const line = 1;\n'.repeat(900));
  const runtime = sandbox.createSandboxRuntime('bwrap', { dataDir: path.join(dir, 'data'), env });
  const name = `forge-bench-guard-${process.pid}`;
  const guardServer = await startFileGuardServer({ pluginDir: path.join(dir, 'plugins') });
  const lines = [];
  try {
    const availability = await runtime.checkAvailable();
    // Under CI a missing prerequisite fails, never a silent skip.
    if (!availability.available && env.CI === 'true') throw new Error(`file tool guard: bwrap is not available: ${availability.reason}`);
    if (!availability.available) return [`file tool guard: skipped: ${availability.reason}`];
    await runtime.create({ name, worktreeDir: wt, gitCommonDir: path.join(wt, '.git'), network: false, limits: { cpus: 1, memoryMb: 256, pids: 64 } });
    // A job that keeps waking up, as an agent's background build or watcher would.
    const job = await runtime.exec(name, 'setsid nohup sh -c "while :; do sleep 0.005; done" >/dev/null 2>&1 & echo started');
    if (job.exitCode !== 0 || !job.stdout.includes('started')) throw new Error(`the background job did not start in the sandbox: ${job.stderr}`);
    const probe = await runtime.freeze(name);
    if (!probe) return ['file tool guard: skipped: this host gives the bwrap sandbox no freezable cgroup (run as root or delegate a cgroup)'];
    await probe();
    const plugin = readFileSync(fileURLToPath(guardServer.pluginUrl), 'utf8');
    const url = JSON.parse(/URL_BASE = (".*?");/.exec(plugin)[1]);
    const auth = JSON.parse(/AUTH = (".*?");/.exec(plugin)[1]);
    const post = async (p, body) => {
      const res = await fetch(url + p, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return res.json();
    };
    const frozenWt = wt;
    const plainWt = path.join(dir, 'plain');
    mkdirSync(path.join(plainWt, 'src'), { recursive: true });
    writeFileSync(path.join(plainWt, 'src', 'a.ts'), 'export const line = 1;\n'.repeat(900));
    guardServer.guard.register({ worktreeDir: frozenWt, allowedDirs: [], freeze: () => runtime.freeze(name) });
    guardServer.guard.register({ worktreeDir: plainWt, allowedDirs: [] });
    // The same sandbox without a cgroup (a user without a delegated one): its process tree is stopped instead.
    const { BwrapRuntime } = await import(path.join(root, 'src/core/sandbox/bwrap-driver.ts'));
    const treeWt = path.join(dir, 'tree');
    mkdirSync(path.join(treeWt, 'src'), { recursive: true });
    execFileSync('git', ['init', '-q', treeWt]);
    writeFileSync(path.join(treeWt, 'src', 'a.ts'), 'export const line = 1;\n'.repeat(900));
    const noCgroup = new BwrapRuntime({ stateDir: path.join(dir, 'tree-state'), cgroups: new sandbox.SandboxCgroups({ root: path.join(dir, 'no-cgroup-fs') }) });
    const treeName = `${name}-tree`;
    await noCgroup.create({ name: treeName, worktreeDir: treeWt, gitCommonDir: path.join(treeWt, '.git'), network: false, limits: { cpus: 1, memoryMb: 256, pids: 64 } });
    const treeJob = noCgroup.exec(treeName, 'while [ ! -e stop ]; do sleep 0.005; done', { timeoutMs: 600_000 });
    guardServer.guard.register({ worktreeDir: treeWt, allowedDirs: [], freeze: () => noCgroup.freeze(treeName) });
    let call = 0;
    const guarded = async (worktree) => {
      const callID = `c${++call}`;
      const t0 = process.hrtime.bigint();
      const answer = await post('/begin', { directory: worktree, callID, tool: 'read', args: { filePath: 'src/a.ts' } });
      if (!answer.ok) throw new Error(answer.reason);
      await readFile(path.join(worktree, 'src', 'a.ts'));
      await post('/end', { directory: worktree, callID });
      return Number(process.hrtime.bigint() - t0) / 1e6;
    };
    const bare = async () => {
      const t0 = process.hrtime.bigint();
      await readFile(path.join(plainWt, 'src', 'a.ts'));
      return Number(process.hrtime.bigint() - t0) / 1e6;
    };
    const samples = { bare: [], plain: [], frozen: [], tree: [] };
    for (let i = 0; i < 10; i++) await Promise.all([bare(), guarded(plainWt), guarded(frozenWt), guarded(treeWt)]);
    for (let i = 0; i < runs; i++) {
      samples.bare.push(await bare());
      samples.plain.push(await guarded(plainWt));
      samples.frozen.push(await guarded(frozenWt));
      samples.tree.push(await guarded(treeWt));
    }
    const f = (x) => x.toFixed(2);
    const row = (label, xs, base) =>
      `${label.padEnd(68)}${f(quantile(xs, 0.5)).padStart(8)}${f(quantile(xs, 0.95)).padStart(8)}${base ? `   +${f(quantile(xs, 0.5) - quantile(base, 0.5))} / +${f(quantile(xs, 0.95) - quantile(base, 0.95))}` : ''}`;
    lines.push(`opencode file tool call with Forge's guard (issue 26), ${runs} alternating samples each: median ms, p95 ms, added (median / p95)`);
    lines.push(row('tool I/O only (20 KB read), no protection', samples.bare));
    lines.push(row('guard: begin + I/O + end, no freezer (unconfined loop)', samples.plain, samples.bare));
    lines.push(row('guard: begin (freeze bwrap sandbox) + I/O + end (thaw)', samples.frozen, samples.bare));
    lines.push(row('guard: begin (stop the sandbox\'s processes, no cgroup) + I/O + end', samples.tree, samples.bare));
    lines.push(`cgroup layout: ${await new sandbox.SandboxCgroups().layout()}; processes on this host: ${readdirSync('/proc').filter((p) => /^\d+$/.test(p)).length}`);
    writeFileSync(path.join(treeWt, 'stop'), '');
    await treeJob.catch(() => undefined);
    await noCgroup.remove(treeName).catch(() => undefined);
    return lines;
  } finally {
    await guardServer.close().catch(() => undefined);
    await runtime.remove(name).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { register } = await import('tsx/esm/api');
  register();
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const i = process.argv.indexOf('--runs');
  const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const before = loadavg();
  for (const line of await fileToolGuardCost({ root, runs: i > 0 ? Number(process.argv[i + 1]) : 200 })) console.log(line);
  console.log(`load average at start: ${before}; at the end: ${loadavg()}`);
}
