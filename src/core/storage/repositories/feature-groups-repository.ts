import type { SqlExecutor, SqlRow } from '../sql-executor';
import type { FeatureGroupStatus, FeatureMergeState, FeatureStatus, GroupPauseReason } from '../../vocabulary/group-vocabulary';
import { RowNotFoundError, flag, integer, json, optionalText, systemClock, text, type Clock } from './row-values';

export type { FeatureGroupStatus, FeatureStatus, GroupPauseReason };

/** One feature of a group: a plan that becomes one loop (`<group id>-<feature id>`). */
export interface GroupFeature {
  readonly id: string;
  readonly title: string;
  readonly dependsOn: readonly string[];
  /** The plan as the splitter wrote it, or as the user's review edit left it at launch. */
  readonly plan: string;
  /** The review copy under the data folder. */
  readonly planPath: string;
  readonly status: FeatureStatus;
  readonly loopName: string | null;
  readonly error: string | null;
  /** Its place in the group's merge queue; absent until its loop first completes. */
  readonly merge?: FeatureMerge | null;
}

/** A feature's merge into its group's integration branch (stored with the feature). */
export interface FeatureMerge {
  readonly state: FeatureMergeState;
  /** What happened, in a sentence (the conflict's files, the failed check). */
  readonly message: string | null;
  /** The integration branch's commit that merged it. */
  readonly commit: string | null;
  /** How many times a failed merge sent its loop back to coding. */
  readonly reopened: number;
  /** A failed merge waiting for a free slot to send the loop back to coding. */
  readonly awaitingReopen: boolean;
  /** When it entered this state (the queue's order: first queued, first merged). */
  readonly at: number;
}

/** Options every loop of the group starts with. */
export interface GroupLoopOptions {
  model?: string;
  auditorModel?: string;
  sandbox?: boolean;
}

