/**
 * The loop runtime's public surface: what the VS Code extension and the CLI call and listen to.
 */
import type { CheckRunRow, LoopRow, ReviewFindingRow } from '../storage/repositories';
import type { MergeMode } from '../workspace';
import type { LoopStatus, Phase, Role, TerminationReason } from './state';
import type { Confinement } from '../sandbox/confinement';
import type { GoalCheckOptions } from '../checks';
import type { LoopBudget, UsageTotalsLike } from './budget';

/** Tokens and money of a session or a loop, as opencode reported them (the usage table's figures). */
export type UsageFigures = UsageTotalsLike;

export interface StartLoopRequest {
  kind: 'plan' | 'goal';
  /** Any folder inside the user's git repository. */
  repoPath: string;
  /** Plan loops: the markdown plan, and where it came from (for messages). */
  planText?: string;
  planSource?: string;
  /** Goal loops: the goal text. */
  goal?: string;
  /**
   * Goal loops: the contract Forge checks itself before the goal can complete (`--check`
   * commands, `--exists` paths, `--contains PATH:TEXT`, `--matches PATH:/RE/`). Immutable once started.
   */
  checks?: GoalCheckOptions;
  /** User-chosen loop name; validated, never silently rewritten into something else. */
  name?: string;
  maxIterations?: number;
  /** "provider/model"; empty/undefined: the configured default. */
  model?: string;
  auditorModel?: string;
  /**
   * Variant of the coding model as opencode names it (reasoning effort: "high", "minimal" …),
   * sent with every prompt of a session on that model; empty/undefined: the model's default.
   */
  variant?: string;
  sandbox?: boolean;
  merge?: MergeMode;
  /** Start from this commit (or branch, resolved at start) instead of the repository's HEAD: a group's dependent feature starts from its integration branch. */
  baseCommit?: string;
  /**
   * The cost governor's budget; fields left out come from the `forge.budget.*` settings (where
   * 0 means none). `null` in a field: no limit of that kind, whatever the settings say.
   */
  budget?: Partial<LoopBudget>;
}

/** How a loop restarts: taken over (force), on other models, with a new budget. */
export interface RestartLoopOptions {
  /** Take over a loop still marked running. */
  force?: boolean;
  /** "provider/model" for the coding sessions from now on. */
  model?: string;
  auditorModel?: string;
  /** Variant of the coding model; a new --model without one drops the old model's variant. */
  variant?: string;
  /**
   * A new budget (fields given replace the loop's; null removes a limit). A loop paused on its
   * budget restarts only with one that leaves room for the session it stopped before.
   */
  budget?: Partial<LoopBudget>;
  /**
   * Reopens a completed loop (only with this): back to a coding phase with this finding,
   * recorded like a failed check's (source 'check'), so the next coder receives it in full and no
   * agent can close it; the caller resolves it (by its fingerprint) once the matter is settled.
   */
  reopen?: { file: string; description: string; fingerprint: string };
  /**
   * The user's review (issue 29): `send` — another coding pass whose prompt carries the user's
   * open comments (any stopped loop, completed too); `final` — a loop awaiting review whose
   * comments are all resolved or dismissed runs its final gate once more and completes.
   */
  review?: 'send' | 'final';
}

export interface LoopRef {
  projectId: string;
  name: string;
}

