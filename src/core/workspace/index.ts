export { sectionCheckpointMessage, loopTeardownMessage, type StagedChanges } from './checkpoint-message';
export { MAX_DATA_DIR_LENGTH, ensureDataDir, resolveDataDir, type ResolveDataDirOptions } from './data-dir';
export { createGitRunner, type GitResult, type GitRunner, type GitRunnerOptions, type GitRunOptions } from './git-runner';
export {
  FALLBACK_LOOP_NAME,
  LOOP_NAME_MAX_LENGTH,
  chooseLoopName,
  explicitLoopName,
  isLoopName,
  loopNameFromPlan,
  slugifyLoopName,
  uniqueLoopName,
  validateLoopName,
  type ChosenLoopName,
  type LoopNameSource,
  type LoopNameValidation,
} from './loop-name';
export {
  canonicalPath,
  countWorkingTreeChanges,
  inspectRepository,
  workingTreeChangesNotice,
  type InspectRepositoryOptions,
  type RepositoryInfo,
  type WorkingTreeChanges,
} from './repository';
export { WorkspaceError, isWorkspaceError, type WorkspaceErrorCode } from './workspace-error';
export {
  DEFAULT_ARTEFACT_DIRS,
  FORGE_COMMIT_IDENTITY,
  LOOP_BRANCH_PREFIX,
  createWorktreeService,
  type ChangedFile,
  type CommitIdentity,
  type CreateWorktreeRequest,
  type EnsureWorktreeResult,
  type LoopWorktree,
  type MergeMode,
  type MergeResult,
  type WorkspaceLog,
  type WorktreeService,
  type WorktreeServiceOptions,
} from './worktree-service';
