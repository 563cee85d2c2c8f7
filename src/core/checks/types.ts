/**
 * The vocabulary of Forge's verification gate (issue 13): the checks a plan or a goal names,
 * what running one gives back, and the finding a failed one becomes.
 *
 * The checks module is a room of its own: it imports nothing of the loop, so the loop (and the
 * CLI, VS Code, the storage) can depend on it without a cycle. Everything here is plain data.
 */

/** Where a check was written; decides when the gate runs it. */
export type CheckScope =
  /** The plan's `## Verification` part: run before a clean final audit can complete the loop. */
  | { kind: 'plan' }
  /** A `Verify:` line in one section's body: run at that section's audit. `index` is the section's 0-based index. */
  | { kind: 'section'; index: number }
  /** A goal's `--check` / `--contains` / `--exists` / `--matches` options: the goal's contract. */
  | { kind: 'goal' };

interface CheckSpecBase {
  /** Stable within its scope: `plan-2`, `section-3-1` (section index + 1, then check number), `goal-1`. */
  id: string;
  /** What people read: `check 2: npm test`, `section 3 check 1: exists: src/cli.ts`. */
  label: string;
  scope: CheckScope;
  /** 1-based number of the check within its scope. */
  number: number;
  /**
   * Identity of what the check asserts (its kind and text, not its position): the same check
   * written twice has the same key, and a finding about it keeps its identity across runs.
   */
  key: string;
  /** Where it was written, for messages: `line 4 of the Verification part`, `--check option 2`. */
  origin: string;
}

/** A shell script run with `bash -c` in the loop's worktree; it passes when it exits 0. */
export interface CommandCheckSpec extends CheckSpecBase {
  kind: 'command';
  command: string;
}

/** A path (relative to the worktree root, never leaving it) that must exist. */
export interface ExistsCheckSpec extends CheckSpecBase {
  kind: 'exists';
  path: string;
}

/** A file that must contain a text (exact, case-sensitive). */
export interface ContainsCheckSpec extends CheckSpecBase {
  kind: 'contains';
  path: string;
  text: string;
}

/** A file whose content must match a regular expression. */
export interface MatchesCheckSpec extends CheckSpecBase {
  kind: 'matches';
  path: string;
  /** The expression's source and flags, as written (`/^## Usage$/m` → `^## Usage$`, `m`). */
  pattern: string;
  flags: string;
}

export type FileCheckSpec = ExistsCheckSpec | ContainsCheckSpec | MatchesCheckSpec;
export type CheckSpec = CommandCheckSpec | FileCheckSpec;

/** A check that cannot be accepted as written, with what is wrong and how to fix it. */
export interface CheckSpecProblem {
  origin: string;
  message: string;
}

export interface ParsedChecks {
  checks: CheckSpec[];
  /** Checks refused as written; the caller refuses the plan or goal while there are any. */
  problems: CheckSpecProblem[];
  /** Things worth telling the user that do not stop anything (a duplicate kept once, a fence Forge does not run). */
  notes: string[];
}

/**
 * - `passed`: exit code 0, or the file assertion holds.
 * - `failed`: a non-zero exit code, or the file assertion does not hold.
 * - `timed-out`: killed (with everything it started) at its timeout.
 * - `not-started`: the command could not be started (command not found, not executable, no worktree).
 * - `refused`: a file assertion whose path leaves the worktree (through `..` or a symbolic link).
 * - `cancelled`: stopped because the loop was cancelled; says nothing about the work (no finding).
 */
export type CheckStatus = 'passed' | 'failed' | 'timed-out' | 'not-started' | 'refused' | 'cancelled';

export interface CheckResult {
  checkId: string;
  label: string;
  kind: CheckSpec['kind'];
  status: CheckStatus;
  /** One line saying what happened: `exited with code 1`, `timed out after 600000 ms`, `README.md does not contain "## Usage"`. */
  message: string;
  /** Exit code of a command; null for file assertions and for a command ended by a signal. */
  exitCode: number | null;
  /** The signal that ended the command, when one did. */
  signal: string | null;
  /** Epoch milliseconds. */
  startedAt: number;
  durationMs: number;
  /** The last bytes of stdout and stderr together (at most the runner's `maxOutputBytes`); '' for file assertions. */
  outputTail: string;
  /** How many bytes the command printed in all. */
  outputBytes: number;
  /** Whether `outputTail` lost the beginning of the output. */
  outputTruncated: boolean;
}

export interface CheckSummary {
  passed: boolean;
  total: number;
  passedCount: number;
  failed: CheckResult[];
  /** `All 3 checks passed.` / `1 of 3 checks failed: check 2: npm test (exited with code 1).` */
  text: string;
}

/** A place in the worktree named by a check's output. */
export interface FileLocation {
  /** Relative to the worktree root, with `/` separators. */
  file: string;
  line: number;
  column?: number;
}

/**
 * The finding a failed check becomes: severity bug, source "check". Its fingerprint is the
 * check's key, so the same check failing again is the same finding (its recurrence goes up)
 * and it can be resolved exactly when that check passes.
 */
export interface CheckFinding {
  severity: 'bug';
  source: 'check';
  checkId: string;
  /** The file the output names, relative to the worktree; '' when it names none. */
  file: string;
  /** The line the output names; 0 when it names none. */
  line: number;
  description: string;
  fingerprint: string;
}