export type LoopRuntimeEvent =
  | { type: 'loop.started'; loop: LoopRef; notices: string[]; confinement?: Confinement }
  | {
      type: 'loop.phase';
      loop: LoopRef;
      event: string;
      from: Phase | null;
      to: Phase;
      iteration: number;
      sectionIndex: number | null;
    }
  | { type: 'loop.session'; loop: LoopRef; sessionId: string; phase: Phase; model: string | null }
  | { type: 'loop.finding'; loop: LoopRef; finding: ReviewFindingRow }
  /**
   * A session's usage was recorded: that session's figures (summed over its models) and the
   * loop's totals so far.
   */
  | { type: 'loop.usage'; loop: LoopRef; sessionId: string; role: Role; session: UsageFigures; total: UsageFigures }
  | { type: 'loop.commit'; loop: LoopRef; sha: string; message: string }
  /** Forge ran a verification check (issue 13); the run is in the check log. */
  | { type: 'loop.check'; loop: LoopRef; run: CheckRunRow }
  | { type: 'loop.notice'; loop: LoopRef; level: 'info' | 'warning' | 'error'; message: string }
  /**
   * The user's words to the agent (`forge tell`, *Message the Agent*, issue 29): sent into the
   * running session (`session`, its id) or kept for the next session's first prompt (`next_session`).
   */
  | { type: 'loop.user_message'; loop: LoopRef; text: string; delivery: UserMessageDelivery; sessionId: string | null }
  /**
   * The cost governor: `warning` once at 80 % of a limit; `paused` when the loop stops at a
   * hand-over because a limit is spent (a `loop.ended` with status `paused` follows).
   */
  | { type: 'loop.budget'; loop: LoopRef; level: 'warning' | 'paused'; message: string }
  /**
   * The setup phase (issue 27): each step's start and end (with its time and its output's tail);
   * step `setup` stands for the whole phase.
   */
  | { type: 'loop.setup'; loop: LoopRef; step: string; status: 'started' | 'passed' | 'failed'; durationMs?: number; output?: string }
  /** A line a setup command printed, as it ran (`forge run --follow` shows them). */
  | { type: 'loop.setup_output'; loop: LoopRef; step: string; line: string }
  | {
      type: 'loop.ended';
      loop: LoopRef;
      status: Exclude<LoopStatus, 'running'>;
      reason: TerminationReason;
      iterations: number;
      branch: string | null;
      worktreeDir: string | null;
      merge: string | null;
    }
  /** Another process took over supervision (force restart elsewhere); this process stopped driving. */
  | { type: 'loop.supervision_lost'; loop: LoopRef };

/** Where a user's message to a running loop went. */
export type UserMessageDelivery = 'session' | 'next_session';

/** Longest message a user may send to a running loop (characters). */
export const MAX_USER_MESSAGE_CHARS = 20_000;

export type LoopRuntimeListener = (event: LoopRuntimeEvent) => void;

/**
 * Timing marks for benchmarks (`bench/loop-overhead.mjs`), `at` in `performance.now()`: `idle`
 * when the supervisor receives an idle of its current session, `prompt_dispatched` when Forge
 * hands the next prompt to the client (its own work done), `prompt_sent` when opencode accepted it.
 */
export interface LoopTimingMark {
  mark: 'idle' | 'prompt_dispatched' | 'prompt_sent';
  loop: LoopRef;
  sessionId: string;
  at: number;
}

export class LoopRuntimeError extends Error {
  constructor(
    readonly code:
      | 'bad_plan'
      | 'bad_name'
      | 'bad_request'
      | 'workspace'
      | 'not_found'
      | 'completed'
      | 'running'
      | 'not_running'
      | 'sandbox'
      | 'opencode',
    message: string,
  ) {
    super(message);
    this.name = 'LoopRuntimeError';
  }
}

export interface LoopRuntime {
  /** Resolves the project (repository identity) of a folder. */
  projectOf(repoPath: string): Promise<{ projectId: string; repoDir: string; headCommit: string }>;
  start(request: StartLoopRequest): Promise<LoopRef & { notices: string[]; confinement: Confinement }>;
  cancel(ref: LoopRef): Promise<void>;
  /**
   * Delivers the user's words to a loop this process drives: into its running session at once,
   * or into the next session's prompt when it sits between sessions. `not_running` otherwise.
   */
  tell(ref: LoopRef, text: string): Promise<{ delivery: UserMessageDelivery; sessionId: string | null }>;
  restart(ref: LoopRef, options?: RestartLoopOptions): Promise<void>;
  get(ref: LoopRef): LoopRow | undefined;
  list(projectId: string): LoopRow[];
  /** Whether this process drives the loop. */
  isSupervising(ref: LoopRef): boolean;
  /** Resolves when a loop this process drives has ended (or supervision was lost). */
  waitForEnd(ref: LoopRef): Promise<LoopRuntimeEvent & { type: 'loop.ended' | 'loop.supervision_lost' }>;
  subscribe(listener: LoopRuntimeListener): () => void;
  /** Stops driving every loop: each ends with `reason` (default `shutdown`). */
  dispose(reason?: 'shutdown' | 'cancelled'): Promise<void>;
}
