/**
 * Runs one check: a command (through an executor, the host by default) or a file assertion
 * (file-assertions.ts, in Node, confined to the worktree). The thin I/O side of the gate; what a result means is
 * evaluate.ts's business.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { isSecretVariableName } from '../sandbox/host-shell';
import { shellQuote } from '../sandbox/process';
import type { SandboxRuntime } from '../sandbox/types';
import { OutputTail } from './output-tail';
import { CHECK_MARKER_VARIABLE, signalMarkedProcesses } from './process-marker';
import { signalProcessGroup, startProcess } from '../process/process-runner';
import { evaluateFileCheck } from './file-assertions';
import type { CheckResult, CheckSpec, CheckStatus } from './types';

export const DEFAULT_CHECK_TIMEOUT_MS = 10 * 60_000;
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024;

export interface CheckCommandRequest {
  command: string;
  /** The loop's worktree (absolute). */
  cwd: string;
  timeoutMs: number;
  maxOutputBytes: number;
  /** Aborted when the loop is cancelled: the executor stops the command and everything it started. */
  signal?: AbortSignal;
  /**
   * The command's output as it comes (the setup phase streams it to `forge run --follow`). In a
   * sandbox the whole output then crosses to the host, where the tail is kept; without it only the
   * tail leaves the sandbox.
   */
  onOutput?: (text: string) => void;
}

export interface CheckCommandOutcome {
  /** null when a signal ended the command. */
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  /** Stopped because `signal` was aborted. */
  cancelled?: boolean;
  /** The last `maxOutputBytes` of stdout and stderr together. */
  outputTail: string;
  outputBytes: number;
  outputTruncated: boolean;
  /** Something the executor wants said beside the result (e.g. a process it could not stop). */
  note?: string;
}

/**
 * Runs `bash -c command` in `cwd`; kills it and everything it started at `timeoutMs`. Rejects
 * only when the command could not be started at all (the message says why).
 */
export type CheckExecutor = (request: CheckCommandRequest) => Promise<CheckCommandOutcome>;

export interface RunCheckOptions {
  /** The loop's worktree (absolute): commands run there, file paths resolve inside it. */
  cwd: string;
  /** Per check; default 10 minutes. */
  timeoutMs?: number;
  /** Output kept per check (its tail); default 64 KiB. */
  maxOutputBytes?: number;
  /** Where commands run; default the host (`hostCheckExecutor()`). */
  exec?: CheckExecutor;
  /** Epoch milliseconds; default Date.now. */
  now?: () => number;
  /** Abort to stop the running check (a cancelled loop); its result is then `cancelled`. */
  signal?: AbortSignal;
}

export async function runCheck(spec: CheckSpec, options: RunCheckOptions): Promise<CheckResult> {
  const now = options.now ?? Date.now;
  const startedAt = now();
  const started = performance.now();
  const base = { checkId: spec.id, label: spec.label, kind: spec.kind, startedAt };
  const elapsed = () => Math.round(performance.now() - started);
  const timeoutMs = options.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS;
  if (spec.kind !== 'command') {
    if (options.signal?.aborted) return { ...base, status: 'cancelled', message: 'cancelled before it started', exitCode: null, signal: null, durationMs: 0, outputTail: '', outputBytes: 0, outputTruncated: false };
    const { status, message } = await boundFileCheck(evaluateFileCheck(spec, options.cwd, timeoutMs), timeoutMs, options.signal);
    return { ...base, status, message, exitCode: null, signal: null, durationMs: elapsed(), outputTail: '', outputBytes: 0, outputTruncated: false };
  }
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new RangeError(`A check's timeout must be a positive number of milliseconds, not ${timeoutMs}.`);
  if (!(maxOutputBytes > 0) || !Number.isInteger(maxOutputBytes)) throw new RangeError(`A check's output limit must be a positive whole number of bytes, not ${maxOutputBytes}.`);
  const exec = options.exec ?? hostCheckExecutor();
  const empty = { exitCode: null, signal: null, outputTail: '', outputBytes: 0, outputTruncated: false };
  if (options.signal?.aborted) return { ...base, ...empty, status: 'cancelled', message: 'cancelled before it started', durationMs: 0 };
  let outcome: CheckCommandOutcome;
  try {
    outcome = await exec({ command: spec.command, cwd: options.cwd, timeoutMs, maxOutputBytes, ...(options.signal ? { signal: options.signal } : {}) });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      ...base,
      status: 'not-started',
      message: `could not start: ${reason}`,
      exitCode: null,
      signal: null,
      durationMs: elapsed(),
      outputTail: '',
      outputBytes: 0,
      outputTruncated: false,
    };
  }
  const { status, message } = describeOutcome(outcome, timeoutMs);
  return {
    ...base,
    status,
    message: outcome.note ? `${message} (${outcome.note})` : message,
    exitCode: outcome.exitCode,
    signal: outcome.signal,
    durationMs: elapsed(),
    outputTail: outcome.outputTail,
    outputBytes: outcome.outputBytes,
    outputTruncated: outcome.outputTruncated,
  };
}

