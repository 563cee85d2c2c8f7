// Shared by the benchmarks: command-line options, medians and percentiles, the machine's load,
// and the run's frame (benchRun): an overall time-out, a progress line per step on stderr, and an
// end that says which step waited for what instead of hanging.
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';

export const numberArg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};

export const stringArg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
};

export const flagArg = (name) => process.argv.includes(`--${name}`);

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

export const loadNow = () => loadavg().map((l) => l.toFixed(1)).join(' ');

/** Exit status of a benchmark that ran out of time (as timeout(1)). */
export const BENCH_TIMED_OUT = 124;

/**
 * The frame of one benchmark run. `--quick` selects the quick mode (one short iteration, no
 * warm-up: what `npm test` runs, so a benchmark that breaks fails CI; its figures are printed,
 * never judged); `--timeout SECONDS` overrides the overall time-out.
 *
 * Each `step(title, waitingFor)` prints a progress line on stderr; `waiting(what)` names what the
 * current step now waits for. When the time-out passes, the run prints one line naming the step
 * and what it was waiting for, runs its clean-ups (bounded) and exits with 124; an error thrown
 * out of the benchmark is printed with its step and exits with 1. Under CI=true, `unavailable`
 * fails the run (a prerequisite missing in CI is a failure, never a skip).
 *
 * @param {string} name the npm script's name, e.g. `bench:loop`
 * @param {{ timeoutS: number, quickTimeoutS: number }} limits default time-outs in seconds
 */
export function benchRun(name, limits) {
  const quick = flagArg('quick');
  const timeoutS = numberArg('timeout', quick ? limits.quickTimeoutS : limits.timeoutS);
  if (!(timeoutS > 0)) {
    process.stderr.write(`${name}: --timeout must be a number of seconds above 0\n`);
    process.exit(2);
  }
  const t0 = performance.now();
  const cleanups = [];
  let stepNo = 0;
  let current = { title: 'start', waitingFor: 'the benchmark to load' };
  let ending = false;
  const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
  const where = () => `step ${stepNo} "${current.title}", waiting for ${current.waitingFor}`;

  const runCleanups = async () => {
    const all = cleanups.splice(0).reverse();
    await Promise.race([
      (async () => {
        for (const c of all) await Promise.resolve().then(c).catch(() => undefined);
      })(),
      new Promise((r) => setTimeout(r, 20_000).unref()),
    ]);
  };
  const end = async (code, message) => {
    if (ending) return;
    ending = true;
    process.stderr.write(`${message}\n`);
    await runCleanups();
    process.exit(code);
  };

  const timer = setTimeout(() => {
    void end(BENCH_TIMED_OUT, `${name}: TIMED OUT after ${timeoutS} s in ${where()} (option --timeout SECONDS)`);
  }, timeoutS * 1000);
  const onError = (error) => {
    void end(1, `${name}: FAILED in ${where()}, after ${elapsed()}: ${error?.stack ?? String(error)}`);
  };
  process.on('uncaughtException', onError);
  process.on('unhandledRejection', onError);
  process.stderr.write(`${name}: ${quick ? 'quick mode (one short iteration, no warm-up; figures not representative)' : 'full run'}, time-out ${timeoutS} s, load ${loadNow()}\n`);

  return {
    quick,
    timeoutS,
    /** Starts a step: prints `name [elapsed] step N: title (waiting for …)` on stderr. */
    step(title, waitingFor = 'it to finish') {
      stepNo += 1;
      current = { title, waitingFor };
      process.stderr.write(`${name} [${elapsed()}] step ${stepNo}: ${title} (waiting for ${waitingFor})\n`);
    },
    /** What the current step waits for now (shown if the time-out passes). */
    waiting(what) {
      current = { ...current, waitingFor: what };
    },
    /** Runs at the end of a failed or timed-out run (last registered first); the benchmark's own finally blocks run otherwise. */
    cleanup(fn) {
      cleanups.push(fn);
      return fn;
    },
    /**
     * A prerequisite is missing: under CI=true this throws (the run fails, naming the step);
     * elsewhere it prints that the part is skipped and why, and returns.
     */
    unavailable(what, why) {
      if (process.env.CI === 'true') throw new Error(`${what} cannot run under CI=true: ${why}`);
      process.stderr.write(`${name}: ${what} skipped: ${why}\n`);
    },
    /** The run completed: stops the time-out and prints the closing line. */
    done() {
      clearTimeout(timer);
      process.stderr.write(`${name}: done in ${elapsed()}${quick ? ' (quick mode: figures not representative)' : ''}, load ${loadNow()}\n`);
    },
  };
}

/**
 * An isolated opencode "machine" under `envRoot` for benchmarks that run `forge` CLIs: HOME and the
 * XDG folders there, a user configuration that names no model (so each CLI starts Forge's embedded
 * one), opencode's one-time plugin install seeded by `seed(configDir)` (test/support/
 * opencode-config-seed.ts). Returns the CLIs' environment (engine debug lines on, no Forge or
 * opencode setting of the caller's) and whether the seeding worked.
 */
export async function isolatedOpencodeEnvironment(envRoot, seed) {
  const home = {
    HOME: path.join(envRoot, 'home'),
    XDG_CONFIG_HOME: path.join(envRoot, 'config'),
    XDG_DATA_HOME: path.join(envRoot, 'data'),
    XDG_CACHE_HOME: path.join(envRoot, 'cache'),
    XDG_STATE_HOME: path.join(envRoot, 'state'),
  };
  for (const d of Object.values(home)) mkdirSync(d, { recursive: true });
  const configDir = path.join(home.XDG_CONFIG_HOME, 'opencode');
  mkdirSync(configDir, { recursive: true });
  writeFileSync(path.join(configDir, 'opencode.json'), JSON.stringify({ $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled' }, null, 2));
  const seeded = await seed(configDir);
  const env = { ...process.env, ...home, FORGE_LOG: 'debug' };
  for (const k of ['FORGE_MODEL', 'FORGE_DATA_DIR', 'FORGE_SETTINGS', 'OPENCODE_CONFIG', 'OPENCODE_CONFIG_CONTENT', 'OPENCODE_CONFIG_DIR']) delete env[k];
  return { env, seeded };
}
