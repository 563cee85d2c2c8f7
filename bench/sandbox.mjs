#!/usr/bin/env node
// Sandbox overhead: per-command cost of each available driver against a plain host spawn
// of the same command (median of 20, as a ratio), through Forge's exec API and through the
// opencode shell shim, plus sandbox create and remove times. Prints a table.
//
//   node bench/sandbox.mjs [--runs 20] [--lifecycle 5] [--drivers docker,bwrap]
//
// Docker is reached through DOCKER_HOST, or the private daemon of scripts/prereqs/docker.sh
// when its socket exists. Drivers that are not available are listed as skipped.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sandbox = await import(path.join(root, 'src/core/sandbox/index.ts'));

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Number(arg('runs', '20'));
const LIFECYCLE = Number(arg('lifecycle', '5'));
const DRIVERS = arg('drivers', 'docker,podman,bwrap,msb').split(',');
const COMMAND = 'true';

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
    child.on('close', (code) => (code === 0 ? resolve(ms(t0)) : reject(new Error(`${program} exited ${code}: ${err}`))));
  });
}

async function timeMany(n, fn) {
  await fn(); // warm-up, not counted
  const out = [];
  for (let i = 0; i < n; i++) out.push(await fn());
  return out;
}

const tmpRoot = path.join(root, '.cache', 'bench-tmp');
mkdirSync(tmpRoot, { recursive: true });
const base = mkdtempSync(path.join(tmpRoot, 'sandbox-'));
const worktreeDir = path.join(base, 'wt');
mkdirSync(worktreeDir);
const limits = { cpus: 1, memoryMb: 512, pids: 256 };
const image = process.env.FORGE_SANDBOX_TEST_IMAGE ?? 'forge-sandbox:test';

const rows = [];
try {
  const host = median(await timeMany(RUNS, () => spawnTimed('bash', ['-c', COMMAND], { cwd: worktreeDir })));
  rows.push({ driver: 'host (bash -c)', exec: host, execRatio: 1, shim: host, shimRatio: 1, create: NaN, remove: NaN, note: '' });

  for (const driver of DRIVERS) {
    const runtime = sandbox.createSandboxRuntime(driver, { dataDir: path.join(base, 'data'), env: engineEnv });
    const availability = await runtime.checkAvailable();
    if (!availability.available) {
      rows.push({ driver, skipped: availability.reason });
      continue;
    }
    const name = `forge-bench-${driver}-${process.pid}`;
    const spec = { name, worktreeDir, network: false, limits, ...(driver === 'bwrap' ? {} : { image }) };
    await runtime.remove(name).catch(() => undefined);

    const creates = [];
    const removes = [];
    for (let i = 0; i < LIFECYCLE; i++) {
      let t0 = process.hrtime.bigint();
      await runtime.create(spec);
      creates.push(ms(t0));
      t0 = process.hrtime.bigint();
      await runtime.remove(name);
      removes.push(ms(t0));
    }

    await runtime.create(spec);
    const settings = await runtime.readSettings(name);
    const handle = { loopName: 'bench', name, driver, settings, runtime };
    const shims = await sandbox.prepareOpencodeSandbox(handle, { shimRoot: path.join(base, 'shims') });
    const exec = median(
      await timeMany(RUNS, async () => {
        const t0 = process.hrtime.bigint();
        const r = await runtime.exec(name, COMMAND);
        if (r.exitCode !== 0) throw new Error(`${driver} exec failed: ${r.stderr}`);
        return ms(t0);
      }),
    );
    const shim = median(await timeMany(RUNS, () => spawnTimed(shims.shellShimPath, ['-c', COMMAND], { cwd: worktreeDir, env: engineEnv })));
    await runtime.remove(name);
    rows.push({
      driver,
      exec,
      execRatio: exec / host,
      shim,
      shimRatio: shim / host,
      create: median(creates),
      remove: median(removes),
      note: settings.unenforcedLimits.length ? `limits not enforced: ${settings.unenforcedLimits.join('; ')}` : '',
    });
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}

const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const header = ['driver', 'exec ms', 'exec ×host', 'shim ms', 'shim ×host', 'create ms', 'remove ms'];
const lines = rows.map((r) =>
  r.skipped
    ? [r.driver, `skipped: ${r.skipped}`]
    : [r.driver, f(r.exec), f(r.execRatio), f(r.shim), f(r.shimRatio), f(r.create, 0), f(r.remove, 0)],
);
const widths = header.map((h, i) => Math.max(h.length, ...lines.filter((l) => l.length > 2).map((l) => String(l[i]).length)));
const fmt = (cells) => cells.map((c, i) => String(c).padEnd(widths[i] ?? 0)).join('  ');
console.log(`Sandbox per-command overhead: "${COMMAND}", median of ${RUNS} (after one warm-up); create/remove median of ${LIFECYCLE}`);
console.log(`load average at the end: ${os.loadavg().map((x) => x.toFixed(1)).join(' ')} on ${os.cpus().length} cores (figures grow with load)`);
console.log(fmt(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const l of lines) console.log(l.length > 2 ? fmt(l) : l.join('  '));
for (const r of rows) if (r.note) console.log(`note (${r.driver}): ${r.note}`);
