/**
 * The one process runner of Forge: every child process the engine starts goes through here, so
 * spawning, time-outs, output caps, process-group kills, cancellation and PATH lookup live in one
 * tested place (test/core/process/process-runner.test.ts).
 *
 * Built on node:child_process, not on execa: measured in the same run (bench/process-spawn.mjs),
 * execa cost 12–19 % more per spawn (`true` and `git status`, 1.2–2 ms each), above the 5 % the
 * sandbox exec path and the git runner may cost (see CHANGELOG, issue 28).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

export interface StartProcessOptions {
  cwd?: string;
  /** Default: this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** `ignore` (default): the child reads nothing; `pipe`: `child.stdin` is writable. */
  stdin?: 'ignore' | 'pipe';
  /** `pipe` (default): `child.stdout` / `child.stderr` readable; `ignore`: discarded. */
  output?: 'pipe' | 'ignore';
  /**
   * The child leads a process group of its own (detached), so `kill` reaches everything it
   * started that did not leave the group; it also survives this process's terminal closing.
   */
  processGroup?: boolean;
  /** Aborting it signals the process (group) with `killSignal` (default SIGTERM) while it runs. */
  signal?: AbortSignal;
  killSignal?: NodeJS.Signals;
}

export interface ProcessExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
}

/** Why a process could not be started; `message` and `code` are node's own. */
export class ProcessSpawnError extends Error {
  readonly code: string | undefined;
  /**
   * `program-not-found`: no such program (on PATH); `cwd-not-found`: the working folder does not
   * exist (node says ENOENT for both); `failed`: anything else (EACCES, E2BIG, …).
   */
  readonly kind: 'program-not-found' | 'cwd-not-found' | 'failed';
  constructor(error: unknown, cwd: string | undefined) {
    const e = error as NodeJS.ErrnoException | null;
    super(error instanceof Error ? error.message : String(error), { cause: error });
    this.name = 'ProcessSpawnError';
    this.code = e?.code;
    this.kind = e?.code !== 'ENOENT' ? 'failed' : cwd !== undefined && !existsSync(cwd) ? 'cwd-not-found' : 'program-not-found';
  }
}

export interface StartedProcess {
  readonly child: ChildProcess;
  readonly pid: number | undefined;
  /** Resolves when the process exits (its pipes may still be open, held by what it started). */
  readonly exited: Promise<ProcessExit>;
  /** Resolves when the process exited and its output pipes are closed. */
  readonly closed: Promise<ProcessExit>;
  /** Resolves if, and only if, the process could not be started. */
  readonly spawnFailed: Promise<ProcessSpawnError>;
  /** Signals the child's process group (with `processGroup`, also after the child exited), else the child while it runs. */
  kill(signal: NodeJS.Signals): void;
}

/** Starts a long-lived process; the caller reads its streams and decides when it ends. */
export function startProcess(program: string, args: readonly string[], options: StartProcessOptions = {}): StartedProcess {
  const output = options.output ?? 'pipe';
  let failed!: (error: ProcessSpawnError) => void;
  const spawnFailed = new Promise<ProcessSpawnError>((resolve) => (failed = resolve));
  let child: ChildProcess;
  try {
    // No shell: every argument reaches the program as it is.
    child = spawn(program, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: [options.stdin ?? 'ignore', output, output],
      detached: options.processGroup === true,
      windowsHide: true,
    });
  } catch (error) {
    // spawn throws synchronously for bad arguments (a NUL byte, …): reported as a failed start.
    const never = new Promise<ProcessExit>(() => undefined);
    failed(new ProcessSpawnError(error, options.cwd));
    return { child: undefined as unknown as ChildProcess, pid: undefined, exited: never, closed: never, spawnFailed, kill: () => undefined };
  }
  child.once('error', (error) => {
    // 'error' also reports a failed kill or write of a running child: only a missing pid is a failed start.
    if (child.pid === undefined) failed(new ProcessSpawnError(error, options.cwd));
  });
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (exitCode, signal) => resolve({ exitCode, signal })));
  const closed = new Promise<ProcessExit>((resolve) => child.once('close', (exitCode, signal) => resolve({ exitCode, signal })));
  const group = options.processGroup === true;
  // A group may outlive its leader (what it started), so it is signalled even after the exit; a
  // lone child is not, once it exited and was reaped (its pid may be someone else's by then).
  const kill = (signal: NodeJS.Signals) => {
    if (group) signalProcessGroup(child.pid, signal);
    else if (child.exitCode === null && child.signalCode === null) signalProcess(child.pid, signal);
  };
  const cancel = options.signal;
  if (cancel && child.pid !== undefined) {
    const onAbort = () => kill(options.killSignal ?? 'SIGTERM');
    if (cancel.aborted) onAbort();
    else {
      cancel.addEventListener('abort', onAbort, { once: true });
      void exited.then(() => cancel.removeEventListener('abort', onAbort));
    }
  }
  return { child, pid: child.pid, exited, closed, spawnFailed, kill };
}

