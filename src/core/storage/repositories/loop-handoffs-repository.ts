import type { Role } from '../../vocabulary/loop-vocabulary';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, json, optionalInteger, systemClock, text, type Clock } from './row-values';

/** One `loop_handoff` call by an agent (append-only). */
export interface LoopHandoffRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly role: Role;
  readonly sessionId: string;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  /** The validated tool arguments, as the agent sent them. */
  readonly payload: unknown;
  readonly at: number;
}

export type NewLoopHandoff = Omit<LoopHandoffRow, 'id' | 'projectId' | 'at'>;

export interface LoopHandoffsRepository {
  append(projectId: string, handoff: NewLoopHandoff): LoopHandoffRow;
  /** Oldest first, optionally only one role's. */
  listByLoop(projectId: string, loopName: string, role?: Role): LoopHandoffRow[];
  latest(projectId: string, loopName: string, role: Role): LoopHandoffRow | undefined;
  /** The handoff a given session made, if any (the runtime's "did it hand off?" check). */
  forSession(projectId: string, loopName: string, sessionId: string): LoopHandoffRow | undefined;
}

function toHandoff(row: SqlRow): LoopHandoffRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    role: text(row.role) as Role,
    sessionId: text(row.session_id),
    iteration: integer(row.iteration),
    sectionIndex: optionalInteger(row.section_index),
    payload: json<unknown>(row.payload, null),
    at: integer(row.at),
  };
}

export function createLoopHandoffsRepository(db: SqlExecutor, clock: Clock = systemClock): LoopHandoffsRepository {
  return {
    append: (projectId, handoff) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO loop_handoffs (project_id, loop_name, role, session_id, iteration, section_index, payload, at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            projectId,
            handoff.loopName,
            handoff.role,
            handoff.sessionId,
            handoff.iteration,
            handoff.sectionIndex,
            JSON.stringify(handoff.payload ?? null),
            clock.now(),
          ],
        );
        return toHandoff(tx.get('SELECT * FROM loop_handoffs WHERE project_id = ? AND id = ?', [projectId, lastInsertRowid])!);
      }),

    listByLoop: (projectId, loopName, role) =>
      (role === undefined
        ? db.query('SELECT * FROM loop_handoffs WHERE project_id = ? AND loop_name = ? ORDER BY id', [projectId, loopName])
        : db.query('SELECT * FROM loop_handoffs WHERE project_id = ? AND loop_name = ? AND role = ? ORDER BY id', [projectId, loopName, role])
      ).map(toHandoff),

    latest: (projectId, loopName, role) => {
      const row = db.get('SELECT * FROM loop_handoffs WHERE project_id = ? AND loop_name = ? AND role = ? ORDER BY id DESC LIMIT 1', [
        projectId,
        loopName,
        role,
      ]);
      return row ? toHandoff(row) : undefined;
    },

    forSession: (projectId, loopName, sessionId) => {
      const row = db.get('SELECT * FROM loop_handoffs WHERE project_id = ? AND loop_name = ? AND session_id = ? ORDER BY id DESC LIMIT 1', [
        projectId,
        loopName,
        sessionId,
      ]);
      return row ? toHandoff(row) : undefined;
    },
  };
}
