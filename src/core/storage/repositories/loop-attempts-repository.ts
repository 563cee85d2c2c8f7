import type { SqlExecutor, SqlRow } from '../sql-executor';
import { RowNotFoundError, integer, optionalInteger, optionalText, systemClock, text, type Clock } from './row-values';

export type AttemptKind = 'coding' | 'audit' | 'final_audit' | 'post_action';
export type AttemptOutcome = 'running' | 'succeeded' | 'failed' | 'abandoned';

/** One try at a phase (durable history of retries, e.g. audits that failed on model errors). */
export interface LoopAttemptRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly kind: AttemptKind;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  /** 1 for the first try of this kind at this iteration and section, 2 for the first retry, … */
  readonly attempt: number;
  readonly sessionId: string | null;
  readonly model: string | null;
  /** The model variant its prompts carried (null: the model's default). */
  readonly variant: string | null;
  readonly outcome: AttemptOutcome;
  readonly error: string | null;
  readonly startedAt: number;
  readonly endedAt: number | null;
}

export interface NewLoopAttempt {
  readonly loopName: string;
  readonly kind: AttemptKind;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  readonly sessionId?: string | null;
  readonly model?: string | null;
  readonly variant?: string | null;
}

export interface LoopAttemptsRepository {
  /** Records the start of an attempt, numbering it after earlier ones at the same iteration and section. */
  start(projectId: string, attempt: NewLoopAttempt): LoopAttemptRow;
  finish(projectId: string, id: number, result: { outcome: Exclude<AttemptOutcome, 'running'>; error?: string | null }): LoopAttemptRow;
  listByLoop(projectId: string, loopName: string): LoopAttemptRow[];
  /** Failed attempts of `kind` (optionally at one iteration): the retry budget check. */
  countFailures(projectId: string, loopName: string, kind: AttemptKind, iteration?: number): number;
  /** Marks attempts still `running` as abandoned (a process died mid-attempt). Returns how many. */
  abandonRunning(projectId: string, loopName: string): number;
}

function toAttempt(row: SqlRow): LoopAttemptRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    kind: text(row.kind) as AttemptKind,
    iteration: integer(row.iteration),
    sectionIndex: optionalInteger(row.section_index),
    attempt: integer(row.attempt),
    sessionId: optionalText(row.session_id),
    model: optionalText(row.model),
    variant: optionalText(row.variant),
    outcome: text(row.outcome) as AttemptOutcome,
    error: optionalText(row.error),
    startedAt: integer(row.started_at),
    endedAt: optionalInteger(row.ended_at),
  };
}

export function createLoopAttemptsRepository(db: SqlExecutor, clock: Clock = systemClock): LoopAttemptsRepository {
  const mustGet = (tx: SqlExecutor, projectId: string, id: number): LoopAttemptRow => {
    const row = tx.get('SELECT * FROM loop_attempts WHERE project_id = ? AND id = ?', [projectId, id]);
    if (!row) throw new RowNotFoundError(`Attempt #${id}`);
    return toAttempt(row);
  };

  return {
    start: (projectId, attempt) =>
      db.transaction((tx) => {
        const previous = tx.get<{ n: number }>(
          `SELECT count(*) AS n FROM loop_attempts WHERE project_id = ? AND loop_name = ? AND kind = ? AND iteration = ?
             AND section_index IS ?`,
          [projectId, attempt.loopName, attempt.kind, attempt.iteration, attempt.sectionIndex],
        );
        const { lastInsertRowid } = tx.run(
          `INSERT INTO loop_attempts (project_id, loop_name, kind, iteration, section_index, attempt, session_id, model, variant, outcome, started_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)`,
          [
            projectId,
            attempt.loopName,
            attempt.kind,
            attempt.iteration,
            attempt.sectionIndex,
            integer(previous?.n ?? 0) + 1,
            attempt.sessionId ?? null,
            attempt.model ?? null,
            attempt.variant ?? null,
            clock.now(),
          ],
        );
        return mustGet(tx, projectId, lastInsertRowid);
      }),

    finish: (projectId, id, result) =>
      db.transaction((tx) => {
        mustGet(tx, projectId, id);
        tx.run('UPDATE loop_attempts SET outcome = ?, error = ?, ended_at = ? WHERE project_id = ? AND id = ?', [
          result.outcome,
          result.error ?? null,
          clock.now(),
          projectId,
          id,
        ]);
        return mustGet(tx, projectId, id);
      }),

    listByLoop: (projectId, loopName) =>
      db.query('SELECT * FROM loop_attempts WHERE project_id = ? AND loop_name = ? ORDER BY id', [projectId, loopName]).map(toAttempt),

    countFailures: (projectId, loopName, kind, iteration) => {
      const row =
        iteration === undefined
          ? db.get<{ n: number }>(
              `SELECT count(*) AS n FROM loop_attempts WHERE project_id = ? AND loop_name = ? AND kind = ? AND outcome = 'failed'`,
              [projectId, loopName, kind],
            )
          : db.get<{ n: number }>(
              `SELECT count(*) AS n FROM loop_attempts
               WHERE project_id = ? AND loop_name = ? AND kind = ? AND iteration = ? AND outcome = 'failed'`,
              [projectId, loopName, kind, iteration],
            );
      return integer(row?.n ?? 0);
    },

    abandonRunning: (projectId, loopName) =>
      db.run(
        `UPDATE loop_attempts SET outcome = 'abandoned', ended_at = ? WHERE project_id = ? AND loop_name = ? AND outcome = 'running'`,
        [clock.now(), projectId, loopName],
      ).changes,
  };
}
