/**
 * The supervisor's pass through the verification gate: after a clean audit of a gated step it
 * runs the step's checks (loop-gate.ts does the running and recording) and gives the transition
 * their result makes. Its own file because a pass can take minutes and must stop at once on a
 * cancel, which needs its own state (the abort of the check running now).
 */
import type { CheckExecutor } from '../checks';
import { runGate } from './loop-gate';
import { readExtras } from './loop-extras';
import type { LoopFindings } from './loop-findings';
import type { PhaseWrites } from './phase-writes';
import type { SupervisorContext } from './supervisor-deps';
import { nextTransition, type LoopEvent, type Transition } from './transitions';

export class GatePass {
  /** Stops the verification check running now (a cancel must not wait for a 10-minute test run). */
  private abortController: AbortController | undefined;

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly writes: PhaseWrites,
    private readonly findings: LoopFindings,
  ) {}

  /** Stops the check running now, if any: its pass then gives the cancel's transition. */
  abort(): void {
    this.abortController?.abort();
  }

  /**
   * Runs the checks a clean audit's gated step needs (loop-gate.ts) and gives the transition
   * their result makes: the step, or back to coding. Caller holds the lock; no session runs.
   */
  async pass(request: Extract<Transition, { kind: 'run_checks' }>): Promise<Transition> {
    const { ref, deps } = this.ctx;
    const loop = this.ctx.loop();
    const extras = readExtras(loop);
    const abort = new AbortController();
    this.abortController = abort;
    try {
      // Writes of the hand-over that led here go first (the gate's own writes follow them).
      this.writes.flush();
      this.writes.emitEvents();
      let exec: CheckExecutor;
      try {
        exec = await deps.checkExecutor(loop);
      } catch (error) {
        deps.emit({ type: 'loop.notice', loop: ref, level: 'error', message: (error as Error).message });
        return { kind: 'terminate', event: 'sandbox_lost', to: extras.loopState, reason: { kind: 'worktree_failed', message: (error as Error).message }, effects: [] };
      }
      const outcome = await runGate(
        {
          db: deps.db,
          projectId: ref.projectId,
          loopName: ref.name,
          worktreeDir: loop.worktreeDir!,
          extras,
          exec,
          signal: abort.signal,
          onRun: (run) => deps.emit({ type: 'loop.check', loop: ref, run }),
        },
        request,
      );
      this.findings.reportChanges();
      const event: LoopEvent = outcome.kind === 'cancelled' || abort.signal.aborted ? { type: 'cancel' } : outcome.event;
      const now = readExtras(this.ctx.loop());
      return nextTransition(now.loopState, event, now.limits);
    } finally {
      this.abortController = undefined;
    }
  }
}
