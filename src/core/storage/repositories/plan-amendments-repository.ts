import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, json, optionalInteger, systemClock, text, type Clock } from './row-values';

/** One mid-loop plan amendment (append-only audit trail). */
export interface PlanAmendmentRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  /** The section being audited when the amendment was made. */
  readonly sectionIndex: number | null;
  readonly before: unknown;
  readonly after: unknown;
  readonly rationale: string;
  readonly at: number;
}

export interface NewPlanAmendment {
  readonly loopName: string;
  readonly sectionIndex: number | null;
  readonly before: unknown;
  readonly after: unknown;
  readonly rationale: string;
}

export interface PlanAmendmentsRepository {
  append(projectId: string, amendment: NewPlanAmendment): PlanAmendmentRow;
  listByLoop(projectId: string, loopName: string): PlanAmendmentRow[];
}

function toAmendment(row: SqlRow): PlanAmendmentRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    sectionIndex: optionalInteger(row.section_index),
    before: json<unknown>(row.before_json, null),
    after: json<unknown>(row.after_json, null),
    rationale: text(row.rationale),
    at: integer(row.at),
  };
}

export function createPlanAmendmentsRepository(db: SqlExecutor, clock: Clock = systemClock): PlanAmendmentsRepository {
  return {
    append: (projectId, amendment) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO plan_amendments (project_id, loop_name, section_index, before_json, after_json, rationale, at)
           VALUES (?, ?, ?, ?, ?, ?, ?)`,
          [
            projectId,
            amendment.loopName,
            amendment.sectionIndex,
            JSON.stringify(amendment.before ?? null),
            JSON.stringify(amendment.after ?? null),
            amendment.rationale,
            clock.now(),
          ],
        );
        return toAmendment(tx.get('SELECT * FROM plan_amendments WHERE project_id = ? AND id = ?', [projectId, lastInsertRowid])!);
      }),

    listByLoop: (projectId, loopName) =>
      db.query('SELECT * FROM plan_amendments WHERE project_id = ? AND loop_name = ? ORDER BY id', [projectId, loopName]).map(toAmendment),
  };
}
