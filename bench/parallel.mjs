#!/usr/bin/env node
// Parallel loops (issue 14's targets): N demo-plan loops at once on one data folder, each a
// separate `forge run` process (`node dist/cli.mjs run PLAN --name …`) started at the same
// instant, on Forge's embedded scripted model (the opencode environment names no model; HOME
// and XDG folders are a temporary "machine", so the user's configuration is never read).
//
// Per N, in one run:
// - peak PSS (proportional set size, not RSS: shared pages are split between the processes
//   sharing them, so the sum is what the machine holds) of every process of the runs — the
//   Forge CLIs (node), their opencode servers, and the rest of their trees (sandboxes, git,
//   the plan's checks) — summed over /proc/<pid>/smaps_rollup, sampled every 200 ms in a
//   worker thread over the process trees of the CLIs (plus any process carrying the run's
//   marker in its environment, should one leave its parent);
// - PSS per extra loop: (peak(N) − peak(1)) / (N − 1);
// - start → first prompt accepted, per loop: from the bench spawning that CLI to the engine's
//   debug line (FORGE_LOG=debug) `prompt accepted` for its first session — printed when
//   opencode answered the prompt request (the `prompt_sent` timing mark bench/loop-overhead.mjs
//   reads inside the engine); median and max over the 2nd and later loops (all but the first
//   loop to get there). Beside it, to the first `session.busy` event of that session: opencode
//   at work on the prompt (its first turn in a new instance sets up the instance's agent and
//   tools before it says busy);
// - wall time (first spawn → last exit) and completed / failed loops.
//
// Modes, measured in the same run:
// - `per-loop`: every `forge run` supervises its own loop on an opencode server of its own
//   (`--no-handover`, `forge.opencode.serverMode` "perLoop": the way before issue 14);
// - `shared`: the defaults — the runs hand their loops to the data folder's engine (the first
//   run; issue 14 part 2), whose loops share one opencode server (part 1); all N spawned at once;
// - `shared-warm`: as `shared`, but the 2nd and later runs are spawned once the first loop's first
//   prompt was accepted (a server already up), which is what "start → first prompt of the 2nd
//   and later loops" asks of a shared server.
// A handed-over loop's debug lines come from the engine's CLI: they are matched by loop name in
// every CLI's output.
//
//   node bench/parallel.mjs [--n 1,2,4,8,16] [--runs 1] [--mode per-loop,shared,shared-warm] [--warmup 1]
//                           [--timeout-min 15] [--no-sandbox] [--log DIR] [--quick] [--timeout S]
//
// --quick (what `npm test` runs): N = 2 in the shared mode (the second loop handed over to the first
// CLI's engine, on its shared server), no warm-up, the CLI rebuilt only when missing; --timeout is
// the whole run's limit (--timeout-min each step's).
//
// --log DIR keeps every CLI's output, each line prefixed with the milliseconds since the step's first
// spawn (DIR/<loop name>.log, whose first line says when that CLI was spawned; a handed-over
// loop's engine lines are in the engine's CLI's log), for reading where a start spends its time.
//
// Every data folder, repository, worktree and process it made is removed at the end, also on
// Ctrl-C. Not part of `npm test`.
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { readdirSync, readFileSync, readlinkSync, rmdirSync } from 'node:fs';

const MARKER_VARIABLE = 'FORGE_BENCH_PARALLEL';

/** `/proc/<pid>/stat`'s parent and start time (null: gone). */
function procStat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(rest[1]), start: rest[19] };
  } catch {
    return null;
  }
}

/**
 * The runs' processes now: the process trees under `roots` (the CLIs), and any process whose
 * environment carries the run's marker (one that left its parent). `markedCache` remembers
 * `pid:start` → marked, so each environment is read once. Returns pid → { start }.
 */