/**
 * A file assertion's evaluation, bounded like a command (issue 27): it ends at the check's
 * timeout or at a cancel whatever the file system does (a stalled mount, a file Forge waits on);
 * the evaluation left behind holds no lock and its result is dropped.
 */
async function boundFileCheck(
  evaluation: Promise<{ status: CheckStatus; message: string }>,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<{ status: CheckStatus; message: string }> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const bounds = new Promise<{ status: CheckStatus; message: string }>((resolve) => {
    timer = setTimeout(() => resolve({ status: 'timed-out', message: `timed out after ${timeoutMs} ms reading the file; Forge stopped waiting for it` }), timeoutMs);
    onAbort = () => resolve({ status: 'cancelled', message: 'cancelled; Forge stopped waiting for the file' });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([evaluation, bounds]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

/** Runs checks one after another (they share the worktree, so never at once). */
export async function runChecks(specs: readonly CheckSpec[], options: RunCheckOptions): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  for (const spec of specs) results.push(await runCheck(spec, options));
  return results;
}

/** What a command's outcome means: bash's 126/127 are a command that could not start. Pure. */
export function describeOutcome(outcome: CheckCommandOutcome, timeoutMs: number): { status: CheckStatus; message: string } {
  if (outcome.cancelled) return { status: 'cancelled', message: 'cancelled; Forge stopped it and everything it started' };
  if (outcome.timedOut) return { status: 'timed-out', message: `timed out after ${timeoutMs} ms; Forge killed it and everything it started` };
  if (outcome.exitCode === 0) return { status: 'passed', message: 'exited with code 0' };
  const said = lastLine(outcome.outputTail);
  if (outcome.exitCode === 127) {
    return { status: 'not-started', message: `command not found (exit 127)${said ? `: ${said}` : ''}` };
  }
  if (outcome.exitCode === 126) {
    return { status: 'not-started', message: `command found but not executable (exit 126)${said ? `: ${said}` : ''}` };
  }
  if (outcome.exitCode === null) return { status: 'failed', message: `ended by signal ${outcome.signal ?? 'unknown'}` };
  return { status: 'failed', message: `exited with code ${outcome.exitCode}` };
}

function lastLine(text: string): string {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return (lines[lines.length - 1] ?? '').trim().slice(0, 300);
}

export interface HostCheckExecutorOptions {
  /**
   * The command's environment. Default: Forge's own minus every variable whose name says it
   * holds a credential (the agent shell's rule, host-shell.ts): a check runs code the agent
   * wrote, which must not read Forge's or the user's secrets through it.
   */
  env?: NodeJS.ProcessEnv;
  /** Between SIGTERM and SIGKILL at a timeout; default 2 s. */
  killGraceMs?: number;
  /** Called with the peak bytes the output tail held (for tests and benchmarks). */
  onPeakHeldBytes?: (bytes: number) => void;
}

/** How long the output may stay open after the command exited, for its last bytes to arrive. */
const OUTPUT_DRAIN_MS = 1_000;

/**
 * Runs checks on this machine: `bash -c` in the worktree, leading its own process group, every
 * process marked (`FORGE_CHECK_RUN`). stdout and stderr share one pipe so the tail interleaves
 * them as a terminal would. When the command exits, or at its timeout, nothing it started
 * survives it: its group and every marked process are killed (a check that starts a server in
 * the background must not leave it running).
 */
export function hostCheckExecutor(executorOptions: HostCheckExecutorOptions = {}): CheckExecutor {
  return async (request) => {
    const stat = await fs.stat(request.cwd).catch(() => null);
    if (!stat?.isDirectory()) throw new Error(`the worktree folder ${request.cwd} does not exist; Forge runs checks in the loop's worktree`);
    const marker = randomBytes(12).toString('hex');
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(executorOptions.env ?? defaultCheckEnvironment())) if (value !== undefined) env[key] = value;
    env[CHECK_MARKER_VARIABLE] = marker;
    const tail = new OutputTail(request.maxOutputBytes);
    // The outer bash only points stderr at stdout and becomes the check's bash (`$0` is "bash",
    // so messages read `bash: line 1: nosuch: command not found`).
    const started = startProcess('bash', ['-c', 'exec bash -c -- "$1" 2>&1', 'forge-check', request.command], { cwd: request.cwd, env, processGroup: true });
    const child = started.child;
    const { spawnFailed } = started;
    const exited = started.exited.then(({ exitCode, signal }) => ({ code: exitCode, signal }));
    let openStreams = 2;
    let streamsClosed!: () => void;
    const allStreamsClosed = new Promise<void>((resolve) => (streamsClosed = resolve));
    const onOutput = request.onOutput;
    for (const stream of child ? [child.stdout!, child.stderr!] : []) {
      const decoder = onOutput ? new StringDecoder('utf8') : undefined;
      stream.on('data', (chunk: Buffer) => {
        tail.push(chunk);
        if (onOutput && decoder) onOutput(decoder.write(chunk));
      });
      stream.once('close', () => {
        if (--openStreams === 0) streamsClosed();
      });
    }
    const pid = started.pid;
    const killAll = (signal: NodeJS.Signals) => {
      if (pid !== undefined) signalProcessGroup(pid, signal);
      return signalMarkedProcesses(marker, signal);
    };

    if (pid !== undefined) runningChecks.set(marker, pid);
    installExitHook();

    let timedOut = false;
    let cancelled = false;
    let graceTimer: NodeJS.Timeout | undefined;
    const stop = () => {
      if (graceTimer) return;
      killAll('SIGTERM');
      graceTimer = setTimeout(() => killAll('SIGKILL'), executorOptions.killGraceMs ?? 2_000);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, request.timeoutMs);
    const onAbort = () => {
      cancelled = true;
      stop();
    };
    request.signal?.addEventListener('abort', onAbort, { once: true });
    if (request.signal?.aborted) onAbort();

    const first = await Promise.race([exited.then((exit) => ({ exit })), spawnFailed.then((error) => ({ error }))]);
    clearTimeout(timer);
    // The group's pid may be reused once it is gone: no signal to it after this sweep.
    clearTimeout(graceTimer);
    request.signal?.removeEventListener('abort', onAbort);
    if ('error' in first) {
      killAll('SIGKILL');
      runningChecks.delete(marker);
      throw new Error(`bash could not be started in ${request.cwd} (${first.error.message}); Forge needs bash on PATH to run checks`);
    }
    // The command has exited: whatever it left behind goes now, then the output may end.
    const deadline = Date.now() + 2_000;
    while (killAll('SIGKILL') > 0 && Date.now() < deadline) await sleep(20);
    runningChecks.delete(marker);
    let note: string | undefined;
    let drainTimer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      allStreamsClosed.then(() => true),
      new Promise<false>((resolve) => (drainTimer = setTimeout(() => resolve(false), OUTPUT_DRAIN_MS))),
    ]);
    clearTimeout(drainTimer);
    if (!drained) {
      // Held open by a process that dropped Forge's marker from its environment: stop reading.
      child?.stdout?.destroy();
      child?.stderr?.destroy();
      note = 'a process it started, which Forge could not find to stop, kept its output open';
    }
    executorOptions.onPeakHeldBytes?.(tail.peakHeldBytes);
    return {
      exitCode: first.exit.code,
      signal: first.exit.signal,
      timedOut: timedOut && !cancelled,
      ...(cancelled ? { cancelled } : {}),
      outputTail: tail.text(),
      outputBytes: tail.totalBytes,
      outputTruncated: tail.truncated,
      ...(note ? { note } : {}),
    };
  };
}

