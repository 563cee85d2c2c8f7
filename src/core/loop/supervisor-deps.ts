/**
 * What a loop's supervisor is given and what its parts share: the engine's dependencies, the
 * session in flight, and the context (loop, deps) each part of the supervisor reads. Its own
 * file so the supervisor's parts (spares, checkpoints, spend, writes, lease, sessions) import
 * these types without importing the supervisor itself.
 */
import type { CheckExecutor } from '../checks';
import type { LiveFeedSink } from '../live/live-feed';
import type { LoopOpencode } from '../opencode/loop-opencode';
import type { ForgeRepositories, LoopRow } from '../storage/repositories';
import type { SqlExecutor } from '../storage/sql-executor';
import type { WorktreeService } from '../workspace';
import type { StoredLoopExtras } from './loop-extras';
import type { LoopRef, LoopRuntimeEvent, LoopTimingMark } from './runtime-types';
import type { Phase, Role } from './state';

export interface EngineLog {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface SupervisorDeps {
  db: SqlExecutor & { transaction<T>(fn: (tx: SqlExecutor) => T): T };
  repos: ForgeRepositories;
  worktrees: WorktreeService;
  log: EngineLog;
  supervisorId: string;
  leaseTtlMs: number;
  emit: (event: LoopRuntimeEvent) => void;
  /** Starts the loop's opencode server (with sandbox routing when the loop is sandboxed). */
  openAgent: (loop: LoopRow, extras: StoredLoopExtras) => Promise<LoopOpencode>;
  /** Releases the loop's sandbox (if any) at loop end. */
  releaseSandbox: (loop: LoopRow, ended: boolean) => Promise<void>;
  /** Checks the sandbox is still there before each phase; throws with a clear message if not. */
  checkSandbox: (loop: LoopRow) => Promise<void>;
  /** Where the loop's verification checks run: in its sandbox when it has one, else on the host. */
  checkExecutor: (loop: LoopRow) => Promise<CheckExecutor>;
  /** Where checks of a clean checkout in `dir` run: a sandbox of its own over `dir` (the loop's settings), or the host for an unconfined loop. */
  checkExecutorOver: (loop: LoopRow, dir: string) => Promise<ScratchCheckRun>;
  /**
   * The setup phase (loop-setup.ts): runs the loop's worktree setup when it has one not done;
   * null when the coder may start, else why the setup failed.
   */
  runSetup?: (ref: LoopRef, signal: AbortSignal) => Promise<string | null>;
  onDisposed: (ref: LoopRef) => void;
  /** Benchmark hook (see LoopTimingMark); unset in normal use. */
  onTiming?: (mark: LoopTimingMark) => void;
  /** The engine's live-parts feed (what the sessions are doing now). */
  live?: LiveFeedSink;
}

export interface CurrentSession {
  id: string;
  phase: Phase;
  role: Role;
  model: string | null;
  promptSentAt: number;
  seenBusy: boolean;
  lastProgressAt: number;
  runningTools: Set<string>;
  retryAttempt: number;
  attemptId: number;
  /** A prompt is in flight (sent, its idle not yet handled). */
  inFlight: boolean;
  /** The model variant this session's prompts carry. */
  variant: string | undefined;
  /** Work held back until the session first shows activity (see PhaseSessions.afterFirstActivity). */
  onFirstActivity?: () => void;
  /** Generation of the opencode server the session was created on. */
  serverGeneration: number;
  /** The budget ran out during this session and its stop is under way (issue 28). */
  budgetStopped?: boolean;
  /** The session called the handoff tool: its pass is over, a user's message waits for the next one. */
  handedOff?: boolean;
}

/** The loop a supervisor part works for: its reference, the engine's deps and its stored row. */
export interface SupervisorContext {
  readonly ref: LoopRef;
  readonly deps: SupervisorDeps;
  /** The loop's row as stored now (throws when it vanished). */
  loop(): LoopRow;
}

/** An executor for checks of a folder other than the worktree, held from before the first check to after the last. */
export interface ScratchCheckRun {
  exec: CheckExecutor;
  /** Where the checks run (`in a bwrap sandbox of their own`, `on the host`). */
  where: string;
  /** Stops and removes what was started for these checks; called once, also after a failure. */
  release(): Promise<void>;
}
