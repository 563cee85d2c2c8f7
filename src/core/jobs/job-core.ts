/**
 * The pure part of `forge_shell` / `forge_jobs` (issue 16): argument defaults and caps, the
 * first-of-four completion decision, output tails, line paging, and the texts the agent reads.
 * No I/O here; `loop-jobs.ts` runs the processes.
 */

/** Every process of a `forge_shell` job carries `FORGE_JOB_MARK=<job marker>` (found and killed whole by it). */
export const JOB_MARKER_VARIABLE = 'FORGE_JOB_MARK';
/** Every process of a builtin shell call carries `FORGE_WATCHDOG_MARK=<call marker>` (the shell-hang watchdog's handle). */
export const WATCHDOG_MARKER_VARIABLE = 'FORGE_WATCHDOG_MARK';

export const DEFAULT_IDLE_MS = 60_000;
export const DEFAULT_MAX_WAIT_MS = 120_000;
export const MAX_MAX_WAIT_MS = 600_000;
export const MAX_POLL_WAIT_MS = 30_000;
/** Lines of output a completed call returns. */
export const RESULT_TAIL_LINES = 60;
/** Bytes of output kept in memory per job for tails and pattern matching. */
export const MEMORY_TAIL_BYTES = 64 * 1024;

export interface ShellTimings {
  idleMs: number;
  maxWaitMs: number;
}

/** Defaults and caps: `max_wait_ms` never above 600 s, `idle_ms` never above `max_wait_ms`. */
export function shellTimings(args: { idle_ms?: number | undefined; max_wait_ms?: number | undefined }): ShellTimings {
  const maxWaitMs = Math.min(MAX_MAX_WAIT_MS, Math.max(1, args.max_wait_ms ?? DEFAULT_MAX_WAIT_MS));
  const idleMs = Math.min(maxWaitMs, Math.max(1, args.idle_ms ?? DEFAULT_IDLE_MS));
  return { idleMs, maxWaitMs };
}

/** Why a `forge_shell` call returned. */
export type ShellCompletion =
  | { kind: 'exited'; exitCode: number | null; signal: string | null }
  | { kind: 'pattern'; match: string }
  | { kind: 'idle'; idleMs: number }
  | { kind: 'max-wait'; maxWaitMs: number }
  | { kind: 'background' };

/**
 * Compiles the agent's `success_pattern` (multiline: `^`/`$` match at line ends). A bad pattern
 * is an error the agent can fix, not a crash.
 */
export function compileSuccessPattern(pattern: string | undefined): RegExp | undefined | { error: string } {
  if (pattern === undefined || pattern === '') return undefined;
  try {
    return new RegExp(pattern, 'm');
  } catch (error) {
    return { error: `success_pattern is not a valid regular expression: ${(error as Error).message}` };
  }
}

/** Keeps the last `maxBytes` characters of `text` (from a line start when one is near). */
export function keepTail(text: string, maxBytes: number): string {
  if (text.length <= maxBytes) return text;
  const cut = text.slice(text.length - maxBytes);
  const nl = cut.indexOf('\n');
  return nl >= 0 && nl < 200 ? cut.slice(nl + 1) : cut;
}

/** The last `n` lines of `text` (a trailing newline does not count as an empty line). */
export function lastLines(text: string, n: number): { lines: string[]; omitted: number } {
  const all = splitLines(text);
  return { lines: all.slice(Math.max(0, all.length - n)), omitted: Math.max(0, all.length - n) };
}

export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Lines `offset .. offset+limit` (0-based) of a log, and how many it has. */
export function pageLines(text: string, offset: number, limit: number): { lines: string[]; total: number; next: number | null } {
  const all = splitLines(text);
  const start = Math.max(0, Math.min(offset, all.length));
  const lines = all.slice(start, start + limit);
  const next = start + lines.length < all.length ? start + lines.length : null;
  return { lines, total: all.length, next };
}

export interface JobSummary {
  id: string;
  command: string;
  state: 'running' | 'exited' | 'killed';
  exitCode: number | null;
  signal: string | null;
  startedAt: number;
  endedAt: number | null;
  outputBytes: number;
  logPath: string;
}

