/**
 * What the runtime stores in a loop row's `state` besides the row's own columns, and how to
 * read it.
 */
import type { CheckSpec } from '../checks';
import type { PermissionRule } from '../opencode/agent-client';
import type { LoopRow } from '../storage/repositories';
import type { MergeMode } from '../workspace';
import type { LoopLimits, LoopState } from './state';
import type { LoopBudget } from './budget';

/** What the runtime stores in `loops.state` besides the row's own columns. */
export interface StoredLoopExtras {
  loopState: LoopState;
  limits: LoopLimits;
  timing: LoopTiming;
  title: string;
  objective: string | null;
  verification: string | null;
  merge: MergeMode;
  postAction: string | null;
  cleanupWorktree: boolean;
  gitCommonDir: string;
  userDenyRules: PermissionRule[];
  /** pid of the opencode server process group serving the loop (killed on a forced takeover). */
  opencodePid?: number | null;
  /** Marker in the environment of every process of that server (see server-process.ts). */
  opencodeMarker?: string | null;
  /**
   * On a server shared with other loops (which a takeover must not kill): the FORGE_LOOP_INSTANCE
   * marker of every process this loop's agent started through the server's router.
   */
  opencodeLoopMarker?: string | null;
  /** Set by another process asking the supervisor to cancel. */
  cancelRequested?: boolean;
  /**
   * The loop's verification checks, parsed at start; immutable (no plan amendment or agent
   * changes them). Absent for loops started before checks existed.
   */
  checks?: CheckSpec[];
  /** Milliseconds each check may run (forge.checks.timeoutMs at start). */
  checkTimeoutMs?: number;
  /** Variant of the coding model (opencode's name), sent with every prompt on that model. */
  variant?: string;
  /** The cost governor's budget (absent: none); a restart may set a new one. */
  budget?: LoopBudget;
  /** The user's messages (`forge tell`) waiting for the next session's first prompt; cleared once sent. */
  pendingUserMessages?: string[];
  /** The 80 % warning was given in this run of the loop (a restart with a new budget clears it). */
  budgetWarned?: boolean;
}

export interface LoopTiming {
  stallTimeoutMs: number;
  busyStallTimeoutMs: number;
  idleGateTimeoutMs: number;
}

export function readExtras(loop: LoopRow): StoredLoopExtras {
  return loop.state as unknown as StoredLoopExtras;
}
