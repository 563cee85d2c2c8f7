/**
 * Keeps one opencode server available to its owner: starts it, restarts it with back-off when
 * it dies, tells the owner what happened through events, and on stop leaves no process behind.
 * Attach mode wraps a server the user runs themselves (no process to supervise).
 */
import {
  killServerProcessesNow,
  startOpencodeProcess,
  waitForHealth,
  type OpencodeEndpoint,
  type OpencodeExit,
  type OpencodeProcess,
  type OpencodeProcessOptions,
} from './server-process';

export type OpencodeServerEvent =
  | { type: 'started'; generation: number; endpoint: OpencodeEndpoint; pid: number | undefined; marker: string | undefined }
  /** The process died without being asked to. `output` is what opencode printed last. */
  | { type: 'exited'; generation: number; exit: OpencodeExit; output: string }
  | { type: 'restarting'; attempt: number; delayMs: number }
  | { type: 'restart-failed'; attempt: number; error: string }
  /** Restarts exhausted: the server stays down until `stop()`. */
  | { type: 'gave-up'; error: string }
  | { type: 'stopped' };

export type OpencodeServerListener = (event: OpencodeServerEvent) => void;

const LISTENING_LINE = /opencode server listening on \S+/;

/**
 * What to tell the user about a server event (undefined: nothing). The dead server's output
 * names the address it listened on, which is no longer Forge's: that line is left out, and the
 * new address is reported once the restarted server listens.
 */
export function serverEventNotice(event: OpencodeServerEvent): { level: 'warning' | 'info'; message: string } | undefined {
  if (event.type === 'exited') {
    const how = event.exit.signal ? `killed by ${event.exit.signal}` : `exit code ${event.exit.code}`;
    const said = event.output
      .split('\n')
      .filter((line) => line.trim() && !LISTENING_LINE.test(line))
      .join('\n')
      .slice(-400)
      .trim();
    return { level: 'warning', message: `opencode exited unexpectedly (${how}); restarting it.${said ? ` It said last: ${said}` : ''}` };
  }
  if (event.type === 'started' && event.generation > 1) {
    return { level: 'info', message: `opencode is running again${event.pid ? ` (pid ${event.pid})` : ''}, listening on ${event.endpoint.url}; the phase in flight restarts in a fresh session.` };
  }
  return undefined;
}

export interface OpencodeServerHandle {
  /** Increments on every (re)start; a client that sees it change knows in-flight work was lost. */
  generation(): number;
  /** The current endpoint, or undefined while (re)starting or after giving up. */
  endpoint(): OpencodeEndpoint | undefined;
  /** Waits until a server is up (rejects after giving up, on stop, or on time-out). */
  waitForEndpoint(timeoutMs?: number): Promise<OpencodeEndpoint>;
  pid(): number | undefined;
  /**
   * The current process's `FORGE_OPENCODE_INSTANCE` marker. Persist it with the pid: after a
   * crash of Forge, `killServerProcessesNow(pid, marker)` removes the orphaned server and its tools.
   */
  marker(): string | undefined;
  onEvent(listener: OpencodeServerListener): () => void;
  stop(): Promise<void>;
}

