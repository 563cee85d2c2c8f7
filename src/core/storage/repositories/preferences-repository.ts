import type { SqlExecutor } from '../sql-executor';
import { integer, json, systemClock, text, type Clock } from './row-values';

export interface PreferenceEntry {
  readonly key: string;
  readonly value: unknown;
  readonly updatedAt: number;
}

/** Small per-project key/value state (JSON values), e.g. the sandbox toggle's default or recent models. */
export interface PreferencesRepository {
  get<T>(projectId: string, key: string): T | undefined;
  set(projectId: string, key: string, value: unknown): void;
  delete(projectId: string, key: string): boolean;
  /** All entries, optionally only keys starting with `prefix`. */
  list(projectId: string, prefix?: string): PreferenceEntry[];
}

export function createPreferencesRepository(db: SqlExecutor, clock: Clock = systemClock): PreferencesRepository {
  return {
    get: <T>(projectId: string, key: string): T | undefined => {
      const row = db.get('SELECT value FROM preferences WHERE project_id = ? AND key = ?', [projectId, key]);
      return row ? json<T | undefined>(row.value, undefined) : undefined;
    },

    set: (projectId, key, value) => {
      if (value === undefined) throw new TypeError(`Preference "${key}" cannot be set to undefined; delete it instead.`);
      db.run(
        `INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (project_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        [projectId, key, JSON.stringify(value), clock.now()],
      );
    },

    delete: (projectId, key) => db.run('DELETE FROM preferences WHERE project_id = ? AND key = ?', [projectId, key]).changes > 0,

    list: (projectId, prefix) =>
      (prefix === undefined
        ? db.query('SELECT * FROM preferences WHERE project_id = ? ORDER BY key', [projectId])
        : db.query('SELECT * FROM preferences WHERE project_id = ? AND substr(key, 1, ?) = ? ORDER BY key', [projectId, prefix.length, prefix])
      ).map((row) => ({ key: text(row.key), value: json<unknown>(row.value, null), updatedAt: integer(row.updated_at) })),
  };
}
