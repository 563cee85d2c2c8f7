import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, systemClock, text, type Clock } from './row-values';

/** A plan of record: markdown the architect wrote, stored per project under a key (e.g. a session id). */
export interface PlanRow {
  readonly projectId: string;
  readonly key: string;
  readonly content: string;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface PlansRepository {
  get(projectId: string, key: string): PlanRow | undefined;
  /** Creates or replaces the plan under `key`. */
  put(projectId: string, key: string, content: string): PlanRow;
  delete(projectId: string, key: string): boolean;
  /** Most recently updated first. */
  list(projectId: string): PlanRow[];
}

function toPlan(row: SqlRow): PlanRow {
  return {
    projectId: text(row.project_id),
    key: text(row.key),
    content: text(row.content),
    createdAt: integer(row.created_at),
    updatedAt: integer(row.updated_at),
  };
}

export function createPlansRepository(db: SqlExecutor, clock: Clock = systemClock): PlansRepository {
  const get = (projectId: string, key: string): PlanRow | undefined => {
    const row = db.get('SELECT * FROM plans WHERE project_id = ? AND key = ?', [projectId, key]);
    return row ? toPlan(row) : undefined;
  };

  return {
    get,
    put: (projectId, key, content) =>
      db.transaction((tx) => {
        const now = clock.now();
        tx.run(
          `INSERT INTO plans (project_id, key, content, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (project_id, key) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`,
          [projectId, key, content, now, now],
        );
        return toPlan(tx.get('SELECT * FROM plans WHERE project_id = ? AND key = ?', [projectId, key])!);
      }),
    delete: (projectId, key) => db.run('DELETE FROM plans WHERE project_id = ? AND key = ?', [projectId, key]).changes > 0,
    list: (projectId) => db.query('SELECT * FROM plans WHERE project_id = ? ORDER BY updated_at DESC, key', [projectId]).map(toPlan),
  };
}