export function describeJobState(job: Pick<JobSummary, 'state' | 'exitCode' | 'signal'>): string {
  if (job.state === 'running') return 'running';
  if (job.state === 'killed') return 'killed (with its whole process tree)';
  return job.signal ? `exited on signal ${job.signal}` : `exited with code ${job.exitCode ?? '?'}`;
}

/** The text a `forge_shell` call returns. */
export function formatShellResult(job: JobSummary, completion: ShellCompletion, outputTail: string): string {
  const head: string[] = [];
  switch (completion.kind) {
    case 'exited':
      head.push(`status: ${describeJobState({ state: 'exited', exitCode: completion.exitCode, signal: completion.signal })}`);
      break;
    case 'pattern':
      head.push(`status: success_pattern matched (${JSON.stringify(completion.match.slice(0, 200))}); the process is ${job.state === 'running' ? 'still running' : describeJobState(job)}`);
      break;
    case 'idle':
      head.push(`status: still-running (no output for ${completion.idleMs} ms)`);
      break;
    case 'max-wait':
      head.push(`status: still-running (max_wait_ms ${completion.maxWaitMs} reached; the process was not stopped)`);
      break;
    case 'background':
      head.push('status: started in the background');
      break;
  }
  head.push(`job: ${job.id}`, `log: ${job.logPath}`);
  if (job.state === 'running') head.push(`Use forge_jobs (action "poll", "log" or "kill", jobId "${job.id}") to follow or stop it; it is killed when the loop ends.`);
  if (completion.kind === 'background') return head.join('\n');
  const { lines, omitted } = lastLines(outputTail, RESULT_TAIL_LINES);
  head.push(omitted > 0 ? `--- output (last ${lines.length} lines; forge_jobs log for the rest) ---` : '--- output ---');
  return [...head, ...(lines.length ? lines : ['(no output)'])].join('\n');
}

export function formatJobList(jobs: JobSummary[], now: number): string {
  if (jobs.length === 0) return 'No jobs in this loop.';
  return jobs
    .map((j) => `${j.id}  ${describeJobState(j)}  ${Math.round(((j.endedAt ?? now) - j.startedAt) / 1000)} s  ${j.outputBytes} bytes  ${j.command.slice(0, 120)}`)
    .join('\n');
}

/**
 * Shell lines for the top of a loop's agent shell (sandbox shim or unconfined host shell): a
 * builtin shell call (no `FORGE_JOB_MARK`: not a forge_shell job) gets a fresh
 * `FORGE_WATCHDOG_MARK`, inherited by everything it starts, and registers its command under
 * that marker in `callsDir`, where the shell-hang watchdog matches it to the tool call.
 */
export function renderWatchdogStamp(callsDir: string): string[] {
  const dir = `'${callsDir.replace(/'/g, `'\\''`)}'`;
  return [
    `if [ -z "\${${JOB_MARKER_VARIABLE}:-}" ] && [ -z "\${${WATCHDOG_MARKER_VARIABLE}:-}" ]; then`,
    `  read -r ${WATCHDOG_MARKER_VARIABLE} < /proc/sys/kernel/random/uuid 2>/dev/null || ${WATCHDOG_MARKER_VARIABLE}="$$-$RANDOM$RANDOM"`,
    `  export ${WATCHDOG_MARKER_VARIABLE}`,
    `  if [ "$#" -eq 2 ] && [ "$1" = "-c" ]; then printf '%s' "$2" > ${dir}/"$${WATCHDOG_MARKER_VARIABLE}" 2>/dev/null; fi`,
    // The process opencode waits on stays unmarked, out of the watchdog's reach: it runs the call
    // (this script again, marked) as its child and exits with its status. opencode's shell tool
    // waits for an exit code, which a process killed by a signal never gives it: killed, the call
    // would never return (issue 28). Its environment (/proc/PID/environ) is the one it started with.
    '  "$0" "$@"',
    '  exit $?',
    'fi',
  ];
}