/** Host checks running now in this process: marker → process-group leader. */
const runningChecks = new Map<string, number>();
let exitHookInstalled = false;

/**
 * Kills every host check running now, with everything it started, synchronously: for exit
 * handlers (a check's process group is detached, so it would outlive Forge). Returns how many
 * checks were running.
 */
export function killRunningChecksNow(): number {
  const count = runningChecks.size;
  for (const [marker, pid] of runningChecks) {
    signalProcessGroup(pid, 'SIGKILL');
    signalMarkedProcesses(marker, 'SIGKILL');
  }
  return count;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => killRunningChecksNow());
}

/** Forge's environment minus credentials (see HostCheckExecutorOptions.env). */
export function defaultCheckEnvironment(base: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) if (value !== undefined && !isSecretVariableName(key)) env[key] = value;
  return env;
}

/**
 * Runs checks inside a loop's sandbox (`SandboxRuntime.exec`, which kills the command's tree at
 * its timeout). The sandbox side keeps only the output's tail (`tail -c`), so a check printing
 * 100 MB never crosses into Forge; `pipefail` keeps the command's own exit code.
 */
export function sandboxCheckExecutor(runtime: Pick<SandboxRuntime, 'exec'>, sandboxName: string): CheckExecutor {
  return async (request) => {
    const streamed = request.onOutput ? new OutputTail(request.maxOutputBytes) : undefined;
    const forward = request.onOutput;
    const script = streamed
      ? `{ bash -c -- ${shellQuote(request.command)}; } 2>&1`
      : `set -o pipefail; { bash -c -- ${shellQuote(request.command)}; } 2>&1 | tail -c ${request.maxOutputBytes}`;
    const running = runtime.exec(sandboxName, script, {
      cwd: request.cwd,
      timeoutMs: request.timeoutMs,
      ...(streamed && forward
        ? {
            onOutput: (text: string) => {
              streamed.push(Buffer.from(text, 'utf8'));
              forward(text);
            },
          }
        : {}),
    });
    // SandboxExecOptions has no abort signal: a cancelled loop does not wait for its check. The
    // command is left to the sandbox's stop, which ends every command in it when the loop ends.
    const cancelled = request.signal ? abortedPromise(request.signal) : null;
    const first = cancelled ? await Promise.race([running, cancelled]) : await running;
    if (first === ABORTED) {
      running.catch(() => undefined);
      return { exitCode: null, signal: null, timedOut: false, cancelled: true, outputTail: '', outputBytes: 0, outputTruncated: false };
    }
    const result = first;
    const tail = streamed ?? new OutputTail(request.maxOutputBytes);
    if (!streamed) tail.push(Buffer.from(result.stdout + result.stderr, 'utf8'));
    return {
      exitCode: result.exitCode,
      signal: result.killed === 'memory-limit' ? 'SIGKILL' : null,
      timedOut: result.timedOut,
      outputTail: tail.text(),
      // Only the tail crosses out of the sandbox: a full tail says the output may have been longer.
      outputBytes: tail.totalBytes,
      outputTruncated: tail.totalBytes >= request.maxOutputBytes,
      // A timeout is said by runCheck already; a memory-limit kill is worth the driver's words.
      ...(result.note && !result.timedOut ? { note: result.note } : {}),
    };
  };
}

const ABORTED = Symbol('aborted');

function abortedPromise(signal: AbortSignal): Promise<typeof ABORTED> {
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(ABORTED), { once: true }));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
