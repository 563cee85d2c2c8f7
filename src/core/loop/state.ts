/**
 * Loop state as the runtime persists it. A discriminated union by phase, so code that
 * handles a phase sees only the fields that phase has.
 */

// The shared words (phases, roles, kinds, statuses) have their own home; re-exported here so
// the loop room's code reads them from its state module as before.
export { PHASES, roleOfPhase } from '../vocabulary/loop-vocabulary';
export type { LoopKind, LoopStatus, Phase, Role } from '../vocabulary/loop-vocabulary';
import type { LoopKind, LoopStatus, Phase, Role } from '../vocabulary/loop-vocabulary';

export type TerminationReason =
  | { kind: 'completed' }
  | { kind: 'cancelled' }
  | { kind: 'user_aborted' }
  | { kind: 'shutdown' }
  /** `message`: why the last pass was needed, when Forge knows (a check that never passed). */
  | { kind: 'max_iterations'; message?: string }
  | { kind: 'stall_timeout' }
  | { kind: 'missing_worktree_dir' }
  | { kind: 'session_creation_failed' }
  | { kind: 'audit_retry_exhausted' }
  | { kind: 'final_audit_retry_exhausted' }
  | { kind: 'coding_no_assistant' }
  | { kind: 'worktree_failed'; message: string }
  | { kind: 'error_max_retries'; message: string }
  /** The model server kept answering with a stream Forge's opencode could not parse. */
  | { kind: 'model_stream_malformed'; message: string }
  /** The loop's budget (money or tokens, or a role's share of it) was spent: paused, not ended. */
  | { kind: 'budget_reached' }
  /** The worktree's setup failed (issue 27): which command, and its output's tail. */
  | { kind: 'setup_failed'; message: string }
  /** A clean final gate with the user's review findings all answered but open: the user decides. */
  | { kind: 'awaiting_review' };

export type TerminationKind = TerminationReason['kind'];

export const TERMINATION_KINDS: readonly TerminationKind[] = [
  'completed',
  'cancelled',
  'user_aborted',
  'shutdown',
  'max_iterations',
  'stall_timeout',
  'missing_worktree_dir',
  'session_creation_failed',
  'audit_retry_exhausted',
  'final_audit_retry_exhausted',
  'coding_no_assistant',
  'worktree_failed',
  'error_max_retries',
  'model_stream_malformed',
  'budget_reached',
  'setup_failed',
  'awaiting_review',
];

export function terminationStatusFor(reason: TerminationReason): Exclude<LoopStatus, 'running'> {
  switch (reason.kind) {
    case 'completed':
      return 'completed';
    case 'cancelled':
    case 'user_aborted':
    case 'shutdown':
      return 'cancelled';
    case 'stall_timeout':
      return 'stalled';
    case 'budget_reached':
      return 'paused';
    case 'setup_failed':
      return 'setup_failed';
    case 'awaiting_review':
      return 'awaiting_review';
    default:
      return 'errored';
  }
}

export function terminationReasonToString(reason: TerminationReason): string {
  return 'message' in reason ? `${reason.kind}: ${reason.message}` : reason.kind;
}

export function parseTerminationReason(text: string): TerminationReason {
  const sep = text.indexOf(': ');
  const kind = (sep >= 0 ? text.slice(0, sep) : text) as TerminationKind;
  if (!TERMINATION_KINDS.includes(kind)) throw new Error(`Unknown termination reason "${text}"`);
  if (kind === 'worktree_failed' || kind === 'error_max_retries' || kind === 'model_stream_malformed' || kind === 'setup_failed') {
    return { kind, message: sep >= 0 ? text.slice(sep + 2) : '' };
  }
  if (kind === 'max_iterations' && sep >= 0) return { kind, message: text.slice(sep + 2) };
  return { kind } as TerminationReason;
}


/** Limits the pure table needs; resolved from settings at loop start and stored with the loop. */
export interface LoopLimits {
  maxIterations: number; // 0 = unlimited
  maxConsecutiveStalls: number;
  maxModelRetries: number;
  /** Tried in order for the auditor after its model keeps failing. */
  auditorFallbackModels: readonly string[];
  postAction: boolean;
  /** How many verification checks each gate runs (absent: a loop from before checks, none). */
  gate?: LoopGate;
}

/**
 * The verification gate as the table sees it (issue 13): how many checks run before a section
 * checkpoint, and before the loop completes. The checks themselves run outside the table; their
 * results come back as `checks_passed` / `checks_failed` events.
 */
export interface LoopGate {
  /** Checks of each section (its `Verify:` lines), by 0-based index. */
  sectionChecks: readonly number[];
  /** Checks run on the final tree before the loop completes. */
  finalChecks: number;
}

interface StateBase {
  kind: LoopKind;
  /** 1-based count of coding passes. */
  iteration: number;
  /** Current section (0-based); null for an unsectioned plan or a goal. */
  sectionIndex: number | null;
  sectionCount: number;
  /** Idles without a handoff in the current phase. */
  missedHandoffs: number;
  /** Model errors in the current phase. */
  modelErrors: number;
  consecutiveStalls: number;
  /** Index into auditorFallbackModels in use; -1 = the primary auditor model. */
  auditorModelIndex: number;
  /**
   * Coding passes made before the last restart (absent: never restarted). A restart keeps the
   * iteration counting up and gives the loop a fresh iteration budget counted from here.
   */
  iterationsBeforeRestart?: number;
}

export interface CodingState extends StateBase {
  phase: 'coding';
}
export interface AuditingState extends StateBase {
  phase: 'auditing';
}
export interface FinalAuditingState extends StateBase {
  phase: 'final_auditing';
}
export interface FinalAuditFixState extends StateBase {
  phase: 'final_audit_fix';
}
export interface PostActionState extends StateBase {
  phase: 'post_action';
}

export type LoopState = CodingState | AuditingState | FinalAuditingState | FinalAuditFixState | PostActionState;

export function initialState(kind: LoopKind, sectionCount: number): LoopState {
  return {
    phase: 'coding',
    kind,
    iteration: 1,
    sectionIndex: kind === 'plan' && sectionCount > 0 ? 0 : null,
    sectionCount: kind === 'plan' ? sectionCount : 0,
    missedHandoffs: 0,
    modelErrors: 0,
    consecutiveStalls: 0,
    auditorModelIndex: -1,
  };
}
