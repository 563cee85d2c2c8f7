import type { SqlExecutor, SqlRow } from '../sql-executor';
import { RowNotFoundError, integer, json, systemClock, text, type Clock } from './row-values';

export type FeatureGroupStatus = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';
export type FeatureStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped';

/** One feature of a group: a plan that becomes one loop. */
export interface GroupFeature {
  readonly name: string;
  readonly plan: string;
  readonly loopName: string | null;
  readonly status: FeatureStatus;
}

/** Grouped execution: features run one after another as separate loops. */
export interface FeatureGroupRow {
  readonly projectId: string;
  readonly id: string;
  readonly title: string;
  readonly status: FeatureGroupStatus;
  readonly features: readonly GroupFeature[];
  /** Index of the feature running or next to run. */
  readonly currentIndex: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export type NewFeatureGroup = Pick<FeatureGroupRow, 'id' | 'title' | 'features'> & Partial<Pick<FeatureGroupRow, 'status' | 'currentIndex'>>;
export type FeatureGroupPatch = Partial<Pick<FeatureGroupRow, 'title' | 'status' | 'features' | 'currentIndex'>>;

export interface FeatureGroupsRepository {
  create(projectId: string, group: NewFeatureGroup): FeatureGroupRow;
  get(projectId: string, id: string): FeatureGroupRow | undefined;
  /** Active groups first, then the most recently updated. */
  list(projectId: string, options?: { status?: FeatureGroupStatus }): FeatureGroupRow[];
  update(projectId: string, id: string, patch: FeatureGroupPatch): FeatureGroupRow;
  /** Sets one feature's status and loop name. */
  updateFeature(projectId: string, id: string, index: number, patch: Partial<Pick<GroupFeature, 'status' | 'loopName'>>): FeatureGroupRow;
  delete(projectId: string, id: string): boolean;
}

function toGroup(row: SqlRow): FeatureGroupRow {
  return {
    projectId: text(row.project_id),
    id: text(row.id),
    title: text(row.title),
    status: text(row.status) as FeatureGroupStatus,
    features: json<GroupFeature[]>(row.features, []),
    currentIndex: integer(row.current_index),
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
    tx.run('UPDATE feature_groups SET title = ?, status = ?, features = ?, current_index = ?, updated_at = ? WHERE project_id = ? AND id = ?', [
      group.title,
      group.status,
      JSON.stringify(group.features),
      group.currentIndex,
      group.updatedAt,
      group.projectId,
      group.id,
    ]);
    return group;
  };

  return {
    create: (projectId, group) =>
      db.transaction((tx) => {
        const now = clock.now();
        tx.run(
          `INSERT INTO feature_groups (project_id, id, title, status, features, current_index, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [projectId, group.id, group.title, group.status ?? 'pending', JSON.stringify(group.features), group.currentIndex ?? 0, now, now],
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
             ORDER BY CASE WHEN status IN ('pending', 'running') THEN 0 ELSE 1 END, updated_at DESC, id`,
            [projectId],
          )
        : db.query('SELECT * FROM feature_groups WHERE project_id = ? AND status = ? ORDER BY updated_at DESC, id', [projectId, options.status])
      ).map(toGroup),

    update: (projectId, id, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, id);
        return write(tx, {
          ...current,
          title: patch.title ?? current.title,
          status: patch.status ?? current.status,
          features: patch.features ?? current.features,
          currentIndex: patch.currentIndex ?? current.currentIndex,
          updatedAt: clock.now(),
        });
      }),

    updateFeature: (projectId, id, index, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, id);
        const feature = current.features[index];
        if (!feature) throw new RowNotFoundError(`Feature ${index + 1} of group "${id}"`);
        const features = current.features.map((f, i) => (i === index ? { ...f, ...patch } : f));
        return write(tx, { ...current, features, updatedAt: clock.now() });
      }),

    delete: (projectId, id) => db.run('DELETE FROM feature_groups WHERE project_id = ? AND id = ?', [projectId, id]).changes > 0,
  };
}