function runProcesses(roots, marker, markedCache = new Map()) {
  const procs = new Map();
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const st = procStat(pid);
    if (!st) continue;
    procs.set(pid, st);
    if (!children.has(st.ppid)) children.set(st.ppid, []);
    children.get(st.ppid).push(pid);
  }
  const found = new Map();
  const queue = roots.filter((p) => procs.has(p));
  while (queue.length) {
    const pid = queue.pop();
    if (found.has(pid)) continue;
    found.set(pid, procs.get(pid));
    for (const c of children.get(pid) ?? []) queue.push(c);
  }
  if (marker) {
    const needle = `${MARKER_VARIABLE}=${marker}\0`;
    for (const [pid, st] of procs) {
      if (found.has(pid) || pid === process.pid) continue;
      const key = `${pid}:${st.start}`;
      if (!markedCache.has(key)) {
        let has = false;
        try {
          has = readFileSync(`/proc/${pid}/environ`, 'latin1').includes(needle);
        } catch {
          /* gone or not readable */
        }
        markedCache.set(key, has);
      }
      if (markedCache.get(key)) found.set(pid, st);
    }
  }
  return found;
}

/** SIGKILLs each { pid, start } still alive with that start time (a reused pid is left alone); the names of those killed. */
function killProcesses(list) {
  const killed = [];
  for (const p of list) {
    if (procStat(p.pid)?.start !== p.start) continue;
    try {
      process.kill(p.pid, 'SIGKILL');
      killed.push(p.name ?? String(p.pid));
    } catch {
      /* gone */
    }
  }
  return killed;
}

/**
 * Removes the empty cgroups Forge's bubblewrap sandboxes of these loops left (`forge/forge-<hash>-<loop>`
 * under each controller), as a CLI killed before its teardown leaves them; how many.
 */
function removeCgroups(names) {
  let removed = 0;
  const root = '/sys/fs/cgroup';
  let bases = [];
  try {
    bases = [root, ...readdirSync(root).map((c) => `${root}/${c}`)];
  } catch {
    return 0;
  }
  for (const base of bases) {
    let entries = [];
    try {
      entries = readdirSync(`${base}/forge`);
    } catch {
      continue;
    }
    for (const e of entries) {
      const m = /^forge-[0-9a-f]+-(.+)$/.exec(e);
      if (!m || !names.has(m[1])) continue;
      try {
        rmdirSync(`${base}/forge/${e}`);
        removed++;
      } catch {
        /* not empty or gone */
      }
    }
  }
  return removed;
}

/** The sampler (worker thread): sums PSS over the runs' processes every `intervalMs`. */
function sampler() {
  let roots = [];
  let marker = '';
  let timer;
  let peak = { total: 0, forge: 0, opencode: 0, other: 0, processes: 0 };
  let samples = 0;
  /** pid → { start, cls } of every process seen in this step (for the leftover sweep). */
  const seen = new Map();
  /** Every opencode process seen in this step (a dying one's last reading may not say opencode any more). */
  const opencodePids = new Set();
  const marked = new Map();
  const pss = (pid) => {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
      return m ? Number(m[1]) * 1024 : 0;
    } catch {
      return 0;
    }
  };
  /** Read every sample: a process just forked has not exec'ed yet. */
  const classify = (pid) => {
    let argv = [];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      /* gone */
    }
    let exe = '';
    try {
      exe = readlinkSync(`/proc/${pid}/exe`);
    } catch {
      /* gone */
    }
    const name = (exe.split('/').pop() || argv[0] || '?').replace(/ \(deleted\)$/, '');
    if (argv.some((a) => /cli\.[cm]js$/.test(a))) return { cls: 'forge', name: 'forge' };
    if (/opencode/.test(name) || /opencode/.test(argv[0] ?? '')) return { cls: 'opencode', name: 'opencode' };
    return { cls: 'other', name };
  };
  const sample = () => {
    const tree = runProcesses(roots, marker, marked);
    const now = { total: 0, forge: 0, opencode: 0, other: 0, processes: 0 };
    for (const [pid, st] of tree) {
      const { cls, name } = classify(pid);
      seen.set(pid, { start: st.start, cls, name });
      if (cls === 'opencode') opencodePids.add(`${pid}:${st.start}`);
      const p = pss(pid);
      now[cls] += p;
      now.total += p;
      now.processes++;
    }
    samples++;
    if (now.total > peak.total) peak = now;
  };
  parentPort.on('message', (msg) => {
    if (msg.type === 'start') {
      roots = [];
      marker = msg.marker;
      peak = { total: 0, forge: 0, opencode: 0, other: 0, processes: 0 };
      samples = 0;
      seen.clear();
      opencodePids.clear();
      marked.clear();
      timer = setInterval(sample, msg.intervalMs);
      sample();
    } else if (msg.type === 'roots') {
      roots = msg.roots;
      sample();
    } else if (msg.type === 'stop') {
      clearInterval(timer);
      sample();
      parentPort.postMessage({ type: 'result', peak, samples, seen: [...seen].map(([pid, i]) => ({ pid, ...i })), opencodeProcesses: opencodePids.size });
    }
  });
}

