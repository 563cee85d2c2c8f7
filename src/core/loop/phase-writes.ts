/**
 * The supervisor's writes to storage around a phase change: the attempt a session starts and
 * finishes, the phase change with its transition-log row, and the loop's end. Its own file
 * because these writes batch: the hand-over's row writes wait (deferred) for the transaction
 * of the phase change that follows them, one journal sync instead of several, and their events
 * are emitted only once that transaction committed.
 */
import { createForgeRepositories, type ForgeRepositories, type LoopAttemptRow, type LoopRow } from '../storage/repositories';
import { readExtras } from './loop-extras';
import type { LoopRuntimeEvent } from './runtime-types';
import type { LoopState, LoopStatus, Phase } from './state';
import type { SupervisorContext } from './supervisor-deps';
import type { TransitionEffect } from './transitions';

/** The transition-log row a phase change writes (null: a change without a row, e.g. a reminder). */
export type TransitionLogEntry = { event: string; from: Phase; effects: TransitionEffect[] } | null;

export class PhaseWrites {
  /**
   * Row writes of the hand-over in progress (finished attempt, handoff fields), made in the same
   * transaction as the phase change that follows them: one journal sync instead of several.
   */
  private deferredWrites: Array<(repos: ForgeRepositories) => void> = [];
  /** Events of the deferred writes, emitted once the transaction that made them committed. */
  private deferredEvents: LoopRuntimeEvent[] = [];

  constructor(private readonly ctx: SupervisorContext) {}

  /** A write for the next transaction (see deferredWrites). */
  defer(write: (repos: ForgeRepositories) => void): void {
    this.deferredWrites.push(write);
  }

  /** An event for after the next transaction committed. */
  deferEvent(event: LoopRuntimeEvent): void {
    this.deferredEvents.push(event);
  }

  finishAttempt(outcome: 'succeeded' | 'failed' | 'abandoned', error: string | undefined, id: number | undefined, deferred = false): void {
    if (id === undefined) return;
    const write = (repos: ForgeRepositories) => {
      try {
        repos.attempts.finish(this.ctx.ref.projectId, id, { outcome, error: error ?? null });
      } catch {
        /* already finished */
      }
    };
    if (deferred) this.deferredWrites.push(write);
    else write(this.ctx.deps.repos);
  }

  /** Makes the deferred writes, in `repos`' transaction when given; emit their events after it. */
  flush(repos: ForgeRepositories = this.ctx.deps.repos): void {
    const writes = this.deferredWrites;
    this.deferredWrites = [];
    for (const write of writes) write(repos);
  }

  emitEvents(): void {
    const events = this.deferredEvents;
    this.deferredEvents = [];
    for (const event of events) this.ctx.deps.emit(event);
  }

  /** The attempt of a phase's new session, with the deferred writes, in one transaction; then their events. */
  startAttempt(
    loop: LoopRow,
    state: LoopState,
    session: { sessionId: string; model: string | null; variant: string | undefined },
  ): { attempt: LoopAttemptRow; updated: LoopRow } {
    const phase = state.phase;
    const { sessionId } = session;
    const started = this.ctx.deps.db.transaction((tx) => {
      const repos = createForgeRepositories(tx);
      this.flush(repos);
      const attempt = repos.attempts.start(this.ctx.ref.projectId, {
        loopName: loop.name,
        kind: phase === 'auditing' ? 'audit' : phase === 'final_auditing' ? 'final_audit' : phase === 'post_action' ? 'post_action' : 'coding',
        iteration: state.iteration,
        sectionIndex: state.sectionIndex,
        sessionId,
        model: session.model,
        variant: session.variant ?? null,
      });
      return { attempt, updated: repos.loops.update(this.ctx.ref.projectId, loop.name, { currentSessionId: sessionId, status: 'running' }) };
    });
    this.emitEvents();
    return started;
  }

  persistState(to: LoopState, log: TransitionLogEntry): void {
    this.ctx.deps.db.transaction((tx) => {
      const repos = createForgeRepositories(tx);
      this.flush(repos);
      this.persistStateIn(repos, to, log);
    });
    this.emitEvents();
  }

  persistStateIn(repos: ForgeRepositories, to: LoopState, log: TransitionLogEntry): void {
    const { projectId, name } = this.ctx.ref;
    const loop = repos.loops.get(projectId, name)!;
    const extras = readExtras(loop);
    repos.loops.update(projectId, name, {
      phase: to.phase,
      iteration: to.iteration,
      sectionIndex: to.sectionIndex,
      errorCount: to.modelErrors,
      consecutiveStalls: to.consecutiveStalls,
      state: { ...extras, loopState: to },
    });
    if (log) {
      for (const e of log.effects) {
        if (e.type === 'complete_section') repos.sectionPlans.setStatus(projectId, name, e.index, 'done');
        if (e.type === 'start_section') {
          repos.sectionPlans.setStatus(projectId, name, e.index, 'in_progress');
          repos.sectionPlans.incrementAttempts(projectId, name, e.index);
        }
      }
      repos.transitions.append(projectId, {
        loopName: name,
        event: log.event,
        fromPhase: log.from,
        toPhase: to.phase,
        iteration: to.iteration,
        sectionIndex: to.sectionIndex,
      });
    }
  }

  /** The loop's end: its last state, the end's transition-log row and its status, in one transaction; then the deferred events. */
  recordEnd(event: string, state: LoopState, effects: TransitionEffect[], status: Exclude<LoopStatus, 'running'>, reasonText: string): void {
    const { projectId, name } = this.ctx.ref;
    this.ctx.deps.db.transaction((tx) => {
      const repos = createForgeRepositories(tx);
      this.flush(repos);
      const loop = repos.loops.get(projectId, name)!;
      for (const e of effects) if (e.type === 'complete_section') repos.sectionPlans.setStatus(projectId, name, e.index, 'done');
      repos.loops.update(projectId, name, {
        phase: state.phase,
        iteration: state.iteration,
        sectionIndex: state.sectionIndex,
        currentSessionId: null,
        state: { ...readExtras(loop), loopState: state, opencodePid: null, cancelRequested: false },
      });
      repos.transitions.append(projectId, {
        loopName: name,
        event,
        fromPhase: readExtras(loop).loopState.phase,
        toPhase: null,
        iteration: state.iteration,
        sectionIndex: state.sectionIndex,
        status,
        reason: reasonText,
      });
      repos.loops.terminate(projectId, name, { status, terminationReason: reasonText });
    });
    this.emitEvents();
  }
}
