/**
 * Accepts of a loop's work (issue 29, `forge accept`, *Accept Loop*), append-only: who (the OS
 * user), when, how, into which branch or remote, and the commit that resulted.
 */
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, optionalText, systemClock, text, type Clock } from './row-values';

/** fast-forward · merge (a merge commit) · squash (one commit) · push (the branch pushed to a remote). */
export type LoopAcceptHow = 'fast-forward' | 'merge' | 'squash' | 'push';

export interface LoopAcceptRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly acceptedBy: string;
  readonly how: LoopAcceptHow;
  /** The base branch merged into (null for a push). */
  readonly intoBranch: string | null;
  /** The remote pushed to (null for a merge). */
  readonly remote: string | null;
  /** The base branch's new tip, or the pushed commit. */
  readonly commit: string | null;
  /** Epoch milliseconds. */
  readonly at: number;
}

export type NewLoopAccept = Omit<LoopAcceptRow, 'id' | 'projectId' | 'at'>;

export interface LoopAcceptsRepository {
  append(projectId: string, row: NewLoopAccept): LoopAcceptRow;
  /** Oldest first. */
  listByLoop(projectId: string, loopName: string): LoopAcceptRow[];
  /** When each loop of the project was last accepted (one query for the Loop Explorer). */
  lastAcceptedByLoop(projectId: string): { loopName: string; at: number }[];
}

function toRow(row: SqlRow): LoopAcceptRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    acceptedBy: text(row.accepted_by),
    how: text(row.how) as LoopAcceptHow,
    intoBranch: optionalText(row.into_branch),
    remote: optionalText(row.remote),
    commit: optionalText(row.commit_sha),
    at: integer(row.at),
  };
}

export function createLoopAcceptsRepository(db: SqlExecutor, clock: Clock = systemClock): LoopAcceptsRepository {
  return {
    append: (projectId, r) =>
      db.transaction((tx) => {
        const { lastInsertRowid } = tx.run(
          `INSERT INTO loop_accepts (project_id, loop_name, accepted_by, how, into_branch, remote, commit_sha, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [projectId, r.loopName, r.acceptedBy, r.how, r.intoBranch, r.remote, r.commit, clock.now()],
        );
        return toRow(tx.get(`SELECT * FROM loop_accepts WHERE id = ?`, [lastInsertRowid])!);
      }),
    listByLoop: (projectId, loopName) => db.query(`SELECT * FROM loop_accepts WHERE project_id = ? AND loop_name = ? ORDER BY id`, [projectId, loopName]).map(toRow),
    lastAcceptedByLoop: (projectId) =>
      db.query(`SELECT loop_name, MAX(at) AS at FROM loop_accepts WHERE project_id = ? GROUP BY loop_name`, [projectId]).map((r) => ({ loopName: text(r.loop_name), at: integer(r.at) })),
  };
}