if (!isMainThread) sampler();
else await main();

async function main() {
  const { spawn, execFileSync } = await import('node:child_process');
  const { randomBytes } = await import('node:crypto');
  const { appendFileSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const os = await import('node:os');
  const path = (await import('node:path')).default;
  const { performance } = await import('node:perf_hooks');
  const { fileURLToPath } = await import('node:url');
  const { register } = await import('tsx/esm/api');
  const { benchRun, isolatedOpencodeEnvironment, loadNow, median, numberArg } = await import('./bench-common.mjs');
  const bench = benchRun('bench:parallel', { timeoutS: 4 * 3600, quickTimeoutS: 300 });
  bench.step('load the modules');

  // Keeps the event loop alive while awaiting work that holds no handle of its own.
  const keepAlive = setInterval(() => {}, 60_000);
  register();
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const { resolveOpencodeBinary } = await import(path.join(root, 'src/core/opencode/server-process.ts'));
  const { seedOpencodeConfigDependencies } = await import(path.join(root, 'test/support/opencode-config-seed.ts'));

  const listArg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return (i > 0 ? process.argv[i + 1] ?? '' : fallback).split(',').map((s) => s.trim()).filter(Boolean);
  };
  const NS = listArg('n', bench.quick ? '2' : '1,2,4,8,16').map(Number);
  if (NS.some((n) => !Number.isInteger(n) || n < 1 || n > 64)) {
    console.error(`--n takes a comma-separated list of whole numbers from 1 to 64, e.g. 1,2,4,8,16 (got ${listArg('n', '').join(',')})`);
    process.exit(2);
  }
  const RUNS = Math.max(1, numberArg('runs', 1));
  const WARMUP = bench.quick ? 0 : Math.max(0, numberArg('warmup', 1));
  const TIMEOUT_MS = Math.max(1, numberArg('timeout-min', 15)) * 60_000;
  const NO_SANDBOX = process.argv.includes('--no-sandbox');
  const LOG_DIR = listArg('log', '')[0] ? path.resolve(listArg('log', '')[0]) : null;
  if (LOG_DIR) mkdirSync(LOG_DIR, { recursive: true });
  const INTERVAL_MS = 200;

  /**
   * How loops run in each mode. `args`/`env`: what a mode adds to each `forge run`. A mode that
   * is not built is listed, said so, and skipped.
   */
  const MODES = {
    // --no-handover and serverMode perLoop: every forge run supervises its own loop on its own server (the old way).
    'per-loop': {
      built: true,
      what: 'one opencode server per loop (each forge run starts its own and supervises its loop itself)',
      args: ['--no-handover'],
      env: { FORGE_SETTINGS: JSON.stringify({ 'forge.opencode.serverMode': 'perLoop' }) },
    },
    // The defaults: the runs hand their loops to the data folder's engine, whose loops share one opencode server.
    shared: { built: true, what: 'one engine and one opencode server per data folder serving every loop (issue 14 parts 1–2; the defaults)', args: [], env: {} },
    // As shared, but the 2nd and later runs start once the first loop's first prompt was accepted (the server is up).
    'shared-warm': {
      built: true,
      what: 'as shared, with the 2nd and later runs started once the 1st loop has its first prompt accepted (a server already up)',
      args: [],
      env: {},
      staggered: true,
    },
  };
  const modes = listArg('mode', bench.quick ? 'shared' : 'per-loop,shared,shared-warm');
  for (const m of modes) {
    if (!MODES[m]) {
      console.error(`--mode: unknown mode "${m}" (known: ${Object.keys(MODES).join(', ')})`);
      process.exit(2);
    }
  }
  if (!modes.some((m) => MODES[m].built)) {
    console.error(`--mode ${modes.join(',')}: not built yet (${modes.map((m) => `${m}: ${MODES[m].what}`).join('; ')}); nothing to measure. Built: ${Object.keys(MODES).filter((m) => MODES[m].built).join(', ')}.`);
    process.exit(2);
  }

  const cli = path.join(root, 'dist/cli.mjs');
  if (!existsSync(cli) || (process.env.FORGE_BENCH_REBUILD ?? (bench.quick ? '0' : '1')) !== '0') {
    bench.step('build dist/ (esbuild.mjs)');
    execFileSync(process.execPath, [path.join(root, 'esbuild.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const opencodeVersion = execFileSync(resolveOpencodeBinary(), ['--version']).toString().trim();
  const loadBefore = loadNow();
  const startedAt = new Date().toISOString();

  // Everything made here, for the cleanup (also on Ctrl-C).
  const dirs = new Set();
  const live = new Set(); // CLI child processes still running
  let currentMarker = ''; // the running step's environment marker
  let lastSeen = []; // processes the sampler saw in the step that just ended
  /** SIGKILLs every process of the current step (CLIs, their servers, whatever they started); the names of those that outlived their CLI. */
  const sweep = () => {
    const now = runProcesses([...live].map((c) => c.pid), currentMarker);
    const cliPids = new Set([...live].map((c) => c.pid));
    for (const c of live) {
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    const known = new Map(lastSeen.map((p) => [p.pid, p]));
    const rest = [...now].filter(([pid]) => !cliPids.has(pid)).map(([pid, st]) => ({ pid, start: st.start, name: known.get(pid)?.name }));
    return killProcesses([...rest, ...lastSeen.filter((p) => !cliPids.has(p.pid) && !now.has(p.pid))]);
  };
  const removeDirs = () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    dirs.clear();
  };
  const loopNames = new Set(); // every loop this run started (their sandboxes' cgroups)
  const runTag = randomBytes(2).toString('hex');
  /**
   * Stops the running CLIs as a terminal's Ctrl-C does (SIGINT to each CLI's process group: the
   * loop is cancelled, its server and sandbox torn down), SIGKILLs what is left after `graceMs`.
   */
  const stopLoops = async (graceMs) => {
    for (const c of live) {
      try {
        process.kill(-c.pid, 'SIGINT');
      } catch {
        /* gone */
      }
    }
    for (let t = 0; t < graceMs / 100 && live.size > 0; t++) await new Promise((r) => setTimeout(r, 100));
    return sweep();
  };
  let worker;
  let interrupted = false;
  bench.cleanup(async () => {
    await stopLoops(5_000);
    removeCgroups(loopNames);
    removeDirs();
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      if (interrupted) {
        // A second Ctrl-C: no more waiting.
        sweep();
        removeCgroups(loopNames);
        removeDirs();
        process.exit(130);
      }
      interrupted = true;
      console.error(`\n${sig}: cancelling every loop (at most 20 s; Ctrl-C again to kill at once) and removing what the bench made…`);
      void stopLoops(20_000).then(async () => {
        await new Promise((r) => setTimeout(r, 500));
        sweep();
        removeCgroups(loopNames);
        removeDirs();
        process.exit(130);
      });
    });
  }

  // An isolated opencode "machine": no model named anywhere, so each CLI starts the embedded one.
  const envRoot = mkdtempSync(path.join(os.tmpdir(), 'forge-bench-parallel-env-'));
  dirs.add(envRoot);
  // opencode's one-time plugin install in a fresh home, done once and kept (as the tests do).
  bench.step("seed opencode's plugin install in the bench's home");
  const { env: baseEnv, seeded } = await isolatedOpencodeEnvironment(envRoot, seedOpencodeConfigDependencies);
  if (!seeded) console.error('opencode\'s plugin install could not be seeded: the first opencode start installs it (the warm-up loop pays for it).');

  const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'Forge Bench', GIT_AUTHOR_EMAIL: 'bench@forge.invalid', GIT_COMMITTER_NAME: 'Forge Bench', GIT_COMMITTER_EMAIL: 'bench@forge.invalid' };
  /** A fresh sample repository (as `npm run demo` makes), the demo plan and an empty data folder. */
  const makeWorld = () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'forge-bench-parallel-'));
    dirs.add(work);
    const repo = path.join(work, 'greeting');
    mkdirSync(repo);
    writeFileSync(path.join(repo, 'README.md'), '# greeting\n\nA sample repository for the Forge parallel benchmark.\n');
    writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'greeting', version: '0.0.0', private: true }, null, 2) + '\n');
    for (const args of [['init', '-q', '-b', 'main'], ['add', '-A'], ['commit', '-q', '-m', 'initial commit']]) execFileSync('git', args, { cwd: repo, env: gitEnv });
    const plan = path.join(work, 'plan.md');
    copyFileSync(path.join(root, 'scripts/demo/plan.md'), plan);
    return { work, repo, plan, dataDir: path.join(work, 'data') };
  };

  worker = new Worker(fileURLToPath(import.meta.url));
  worker.unref();
  const sampled = () => new Promise((resolve) => worker.once('message', resolve));

  /** One step: N loops at once in `mode`; what it measured. */
  async function step(mode, n, label) {
    bench.step(`[${mode}] N=${n} (${label})`, `${n} forge run process(es) to start, run their loop and exit (each step at most ${TIMEOUT_MS / 60_000} min)`);
    const world = makeWorld();
    const marker = randomBytes(8).toString('hex');
    currentMarker = marker;
    worker.postMessage({ type: 'start', marker, intervalMs: INTERVAL_MS });
    const loops = [];
    const byName = new Map();
    // A handed-over loop's debug lines come from the engine's CLI, not its own: any CLI's line counts, by loop name.
    const busy = /^debug \[loop (\S+)\] event session\.busy (\S+)/;
    const accepted = /^debug \[loop (\S+)\] prompt accepted (\S+)/;
    const spawnAt = performance.now();
    const spawnLoop = (i) => {
      const name = `${label}-${runTag}-${i + 1}`;
      loopNames.add(name);
      const args = [cli, 'run', world.plan, '--name', name, '--repo', world.repo, '--data-dir', world.dataDir, '--json', ...(NO_SANDBOX ? ['--no-sandbox'] : []), ...MODES[mode].args];
      const t0 = performance.now();
      const child = spawn(process.execPath, args, { cwd: world.repo, env: { ...baseEnv, ...MODES[mode].env, [MARKER_VARIABLE]: marker }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      live.add(child);
      const loop = { name, child, t0, firstSession: null, firstAccepted: null, firstBusy: null, ended: null, confinement: null, exit: null, exitAt: null, problems: [] };
      byName.set(name, loop);
      const logFile = LOG_DIR ? path.join(LOG_DIR, `${name}.log`) : null;
      if (logFile) appendFileSync(logFile, `${(t0 - spawnAt).toFixed(0).padStart(6)} [bench] spawned ${name}\n`);
      const lines = (stream, onLine) => {
        let buf = '';
        stream.on('data', (chunk) => {
          const at = performance.now();
          buf += chunk.toString('utf8');
          const parts = buf.split('\n');
          buf = parts.pop();
          if (logFile) appendFileSync(logFile, parts.map((l) => `${(at - spawnAt).toFixed(0).padStart(6)} ${l}\n`).join(''));
          for (const l of parts) onLine(l, at);
        });
      };
      lines(child.stdout, (l, at) => {
        let e;
        try {
          e = JSON.parse(l);
        } catch {
          return;
        }
        if (e.type === 'loop.started') loop.confinement = e.confinement ? (e.confinement.sandboxed ? e.confinement.driver : 'unconfined') : 'unknown';
        if (e.type === 'loop.session' && loop.firstSession === null) loop.firstSession = { at: at - t0, id: e.sessionId };
        if (e.type === 'loop.ended') loop.ended = e;
      });
      lines(child.stderr, (l, at) => {
        const a = accepted.exec(l);
        const acceptedBy = a ? byName.get(a[1]) : undefined;
        if (acceptedBy) {
          if (acceptedBy.firstAccepted === null && (!acceptedBy.firstSession || acceptedBy.firstSession.id === a[2])) acceptedBy.firstAccepted = at - acceptedBy.t0;
          return;
        }
        const m = busy.exec(l);
        const target = m ? byName.get(m[1]) : undefined;
        if (target) {
          if (target.firstBusy === null && (!target.firstSession || target.firstSession.id === m[2])) target.firstBusy = at - target.t0;
        } else if (/^forge: (warning|error)|^Error|^\s*at /.test(l)) loop.problems.push(l);
        else if (/^forge: handed loop/.test(l)) loop.handedOver = true;
      });
      loop.exited = new Promise((resolve) => child.once('close', (code, signal) => {
        live.delete(child);
        loop.exit = code ?? signal;
        loop.exitAt = performance.now();
        resolve();
      }));
      loops.push(loop);
    };
    spawnLoop(0);
    if (MODES[mode].staggered && n > 1) {
      // The rest start once the first loop's first prompt was accepted and opencode is at work on it (or it ended without one).
      let firstDone = false;
      void loops[0].exited.then(() => (firstDone = true));
      while ((loops[0].firstBusy === null || loops[0].firstAccepted === null) && !firstDone) await new Promise((r) => setTimeout(r, 10));
    }
    const restAt = performance.now();
    for (let i = 1; i < n; i++) spawnLoop(i);
    const spread = performance.now() - (n > 1 ? restAt : spawnAt);
    worker.postMessage({ type: 'roots', roots: loops.map((l) => l.child.pid) });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void stopLoops(20_000);
    }, TIMEOUT_MS);
    await Promise.all(loops.map((l) => l.exited));
    clearTimeout(timer);
    const wall = Math.max(...loops.map((l) => l.exitAt)) - spawnAt;
    const result = sampled();
    worker.postMessage({ type: 'stop' });
    const { peak, samples, seen, opencodeProcesses } = await result;
    lastSeen = seen;
    // The CLIs stop their servers before they exit; what is still alive 3 s after the last exit
    // (e.g. a guardian's `sleep 0.5` under load) outlived its CLI: named and killed.
    const stillAlive = () => [...seen.filter((p) => procStat(p.pid)?.start === p.start), ...runProcesses([], marker).keys()].length;
    for (let t = 0; t < 12 && stillAlive() > 0; t++) await new Promise((r) => setTimeout(r, 250));
    const leftBehind = sweep();
    lastSeen = [];
    currentMarker = '';
    const cgroupsLeft = removeCgroups(new Set(loops.map((l) => l.name)));
    if (cgroupsLeft) leftBehind.push(`${cgroupsLeft} sandbox cgroup(s)`);
    rmSync(world.work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    dirs.delete(world.work);
    const completed = loops.filter((l) => l.exit === 0 && l.ended?.status === 'completed');
    const failed = loops.filter((l) => !completed.includes(l)).map((l) => ({
      name: l.name,
      why: timedOut && l.ended?.status !== 'completed' ? `timed out after ${TIMEOUT_MS / 60_000} min` : `exit ${l.exit}${l.ended ? `, ${l.ended.status} (${l.ended.reason})` : ''}${l.problems.length ? `: ${l.problems.at(-1)}` : ''}`,
    }));
    const handedOver = loops.filter((l) => l.handedOver).length;
    return { n, peak, samples, wall, spread, loops, completed: completed.length, failed, leftBehind, opencodeProcesses, handedOver, confinements: [...new Set(loops.map((l) => l.confinement ?? 'unknown'))] };
  }

  const mb = (bytes) => `${(bytes / 1e6).toFixed(0)} MB`;
  const s = (ms) => (ms === null || ms === undefined || Number.isNaN(ms) ? '—' : `${(ms / 1000).toFixed(2)} s`);

  console.log(`parallel loops (opencode ${opencodeVersion}, node ${process.version}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${startedAt})`);
  console.log(`command: node bench/parallel.mjs ${process.argv.slice(2).join(' ')}`.trimEnd());
  console.log(`load before: ${loadBefore}`);
  for (const [name, m] of Object.entries(MODES)) {
    if (!m.built) console.log(`mode ${name}: ${m.what} — NOT BUILT YET${modes.includes(name) ? ' (asked for; skipped)' : ''}; only per-loop is measured, so issue 14's comparison cannot be made yet.`);
  }
  console.log('');

  const results = [];
  try {
    for (const mode of modes.filter((m) => MODES[m].built)) {
      for (let w = 0; w < WARMUP; w++) {
        const r = await step(mode, 1, `warm${w + 1}`);
        console.error(`[${mode}] warm-up (not counted): ${r.completed}/1 completed in ${s(r.wall)}, first prompt accepted ${s(r.loops[0].firstAccepted)}, peak PSS ${mb(r.peak.total)}`);
      }
      for (const n of NS) {
        const runs = [];
        for (let run = 0; run < RUNS; run++) {
          const r = await step(mode, n, `p${n}-r${run + 1}`);
          runs.push(r);
          const fp = r.loops.map((l) => l.firstAccepted).filter((x) => x !== null);
          console.error(`[${mode}] N=${n} run ${run + 1}: ${r.completed}/${n} completed, wall ${s(r.wall)}, peak PSS ${mb(r.peak.total)} (${r.peak.processes} processes, ${r.samples} samples), first prompt ${fp.length ? `${s(Math.min(...fp))}–${s(Math.max(...fp))}` : '—'}, spawned within ${r.spread.toFixed(0)} ms, load ${loadNow()}${r.failed.length ? `; failed: ${r.failed.map((f) => `${f.name} (${f.why})`).join('; ')}` : ''}${r.leftBehind.length ? `; ${r.leftBehind.length} process(es) outlived their CLI, killed: ${r.leftBehind.join(', ')}` : ''}`);
        }
        results.push({ mode, n, runs });
      }
    }
  } finally {
    await stopLoops(20_000);
    removeCgroups(loopNames);
    removeDirs();
    await worker.terminate();
    clearInterval(keepAlive);
  }
  const loadAfter = loadNow();

  // Per N: medians over runs (one run: its figures); first-prompt times pooled over runs.
  const rows = results.map(({ mode, n, runs }) => {
    const peakOf = (k) => median(runs.map((r) => r.peak[k]));
    // Staggered: the 1st loop is the one started first (the others wait for it); at once: the first to get there.
    const staggered = MODES[mode].staggered;
    const laterOf = (k) => runs.flatMap((r) => (staggered ? r.loops.slice(1).map((l) => l[k]) : r.loops.map((l) => l[k]).sort((a, b) => (a ?? Infinity) - (b ?? Infinity)).slice(1)).filter((x) => x !== null));
    const firstOf = (k) => runs.map((r) => (staggered ? r.loops[0][k] ?? Infinity : Math.min(...r.loops.map((l) => l[k] ?? Infinity)))).filter(Number.isFinite);
    const later = laterOf('firstAccepted');
    const firsts = firstOf('firstAccepted');
    const laterBusy = laterOf('firstBusy');
    const firstsBusy = firstOf('firstBusy');
    return {
      mode,
      n,
      total: peakOf('total'),
      forge: peakOf('forge'),
      opencode: peakOf('opencode'),
      other: peakOf('other'),
      processes: median(runs.map((r) => r.peak.processes)),
      first: firsts.length ? median(firsts) : null,
      laterMedian: later.length ? median(later) : null,
      laterMax: later.length ? Math.max(...later) : null,
      firstBusy: firstsBusy.length ? median(firstsBusy) : null,
      laterBusyMedian: laterBusy.length ? median(laterBusy) : null,
      noPrompt: runs.reduce((a, r) => a + r.loops.filter((l) => l.firstAccepted === null).length, 0),
      wall: median(runs.map((r) => r.wall)),
      completed: runs.reduce((a, r) => a + r.completed, 0),
      failed: runs.reduce((a, r) => a + r.failed.length, 0),
      of: n * runs.length,
      leftBehind: runs.flatMap((r) => r.leftBehind),
      confinements: [...new Set(runs.flatMap((r) => r.confinements))],
      samples: runs.reduce((a, r) => a + r.samples, 0),
      sampledMs: runs.reduce((a, r) => a + r.wall, 0),
      spread: Math.max(...runs.map((r) => r.spread)),
      failures: runs.flatMap((r) => r.failed),
      opencodeProcesses: Math.max(...runs.map((r) => r.opencodeProcesses)),
      handedOver: runs.reduce((a, r) => a + r.handedOver, 0),
    };
  });
  console.log(`load after: ${loadAfter}`);
  console.log('');
  console.log(`PSS (proportional set size, not RSS): the peak of the sum over all processes of the runs, sampled every ${INTERVAL_MS} ms; Forge CLIs (node) / opencode / other (sandboxes, git, checks): that same sample's split.`);
  console.log(`First prompt accepted: from spawning a CLI to the engine's debug line "prompt accepted" for its first session (opencode answered the prompt request); busy: to that session's first session.busy (opencode at work on it). "1st loop" is the first loop to get there (shared-warm: the loop started first), "2nd+" all the others.`);
  console.log('');
  console.log('| mode | N | completed | failed | peak PSS, all | Forge CLIs | opencode | other | per extra loop | first prompt accepted, 1st loop | 2nd+ median | 2nd+ max | busy, 1st | busy, 2nd+ median | wall |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    const one = rows.find((x) => x.mode === r.mode && x.n === 1);
    const extra = one && r.n > 1
      ? `${mb((r.total - one.total) / (r.n - 1))} (≈${mb((r.opencode - one.opencode) / (r.n - 1))} opencode + ${mb((r.forge - one.forge) / (r.n - 1))} CLI)`
      : r.n === 1 ? '—' : 'n/a (no N=1)';
    console.log(`| ${r.mode} | ${r.n} | ${r.completed}/${r.of} | ${r.failed} | ${mb(r.total)} | ${mb(r.forge)} | ${mb(r.opencode)} | ${mb(r.other)} | ${extra} | ${s(r.first)} | ${r.n > 1 ? s(r.laterMedian) : '—'} | ${r.n > 1 ? s(r.laterMax) : '—'} | ${s(r.firstBusy)} | ${r.n > 1 ? s(r.laterBusyMedian) : '—'} | ${s(r.wall)} |`);
  }
  console.log('');
  for (const r of rows) {
    const notes = [];
    if (r.noPrompt) notes.push(`${r.noPrompt} loop(s) never had a prompt accepted (or printed no line for it)`);
    if (r.failures.length) notes.push(`failed: ${r.failures.map((f) => `${f.name} (${f.why})`).join('; ')}`);
    if (r.leftBehind.length) notes.push(`${r.leftBehind.length} process(es) outlived their CLI (1 s after its exit) and were killed by the bench: ${[...new Set(r.leftBehind)].join(', ')}`);
    notes.push(`opencode processes seen: ${r.opencodeProcesses} (most in one run); loops handed over to another CLI's engine: ${r.handedOver} of ${r.of}`);
    notes.push(`confinement: ${r.confinements.join(', ')}; ${r.processes} processes at the peak; ${r.samples} samples (one per ${(r.sampledMs / r.samples).toFixed(0)} ms on average${r.sampledMs / r.samples > INTERVAL_MS * 1.2 ? `: the loaded machine stretched the ${INTERVAL_MS} ms` : ''}); all started within ${r.spread.toFixed(0)} ms`);
    console.log(`${r.mode} N=${r.n}: ${notes.join('; ')}`);
  }
  console.log('');
  console.log('Targets (issue 14, for the shared mode): per extra loop ≤ 100 MB, first prompt of the 2nd and later loops < 500 ms, 16 of 16 completed.');
  if (bench.quick) console.log('QUICK MODE (N = 2, shared, no warm-up): figures not representative');
  bench.done();
  process.exit(rows.some((r) => r.failed) ? 1 : 0);
}