/** A PRD split into feature plans, run as loops under a cap and a budget over all of them. */
export interface FeatureGroupRow {
  readonly projectId: string;
  readonly id: string;
  readonly title: string;
  readonly status: FeatureGroupStatus;
  readonly features: readonly GroupFeature[];
  /** Kept from the base schema (sequential groups); unused by the scheduler. */
  readonly currentIndex: number;
  readonly source: string;
  readonly repoDir: string;
  readonly reviewDir: string;
  readonly maxConcurrent: number;
  readonly budgetMoney: number | null;
  readonly budgetTokens: number | null;
  readonly budgetWarned: boolean;
  readonly pauseReason: GroupPauseReason | null;
  readonly splitterModel: string | null;
  readonly loopOptions: GroupLoopOptions;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export type NewFeatureGroup = Pick<FeatureGroupRow, 'id' | 'title' | 'features'> &
  Partial<Pick<FeatureGroupRow, 'status' | 'currentIndex' | 'source' | 'repoDir' | 'reviewDir' | 'maxConcurrent' | 'budgetMoney' | 'budgetTokens' | 'splitterModel' | 'loopOptions'>>;
export type FeatureGroupPatch = Partial<
  Pick<FeatureGroupRow, 'title' | 'status' | 'features' | 'currentIndex' | 'maxConcurrent' | 'budgetMoney' | 'budgetTokens' | 'budgetWarned' | 'pauseReason'>
>;
export type GroupFeaturePatch = Partial<Pick<GroupFeature, 'status' | 'loopName' | 'error' | 'plan' | 'merge'>>;

export interface FeatureGroupsRepository {
  create(projectId: string, group: NewFeatureGroup): FeatureGroupRow;
  get(projectId: string, id: string): FeatureGroupRow | undefined;
  /** Active groups first, then the most recently updated. */
  list(projectId: string, options?: { status?: FeatureGroupStatus }): FeatureGroupRow[];
  update(projectId: string, id: string, patch: FeatureGroupPatch): FeatureGroupRow;
  /** Changes one feature (by its id, or by its index for rows of the base schema). */
  updateFeature(projectId: string, id: string, feature: string | number, patch: GroupFeaturePatch): FeatureGroupRow;
  delete(projectId: string, id: string): boolean;
}

/** A feature of a row written before the group columns (`name` instead of `id`) reads as one of now. */
function toFeature(raw: Record<string, unknown>): GroupFeature {
  const id = String(raw.id ?? raw.name ?? '');
  return {
    id,
    title: String(raw.title ?? id),
    dependsOn: Array.isArray(raw.dependsOn) ? raw.dependsOn.map(String) : [],
    plan: String(raw.plan ?? ''),
    planPath: String(raw.planPath ?? ''),
    status: String(raw.status ?? 'pending') as FeatureStatus,
    loopName: raw.loopName === null || raw.loopName === undefined ? null : String(raw.loopName),
    error: raw.error === null || raw.error === undefined ? null : String(raw.error),
    ...(raw.merge && typeof raw.merge === 'object' ? { merge: toMerge(raw.merge as Record<string, unknown>) } : {}),
  };
}

function toMerge(raw: Record<string, unknown>): FeatureMerge {
  return {
    state: String(raw.state ?? 'queued') as FeatureMergeState,
    message: typeof raw.message === 'string' ? raw.message : null,
    commit: typeof raw.commit === 'string' ? raw.commit : null,
    reopened: Number(raw.reopened ?? 0) || 0,
    awaitingReopen: raw.awaitingReopen === true,
    at: Number(raw.at ?? 0) || 0,
  };
}

function toGroup(row: SqlRow): FeatureGroupRow {
  const money = row.budget_money;
  const tokens = row.budget_tokens;
  return {
    projectId: text(row.project_id),
    id: text(row.id),
    title: text(row.title),
    status: text(row.status) as FeatureGroupStatus,
    features: json<Array<Record<string, unknown>>>(row.features, []).map(toFeature),
    currentIndex: integer(row.current_index),
    source: text(row.source),
    repoDir: text(row.repo_dir),
    reviewDir: text(row.review_dir),
    maxConcurrent: integer(row.max_concurrent ?? 3),
    budgetMoney: money === null || money === undefined ? null : Number(money),
    budgetTokens: tokens === null || tokens === undefined ? null : Number(tokens),
    budgetWarned: flag(row.budget_warned),
    pauseReason: optionalText(row.pause_reason) as GroupPauseReason | null,
    splitterModel: optionalText(row.splitter_model),
    loopOptions: json<GroupLoopOptions>(row.loop_options, {}),
    createdAt: integer(row.created_at),
    updatedAt: integer(row.updated_at),
  };
}

export function createFeatureGroupsRepository(db: SqlExecutor, clock: Clock = systemClock): FeatureGroupsRepository {
  const mustGet = (tx: SqlExecutor, projectId: string, id: string): FeatureGroupRow => {
    const row = tx.get('SELECT * FROM feature_groups WHERE project_id = ? AND id = ?', [projectId, id]);
    if (!row) throw new RowNotFoundError(`Feature group "${id}"`);
    return toGroup(row);
  };

  const write = (tx: SqlExecutor, group: FeatureGroupRow): FeatureGroupRow => {
    tx.run(
      `UPDATE feature_groups SET title = ?, status = ?, features = ?, current_index = ?, max_concurrent = ?, budget_money = ?, budget_tokens = ?,
         budget_warned = ?, pause_reason = ?, updated_at = ? WHERE project_id = ? AND id = ?`,
      [
        group.title,
        group.status,
        JSON.stringify(group.features),
        group.currentIndex,
        group.maxConcurrent,
        group.budgetMoney,
        group.budgetTokens,
        group.budgetWarned ? 1 : 0,
        group.pauseReason,
        group.updatedAt,
        group.projectId,
        group.id,
      ],
    );
    return group;
  };

  return {
    create: (projectId, group) =>
      db.transaction((tx) => {
        const now = clock.now();
        tx.run(
          `INSERT INTO feature_groups (project_id, id, title, status, features, current_index, source, repo_dir, review_dir, max_concurrent,
             budget_money, budget_tokens, splitter_model, loop_options, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            projectId,
            group.id,
            group.title,
            group.status ?? 'review',
            JSON.stringify(group.features),
            group.currentIndex ?? 0,
            group.source ?? '',
            group.repoDir ?? '',
            group.reviewDir ?? '',
            group.maxConcurrent ?? 3,
            group.budgetMoney ?? null,
            group.budgetTokens ?? null,
            group.splitterModel ?? null,
            JSON.stringify(group.loopOptions ?? {}),
            now,
            now,
          ],
        );
        return mustGet(tx, projectId, group.id);
      }),

    get: (projectId, id) => {
      const row = db.get('SELECT * FROM feature_groups WHERE project_id = ? AND id = ?', [projectId, id]);
      return row ? toGroup(row) : undefined;
    },

    list: (projectId, options = {}) =>
      (options.status === undefined
        ? db.query(
            `SELECT * FROM feature_groups WHERE project_id = ?
             ORDER BY CASE WHEN status IN ('review', 'running', 'paused') THEN 0 ELSE 1 END, updated_at DESC, id`,
            [projectId],
          )
        : db.query('SELECT * FROM feature_groups WHERE project_id = ? AND status = ? ORDER BY updated_at DESC, id', [projectId, options.status])
      ).map(toGroup),

    update: (projectId, id, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, id);
        const next: FeatureGroupRow = { ...current, updatedAt: clock.now() };
        for (const [k, v] of Object.entries(patch)) if (v !== undefined) (next as unknown as Record<string, unknown>)[k] = v;
        return write(tx, next);
      }),

    updateFeature: (projectId, id, which, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, id);
        const index = typeof which === 'number' ? which : current.features.findIndex((f) => f.id === which);
        const feature = current.features[index];
        if (!feature) throw new RowNotFoundError(`Feature ${typeof which === 'number' ? which + 1 : `"${which}"`} of group "${id}"`);
        const features = current.features.map((f, i) => (i === index ? { ...f, ...patch } : f));
        return write(tx, { ...current, features, updatedAt: clock.now() });
      }),

    delete: (projectId, id) => db.run('DELETE FROM feature_groups WHERE project_id = ? AND id = ?', [projectId, id]).changes > 0,
  };
}
