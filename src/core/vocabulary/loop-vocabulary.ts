/**
 * The words several rooms of the engine share: a loop's phases, the agent roles, the kinds and
 * statuses of a loop, and the section cap. Storage persists them, the loop runtime moves
 * through them, the surfaces show them; none of those rooms owns them, so they live here and
 * this file imports nothing.
 */

export type Phase = 'coding' | 'auditing' | 'final_auditing' | 'final_audit_fix' | 'post_action';
export const PHASES: readonly Phase[] = ['coding', 'auditing', 'final_auditing', 'final_audit_fix', 'post_action'];

export type Role = 'code' | 'auditor';
export const ROLES: readonly Role[] = ['code', 'auditor'];

export type LoopKind = 'plan' | 'goal';
export const LOOP_KINDS: readonly LoopKind[] = ['plan', 'goal'];

/**
 * `paused`: the loop stopped at a hand-over and waits for the user (its budget was reached);
 * worktree, branch and sessions are kept, and only a restart (with a new budget) moves it on.
 * `setup_failed`: the worktree's setup (installs, setup commands) failed before the first session;
 * the worktree is kept for inspection and a restart runs the setup again (issue 27).
 */
/**
 * `awaiting_review`: the coder answered every open finding of the user's review (issue 29); the
 * loop waits, its work committed, until the user resolves them (then it completes) or sends
 * the review back for another pass.
 */
export type LoopStatus = 'running' | 'completed' | 'cancelled' | 'errored' | 'stalled' | 'paused' | 'awaiting_review' | 'setup_failed';
export const LOOP_STATUSES: readonly LoopStatus[] = ['running', 'completed', 'cancelled', 'errored', 'stalled', 'paused', 'awaiting_review', 'setup_failed'];

/** Most sections a plan runs; later ones are dropped with a message. */
export const MAX_SECTIONS = 24;

/** The auditing phases belong to the auditor; every other phase to the coder. */
export function roleOfPhase(phase: Phase): Role {
  return phase === 'auditing' || phase === 'final_auditing' ? 'auditor' : 'code';
}
