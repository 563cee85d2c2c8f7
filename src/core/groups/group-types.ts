/**
 * The feature-group service's public surface (issue 14 part 3, issue 16's group budget): what
 * the CLI (`forge group …`) and the VS Code surfaces (Execute PRD, the Loop Explorer's group
 * nodes, the dashboard's Group part) call and listen to. The engine builds the service; the
 * surfaces never reach into the scheduler or storage for groups.
 */
import type { FeatureGroupStatus, FeatureMergeState, FeatureStatus, GroupPauseReason } from '../vocabulary/group-vocabulary';
import type { FileOverlap } from './overlap';

export interface GroupRef {
  projectId: string;
  /** The group id, also the prefix of its loops' names (`<id>-<feature id>`). */
  id: string;
}

/** A group's budget: money and/or tokens over all its loops together; null: no limit of that kind. */
export interface GroupBudget {
  money: number | null;
  tokens: number | null;
}

/** What the group's loops spent together (the splitter's own session is not counted). */
export interface GroupSpend {
  cost: number;
  tokens: number;
}

export interface GroupFeatureView {
  /** The splitter's id (`FEATURE_ID_PATTERN`). */
  id: string;
  title: string;
  /** Ids of the features that must complete before this one starts. */
  dependsOn: string[];
  /** The feature's plan (markdown), as stored; the review file when the user edited it. */
  plan: string;
  /** The review copy of the plan under the data folder, editable before launch. */
  planPath: string;
  status: FeatureStatus;
  /** The loop running this feature, once started. */
  loopName: string | null;
  /** Why it failed or is blocked, in a sentence. */
  error: string | null;
  /** Its place in the merge queue into the group's integration branch `forge/group/<id>`; null until its loop completes. */
  merge?: GroupFeatureMergeView | null;
}

export interface GroupFeatureMergeView {
  state: FeatureMergeState;
  /** What happened, in a sentence (the conflicted files, the check that failed on the merged tree). */
  message: string | null;
  /** The integration branch's commit that merged it. */
  commit: string | null;
  /** How many times a failed merge sent its loop back to coding. */
  reopened: number;
  /** A failed merge waiting for a free slot to go back to coding. */
  awaitingReopen: boolean;
}

export interface FeatureGroupView {
  ref: GroupRef;
  title: string;
  /** The PRD it was split from (a path, or "(text)"). */
  source: string;
  repoDir: string;
  status: FeatureGroupStatus;
  pauseReason: GroupPauseReason | null;
  maxConcurrent: number;
  budget: GroupBudget;
  spend: GroupSpend;
  /** The 80 % warning was given (once per group). */
  budgetWarned: boolean;
  features: GroupFeatureView[];
  /** The folder holding the review copies of the plans (`<data>/groups/<project>/<id>/`). */
  reviewDir: string;
  createdAt: number;
  updatedAt: number;
  /**
   * The conflict radar (issue 14 part 4): files two or more live loops (features running or
   * paused) changed in their worktrees, as this process last read them (kept fresh while it
   * drives the group); `radar(ref)` reads them afresh. Empty when none, or never read here.
   */
  overlaps: FileOverlap[];
}

export interface SplitPrdRequest {
  /** Any folder inside the user's git repository. */
  repoPath: string;
  prdText: string;
  /** Where the PRD came from, for messages and `source`. */
  prdSource: string;
  /** Group id; default derived from the PRD's title. Validated like a loop name. */
  id?: string;
  /** "provider/model" for the splitter; default: the architect's/coder's default model. */
  model?: string;
  maxConcurrent?: number;
  /** Fields left out come from `forge.groups.budget.*` (0 there means none). */
  budget?: Partial<GroupBudget>;
  /** Loop options handed to each feature loop. */
  loopModel?: string;
  auditorModel?: string;
  sandbox?: boolean;
  signal?: AbortSignal;
  /** Progress lines while the splitter works ("splitter: reading README.md"). */
  onProgress?: (line: string) => void;
}

export interface LaunchGroupOptions {
  maxConcurrent?: number;
  budget?: Partial<GroupBudget>;
}

export type GroupEvent =
  | { type: 'group.changed'; group: GroupRef }
  | { type: 'group.feature'; group: GroupRef; featureId: string; status: FeatureStatus; loopName: string | null }
  /** `warning` once at 80 % of a limit; `paused` when the budget is spent. */
  | { type: 'group.budget'; group: GroupRef; level: 'warning' | 'paused'; message: string }
  | { type: 'group.ended'; group: GroupRef; status: FeatureGroupStatus; pauseReason: GroupPauseReason | null }
  /** The conflict radar's overlaps changed (also to none): the whole current list. */
  | { type: 'group.overlap'; group: GroupRef; overlaps: FileOverlap[] }
  /** The merge queue moved a feature: queued, merged into `forge/group/<id>`, or a conflict / failed check sending its loop back to coding. */
  | {
      type: 'group.merge';
      group: GroupRef;
      featureId: string;
      loopName: string | null;
      state: FeatureMergeState;
      message: string | null;
      commit: string | null;
      reopened: number;
      awaitingReopen: boolean;
    };

export interface FeatureGroupService {
  /** Runs the read-only splitter on the PRD; stores the group in `review`. Throws GroupError on bad input. */
  split(request: SplitPrdRequest): Promise<FeatureGroupView>;
  /** Reads the review copies back (edits win), validates them, and starts the group. */
  launch(ref: GroupRef, options?: LaunchGroupOptions): Promise<FeatureGroupView>;
  /** Continues a paused group; a `budget_reached` group only with a budget that leaves room. */
  resume(ref: GroupRef, options?: LaunchGroupOptions): Promise<FeatureGroupView>;
  /** Cancels its running loops; nothing is deleted. */
  cancel(ref: GroupRef): Promise<FeatureGroupView>;
  get(ref: GroupRef): FeatureGroupView | undefined;
  list(projectId: string): FeatureGroupView[];
  /** Resolves when the group leaves `running` (completed, failed, paused, cancelled). */
  waitForEnd(ref: GroupRef): Promise<FeatureGroupView>;
  subscribe(listener: (event: GroupEvent) => void): () => void;
  /**
   * The conflict radar, read now: the files two or more of the group's live loops changed
   * against their base (committed, uncommitted, untracked), read-only. Works for a group another
   * process drives. Emits `group.overlap` when the list differs from the last one read here.
   */
  radar(ref: GroupRef): Promise<FileOverlap[]>;
}

/** Bad input or a refused action: the message says what is wrong and how to fix it. */
/** A PRD goes whole into one splitter request: at most this many bytes (about 64k tokens). */
export const MAX_PRD_BYTES = 256 * 1024;

export class GroupError extends Error {
  constructor(
    message: string,
    readonly code:
      | 'bad_prd'
      | 'unsplittable'
      | 'bad_cap'
      | 'cycle'
      | 'unknown_dependency'
      | 'duplicate_feature'
      | 'not_found'
      | 'bad_state'
      | 'no_budget_room'
      | 'bad_plan'
      // Added by the implementation: a bad budget figure, opencode failing the splitter, the splitter interrupted.
      | 'bad_budget'
      // A splitter model opencode does not know.
      | 'bad_model'
      | 'opencode'
      | 'interrupted',
  ) {
    super(message);
    this.name = 'GroupError';
  }
}
