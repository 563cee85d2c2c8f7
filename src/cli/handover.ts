/**
 * `forge run` / `goal` / `restart` handing their loop to the data folder's engine: the engine
 * supervises the loop, this process prints it exactly as if it ran it (the same lines, the same
 * --json objects, the same exit codes) and cancels it through the engine on Ctrl-C. It writes
 * nothing of the loop: the lease and every state change are the engine's.
 */
import type { EngineConnection, StartOrRestart } from '../core/engine-host';
import type { LiveFeedEvent } from '../core/live/live-feed';
import { supervisorOf } from '../core/loop/lease-holder';
import { LoopRuntimeError, type LoopRef, type LoopRuntimeEvent } from '../core/loop/runtime-types';
import { parseTerminationReason } from '../core/loop/state';
import { isProcessAlive } from '../core/storage/cross-process-lock';
import type { LoopRow } from '../core/storage/repositories';
import { EXIT, exitCodeFor } from './args';
import { LoopPrinter } from './loop-printer';

export interface HandoverOutput {
  json: boolean;
  follow: boolean;
  out(line: string): void;
  err(line: string): void;
  /** The loop's row as the database has it now (read-only; opens this process's engine on first use). */
  getLoop(ref: LoopRef): Promise<LoopRow | undefined>;
}

const RUNTIME_ERROR_CODES = new Set(['bad_plan', 'bad_name', 'bad_request', 'workspace', 'not_found', 'completed', 'running', 'not_running', 'sandbox', 'opencode']);

/**
 * Hands the loop over and follows it to its end: the exit code, or 'self' when the engine
 * declined before touching anything (other settings, shutting down): the caller supervises it.
 */
export async function runHandedOver(conn: EngineConnection, message: StartOrRestart, io: HandoverOutput): Promise<number | 'self'> {
  const answer = await conn.request(message);
  if (answer.type === 'refused') {
    if (answer.code === 'incompatible' || answer.code === 'version') io.err(`forge: ${answer.message}; this process supervises the loop itself.`);
    conn.close();
    return 'self';
  }
  if (answer.type === 'error') {
    conn.close();
    if (answer.code === 'engine_gone') {
      io.err(`forge: ${answer.message}`);
      return EXIT.supervisionLost;
    }
    if (RUNTIME_ERROR_CODES.has(answer.code)) throw new LoopRuntimeError(answer.code as LoopRuntimeError['code'], answer.message);
    throw new Error(`the Forge engine in process ${conn.engine.pid} failed: ${answer.message}`);
  }
  const ref = answer.ref;
  const engine = conn.engine;
  io.err(`forge: handed loop "${ref.name}" to the Forge engine in process ${engine.pid} (${engine.kind}); that process supervises it, this one prints it (Ctrl-C cancels it).`);

  const printer = new LoopPrinter(io.json, io.out, io.follow === true);
  const printEvent = (e: LoopRuntimeEvent) => printer.event(e);

  let interrupted = 0;
  const onSignal = () => {
    interrupted++;
    if (interrupted === 1) {
      io.err(`forge: cancelling loop "${ref.name}" (worktree and branch are kept)…`);
      conn.cancel(ref);
    } else {
      io.err(`forge: second interrupt, exiting without waiting; the engine in process ${engine.pid} goes on supervising loop "${ref.name}" ("forge cancel ${ref.name}" ends it).`);
      process.exit(EXIT.cancelled);
    }
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  // The socket alone does not keep this process alive while nothing else is pending.
  const keepAlive = setInterval(() => {}, 60_000);
  try {
    return await new Promise<number>((resolve) => {
      conn.onReply((reply) => {
        if (reply.type === 'live' && io.follow) {
          printer.live(reply.event as LiveFeedEvent);
        } else if (reply.type === 'event') {
          const e = reply.event as LoopRuntimeEvent;
          printEvent(e);
          if (e.type === 'loop.ended') resolve(exitCodeFor(e.reason));
          if (e.type === 'loop.supervision_lost') resolve(EXIT.supervisionLost);
        } else if (reply.type === 'error') {
          io.err(`forge: ${reply.message}`);
        }
      });
      conn.onClose(() => void afterDisconnect(ref, engine.pid, io, printEvent).then(resolve));
    });
  } finally {
    clearInterval(keepAlive);
    for (const signal of signals) process.off(signal, onSignal);
    conn.close();
  }
}

/**
 * The engine hung up before the loop's end reached this process. Its process died (the lease
 * then runs out) or it closed: the database tells how the loop stands. Nothing restarts the
 * loop on its own; the user is told how to.
 */
async function afterDisconnect(ref: LoopRef, enginePid: number, io: HandoverOutput, printEvent: (e: LoopRuntimeEvent) => void): Promise<number> {
  for (;;) {
    const row = await io.getLoop(ref);
    if (row && row.status !== 'running' && row.status !== 'starting') {
      // It ended as the engine hung up: the end is recorded.
      try {
        return exitCodeFor(parseTerminationReason(row.terminationReason ?? 'shutdown'));
      } catch {
        return EXIT.internal;
      }
    }
    const sup = row ? supervisorOf(row) : { state: 'none' as const };
    const engineGone = !isProcessAlive(enginePid);
    if (engineGone || sup.state !== 'alive' || (sup.state === 'alive' && sup.pid !== enginePid)) {
      if (io.json) io.out(JSON.stringify({ loop: ref.name, type: 'loop.supervision_lost', supervisor: enginePid }));
      io.err(
        `forge: the Forge engine (process ${enginePid}) that supervised loop "${ref.name}" ${engineGone ? 'is gone' : 'stopped supervising it'}. Nothing restarts the loop on its own: "forge restart ${ref.name} --force" takes it over (its worktree and branch are kept).`,
      );
      return EXIT.supervisionLost;
    }
    // The engine lives and still holds the lease: its end will be in the database.
    await new Promise((r) => setTimeout(r, 1000));
  }
}
