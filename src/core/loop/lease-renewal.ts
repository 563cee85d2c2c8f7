/**
 * The supervision lease: while a process drives a loop it renews the loop's lease on a timer,
 * and the same tick notices what other processes did to the loop (took supervision over, ended
 * it, asked for a cancel). Its own file because it is the supervisor's one cross-process
 * concern, a timer with no share in the loop's phases.
 */
import { readExtras } from './loop-extras';
import type { SupervisorContext } from './supervisor-deps';

export interface LeaseRenewalHooks {
  /** The loop ended here: renewing stops mattering. */
  ended(): boolean;
  /** Another process supervises the loop now, or it is no longer running. */
  relinquish(): void;
  /** A cancel was requested (from another process or surface). */
  cancel(): void;
}

/** Renews the lease every third of its time to live; the returned function stops the timer. */
export function startLeaseRenewal(ctx: SupervisorContext, hooks: LeaseRenewalHooks): () => void {
  const { ref, deps } = ctx;
  const every = Math.max(200, Math.floor(deps.leaseTtlMs / 3));
  const timer = setInterval(() => {
    if (hooks.ended()) return;
    try {
      const ok = deps.repos.loops.acquireLease(ref.projectId, ref.name, deps.supervisorId, deps.leaseTtlMs);
      if (!ok) {
        deps.log.warn(`[loop ${ref.name}] another process took over supervision`);
        hooks.relinquish();
        return;
      }
      const loop = ctx.loop();
      if (loop.status !== 'running' && loop.status !== 'starting') {
        hooks.relinquish();
        return;
      }
      if (readExtras(loop).cancelRequested) hooks.cancel();
    } catch (error) {
      deps.log.warn(`[loop ${ref.name}] lease renewal failed: ${String(error)}`);
    }
  }, every);
  timer.unref?.();
  return () => clearInterval(timer);
}
