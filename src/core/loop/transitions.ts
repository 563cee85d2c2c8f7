/**
 * The loop's transition table: `nextTransition(state, event, limits)`. Pure — no I/O, no
 * clock, no randomness — so every phase × event pair is unit-tested, and the runtime only
 * performs what the returned transition says.
 */
import {
  roleOfPhase,
  type LoopLimits,
  type LoopState,
  type Phase,
  type Role,
  type TerminationReason,
} from './state';

export type LoopEvent =
  /**
   * An agent called `loop_handoff`. The runtime counts the loop's open findings at that
   * moment; the table decides whether that is clean.
   */
  | {
      type: 'handoff';
      role: Role;
      /** Open `bug` findings of the current section (sectioned plans). */
      openBugsInSection: number;
      /** Open `bug` findings of the whole loop. */
      openBugs: number;
      /** Open findings of any severity of the whole loop. */
      openFindings: number;
      /**
       * Sectioned plans: the sections as they are now (an auditor's `plan_adjust` may have added
       * or removed some since the state was written), and the first one not done other than the
       * one under audit (null: none). Absent: as the state says.
       */
      sections?: { count: number; firstPending: number | null };
    }
  /** The checks a `run_checks` transition asked for all passed (or there were none to run). */
  | { type: 'checks_passed'; gate: CheckGateKind }
  /** At least one of them failed; `failed` names the first (for the max_iterations reason). */
  | { type: 'checks_failed'; gate: CheckGateKind; failed: string }
  | { type: 'idle_without_handoff' }
  | { type: 'stall' }
  /** `malformed`: the model's answer was not a readable stream (the end reason says so if it persists). */
  | { type: 'model_error'; message: string; malformed?: boolean }
  | { type: 'model_retries_exhausted'; message: string }
  | { type: 'cancel' }
  | { type: 'user_abort' }
  | { type: 'shutdown' }
  | { type: 'session_creation_failed' }
  | { type: 'worktree_missing' }
  | { type: 'worktree_failed'; message: string }
  /**
   * The loop's budget is spent (budget.ts decides, from the usage recorded so far): the loop
   * pauses at this hand-over instead of starting the next session.
   */
  | { type: 'budget_reached' };

export type LoopEventType = LoopEvent['type'];
export const LOOP_EVENT_TYPES: readonly LoopEventType[] = [
  'handoff',
  'checks_passed',
  'checks_failed',
  'idle_without_handoff',
  'stall',
  'model_error',
  'model_retries_exhausted',
  'cancel',
  'user_abort',
  'shutdown',
  'session_creation_failed',
  'worktree_missing',
  'worktree_failed',
  'budget_reached',
];

/** Which verification gate: a section's checkpoint (its `Verify:` lines) or the loop's completion. */
export type CheckGateKind = 'section' | 'final';

export type TransitionEffect =
  /** Mark the section done and commit the checkpoint `section <N>: <title>`. */
  | { type: 'complete_section'; index: number }
  /** A coding pass on this section begins (counts an attempt, marks it in progress). */
  | { type: 'start_section'; index: number };

export type Transition =
  /** Rotate: a fresh session in `to.phase`, prompted for that phase. One log row. */
  | { kind: 'advance'; event: string; to: LoopState; effects: TransitionEffect[] }
  /** A fresh session in the same phase (stall, model error, missed handoffs). One log row. */
  | { kind: 'retrigger'; event: string; to: LoopState; delayMs: number; effects: TransitionEffect[] }
  /** Same session, told to call loop_handoff. State changes, phase does not: no log row. */
  | { kind: 'remind_handoff'; event: string; to: LoopState }
  /** The loop ends. One log row; the runtime commits pending work and tears down. */
  | { kind: 'terminate'; event: string; to: LoopState; reason: TerminationReason; effects: TransitionEffect[] }
  /**
   * The audit was clean, but the step it allows (a section checkpoint, the loop's completion) is
   * gated: the runtime runs that gate's checks in the worktree (outside this pure table) and
   * feeds back `checks_passed` or `checks_failed`. State and phase do not change: no log row.
   */
  | { kind: 'run_checks'; event: string; gate: CheckGateKind; sectionIndex: number | null }
  /** Nothing to do (e.g. a handoff from the wrong role); `why` is logged. */
  | { kind: 'ignore'; why: string };

/** Back-off before a retried phase: 2 s doubling, at most 30 s. */
export function retryDelayMs(errors: number): number {
  return Math.min(30_000, 2_000 * 2 ** Math.max(0, errors - 1));
}

