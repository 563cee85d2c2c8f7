/**
 * A loop's `forge_shell` jobs (issue 16): a shell that cannot hang a session. Each job runs
 * `<agent shell> -c <command>` — the loop's sandbox shim when it has a sandbox (the command runs
 * inside it), else the unconfined host agent shell (no Forge/opencode secret, push refused) —
 * with its output teed to a log file, and every process it starts carries `FORGE_JOB_MARK`.
 *
 * A call completes on the first of: the process exiting (bound to the exit event, never to the
 * pipes closing: a detached child holding stdout cannot keep the call open), `success_pattern`
 * matching new output, `idle_ms` without output, or `max_wait_ms`. Jobs belong to the loop:
 * `dispose()` (the loop's scope ending) kills every job's whole process tree.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { findMarkedProcesses, signalMarkedProcesses } from '../process/marked-processes';
import { startProcess, type StartedProcess } from '../process/process-runner';
import { isSecretVariableName } from '../sandbox/host-shell';
import {
  compileSuccessPattern,
  describeJobState,
  formatJobList,
  formatShellResult,
  JOB_MARKER_VARIABLE,
  keepTail,
  lastLines,
  MAX_POLL_WAIT_MS,
  MEMORY_TAIL_BYTES,
  pageLines,
  shellTimings,
  type JobSummary,
  type ShellCompletion,
} from './job-core';

export interface ShellRequest {
  command: string;
  success_pattern?: string | undefined;
  idle_ms?: number | undefined;
  max_wait_ms?: number | undefined;
  run_in_background?: boolean | undefined;
  keep_alive?: boolean | undefined;
}

export interface JobsRequest {
  action: 'list' | 'poll' | 'log' | 'kill';
  jobId?: string | undefined;
  wait_ms?: number | undefined;
  offset?: number | undefined;
  limit?: number | undefined;
}

export interface LoopJobsOptions {
  loopName: string;
  /** The loop's agent shell: its sandbox shim, or its unconfined host shell. */
  shellPath: string;
  /** Working directory of every job (the worktree; mounted at the same path in a sandbox). */
  cwd: string;
  /** Forge-owned folder for the jobs' logs (never the worktree). */
  logDir: string;
  /** Environment the shell starts from; secret-named variables are dropped here too. */
  baseEnv: NodeJS.ProcessEnv;
  log?: (message: string) => void;
}

/** A refusal the agent reads (bad job id, bad pattern, the loop ending). */
export class JobRequestError extends Error {}

interface Job {
  summary: JobSummary;
  process: StartedProcess;
  mark: string;
  logFd: number | null;
  tail: string;
  /** Total characters of output seen, and how far `poll` has handed it out. */
  seen: number;
  polled: number;
  exited: Promise<void>;
  wake: Set<() => void>;
}

export class LoopJobs {
  private readonly byId = new Map<string, Job>();
  private counter = 0;
  private disposed = false;

  constructor(private readonly options: LoopJobsOptions) {
    mkdirSync(options.logDir, { recursive: true });
  }

  /** `forge_shell`: starts a job and waits for the first completion condition. */
  async shell(request: ShellRequest): Promise<string> {
    const pattern = compileSuccessPattern(request.success_pattern);
    if (pattern && !(pattern instanceof RegExp)) throw new JobRequestError(pattern.error);
    const timings = shellTimings(request);
    const job = this.start(request.command);
    if (request.run_in_background) return formatShellResult(job.summary, { kind: 'background' }, '');
    const completion = await new Promise<ShellCompletion>((resolve) => {
      let idle: NodeJS.Timeout | undefined;
      const finish = (c: ShellCompletion) => {
        clearTimeout(idle);
        clearTimeout(cap);
        job.wake.delete(onWake);
        resolve(c);
      };
      const armIdle = () => {
        clearTimeout(idle);
        idle = setTimeout(() => finish({ kind: 'idle', idleMs: timings.idleMs }), timings.idleMs);
      };
      const cap = setTimeout(() => finish({ kind: 'max-wait', maxWaitMs: timings.maxWaitMs }), timings.maxWaitMs);
      const onWake = () => {
        if (job.summary.state !== 'running') {
          finish({ kind: 'exited', exitCode: job.summary.exitCode, signal: job.summary.signal });
          return;
        }
        if (pattern instanceof RegExp) {
          // The job started with this call: all of its output (the in-memory tail) is this call's.
          const m = pattern.exec(job.tail);
          if (m) {
            finish({ kind: 'pattern', match: m[0] });
            return;
          }
        }
        armIdle();
      };
      job.wake.add(onWake);
      armIdle();
      onWake();
    });
    if (completion.kind === 'pattern' && request.keep_alive === false) await this.killJob(job);
    job.polled = job.seen;
    return formatShellResult(job.summary, completion, job.tail);
  }

