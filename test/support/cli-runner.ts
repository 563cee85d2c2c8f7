/**
 * Runs the built `forge` CLI (`dist/cli.mjs`) as real child processes for tests: each in its own
 * process group, with the test's isolated opencode environment, its output collected line by
 * line, and a way to find (and kill) every process a test's CLIs started — their opencode
 * servers included, which Forge spawns in process groups of their own.
 *
 * Every process of one runner carries `FORGE_CLI_TEST_RUN=<id>` in its environment (opencode and
 * its tools inherit the CLI's environment), and each CLI process also `FORGE_CLI_TEST_PROCESS=<id>`:
 * /proc tells which processes a given CLI left behind.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const RUN_MARKER_VARIABLE = 'FORGE_CLI_TEST_RUN';
export const PROCESS_MARKER_VARIABLE = 'FORGE_CLI_TEST_PROCESS';

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface CliProcess {
  readonly pid: number;
  /** Value of `FORGE_CLI_TEST_PROCESS` for this CLI and everything it started. */
  readonly marker: string;
  readonly args: readonly string[];
  readonly exited: Promise<CliExit>;
  stdout(): string;
  stderr(): string;
  /** Complete stdout lines so far. */
  stdoutLines(): string[];
  /** Resolves with the first stdout line (already printed or to come) that matches. */
  waitForLine(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Closes the read end of the CLI's stdout pipe (as `forge run … | head -2` does after two lines). */
  closeStdout(): void;
  /** Closes the read end of the CLI's stderr pipe. */
  closeStderr(): void;
  /** Signals the CLI's process group (as a terminal's Ctrl-C does). */
  signal(signal: NodeJS.Signals): void;
  /** What the process printed, for assertion messages. */
  describe(): string;
}

export interface CliResult extends CliExit {
  stdout: string;
  stderr: string;
}

export interface CliRunnerOptions {
  /** `dist/cli.mjs`. */
  cliPath: string;
  /** Added to `process.env` for every CLI (HOME/XDG isolation of opencode). */
  env: Record<string, string>;
  /** Arguments appended to every command (`--data-dir D --repo R`). */
  commonArgs: string[];
  /** Forge settings handed over as `FORGE_SETTINGS`. */
  settings?: Record<string, unknown>;
}

export interface CliRunner {
  readonly runMarker: string;
  /** Starts `forge <args> <commonArgs>`. */
  start(args: string[], options?: { env?: Record<string, string>; settings?: Record<string, unknown>; cwd?: string }): CliProcess;
  /** Runs a command to its end. */
  run(args: string[], options?: { env?: Record<string, string>; settings?: Record<string, unknown>; timeoutMs?: number; cwd?: string }): Promise<CliResult>;
  /** pids of live processes carrying `variable=value` in their environment (Linux /proc). */
  processesWith(variable: string, value: string): number[];
  /** SIGKILLs every CLI this runner started and every process they left (opencode servers included). */
  killAll(): Promise<void>;
}

/** Builds `dist/cli.mjs` when it is missing (`npm test` builds it before the tests run). */
export function ensureCliBuilt(repoRoot: string): string {
  const cliPath = join(repoRoot, 'dist', 'cli.mjs');
  if (!existsSync(cliPath)) {
    const r = spawnSync(process.execPath, ['esbuild.mjs'], { cwd: repoRoot, stdio: 'inherit' });
    if (r.status !== 0 || !existsSync(cliPath)) throw new Error(`Building ${cliPath} failed (node esbuild.mjs exited ${r.status}).`);
  }
  return cliPath;
}