export function nextTransition(state: LoopState, event: LoopEvent, limits: LoopLimits): Transition {
  switch (event.type) {
    case 'cancel':
      return terminate(state, 'cancel', { kind: 'cancelled' });
    case 'user_abort':
      return terminate(state, 'user_abort', { kind: 'user_aborted' });
    case 'shutdown':
      return terminate(state, 'shutdown', { kind: 'shutdown' });
    case 'session_creation_failed':
      return terminate(state, 'session_creation_failed', { kind: 'session_creation_failed' });
    case 'worktree_missing':
      return terminate(state, 'worktree_missing', { kind: 'missing_worktree_dir' });
    case 'worktree_failed':
      return terminate(state, 'worktree_failed', { kind: 'worktree_failed', message: event.message });
    case 'budget_reached':
      // Status `paused` (terminationStatusFor): the supervisor keeps worktree, sandbox and sessions.
      return terminate(state, 'budget_reached', { kind: 'budget_reached' });
    case 'stall':
      return onStall(state, limits);
    case 'model_error':
      return onModelError(state, limits, event.message, false, event.malformed === true);
    case 'model_retries_exhausted':
      return onModelError(state, limits, event.message, true);
    case 'idle_without_handoff':
      return onMissedHandoff(state, limits);
    case 'handoff':
      return onHandoff(state, event, limits);
    case 'checks_passed':
      return onChecksPassed(state, event.gate, limits);
    case 'checks_failed':
      return onChecksFailed(state, event.gate, event.failed, limits);
  }
}

function fresh(state: LoopState): Pick<LoopState, 'missedHandoffs' | 'modelErrors' | 'consecutiveStalls'> {
  void state;
  return { missedHandoffs: 0, modelErrors: 0, consecutiveStalls: 0 };
}

function terminate(
  state: LoopState,
  event: string,
  reason: TerminationReason,
  effects: TransitionEffect[] = [],
): Transition {
  return { kind: 'terminate', event, to: state, reason, effects };
}

/** Entering a coding pass costs an iteration; past the cap the loop ends instead. */
function enterCoding(
  state: LoopState,
  phase: 'coding' | 'final_audit_fix',
  sectionIndex: number | null,
  event: string,
  limits: LoopLimits,
  effects: TransitionEffect[],
  /** Why the loop goes back to coding, said in the max_iterations reason when the cap ends it. */
  because?: string,
): Transition {
  const iteration = state.iteration + 1;
  if (limits.maxIterations > 0 && iteration - (state.iterationsBeforeRestart ?? 0) > limits.maxIterations) {
    return terminate(state, event, because ? { kind: 'max_iterations', message: because } : { kind: 'max_iterations' }, effects);
  }
  const to = { ...state, ...fresh(state), phase, iteration, sectionIndex } as LoopState;
  const start: TransitionEffect[] = phase === 'coding' && sectionIndex !== null ? [{ type: 'start_section', index: sectionIndex }] : [];
  return { kind: 'advance', event, to, effects: [...effects, ...start] };
}

function advanceTo(state: LoopState, phase: Phase, event: string, effects: TransitionEffect[] = []): Transition {
  return { kind: 'advance', event, to: { ...state, ...fresh(state), phase } as LoopState, effects };
}

function onHandoff(current: LoopState, event: Extract<LoopEvent, { type: 'handoff' }>, limits: LoopLimits): Transition {
  // The section count follows the plan as amended: a section added during the last section's
  // audit is coded next instead of being skipped by the final audit.
  const state = event.sections && current.kind === 'plan' && current.sectionIndex !== null ? ({ ...current, sectionCount: event.sections.count } as LoopState) : current;
  const expected = roleOfPhase(state.phase);
  if (event.role !== expected) {
    return { kind: 'ignore', why: `a ${event.role} handoff arrived during ${state.phase}, which expects the ${expected}` };
  }
  switch (state.phase) {
    case 'coding':
      return advanceTo(state, 'auditing', 'coder_handoff');
    case 'final_audit_fix':
      return advanceTo(state, 'final_auditing', 'coder_handoff');
    case 'post_action':
      return terminate(state, 'post_action_done', { kind: 'completed' });
    case 'auditing': {
      if (state.kind === 'goal') {
        if (event.openFindings > 0) return enterCoding(state, 'coding', null, 'audit_dirty', limits, []);
        return finalGateChecks(limits) > 0 ? runChecks('audit_clean', 'final', null) : terminate(state, 'audit_clean', { kind: 'completed' });
      }
      const section = state.sectionIndex;
      if (section === null) {
        // Unsectioned plan: the whole plan is the scope, so any open finding keeps it dirty.
        return event.openFindings === 0
          ? advanceTo(state, 'final_auditing', 'audit_clean')
          : enterCoding(state, 'coding', null, 'audit_dirty', limits, []);
      }
      if (event.openBugsInSection > 0) {
        return enterCoding(state, 'coding', section, 'audit_dirty', limits, []);
      }
      if ((limits.gate?.sectionChecks[section] ?? 0) > 0) return runChecks('audit_clean', 'section', section);
      return completeSection(state, section, 'audit_clean', limits);
    }
    case 'final_auditing': {
      // A loop never completes with a pending section: it is coded first.
      const pending = event.sections?.firstPending ?? null;
      if (pending !== null && state.sectionIndex !== null) return enterCoding(state, 'coding', pending, 'section_pending', limits, []);
      if (event.openBugs > 0) return enterCoding(state, 'final_audit_fix', state.sectionIndex, 'final_audit_dirty', limits, []);
      if (finalGateChecks(limits) > 0) return runChecks('final_audit_clean', 'final', state.sectionIndex);
      return completeLoop(state, 'final_audit_clean', limits);
    }
  }
}