  /** `forge_jobs`. */
  async jobs(request: JobsRequest): Promise<string> {
    if (request.action === 'list') return formatJobList([...this.byId.values()].map((j) => j.summary), Date.now());
    const job = this.jobOf(request.jobId);
    switch (request.action) {
      case 'poll': {
        const waitMs = Math.min(MAX_POLL_WAIT_MS, Math.max(0, request.wait_ms ?? 10_000));
        if (job.seen === job.polled && job.summary.state === 'running' && waitMs > 0) {
          await new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              job.wake.delete(done);
              resolve();
            };
            const timer = setTimeout(done, waitMs);
            job.wake.add(done);
          });
        }
        const fresh = job.tail.slice(Math.max(0, job.tail.length - (job.seen - job.polled)));
        job.polled = job.seen;
        const { lines, omitted } = lastLines(fresh, 200);
        return [
          `job ${job.summary.id}: ${describeJobState(job.summary)}`,
          omitted > 0 ? `--- new output (last ${lines.length} lines; forge_jobs log for the rest) ---` : '--- new output ---',
          ...(lines.length ? lines : ['(none)']),
        ].join('\n');
      }
      case 'log': {
        const text = this.readLog(job);
        const page = pageLines(text, request.offset ?? 0, request.limit ?? 200);
        return [
          `job ${job.summary.id}: ${describeJobState(job.summary)}; log lines ${page.lines.length ? `${(request.offset ?? 0)}–${(request.offset ?? 0) + page.lines.length - 1}` : 'none'} of ${page.total}${page.next !== null ? ` (next offset ${page.next})` : ''}`,
          ...page.lines,
        ].join('\n');
      }
      case 'kill': {
        // A job whose shell exited may have left detached children: they are killed too.
        const alive = findMarkedProcesses(JOB_MARKER_VARIABLE, job.mark).length;
        if (job.summary.state !== 'running' && alive === 0) return `job ${job.summary.id} is not running (${describeJobState(job.summary)}) and left no process.`;
        const left = await this.killJob(job);
        return left === 0
          ? `job ${job.summary.id} killed with its whole process tree.`
          : `job ${job.summary.id} killed, but ${left} of its processes could not be stopped.`;
      }
    }
  }

  list(): JobSummary[] {
    return [...this.byId.values()].map((j) => ({ ...j.summary }));
  }

  /** The loop's scope ends: every job's tree is killed. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    // Every job, exited ones too: a detached child may outlive its shell.
    await Promise.all([...this.byId.values()].map((j) => this.killJob(j)));
    for (const j of this.byId.values()) this.closeLog(j);
  }

  private jobOf(id: string | undefined): Job {
    const job = id ? this.byId.get(id.trim()) : undefined;
    if (!job) {
      const known = [...this.byId.keys()];
      throw new JobRequestError(`No job "${id ?? ''}" in this loop.${known.length ? ` Jobs: ${known.join(', ')}.` : ' It has none.'}`);
    }
    return job;
  }

  private start(command: string): Job {
    if (this.disposed) throw new JobRequestError('The loop is ending; no new jobs start.');
    const id = `job-${++this.counter}`;
    const mark = `${id}-${randomBytes(8).toString('hex')}`;
    const logPath = path.join(this.options.logDir, `${id}.log`);
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(this.options.baseEnv)) if (v !== undefined && !isSecretVariableName(k)) env[k] = v;
    env[JOB_MARKER_VARIABLE] = mark;
    const started = startProcess(this.options.shellPath, ['-c', command], { cwd: this.options.cwd, env, processGroup: true });
    const job: Job = {
      summary: { id, command, state: 'running', exitCode: null, signal: null, startedAt: Date.now(), endedAt: null, outputBytes: 0, logPath },
      process: started,
      mark,
      logFd: openSync(logPath, 'w', 0o600),
      tail: '',
      seen: 0,
      polled: 0,
      exited: Promise.resolve(),
      wake: new Set(),
    };
    const wakeAll = () => {
      for (const w of [...job.wake]) w();
    };
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      job.summary.outputBytes += chunk.length;
      job.seen += text.length;
      job.tail = keepTail(job.tail + text, MEMORY_TAIL_BYTES);
      if (job.logFd !== null) {
        try {
          writeSync(job.logFd, chunk);
        } catch {
          /* a full disk must not stop the job */
        }
      }
      wakeAll();
    };
    started.child?.stdout?.on('data', onData);
    started.child?.stderr?.on('data', onData);
    // Completion is the exit event: the pipes may stay open behind a detached child.
    job.exited = new Promise<void>((resolve) => {
      void started.exited.then(({ exitCode, signal }) => {
        if (job.summary.state === 'running') job.summary.state = 'exited';
        job.summary.exitCode = exitCode;
        job.summary.signal = signal;
        job.summary.endedAt = Date.now();
        // Output already in the pipe arrives right after exit: give it a moment before waking.
        setTimeout(() => {
          resolve();
          wakeAll();
        }, 20);
      });
      void started.spawnFailed.then((error) => {
        onData(Buffer.from(`forge: could not start the shell: ${error.message}\n`));
        job.summary.state = 'exited';
        job.summary.exitCode = 127;
        job.summary.endedAt = Date.now();
        resolve();
        wakeAll();
      });
    });
    this.byId.set(id, job);
    this.options.log?.(`[jobs ${this.options.loopName}] ${id} started (pid ${started.pid ?? '?'}): ${command.slice(0, 200)}`);
    return job;
  }

  /** Kills the job's process group and every process carrying its marker; how many marked processes are left. */
  private async killJob(job: Job): Promise<number> {
    const wasRunning = job.summary.state === 'running';
    if (wasRunning) job.summary.state = 'killed';
    const sweep = () => {
      job.process.kill('SIGKILL');
      signalMarkedProcesses(JOB_MARKER_VARIABLE, job.mark, 'SIGKILL');
    };
    sweep();
    await Promise.race([job.exited, new Promise((r) => setTimeout(r, 3000))]);
    let left = findMarkedProcesses(JOB_MARKER_VARIABLE, job.mark).length;
    for (let i = 0; left > 0 && i < 20; i++) {
      sweep();
      await new Promise((r) => setTimeout(r, 100));
      left = findMarkedProcesses(JOB_MARKER_VARIABLE, job.mark).length;
    }
    if (job.summary.endedAt === null) job.summary.endedAt = Date.now();
    job.process.child?.stdout?.destroy();
    job.process.child?.stderr?.destroy();
    if (wasRunning) this.options.log?.(`[jobs ${this.options.loopName}] ${job.summary.id} killed${left ? ` (${left} processes left)` : ''}`);
    for (const w of [...job.wake]) w();
    return left;
  }

  private readLog(job: Job): string {
    try {
      return readFileSync(job.summary.logPath, 'utf8');
    } catch {
      return job.tail;
    }
  }

  private closeLog(job: Job): void {
    if (job.logFd === null) return;
    try {
      closeSync(job.logFd);
    } catch {
      /* closed */
    }
    job.logFd = null;
  }
}