export function createCliRunner(options: CliRunnerOptions): CliRunner {
  const runMarker = randomBytes(8).toString('hex');
  const started: CliProcess[] = [];

  function start(args: string[], extra: { env?: Record<string, string>; settings?: Record<string, unknown>; cwd?: string } = {}): CliProcess {
    const marker = randomBytes(8).toString('hex');
    const settings = { ...(options.settings ?? {}), ...(extra.settings ?? {}) };
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      ...options.env,
      FORGE_SETTINGS: JSON.stringify(settings),
      // After FORGE_SETTINGS: a test may hand over a raw (malformed) value.
      ...(extra.env ?? {}),
      [RUN_MARKER_VARIABLE]: runMarker,
      [PROCESS_MARKER_VARIABLE]: marker,
    };
    const fullArgs = [...args, ...options.commonArgs];
    const child: ChildProcess = spawn(process.execPath, [options.cliPath, ...fullArgs], {
      env,
      ...(extra.cwd ? { cwd: extra.cwd } : {}),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let errText = '';
    const lineWaiters: Array<{ predicate: (l: string) => boolean; resolve: (l: string) => void }> = [];
    const completeLines = () => out.split('\n').slice(0, -1);
    child.stdout!.on('data', (chunk: Buffer) => {
      const before = completeLines().length;
      out += chunk.toString('utf8');
      const lines = completeLines();
      for (const line of lines.slice(before)) {
        for (const w of [...lineWaiters]) {
          if (w.predicate(line)) {
            lineWaiters.splice(lineWaiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      errText += chunk.toString('utf8');
    });
    const exited = new Promise<CliExit>((resolve) => {
      child.once('close', (code, signal) => resolve({ code, signal }));
    });
    const describe = () => `forge ${fullArgs.join(' ')}\n--- stdout ---\n${out}\n--- stderr ---\n${errText}`;
    const proc: CliProcess = {
      pid: child.pid!,
      marker,
      args: fullArgs,
      exited,
      stdout: () => out,
      stderr: () => errText,
      stdoutLines: completeLines,
      waitForLine(predicate, timeoutMs = 180_000) {
        const seen = completeLines().find(predicate);
        if (seen !== undefined) return Promise.resolve(seen);
        return new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            const i = lineWaiters.findIndex((w) => w.resolve === done);
            if (i >= 0) lineWaiters.splice(i, 1);
            reject(new Error(`no matching output line within ${timeoutMs} ms\n${describe()}`));
          }, timeoutMs);
          const done = (line: string) => {
            clearTimeout(timer);
            resolve(line);
          };
          void exited.then(() => {
            // The process ended: no further line can come.
            setImmediate(() => {
              const i = lineWaiters.findIndex((w) => w.resolve === done);
              if (i < 0) return;
              lineWaiters.splice(i, 1);
              clearTimeout(timer);
              reject(new Error(`the CLI exited before printing a matching line\n${describe()}`));
            });
          });
          lineWaiters.push({ predicate, resolve: done });
        });
      },
      closeStdout() {
        child.stdout!.destroy();
      },
      closeStderr() {
        child.stderr!.destroy();
      },
      signal(sig) {
        try {
          process.kill(-child.pid!, sig);
        } catch {
          /* already gone */
        }
      },
      describe,
    };
    started.push(proc);
    return proc;
  }

  function processesWith(variable: string, value: string): number[] {
    if (!existsSync('/proc/self/environ')) return [];
    const needle = Buffer.from(`${variable}=${value}\0`);
    const pids: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
      try {
        if (readFileSync(`/proc/${entry}/environ`).includes(needle)) pids.push(Number(entry));
      } catch {
        /* gone or not readable */
      }
    }
    return pids;
  }

  return {
    runMarker,
    start,
    async run(args, extra = {}) {
      const proc = start(args, extra);
      const timeoutMs = extra.timeoutMs ?? 120_000;
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([
        proc.exited,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            proc.signal('SIGKILL');
            reject(new Error(`forge ${args.join(' ')} did not finish within ${timeoutMs} ms\n${proc.describe()}`));
          }, timeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
      return { ...exit, stdout: proc.stdout(), stderr: proc.stderr() };
    },
    processesWith,
    async killAll() {
      for (const p of started) p.signal('SIGKILL');
      await Promise.all(started.map((p) => Promise.race([p.exited, new Promise((r) => setTimeout(r, 5_000).unref())])));
      // Whatever the CLIs started in groups of their own (opencode servers and their tools).
      for (let sweep = 0; sweep < 2; sweep++) {
        for (const pid of processesWith(RUN_MARKER_VARIABLE, runMarker)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            /* gone */
          }
        }
      }
    },
  };
}