function finalGateChecks(limits: LoopLimits): number {
  return limits.gate?.finalChecks ?? 0;
}

function runChecks(event: string, gate: CheckGateKind, sectionIndex: number | null): Transition {
  return { kind: 'run_checks', event, gate, sectionIndex };
}

/** A clean section (and its checks passed): its checkpoint, then the next section or the final audit. */
function completeSection(state: LoopState, section: number, event: string, limits: LoopLimits): Transition {
  const done: TransitionEffect[] = [{ type: 'complete_section', index: section }];
  if (section + 1 < state.sectionCount) return enterCoding(state, 'coding', section + 1, event, limits, done);
  return advanceTo(state, 'final_auditing', event, done);
}

/** A clean final audit (and every check passed on the final tree): the post action, or done. */
function completeLoop(state: LoopState, event: string, limits: LoopLimits): Transition {
  return limits.postAction ? advanceTo(state, 'post_action', event) : terminate(state, event, { kind: 'completed' });
}

/** The gate's checks passed: the step the clean audit allowed happens now. */
function onChecksPassed(state: LoopState, gate: CheckGateKind, limits: LoopLimits): Transition {
  if (gate === 'section' && state.phase === 'auditing' && state.sectionIndex !== null) return completeSection(state, state.sectionIndex, 'checks_passed', limits);
  if (gate === 'final' && state.phase === 'auditing' && state.kind === 'goal') return terminate(state, 'checks_passed', { kind: 'completed' });
  if (gate === 'final' && state.phase === 'final_auditing') return completeLoop(state, 'checks_passed', limits);
  return { kind: 'ignore', why: `checks of the ${gate} gate passed during ${state.phase}, which has no such gate` };
}

/** A check failed: the step is blocked and the coder goes back to work (the failure is a finding). */
function onChecksFailed(state: LoopState, gate: CheckGateKind, failed: string, limits: LoopLimits): Transition {
  const because = `check failed: ${failed}`;
  if (state.phase === 'auditing' && (gate === 'section' || state.kind === 'goal')) return enterCoding(state, 'coding', state.sectionIndex, 'checks_failed', limits, [], because);
  if (gate === 'final' && state.phase === 'final_auditing') return enterCoding(state, 'final_audit_fix', state.sectionIndex, 'checks_failed', limits, [], because);
  return { kind: 'ignore', why: `checks of the ${gate} gate failed during ${state.phase}, which has no such gate` };
}

function onStall(state: LoopState, limits: LoopLimits): Transition {
  const consecutiveStalls = state.consecutiveStalls + 1;
  const to = { ...state, consecutiveStalls, missedHandoffs: 0 } as LoopState;
  if (consecutiveStalls >= limits.maxConsecutiveStalls) return terminate(to, 'stall', { kind: 'stall_timeout' });
  return { kind: 'retrigger', event: 'stall', to, delayMs: 0, effects: [] };
}

function onModelError(state: LoopState, limits: LoopLimits, message: string, exhausted: boolean, malformed = false): Transition {
  const modelErrors = exhausted ? Number.POSITIVE_INFINITY : state.modelErrors + 1;
  if (modelErrors <= limits.maxModelRetries) {
    const to = { ...state, modelErrors, missedHandoffs: 0 } as LoopState;
    return { kind: 'retrigger', event: 'model_error', to, delayMs: retryDelayMs(modelErrors), effects: [] };
  }
  if (roleOfPhase(state.phase) === 'auditor' && state.auditorModelIndex + 1 < limits.auditorFallbackModels.length) {
    const to = { ...state, ...fresh(state), auditorModelIndex: state.auditorModelIndex + 1 } as LoopState;
    return { kind: 'retrigger', event: 'auditor_fallback', to, delayMs: 0, effects: [] };
  }
  return terminate(
    { ...state, modelErrors: Math.min(modelErrors, limits.maxModelRetries + 1) } as LoopState,
    'model_error',
    malformed ? { kind: 'model_stream_malformed', message } : { kind: 'error_max_retries', message },
  );
}

