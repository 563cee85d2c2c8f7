/**
 * The `forge` CLI's exit codes: one per way a loop (or a command) can end, so scripts can tell them
 * apart without reading the output (docs/cli.md lists them). Split out of args.ts, which parses.
 */
import type { TerminationReason } from '../core/loop/state';

export const EXIT = {
  completed: 0,
  internal: 1,
  badInput: 2,
  cancelled: 3,
  maxIterations: 4,
  stalled: 5,
  agentFailure: 6,
  worktreeFailure: 7,
  opencodeFailure: 8,
  supervisionLost: 9,
  budgetPaused: 10,
  setupFailed: 11,
  /** The coder answered the user's review; the loop waits for the user (forge review NAME). */
  awaitingReview: 12,
} as const;

export function exitCodeFor(reason: TerminationReason): number {
  switch (reason.kind) {
    case 'completed':
      return EXIT.completed;
    case 'cancelled':
    case 'user_aborted':
    case 'shutdown':
      return EXIT.cancelled;
    case 'max_iterations':
      return EXIT.maxIterations;
    case 'stall_timeout':
      return EXIT.stalled;
    case 'error_max_retries':
    case 'model_stream_malformed':
    case 'audit_retry_exhausted':
    case 'final_audit_retry_exhausted':
    case 'coding_no_assistant':
      return EXIT.agentFailure;
    case 'missing_worktree_dir':
    case 'worktree_failed':
      return EXIT.worktreeFailure;
    case 'session_creation_failed':
      return EXIT.opencodeFailure;
    case 'budget_reached':
      return EXIT.budgetPaused;
    case 'setup_failed':
      return EXIT.setupFailed;
    case 'awaiting_review':
      return EXIT.awaitingReview;
  }
}
