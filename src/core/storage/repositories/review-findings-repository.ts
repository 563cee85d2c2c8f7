import { createHash } from 'node:crypto';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { RowNotFoundError, integer, optionalInteger, optionalText, systemClock, text, type Clock } from './row-values';

export type FindingSeverity = 'bug' | 'warning';
export type FindingStatus = 'open' | 'resolved' | 'dismissed';
/**
 * Who reported a finding: the auditor, a failed verification check, or the user reviewing the
 * loop's diff. A check's finding is resolved only by Forge, when that check passes; a user's only
 * by the user. No agent tool can resolve or delete either.
 */
export type FindingSource = 'auditor' | 'check' | 'user';

export interface ReviewFindingRow {
  readonly id: number;
  readonly projectId: string;
  readonly loopName: string;
  readonly file: string;
  readonly line: number;
  readonly severity: FindingSeverity;
  readonly description: string;
  readonly scenario: string | null;
  readonly status: FindingStatus;
  /** The section the finding belongs to; null for unsectioned plans, goals and final audits. */
  readonly sectionIndex: number | null;
  /** How many times the auditor has reported this finding (1 = first time). */
  readonly recurrenceCount: number;
  readonly fingerprint: string;
  readonly source: FindingSource;
  /** Last line of the range a user's finding covers (null: the one line). */
  readonly lineEnd: number | null;
  /** The coder's answer to a user's finding (review_reply): what it fixed or why not. */
  readonly reply: string | null;
  readonly repliedAt: number | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface NewFinding {
  readonly loopName: string;
  readonly file: string;
  readonly line: number;
  readonly severity: FindingSeverity;
  readonly description: string;
  readonly scenario?: string | null;
  readonly sectionIndex?: number | null;
  /** Identity across audits; defaults to findingFingerprint(file, description). */
  readonly fingerprint?: string;
  /** Default 'auditor'. */
  readonly source?: FindingSource;
  readonly lineEnd?: number | null;
}

export interface FindingFilter {
  readonly status?: FindingStatus | readonly FindingStatus[];
  readonly severity?: FindingSeverity;
  /** A section index, or null for findings without a section. Omit for all. */
  readonly sectionIndex?: number | null;
}

export interface FindingCounts {
  readonly bug: number;
  readonly warning: number;
}

export interface LoopFindingCounts extends FindingCounts {
  readonly loopName: string;
}

export interface ReviewFindingsRepository {
  /**
   * Records a finding. If the loop already has one with the same fingerprint
   * (open, resolved or dismissed), that row is reopened with the new details
   * and its recurrence count goes up; otherwise a new row is inserted.
   */
  record(projectId: string, finding: NewFinding): ReviewFindingRow;
  get(projectId: string, id: number): ReviewFindingRow | undefined;
  listByLoop(projectId: string, loopName: string, filter?: FindingFilter): ReviewFindingRow[];
  /** Open findings of a loop, bugs first, then by file and line. */
  listOpen(projectId: string, loopName: string, filter?: Omit<FindingFilter, 'status'>): ReviewFindingRow[];
  /** Findings on one file (for diagnostics), optionally of one loop. */
  listByFile(projectId: string, file: string, options?: { loopName?: string; status?: FindingStatus }): ReviewFindingRow[];
  /** Findings reported at least `minCount` times (default 3) that are still open. */
  listRecurring(projectId: string, loopName: string, minCount?: number): ReviewFindingRow[];
  setStatus(projectId: string, id: number, status: FindingStatus): ReviewFindingRow;
  /** Resolves the loop's open finding of a check (source 'check') with this fingerprint; whether there was one. */
  resolveCheckFinding(projectId: string, loopName: string, fingerprint: string): ReviewFindingRow | undefined;
  /** Stores the coder's answer to a finding; its status does not change. */
  setReply(projectId: string, id: number, reply: string): ReviewFindingRow;
  delete(projectId: string, id: number): boolean;
  countOpen(projectId: string, loopName: string, filter?: Pick<FindingFilter, 'sectionIndex'>): FindingCounts;
  /** Open bug/warning counts of every loop of the project that has any. */
  countOpenByLoop(projectId: string): LoopFindingCounts[];
}

/** Stable identity of a finding across audits: the file plus its description with whitespace and case folded. */
export function findingFingerprint(file: string, description: string): string {
  const normalised = `${file.trim()}\n${description.trim().toLowerCase().replace(/\s+/g, ' ')}`;
  return createHash('sha1').update(normalised).digest('hex').slice(0, 16);
}

function toFinding(row: SqlRow): ReviewFindingRow {
  return {
    id: integer(row.id),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    file: text(row.file),
    line: integer(row.line),
    severity: text(row.severity) as FindingSeverity,
    description: text(row.description),
    scenario: optionalText(row.scenario),
    status: text(row.status) as FindingStatus,
    sectionIndex: optionalInteger(row.section_index),
    recurrenceCount: integer(row.recurrence_count),
    fingerprint: text(row.fingerprint),
    source: (optionalText(row.source) ?? 'auditor') as FindingSource,
    lineEnd: optionalInteger(row.line_end),
    reply: optionalText(row.reply),
    repliedAt: optionalInteger(row.replied_at),
    createdAt: integer(row.created_at),
    updatedAt: integer(row.updated_at),
  };
}

/** SQL conditions and parameters for a filter (appended after `project_id = ? AND loop_name = ?`). */
function filterClause(filter: FindingFilter): { sql: string; params: (string | number | null)[] } {
  let sql = '';
  const params: (string | number | null)[] = [];
  if (filter.status !== undefined) {
    const statuses = typeof filter.status === 'string' ? [filter.status] : [...filter.status];
    sql += ` AND status IN (${statuses.map(() => '?').join(', ')})`;
    params.push(...statuses);
  }
  if (filter.severity !== undefined) {
    sql += ' AND severity = ?';
    params.push(filter.severity);
  }
  if (filter.sectionIndex !== undefined) {
    if (filter.sectionIndex === null) sql += ' AND section_index IS NULL';
    else {
      sql += ' AND section_index = ?';
      params.push(filter.sectionIndex);
    }
  }
  return { sql, params };
}

const ORDER = `ORDER BY CASE severity WHEN 'bug' THEN 0 ELSE 1 END, file, line, id`;

export function createReviewFindingsRepository(db: SqlExecutor, clock: Clock = systemClock): ReviewFindingsRepository {
  const get = (projectId: string, id: number): ReviewFindingRow | undefined => {
    const row = db.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, id]);
    return row ? toFinding(row) : undefined;
  };

  const listByLoop = (projectId: string, loopName: string, filter: FindingFilter = {}): ReviewFindingRow[] => {
    const { sql, params } = filterClause(filter);
    return db
      .query(`SELECT * FROM review_findings WHERE project_id = ? AND loop_name = ?${sql} ${ORDER}`, [projectId, loopName, ...params])
      .map(toFinding);
  };

  return {
    record: (projectId, finding) =>
      db.transaction((tx) => {
        const now = clock.now();
        const fingerprint = finding.fingerprint ?? findingFingerprint(finding.file, finding.description);
        // A user's finding is the user's: another report with its fingerprint never rewrites it.
        const existing = tx.get<{ id: number }>(
          `SELECT id FROM review_findings WHERE project_id = ? AND loop_name = ? AND fingerprint = ? AND (source <> 'user' OR ? = 'user') ORDER BY id LIMIT 1`,
          [projectId, finding.loopName, fingerprint, finding.source ?? 'auditor'],
        );
        if (existing) {
          tx.run(
            `UPDATE review_findings SET file = ?, line = ?, severity = ?, description = ?, scenario = ?, section_index = ?,
               status = 'open', recurrence_count = recurrence_count + 1, source = ?, updated_at = ?
             WHERE project_id = ? AND id = ?`,
            [
              finding.file,
              finding.line,
              finding.severity,
              finding.description,
              finding.scenario ?? null,
              finding.sectionIndex ?? null,
              finding.source ?? 'auditor',
              now,
              projectId,
              existing.id,
            ],
          );
          return toFinding(tx.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, existing.id])!);
        }
        const { lastInsertRowid } = tx.run(
          `INSERT INTO review_findings (project_id, loop_name, file, line, severity, description, scenario, status,
             section_index, recurrence_count, fingerprint, source, line_end, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, 1, ?, ?, ?, ?, ?)`,
          [
            projectId,
            finding.loopName,
            finding.file,
            finding.line,
            finding.severity,
            finding.description,
            finding.scenario ?? null,
            finding.sectionIndex ?? null,
            fingerprint,
            finding.source ?? 'auditor',
            finding.lineEnd ?? null,
            now,
            now,
          ],
        );
        return toFinding(tx.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, lastInsertRowid])!);
      }),

    get,
    listByLoop,
    listOpen: (projectId, loopName, filter = {}) => listByLoop(projectId, loopName, { ...filter, status: 'open' }),

    listByFile: (projectId, file, options = {}) => {
      let sql = 'SELECT * FROM review_findings WHERE project_id = ? AND file = ?';
      const params: string[] = [projectId, file];
      if (options.loopName !== undefined) {
        sql += ' AND loop_name = ?';
        params.push(options.loopName);
      }
      if (options.status !== undefined) {
        sql += ' AND status = ?';
        params.push(options.status);
      }
      return db.query(`${sql} ORDER BY line, id`, params).map(toFinding);
    },

    listRecurring: (projectId, loopName, minCount = 3) =>
      db
        .query(
          `SELECT * FROM review_findings WHERE project_id = ? AND loop_name = ? AND status = 'open' AND recurrence_count >= ? ${ORDER}`,
          [projectId, loopName, minCount],
        )
        .map(toFinding),

    setStatus: (projectId, id, status) =>
      db.transaction((tx) => {
        const changed = tx.run('UPDATE review_findings SET status = ?, updated_at = ? WHERE project_id = ? AND id = ?', [
          status,
          clock.now(),
          projectId,
          id,
        ]).changes;
        if (changed === 0) throw new RowNotFoundError(`Finding #${id}`);
        return toFinding(tx.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, id])!);
      }),

    resolveCheckFinding: (projectId, loopName, fingerprint) =>
      db.transaction((tx) => {
        const row = tx.get<{ id: number }>(
          `SELECT id FROM review_findings WHERE project_id = ? AND loop_name = ? AND fingerprint = ? AND source = 'check' AND status = 'open' ORDER BY id LIMIT 1`,
          [projectId, loopName, fingerprint],
        );
        if (!row) return undefined;
        tx.run(`UPDATE review_findings SET status = 'resolved', updated_at = ? WHERE project_id = ? AND id = ?`, [clock.now(), projectId, row.id]);
        return toFinding(tx.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, row.id])!);
      }),

    setReply: (projectId, id, reply) =>
      db.transaction((tx) => {
        const now = clock.now();
        const changed = tx.run('UPDATE review_findings SET reply = ?, replied_at = ?, updated_at = ? WHERE project_id = ? AND id = ?', [reply, now, now, projectId, id]).changes;
        if (changed === 0) throw new RowNotFoundError(`Finding #${id}`);
        return toFinding(tx.get('SELECT * FROM review_findings WHERE project_id = ? AND id = ?', [projectId, id])!);
      }),

    delete: (projectId, id) => db.run('DELETE FROM review_findings WHERE project_id = ? AND id = ?', [projectId, id]).changes > 0,

    countOpen: (projectId, loopName, filter = {}) => {
      const { sql, params } = filterClause({ sectionIndex: filter.sectionIndex, status: 'open' });
      const row = db.get<{ bug: number | null; warning: number | null }>(
        `SELECT sum(severity = 'bug') AS bug, sum(severity = 'warning') AS warning
         FROM review_findings WHERE project_id = ? AND loop_name = ?${sql}`,
        [projectId, loopName, ...params],
      );
      return { bug: integer(row?.bug ?? 0), warning: integer(row?.warning ?? 0) };
    },

    countOpenByLoop: (projectId) =>
      db
        .query<{ loop_name: string; bug: number; warning: number }>(
          `SELECT loop_name, sum(severity = 'bug') AS bug, sum(severity = 'warning') AS warning
           FROM review_findings WHERE project_id = ? AND status = 'open' GROUP BY loop_name ORDER BY loop_name`,
          [projectId],
        )
        .map((row) => ({ loopName: row.loop_name, bug: integer(row.bug), warning: integer(row.warning) })),
  };
}