function onMissedHandoff(state: LoopState, limits: LoopLimits): Transition {
  const missedHandoffs = state.missedHandoffs + 1;
  if (missedHandoffs === 1) {
    return { kind: 'remind_handoff', event: 'idle_without_handoff', to: { ...state, missedHandoffs } as LoopState };
  }
  // The reminder did not help: it counts as an error of the phase.
  const modelErrors = state.modelErrors + 1;
  if (modelErrors <= limits.maxModelRetries) {
    const to = { ...state, missedHandoffs: 0, modelErrors } as LoopState;
    return { kind: 'retrigger', event: 'no_handoff', to, delayMs: 0, effects: [] };
  }
  const reason: TerminationReason =
    state.phase === 'auditing'
      ? { kind: 'audit_retry_exhausted' }
      : state.phase === 'final_auditing'
        ? { kind: 'final_audit_retry_exhausted' }
        : { kind: 'coding_no_assistant' };
  return terminate({ ...state, missedHandoffs, modelErrors } as LoopState, 'no_handoff', reason);
}

/** The user's review findings of a loop (source 'user') as the completion gate counts them. */
export interface UserReviewCounts {
  /** Open (neither resolved nor dismissed by the user). */
  open: number;
  /** Open and not answered by the coder (review_reply) yet. */
  unanswered: number;
}

/**
 * The user's review gates completion (issue 29): a loop never completes while a finding of the
 * user is open. A completion with one the coder has not answered goes back to a coding pass; with
 * every open one answered, the loop waits for the user (`awaiting_review`). Every other
 * transition passes unchanged. Pure.
 */
export function userReviewGate(t: Transition, state: LoopState, user: UserReviewCounts, limits: LoopLimits): Transition {
  const completes = (t.kind === 'terminate' && t.reason.kind === 'completed') || (t.kind === 'advance' && t.to.phase === 'post_action' && state.phase !== 'post_action');
  if (!completes || user.open === 0) return t;
  const effects = t.kind === 'terminate' || t.kind === 'advance' ? t.effects : [];
  if (user.unanswered > 0) {
    const phase = state.kind === 'goal' ? 'coding' : 'final_audit_fix';
    return enterCoding(state, phase, state.kind === 'goal' ? null : state.sectionIndex, 'user_review_open', limits, effects, `${user.unanswered} finding${user.unanswered === 1 ? '' : 's'} of the user's review unanswered`);
  }
  return terminate(state, 'user_review_answered', { kind: 'awaiting_review' }, effects);
}

/**
 * Restart keeps identity, plan, section progress, findings and the iteration count (it never
 * goes back: the restarted phase runs in the iteration it was in); it resets the error budgets
 * and gives a fresh iteration budget, counted from the restarted iteration.
 */
export function restartState(state: LoopState): LoopState {
  return { ...state, ...fresh(state), auditorModelIndex: -1, iterationsBeforeRestart: state.iteration - 1 };
}

/**
 * A completed loop reopened (a group's merge queue hands it back a conflict or a failed check as
 * a finding): a plan goes to fixing its final audit, a goal back to coding, one iteration on;
 * then as any restart (fresh error and iteration budgets).
 */
export function reopenState(state: LoopState): LoopState {
  return reviewPassState(state, 'send');
}

/**
 * The user's review moves the loop on (issue 29): `send` — another coding pass (a plan fixes as
 * after its final audit, a goal codes), one iteration on; `final` — every finding of the user
 * settled, the final gate once more (a plan's final audit, a goal's audit), then it completes.
 * Then as any restart (fresh error and iteration budgets).
 */
export function reviewPassState(state: LoopState, pass: 'send' | 'final'): LoopState {
  if (pass === 'final') {
    const phase = state.kind === 'goal' ? 'auditing' : 'final_auditing';
    return restartState({ ...state, ...fresh(state), phase } as LoopState);
  }
  const phase = state.kind === 'goal' ? 'coding' : 'final_audit_fix';
  return restartState({ ...state, ...fresh(state), phase, iteration: state.iteration + 1, sectionIndex: state.kind === 'goal' ? null : state.sectionIndex } as LoopState);
}

/** The iteration the loop may reach before it ends with max_iterations (0 = unlimited), for display. */
export function iterationCap(state: LoopState, limits: Pick<LoopLimits, 'maxIterations'>): number {
  return limits.maxIterations > 0 ? (state.iterationsBeforeRestart ?? 0) + limits.maxIterations : 0;
}
