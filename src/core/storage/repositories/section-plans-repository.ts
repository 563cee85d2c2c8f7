import { MAX_SECTIONS } from '../../vocabulary/loop-vocabulary';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { RowNotFoundError, integer, systemClock, text, type Clock } from './row-values';

export type SectionStatus = 'pending' | 'in_progress' | 'done';

export interface SectionPlanRow {
  readonly projectId: string;
  readonly loopName: string;
  /** 0-based position in the plan. */
  readonly index: number;
  readonly title: string;
  readonly body: string;
  readonly status: SectionStatus;
  /** Coding passes spent on this section. */
  readonly attempts: number;
  readonly updatedAt: number;
}

export interface SectionDraft {
  readonly title: string;
  readonly body: string;
}

export interface SectionProgress {
  readonly total: number;
  readonly done: number;
}

export interface SectionPlansRepository {
  /** Replaces the loop's sections with `sections`, all pending (plan decomposition). */
  replaceAll(projectId: string, loopName: string, sections: readonly SectionDraft[]): SectionPlanRow[];
  list(projectId: string, loopName: string): SectionPlanRow[];
  get(projectId: string, loopName: string, index: number): SectionPlanRow | undefined;
  setStatus(projectId: string, loopName: string, index: number, status: SectionStatus): SectionPlanRow;
  /** Counts one more coding pass on the section and returns the new count. */
  incrementAttempts(projectId: string, loopName: string, index: number): number;
  /** Rewrites a section that is not done (plan amendment); a done section is immutable. */
  revise(projectId: string, loopName: string, index: number, draft: Partial<SectionDraft>): SectionPlanRow;
  /**
   * Replaces every section from `fromIndex` on with `sections` (plan_adjust).
   * Refuses to touch a done section or to exceed the 24-section cap.
   */
  replaceFrom(projectId: string, loopName: string, fromIndex: number, sections: readonly SectionDraft[]): SectionPlanRow[];
  progress(projectId: string, loopName: string): SectionProgress;
}

export class SectionPlanError extends Error {
  override readonly name = 'SectionPlanError';
}

function toSection(row: SqlRow): SectionPlanRow {
  return {
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    index: integer(row.idx),
    title: text(row.title),
    body: text(row.body),
    status: text(row.status) as SectionStatus,
    attempts: integer(row.attempts),
    updatedAt: integer(row.updated_at),
  };
}

const INSERT_SECTION = `INSERT INTO section_plans (project_id, loop_name, idx, title, body, status, attempts, updated_at)
  VALUES (?, ?, ?, ?, ?, 'pending', 0, ?)`;

export function createSectionPlansRepository(db: SqlExecutor, clock: Clock = systemClock): SectionPlansRepository {
  const list = (projectId: string, loopName: string): SectionPlanRow[] =>
    db.query('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? ORDER BY idx', [projectId, loopName]).map(toSection);

  const mustGet = (tx: SqlExecutor, projectId: string, loopName: string, index: number): SectionPlanRow => {
    const row = tx.get('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? AND idx = ?', [projectId, loopName, index]);
    if (!row) throw new RowNotFoundError(`Section ${index + 1} of loop "${loopName}"`);
    return toSection(row);
  };

  const checkCap = (count: number): void => {
    if (count > MAX_SECTIONS) {
      throw new SectionPlanError(`A plan may have at most ${MAX_SECTIONS} sections; this change would make ${count}.`);
    }
  };

  return {
    replaceAll: (projectId, loopName, sections) =>
      db.transaction((tx) => {
        checkCap(sections.length);
        tx.run('DELETE FROM section_plans WHERE project_id = ? AND loop_name = ?', [projectId, loopName]);
        const now = clock.now();
        sections.forEach((section, index) => tx.run(INSERT_SECTION, [projectId, loopName, index, section.title, section.body, now]));
        return tx
          .query('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? ORDER BY idx', [projectId, loopName])
          .map(toSection);
      }),

    list,

    get: (projectId, loopName, index) => {
      const row = db.get('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? AND idx = ?', [projectId, loopName, index]);
      return row ? toSection(row) : undefined;
    },

    setStatus: (projectId, loopName, index, status) =>
      db.transaction((tx) => {
        mustGet(tx, projectId, loopName, index);
        tx.run('UPDATE section_plans SET status = ?, updated_at = ? WHERE project_id = ? AND loop_name = ? AND idx = ?', [
          status,
          clock.now(),
          projectId,
          loopName,
          index,
        ]);
        return mustGet(tx, projectId, loopName, index);
      }),

    incrementAttempts: (projectId, loopName, index) =>
      db.transaction((tx) => {
        mustGet(tx, projectId, loopName, index);
        tx.run('UPDATE section_plans SET attempts = attempts + 1, updated_at = ? WHERE project_id = ? AND loop_name = ? AND idx = ?', [
          clock.now(),
          projectId,
          loopName,
          index,
        ]);
        return mustGet(tx, projectId, loopName, index).attempts;
      }),

    revise: (projectId, loopName, index, draft) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, loopName, index);
        if (current.status === 'done') {
          throw new SectionPlanError(`Section ${index + 1} ("${current.title}") is done; completed sections cannot be amended.`);
        }
        tx.run('UPDATE section_plans SET title = ?, body = ?, updated_at = ? WHERE project_id = ? AND loop_name = ? AND idx = ?', [
          draft.title ?? current.title,
          draft.body ?? current.body,
          clock.now(),
          projectId,
          loopName,
          index,
        ]);
        return mustGet(tx, projectId, loopName, index);
      }),

    replaceFrom: (projectId, loopName, fromIndex, sections) =>
      db.transaction((tx) => {
        const existing = tx
          .query('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? ORDER BY idx', [projectId, loopName])
          .map(toSection);
        const doneAfter = existing.find((section) => section.index >= fromIndex && section.status === 'done');
        if (doneAfter) {
          throw new SectionPlanError(`Section ${doneAfter.index + 1} ("${doneAfter.title}") is done; completed sections cannot be replaced.`);
        }
        const kept = existing.filter((section) => section.index < fromIndex).length;
        checkCap(kept + sections.length);
        tx.run('DELETE FROM section_plans WHERE project_id = ? AND loop_name = ? AND idx >= ?', [projectId, loopName, fromIndex]);
        const now = clock.now();
        sections.forEach((section, offset) =>
          tx.run(INSERT_SECTION, [projectId, loopName, kept + offset, section.title, section.body, now]),
        );
        return tx
          .query('SELECT * FROM section_plans WHERE project_id = ? AND loop_name = ? ORDER BY idx', [projectId, loopName])
          .map(toSection);
      }),

    progress: (projectId, loopName) => {
      const row = db.get<{ total: number; done: number | null }>(
        `SELECT count(*) AS total, sum(status = 'done') AS done FROM section_plans WHERE project_id = ? AND loop_name = ?`,
        [projectId, loopName],
      );
      return { total: integer(row?.total ?? 0), done: integer(row?.done ?? 0) };
    },
  };
}
