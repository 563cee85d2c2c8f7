/**
 * The shell-hang watchdog's interventions (issue 16), append-only: a builtin shell call of a
 * loop's agent that ran past `forge.watchdog.stallMs`, and what the watchdog did about it.
 */
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, optionalText, systemClock, text, type Clock } from './row-values';

/** killed: its processes were killed · dry-run: listed, nothing killed · unresolved: no process of the call was found. */
export type ShellInterventionAction = 'killed' | 'dry-run' | 'unresolved';

export interface InterventionProcess {
  pid: number;
  command: string;
}

export interface ShellInterventionRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly sessionId: string | null;
  readonly callId: string | null;
  readonly command: string;
  readonly mode: string;
  readonly action: ShellInterventionAction;
  readonly elapsedMs: number;
  readonly thresholdMs: number;
  readonly processes: InterventionProcess[];
  /** Epoch milliseconds. */
  readonly at: number;
}

export type NewShellIntervention = Omit<ShellInterventionRow, 'id' | 'projectId' | 'at'>;

export interface ShellInterventionsRepository {
  append(projectId: string, row: NewShellIntervention): ShellInterventionRow;
  /** Oldest first. */
  listByLoop(projectId: string, loopName: string): ShellInterventionRow[];
}

function parseProcesses(value: SqlRow[string] | undefined): InterventionProcess[] {
  try {
    const parsed = JSON.parse(text(value ?? "[]")) as unknown;
    return Array.isArray(parsed) ? (parsed as InterventionProcess[]) : [];
  } catch {
    return [];
  }
}

function toRow(row: SqlRow): ShellInterventionRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    sessionId: optionalText(row.session_id),
    callId: optionalText(row.call_id),
    command: text(row.command),
    mode: text(row.mode),
    action: text(row.action) as ShellInterventionAction,
    elapsedMs: integer(row.elapsed_ms),
    thresholdMs: integer(row.threshold_ms),
    processes: parseProcesses(row.processes),
    at: integer(row.at),
  };
}

export function createShellInterventionsRepository(db: SqlExecutor, clock: Clock = systemClock): ShellInterventionsRepository {
  return {
    append: (projectId, r) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO shell_interventions (project_id, loop_name, session_id, call_id, command, mode, action, elapsed_ms, threshold_ms, processes, at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [projectId, r.loopName, r.sessionId, r.callId, r.command, r.mode, r.action, r.elapsedMs, r.thresholdMs, JSON.stringify(r.processes), clock.now()],
        );
        return toRow(tx.get(`SELECT * FROM shell_interventions WHERE id = ?`, [lastInsertRowid])!);
      }),
    listByLoop: (projectId, loopName) =>
      db.query(`SELECT * FROM shell_interventions WHERE project_id = ? AND loop_name = ? ORDER BY id`, [projectId, loopName]).map(toRow),
  };
}
