/**
 * The worktree service's vocabulary: its options, what it takes and returns (loop worktrees,
 * merge modes and results, changed files) and its constants (Forge's commit identity, artefact
 * folders, the loop branch prefix). Its own file so the service's parts (merging, git output
 * parsing) share these without importing the service itself; worktree-service.ts re-exports
 * them, which is where the rest of Forge imports them from.
 */
import type { RepositoryInfo } from './repository';

/** The subset of a log channel the workspace writes to (VS Code's LogOutputChannel and console both fit). */
export interface WorkspaceLog {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
}

export interface CommitIdentity {
  name: string;
  email: string;
}

/** Used for Forge's commits only when the user has no `user.email` configured. */
export const FORGE_COMMIT_IDENTITY: CommitIdentity = { name: 'Forge', email: 'forge@localhost' };

/**
 * Folders that opencode and Forge write into a worktree for their own use
 * (opencode installs its plugin package into `<project>/.opencode/`). They are
 * kept out of the loop's commits unless the repository itself tracks them.
 */
export const DEFAULT_ARTEFACT_DIRS: readonly string[] = ['.opencode'];

export const LOOP_BRANCH_PREFIX = 'forge/';

/** How a commit in a loop worktree goes. */
export interface CommitAllOptions {
  /** The loop's last commit, often after a checkpoint that took everything: ask git's status first. */
  likelyClean?: boolean;
  /**
   * What the agent did to the worktree's git that Forge undid before committing (a rewritten
   * `.git` file, a repository of its own inside the worktree): the caller records findings.
   */
  onAgentGitChanges?: (changes: ReadonlyArray<{ kind: string; path: string; detail: string }>) => void;
}

export interface WorktreeServiceOptions {
  /** Forge's data folder; worktrees live in `<dataDir>/worktrees/<loop-name>`. */
  dataDir: string;
  log: WorkspaceLog;
  /** Environment for git; defaults to this process's environment. */
  gitEnv?: Readonly<Record<string, string | undefined>>;
  identity?: CommitIdentity;
  artefactDirs?: readonly string[];
}

export interface CreateWorktreeRequest {
  /** Any folder inside the user's repository. */
  repoPath: string;
  /** A valid loop name (see `isLoopName`); reserve it before calling. */
  loopName: string;
  /** Start from this commit instead of the current HEAD. */
  baseCommit?: string;
  /** What `inspectRepository(repoPath)` just returned, when the caller has it (saves four git processes). */
  repository?: RepositoryInfo;
}

/** Everything a loop persists about its workspace. */
export interface LoopWorktree {
  loopName: string;
  worktreeDir: string;
  branch: string;
  /** The branch checked out when the loop started, or null when HEAD was detached. */
  baseBranch: string | null;
  baseCommit: string;
  /** Top-level folder of the user's working tree. */
  repoDir: string;
  gitCommonDir: string;
}

export type EnsureWorktreeResult = { status: 'present' | 'recreated'; worktreeDir: string };

export type MergeMode = 'never' | 'fast-forward' | 'merge';

export interface MergeResult {
  kind: 'kept' | 'fast-forwarded' | 'merged' | 'refused';
  message: string;
  /** The base branch's new tip after a fast-forward or merge. */
  commit?: string;
  /** Files that conflicted when a merge was attempted and aborted. */
  conflicts?: string[];
}

/** One line of `git diff --name-status`: A added, M modified, D deleted, R renamed, C copied, T type changed, U unmerged. */
export interface ChangedFile {
  status: 'A' | 'M' | 'D' | 'R' | 'C' | 'T' | 'U' | 'X';
  path: string;
  /** The path before a rename or copy. */
  oldPath?: string;
}
