/**
 * The words of feature groups (issue 14 part 3, issue 16's group budget) that storage, the
 * group runner, the CLI and the VS Code surfaces share. Like loop-vocabulary.ts it imports
 * nothing, so every room can depend on it without depending on another room.
 */

/**
 * A group's life:
 * - `review`: the splitter wrote its feature plans; nothing runs until the user launches it.
 * - `running`: the scheduler starts features under the cap as their dependencies complete.
 * - `paused`: nothing new starts (see `GroupPauseReason`); running loops stop at their next
 *   hand-over; worktrees and sessions are kept; only a resume moves it on.
 * - `completed`: every feature completed. `failed`: a feature failed or was blocked by one
 *   that did, and nothing else can run. `cancelled`: the user cancelled it.
 */
export type FeatureGroupStatus = 'review' | 'running' | 'paused' | 'completed' | 'failed' | 'cancelled';
export const FEATURE_GROUP_STATUSES: readonly FeatureGroupStatus[] = ['review', 'running', 'paused', 'completed', 'failed', 'cancelled'];

/** Why a group is paused: its budget is spent, or its supervising process went away. */
export type GroupPauseReason = 'budget_reached' | 'interrupted';

/**
 * A feature's life: `pending` until its dependencies completed and a slot is free, `running`
 * while its loop runs, then `completed` or `failed` (its loop ended otherwise: errored,
 * stalled, cancelled), `blocked` when a feature it depends on failed, `paused` when its loop
 * paused on the group's budget, `cancelled` with the group.
 */
export type FeatureStatus = 'pending' | 'running' | 'paused' | 'completed' | 'failed' | 'blocked' | 'cancelled';
export const FEATURE_STATUSES: readonly FeatureStatus[] = ['pending', 'running', 'paused', 'completed', 'failed', 'blocked', 'cancelled'];

/** The cap on loops a group runs at once: `forge.groups.maxConcurrentLoops`, `--max-concurrent`. */
export const MIN_GROUP_CONCURRENCY = 1;
export const MAX_GROUP_CONCURRENCY = 16;
export const DEFAULT_GROUP_CONCURRENCY = 3;

/** Most features one PRD splits into. */
export const MAX_GROUP_FEATURES = 24;

/** A feature id: what the splitter names it, used in the loop name `<group>-<id>`. */
export const FEATURE_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;

/**
 * Where a completed feature stands in its group's merge queue (issue 14 part 4): `queued` until
 * the queue merges it into the group's integration branch, `merged` once there (its checks
 * passed on the combined tree), `conflict` / `check_failed` when the merge did not hold and the
 * loop went (or goes, when a slot frees) back to coding with that as a finding.
 */
export type FeatureMergeState = 'queued' | 'merged' | 'conflict' | 'check_failed';
export const FEATURE_MERGE_STATES: readonly FeatureMergeState[] = ['queued', 'merged', 'conflict', 'check_failed'];
