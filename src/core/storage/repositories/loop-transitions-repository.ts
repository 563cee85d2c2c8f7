import type { Phase } from '../../vocabulary/loop-vocabulary';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, optionalInteger, optionalText, systemClock, text, type Clock } from './row-values';

/** One persisted phase change (append-only). */
export interface LoopTransitionRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly event: string;
  readonly fromPhase: Phase | null;
  readonly toPhase: Phase | null;
  readonly iteration: number;
  readonly sectionIndex: number | null;
  /** Terminal status when the transition ended the loop. */
  readonly status: string | null;
  readonly reason: string | null;
  readonly at: number;
}

export type NewLoopTransition = Omit<LoopTransitionRow, 'id' | 'projectId' | 'at' | 'status' | 'reason' | 'sectionIndex'> & {
  readonly sectionIndex?: number | null;
  readonly status?: string | null;
  readonly reason?: string | null;
  /** Defaults to the repository clock. */
  readonly at?: number;
};

export interface TransitionEdgeCount {
  readonly fromPhase: Phase | null;
  readonly toPhase: Phase | null;
  readonly count: number;
}

export interface LoopTransitionsRepository {
  append(projectId: string, transition: NewLoopTransition): LoopTransitionRow;
  /** Oldest first; `afterId` pages forward (for live dashboards). */
  listByLoop(projectId: string, loopName: string, options?: { afterId?: number; limit?: number }): LoopTransitionRow[];
  last(projectId: string, loopName: string): LoopTransitionRow | undefined;
  /** How often each phase edge was taken (the dashboard's state-machine diagram). */
  countsByEdge(projectId: string, loopName: string): TransitionEdgeCount[];
}

function toTransition(row: SqlRow): LoopTransitionRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    event: text(row.event),
    fromPhase: optionalText(row.from_phase) as Phase | null,
    toPhase: optionalText(row.to_phase) as Phase | null,
    iteration: integer(row.iteration),
    sectionIndex: optionalInteger(row.section_index),
    status: optionalText(row.status),
    reason: optionalText(row.reason),
    at: integer(row.at),
  };
}

export function createLoopTransitionsRepository(db: SqlExecutor, clock: Clock = systemClock): LoopTransitionsRepository {
  return {
    append: (projectId, transition) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO loop_transitions (project_id, loop_name, event, from_phase, to_phase, iteration, section_index, status, reason, at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            projectId,
            transition.loopName,
            transition.event,
            transition.fromPhase,
            transition.toPhase,
            transition.iteration,
            transition.sectionIndex ?? null,
            transition.status ?? null,
            transition.reason ?? null,
            transition.at ?? clock.now(),
          ],
        );
        return toTransition(tx.get('SELECT * FROM loop_transitions WHERE project_id = ? AND id = ?', [projectId, lastInsertRowid])!);
      }),

    listByLoop: (projectId, loopName, options = {}) =>
      db
        .query('SELECT * FROM loop_transitions WHERE project_id = ? AND loop_name = ? AND id > ? ORDER BY id LIMIT ?', [
          projectId,
          loopName,
          options.afterId ?? 0,
          options.limit ?? -1,
        ])
        .map(toTransition),

    last: (projectId, loopName) => {
      const row = db.get('SELECT * FROM loop_transitions WHERE project_id = ? AND loop_name = ? ORDER BY id DESC LIMIT 1', [
        projectId,
        loopName,
      ]);
      return row ? toTransition(row) : undefined;
    },

    countsByEdge: (projectId, loopName) =>
      db
        .query<{ from_phase: string | null; to_phase: string | null; count: number }>(
          `SELECT from_phase, to_phase, count(*) AS count FROM loop_transitions
           WHERE project_id = ? AND loop_name = ? GROUP BY from_phase, to_phase ORDER BY count DESC, from_phase, to_phase`,
          [projectId, loopName],
        )
        .map((row) => ({ fromPhase: row.from_phase as Phase | null, toPhase: row.to_phase as Phase | null, count: integer(row.count) })),
  };
}