export interface RestartPolicy {
  /** Consecutive failed restarts before giving up (default 5). */
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  /** A server that stayed up this long resets the attempt count. */
  resetAfterMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = { maxAttempts: 5, initialDelayMs: 500, maxDelayMs: 30_000, resetAfterMs: 60_000 };

export interface SupervisedServerOptions extends OpencodeProcessOptions {
  restart?: Partial<RestartPolicy>;
  /** Replaces process start (tests of the supervisor itself, a guard run before every start); default `startOpencodeProcess`. */
  start?: (options: OpencodeProcessOptions) => Promise<OpencodeProcess>;
}

/** Starts opencode and supervises it. Rejects with `OpencodeStartError` when the first start fails. */
export async function startSupervisedOpencode(options: SupervisedServerOptions): Promise<OpencodeServerHandle> {
  const policy: RestartPolicy = { ...DEFAULT_RESTART_POLICY, ...(options.restart ?? {}) };
  const start = options.start ?? startOpencodeProcess;
  const listeners = new Set<OpencodeServerListener>();
  const emit = (event: OpencodeServerEvent) => listeners.forEach((l) => l(event));
  let current: OpencodeProcess | undefined;
  let generation = 0;
  let stopped = false;
  let gaveUp: string | undefined;
  let waiters: Array<{ resolve: (e: OpencodeEndpoint) => void; reject: (e: Error) => void }> = [];
  let restartTimer: NodeJS.Timeout | undefined;

  // If Forge's own process ends without stopping us, take the server's process group with it.
  const onProcessExit = () => {
    if (current) killServerProcessesNow(current.pid, current.marker);
  };
  process.on('exit', onProcessExit);

  const settleWaiters = () => {
    const pending = waiters;
    waiters = [];
    for (const w of pending) {
      if (current) w.resolve(current.endpoint);
      else w.reject(new Error(stopped ? 'The opencode server was stopped.' : `The opencode server is down: ${gaveUp ?? 'unknown error'}`));
    }
  };

  const adopt = (proc: OpencodeProcess) => {
    current = proc;
    generation += 1;
    const myGeneration = generation;
    const startedAt = Date.now();
    emit({ type: 'started', generation: myGeneration, endpoint: proc.endpoint, pid: proc.pid, marker: proc.marker });
    settleWaiters();
    void proc.exited.then((exit) => {
      if (stopped || current !== proc) return;
      current = undefined;
      // Tool processes of the dead server may linger in its group.
      killServerProcessesNow(proc.pid, proc.marker);
      emit({ type: 'exited', generation: myGeneration, exit, output: proc.outputTail() });
      const uptime = Date.now() - startedAt;
      scheduleRestart(uptime >= policy.resetAfterMs ? 1 : attemptsSoFar + 1);
    });
  };

  let attemptsSoFar = 0;
  const scheduleRestart = (attempt: number) => {
    attemptsSoFar = attempt;
    if (stopped) return;
    if (attempt > policy.maxAttempts) {
      gaveUp = `opencode kept failing; gave up after ${policy.maxAttempts} restart attempts.`;
      emit({ type: 'gave-up', error: gaveUp });
      settleWaiters();
      return;
    }
    const delayMs = Math.min(policy.initialDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
    emit({ type: 'restarting', attempt, delayMs });
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopped) return;
      start(options).then(
        (proc) => {
          if (stopped) {
            void proc.stop();
            return;
          }
          adopt(proc);
        },
        (error: unknown) => {
          emit({ type: 'restart-failed', attempt, error: error instanceof Error ? error.message : String(error) });
          scheduleRestart(attempt + 1);
        },
      );
    }, delayMs);
  };

  try {
    adopt(await start(options));
  } catch (error) {
    process.off('exit', onProcessExit);
    throw error;
  }

  return {
    generation: () => generation,
    endpoint: () => current?.endpoint,
    waitForEndpoint(timeoutMs = 120_000) {
      if (current) return Promise.resolve(current.endpoint);
      if (stopped || gaveUp) return Promise.reject(new Error(stopped ? 'The opencode server was stopped.' : gaveUp));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w.resolve !== done);
          reject(new Error(`The opencode server did not come back within ${Math.round(timeoutMs / 1000)} s.`));
        }, timeoutMs);
        const done = (endpoint: OpencodeEndpoint) => {
          clearTimeout(timer);
          resolve(endpoint);
        };
        waiters.push({
          resolve: done,
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
      });
    },
    pid: () => current?.pid,
    marker: () => current?.marker,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (restartTimer) clearTimeout(restartTimer);
      const proc = current;
      current = undefined;
      settleWaiters();
      await proc?.stop();
      process.off('exit', onProcessExit);
      emit({ type: 'stopped' });
    },
  };
}

/**
 * A server the user runs (setting `forge.opencode.serverUrl`). Forge checks it answers but
 * cannot restart it; Forge's agents and tools must then come from that server's own
 * configuration (see docs/architecture.md, "opencode").
 */
export async function attachOpencodeServer(endpoint: OpencodeEndpoint, timeoutMs = 15_000): Promise<OpencodeServerHandle> {
  await waitForHealth(endpoint, undefined, timeoutMs);
  const listeners = new Set<OpencodeServerListener>();
  let stopped = false;
  return {
    generation: () => 1,
    endpoint: () => (stopped ? undefined : endpoint),
    waitForEndpoint: () => (stopped ? Promise.reject(new Error('Detached from the opencode server.')) : Promise.resolve(endpoint)),
    pid: () => undefined,
    marker: () => undefined,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async stop() {
      stopped = true;
      listeners.forEach((l) => l({ type: 'stopped' }));
    },
  };
}
