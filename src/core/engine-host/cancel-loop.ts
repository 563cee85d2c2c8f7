/**
 * `forge cancel` and *Cancel Loop* for a loop another process drives: the data folder's engine is
 * asked over its socket and ends the loop at once (its checks, its session, its sandbox). Only
 * when no engine supervises the loop does the cancel go through the database, where its
 * supervisor reads it at its next lease tick (a third of the lease, up to 10 s). Host-neutral:
 * the CLI and the extension call it.
 */
import { LoopRuntimeError, type LoopRef, type LoopRuntime } from '../loop/runtime-types';
import { askEngine } from './engine-client';

/** 'cancelled' when the loop has ended, 'requested' when its supervisor will end it at its next lease tick. */
export async function cancelLoop(runtime: LoopRuntime, dataDir: string, ref: LoopRef): Promise<'cancelled' | 'requested'> {
  const loop = runtime.get(ref);
  if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}" in this repository.`);
  if (!runtime.isSupervising(ref) && (loop.status === 'running' || loop.status === 'starting')) {
    const reply = await askEngine(dataDir, (conn) => conn.cancelAndWait(ref));
    if (reply?.type === 'cancelled') return 'cancelled';
    // Any other answer (the engine does not drive this loop, or it went away): the database way.
    // But an engine that ran only this loop exits once it has ended it, maybe before its answer.
    if (runtime.get(ref)?.status === 'cancelled') return 'cancelled';
  }
  await runtime.cancel(ref);
  return runtime.get(ref)?.status === 'cancelled' ? 'cancelled' : 'requested';
}