export interface RunProcessOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /**
   * `pipe` (default): stdin is a pipe, closed at once (or after `input`); `ignore`: no stdin;
   * `keep-open`: an idle pipe for the child's whole life (a reader notices when Forge is gone).
   */
  stdin?: 'pipe' | 'ignore' | 'keep-open';
  /** Written to stdin, which is then closed. */
  input?: string;
  /** See StartProcessOptions.processGroup: with it, a time-out or cancel kills the whole group. */
  processGroup?: boolean;
  /** Kills the process (group) after this many ms; the result says `timedOut`. */
  timeoutMs?: number;
  /** Signal of a time-out or cancel; default SIGKILL. */
  killSignal?: NodeJS.Signals;
  /** After a `killSignal` other than SIGKILL: SIGKILL this many ms later if still running; default 2 s. */
  forceKillAfterMs?: number;
  /** Aborting it kills the process (group) like a time-out; the result says `cancelled`. */
  signal?: AbortSignal;
  /** Cap on captured output per stream, in bytes (the start is kept); default 16 MiB. */
  maxOutputBytes?: number;
  /** Called with the output as it comes (decoded per stream, whole characters), beyond the cap too. */
  onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
}

export interface ProcessResult extends ProcessExit {
  stdout: string;
  stderr: string;
  timedOut: boolean;
  cancelled: boolean;
  /** Output beyond `maxOutputBytes` was dropped on at least one stream. */
  outputTruncated: boolean;
}

export const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/**
 * Runs a process to its end and captures its output. Never rejects for a non-zero exit, a signal,
 * a time-out or a cancel (the result says which); rejects with ProcessSpawnError when it could
 * not start. Resolves once the process exited and its pipes closed.
 */
export function runProcess(program: string, args: readonly string[], options: RunProcessOptions = {}): Promise<ProcessResult> {
  const stdinMode = options.stdin ?? 'pipe';
  const started = startProcess(program, args, {
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.env ? { env: options.env } : {}),
    stdin: stdinMode === 'ignore' && options.input === undefined ? 'ignore' : 'pipe',
    processGroup: options.processGroup === true,
  });
  return collectProcess(started, options);
}

/**
 * Runs an already started process to its end as runProcess does (time-out, cancel, output caps,
 * stdin per `options`), from now: what the bwrap driver uses for a sandbox command whose process
 * it started ahead of the command (`cwd`, `env` and `processGroup` were the start's business).
 */
export function collectProcess(started: StartedProcess, options: Omit<RunProcessOptions, 'cwd' | 'env'> = {}): Promise<ProcessResult> {
  const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const stdinMode = options.stdin ?? 'pipe';
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let forceTimer: NodeJS.Timeout | undefined;
    let timedOut = false;
    let cancelled = false;
    const stop = () => {
      clearTimeout(timer);
      clearTimeout(forceTimer);
      options.signal?.removeEventListener('abort', onAbort);
    };
    void started.spawnFailed.then((error) => {
      stop();
      reject(error);
    });
    const child = started.child;
    if (!child) return;
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    const onOutput = options.onOutput;
    const outText = onOutput ? new StringDecoder('utf8') : undefined;
    const errText = onOutput ? new StringDecoder('utf8') : undefined;
    child.stdout!.on('data', (b: Buffer) => {
      if (outBytes < max) out.push(outBytes + b.length > max ? b.subarray(0, max - outBytes) : b);
      outBytes += b.length;
      if (onOutput && outText) onOutput(outText.write(b), 'stdout');
    });
    child.stderr!.on('data', (b: Buffer) => {
      if (errBytes < max) err.push(errBytes + b.length > max ? b.subarray(0, max - errBytes) : b);
      errBytes += b.length;
      if (onOutput && errText) onOutput(errText.write(b), 'stderr');
    });
    const kill = () => {
      const signal = options.killSignal ?? 'SIGKILL';
      started.kill(signal);
      if (signal !== 'SIGKILL' && !forceTimer) forceTimer = setTimeout(() => started.kill('SIGKILL'), options.forceKillAfterMs ?? 2_000);
    };
    function onAbort() {
      if (timedOut || cancelled) return;
      cancelled = true;
      kill();
    }
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        if (cancelled) return;
        timedOut = true;
        kill();
      }, options.timeoutMs);
    }
    if (options.signal) {
      if (options.signal.aborted) onAbort();
      else options.signal.addEventListener('abort', onAbort, { once: true });
    }
    if (child.stdin) {
      child.stdin.on('error', () => {
        // The child may exit before reading its input; that is its business.
      });
      if (options.input !== undefined) child.stdin.end(options.input);
      else if (stdinMode !== 'keep-open') child.stdin.end();
    }
    void started.closed.then(({ exitCode, signal }) => {
      stop();
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
        cancelled,
        outputTruncated: outBytes > max || errBytes > max,
      });
    });
  });
}

/**
 * Runs a short process synchronously (for the few callers that cannot wait, e.g. a plan's
 * validation): stdout as text, or null when it could not start, failed or timed out.
 */
export function runProcessSync(program: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): string | null {
  const result = spawnSync(program, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    maxBuffer: DEFAULT_MAX_OUTPUT_BYTES,
    windowsHide: true,
    ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs, killSignal: 'SIGKILL' as const } : {}),
  });
  return result.error || result.status !== 0 ? null : result.stdout;
}

/**
 * Signals the process group led by `pid`; a group already gone is fine. No fall-back to the pid
 * alone: once its group is gone the pid may belong to an unrelated process.
 */
export function signalProcessGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is gone.
  }
}

/** Signals one process; a process already gone is fine. */
export function signalProcess(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: already gone.
  }
}

/** The absolute path of `binary` on `pathVar`, or `binary` itself when not found (or already a path). */
export function resolveOnPath(binary: string, pathVar: string | undefined): string {
  if (binary.includes('/')) return binary;
  for (const dir of (pathVar ?? '').split(':')) {
    if (!dir) continue;
    const candidate = `${dir}/${binary}`;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return binary;
}
