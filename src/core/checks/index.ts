/**
 * Forge's verification gate, the engine pieces (issue 13): check specs parsed from a plan, a
 * section or a goal's options (parse.ts), run in the worktree on the host or in the loop's
 * sandbox (runner.ts), and their results turned into a summary and findings (evaluate.ts).
 * Imports nothing of the loop: the loop depends on this room, never the reverse.
 */
export * from './types';
export { ALLOWED_REGEX_FLAGS, describeCheckProblems, parseGoalCheckOptions, parseSectionChecks, parseVerificationChecks, RUNNABLE_FENCE_LANGUAGES, type GoalCheckOptions } from './parse';
export {
  DEFAULT_CHECK_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_BYTES,
  defaultCheckEnvironment,
  describeOutcome,
  hostCheckExecutor,
  killRunningChecksNow,
  runCheck,
  runChecks,
  sandboxCheckExecutor,
  type CheckCommandOutcome,
  type CheckCommandRequest,
  type CheckExecutor,
  type HostCheckExecutorOptions,
  type RunCheckOptions,
} from './runner';
export { evaluateFileCheck, MAX_ASSERTED_FILE_BYTES, MAX_MATCH_MS } from './file-assertions';
export { checkFinding, checkFindingFingerprint, extractFileLocations, summariseCheckResults, type CheckFindingOptions } from './evaluate';
export { normaliseWorktreePath } from './worktree-path';
export { CHECK_MARKER_VARIABLE } from './process-marker';
export { allowsVerificationChanges, detectVerificationChanges, isTestPath, makeRule, type ChangedPath, type VerificationChange, type VerificationInputs } from './verification-changes';
