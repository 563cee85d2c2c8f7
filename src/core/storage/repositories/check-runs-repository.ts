/**
 * The check log (issue 13): every run of every verification check of a loop, append-only.
 */
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, optionalInteger, optionalText, systemClock, text, type Clock } from './row-values';

/** Which gate ran the check: a section's checkpoint, or the loop's completion. */
export type CheckGate = 'section' | 'final';

export interface CheckRunRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly iteration: number;
  /** The section whose checkpoint ran it (gate 'section'); the loop's section at the final gate, or null. */
  readonly sectionIndex: number | null;
  readonly gate: CheckGate;
  readonly checkId: string;
  readonly label: string;
  readonly kind: string;
  /** The command of a command check; null for file assertions. */
  readonly command: string | null;
  /** passed | failed | timed-out | not-started | refused | cancelled */
  readonly status: string;
  readonly message: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly durationMs: number;
  /** The last bytes of the output (bounded by the runner). */
  readonly outputTail: string;
  readonly outputBytes: number;
  /** Epoch milliseconds. */
  readonly startedAt: number;
}

export type NewCheckRun = Omit<CheckRunRow, 'id' | 'projectId'>;

export interface CheckRunsRepository {
  append(projectId: string, run: NewCheckRun): CheckRunRow;
  /** Oldest first. */
  listByLoop(projectId: string, loopName: string, options?: { afterId?: number; limit?: number }): CheckRunRow[];
  /** The latest run of each check of the loop, in the order the checks first ran. */
  latestByCheck(projectId: string, loopName: string): CheckRunRow[];
}

function toCheckRun(row: SqlRow): CheckRunRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    iteration: integer(row.iteration),
    sectionIndex: optionalInteger(row.section_index),
    gate: text(row.gate) as CheckGate,
    checkId: text(row.check_id),
    label: text(row.label),
    kind: text(row.kind),
    command: optionalText(row.command),
    status: text(row.status),
    message: text(row.message),
    exitCode: optionalInteger(row.exit_code),
    signal: optionalText(row.signal),
    durationMs: integer(row.duration_ms),
    outputTail: text(row.output_tail),
    outputBytes: integer(row.output_bytes),
    startedAt: integer(row.started_at),
  };
}

export function createCheckRunsRepository(db: SqlExecutor, clock: Clock = systemClock): CheckRunsRepository {
  void clock;
  return {
    append: (projectId, run) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO check_runs (project_id, loop_name, iteration, section_index, gate, check_id, label, kind, command, status, message,
             exit_code, signal, duration_ms, output_tail, output_bytes, started_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            projectId,
            run.loopName,
            run.iteration,
            run.sectionIndex,
            run.gate,
            run.checkId,
            run.label,
            run.kind,
            run.command,
            run.status,
            run.message,
            run.exitCode,
            run.signal,
            run.durationMs,
            run.outputTail,
            run.outputBytes,
            run.startedAt,
          ],
        );
        return toCheckRun(tx.get('SELECT * FROM check_runs WHERE project_id = ? AND id = ?', [projectId, lastInsertRowid])!);
      }),

    listByLoop: (projectId, loopName, options = {}) =>
      db
        .query('SELECT * FROM check_runs WHERE project_id = ? AND loop_name = ? AND id > ? ORDER BY id LIMIT ?', [
          projectId,
          loopName,
          options.afterId ?? 0,
          options.limit ?? -1,
        ])
        .map(toCheckRun),

    latestByCheck: (projectId, loopName) =>
      db
        .query(
          `SELECT * FROM check_runs WHERE id IN (
             SELECT max(id) FROM check_runs WHERE project_id = ? AND loop_name = ? GROUP BY check_id
           ) ORDER BY (SELECT min(id) FROM check_runs c WHERE c.project_id = check_runs.project_id AND c.loop_name = check_runs.loop_name AND c.check_id = check_runs.check_id)`,
          [projectId, loopName],
        )
        .map(toCheckRun),
  };
}
