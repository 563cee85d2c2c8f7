import type { LoopKind, LoopStatus, Phase } from '../../vocabulary/loop-vocabulary';
import { uniqueLoopName } from '../../workspace/loop-name';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { RowNotFoundError, flag, integer, json, optionalInteger, optionalText, systemClock, text, type Clock } from './row-values';

/** Storage-level status: the runtime's statuses plus `starting` for a reserved loop before its first session. */
export type StoredLoopStatus = LoopStatus | 'starting';

export interface LoopRow {
  readonly projectId: string;
  readonly name: string;
  readonly status: StoredLoopStatus;
  readonly phase: Phase;
  readonly kind: LoopKind;
  readonly iteration: number;
  readonly maxIterations: number;
  readonly sectionIndex: number | null;
  readonly worktreeDir: string | null;
  readonly branch: string | null;
  readonly baseBranch: string | null;
  readonly baseCommit: string | null;
  readonly repoDir: string | null;
  readonly model: string | null;
  readonly auditorModel: string | null;
  readonly currentSessionId: string | null;
  readonly sandbox: boolean;
  readonly terminationReason: string | null;
  readonly errorCount: number;
  readonly consecutiveStalls: number;
  /** Which process supervises the loop; valid until leaseExpiresAt. */
  readonly supervisorId: string | null;
  readonly leaseExpiresAt: number | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly endedAt: number | null;
  /** Phase-specific fields the runtime keeps with the loop (JSON). */
  readonly state: Readonly<Record<string, unknown>>;
}

/** Fields a caller may set; everything but name and kind has a default. */
export type NewLoop = Pick<LoopRow, 'name' | 'kind'> &
  Partial<Omit<LoopRow, 'projectId' | 'name' | 'kind' | 'createdAt' | 'updatedAt'>>;
export type LoopPatch = Partial<Omit<LoopRow, 'projectId' | 'name' | 'createdAt' | 'updatedAt'>>;

export interface LoopLargeFields {
  readonly planText: string | null;
  readonly goalText: string | null;
  readonly lastAuditSummary: string | null;
  readonly lastCoderHandoff: string | null;
  readonly completionSummary: string | null;
}

export interface ListLoopsOptions {
  readonly status?: StoredLoopStatus | readonly StoredLoopStatus[];
  readonly limit?: number;
}

export interface LoopsRepository {
  /** Inserts a loop under exactly `loop.name`; throws LoopNameTakenError if the name exists in the project. */
  create(projectId: string, loop: NewLoop): LoopRow;
  /**
   * Reserves a unique loop name derived from `desiredName` (slug `[a-z0-9-]`,
   * ≤ 48 chars; `name`, `name-2`, … when taken) by inserting the loop row, in
   * one transaction. Two processes racing for one name get different names.
   */
  reserve(projectId: string, desiredName: string, loop: Omit<NewLoop, 'name'>): LoopRow;
  get(projectId: string, name: string): LoopRow | undefined;
  /** Running (and starting) loops first, then the most recently updated. */
  list(projectId: string, options?: ListLoopsOptions): LoopRow[];
  /** Applies `patch` and bumps updatedAt; throws RowNotFoundError if the loop does not exist. */
  update(projectId: string, name: string, patch: LoopPatch): LoopRow;
  /** Shallow-merges `patch` into the JSON state (a key set to undefined is removed). */
  mergeState(projectId: string, name: string, patch: Readonly<Record<string, unknown>>): LoopRow;
  /** Ends a loop: status, reason and endedAt, and drops its lease. */
  terminate(projectId: string, name: string, outcome: { status: Exclude<LoopStatus, 'running'>; terminationReason: string }): LoopRow;
  /** Deletes the loop and every row that belongs to it. */
  delete(projectId: string, name: string): boolean;
  getLargeFields(projectId: string, name: string): LoopLargeFields;
  setLargeFields(projectId: string, name: string, fields: Partial<LoopLargeFields>): LoopLargeFields;
  /**
   * Makes `supervisorId` the loop's supervisor until now + ttlMs if nobody
   * else holds an unexpired lease (renewing our own lease is allowed).
   */
  acquireLease(projectId: string, name: string, supervisorId: string, ttlMs: number): boolean;
  releaseLease(projectId: string, name: string, supervisorId: string): boolean;
  /** Running loops that no live supervisor holds (lease absent or expired). */
  listUnsupervised(projectId: string): LoopRow[];
}

export class LoopNameTakenError extends Error {
  override readonly name = 'LoopNameTakenError';
  constructor(readonly projectId: string, readonly loopName: string) {
    super(`A loop named "${loopName}" already exists in this project; choose another name or restart that loop.`);
  }
}

/** Tables whose rows belong to one loop (deleted with it). */
const LOOP_OWNED_TABLES = [
  'loop_large_fields',
  'review_findings',
  'section_plans',
  'loop_transitions',
  'plan_amendments',
  'loop_session_usage',
  'loop_handoffs',
  'loop_attempts',
  'check_runs',
] as const;

const LOOP_COLUMNS = [
  'status',
  'phase',
  'kind',
  'iteration',
  'max_iterations',
  'section_index',
  'worktree_dir',
  'branch',
  'base_branch',
  'base_commit',
  'repo_dir',
  'model',
  'auditor_model',
  'current_session_id',
  'sandbox',
  'termination_reason',
  'error_count',
  'consecutive_stalls',
  'supervisor_id',
  'lease_expires_at',
  'created_at',
  'updated_at',
  'ended_at',
  'state',
] as const;

const INSERT_LOOP = `INSERT INTO loops (project_id, name, ${LOOP_COLUMNS.join(', ')})
  VALUES (?, ?, ${LOOP_COLUMNS.map(() => '?').join(', ')})`;
const UPDATE_LOOP = `UPDATE loops SET ${LOOP_COLUMNS.map((c) => `${c} = ?`).join(', ')}
  WHERE project_id = ? AND name = ?`;

function toLoopRow(row: SqlRow): LoopRow {
  return {
    projectId: text(row.project_id),
    name: text(row.name),
    status: text(row.status) as StoredLoopStatus,
    phase: text(row.phase) as Phase,
    kind: text(row.kind) as LoopKind,
    iteration: integer(row.iteration),
    maxIterations: integer(row.max_iterations),
    sectionIndex: optionalInteger(row.section_index),
    worktreeDir: optionalText(row.worktree_dir),
    branch: optionalText(row.branch),
    baseBranch: optionalText(row.base_branch),
    baseCommit: optionalText(row.base_commit),
    repoDir: optionalText(row.repo_dir),
    model: optionalText(row.model),
    auditorModel: optionalText(row.auditor_model),
    currentSessionId: optionalText(row.current_session_id),
    sandbox: flag(row.sandbox),
    terminationReason: optionalText(row.termination_reason),
    errorCount: integer(row.error_count),
    consecutiveStalls: integer(row.consecutive_stalls),
    supervisorId: optionalText(row.supervisor_id),
    leaseExpiresAt: optionalInteger(row.lease_expires_at),
    createdAt: integer(row.created_at),
    updatedAt: integer(row.updated_at),
    endedAt: optionalInteger(row.ended_at),
    state: json<Record<string, unknown>>(row.state, {}),
  };
}

function loopValues(loop: Omit<LoopRow, 'projectId' | 'name'>) {
  return [
    loop.status,
    loop.phase,
    loop.kind,
    loop.iteration,
    loop.maxIterations,
    loop.sectionIndex,
    loop.worktreeDir,
    loop.branch,
    loop.baseBranch,
    loop.baseCommit,
    loop.repoDir,
    loop.model,
    loop.auditorModel,
    loop.currentSessionId,
    loop.sandbox,
    loop.terminationReason,
    loop.errorCount,
    loop.consecutiveStalls,
    loop.supervisorId,
    loop.leaseExpiresAt,
    loop.createdAt,
    loop.updatedAt,
    loop.endedAt,
    JSON.stringify(loop.state),
  ];
}

function toLargeFields(row: SqlRow | undefined): LoopLargeFields {
  return {
    planText: optionalText(row?.plan_text),
    goalText: optionalText(row?.goal_text),
    lastAuditSummary: optionalText(row?.last_audit_summary),
    lastCoderHandoff: optionalText(row?.last_coder_handoff),
    completionSummary: optionalText(row?.completion_summary),
  };
}

export function createLoopsRepository(db: SqlExecutor, clock: Clock = systemClock): LoopsRepository {
  const get = (projectId: string, name: string): LoopRow | undefined => {
    const row = db.get('SELECT * FROM loops WHERE project_id = ? AND name = ?', [projectId, name]);
    return row ? toLoopRow(row) : undefined;
  };

  const mustGet = (tx: SqlExecutor, projectId: string, name: string): LoopRow => {
    const row = tx.get('SELECT * FROM loops WHERE project_id = ? AND name = ?', [projectId, name]);
    if (!row) throw new RowNotFoundError(`Loop "${name}"`);
    return toLoopRow(row);
  };

  const insert = (tx: SqlExecutor, projectId: string, loop: NewLoop): LoopRow => {
    const now = clock.now();
    const row: LoopRow = {
      projectId,
      name: loop.name,
      status: loop.status ?? 'starting',
      phase: loop.phase ?? 'coding',
      kind: loop.kind,
      iteration: loop.iteration ?? 0,
      maxIterations: loop.maxIterations ?? 15,
      sectionIndex: loop.sectionIndex ?? null,
      worktreeDir: loop.worktreeDir ?? null,
      branch: loop.branch ?? null,
      baseBranch: loop.baseBranch ?? null,
      baseCommit: loop.baseCommit ?? null,
      repoDir: loop.repoDir ?? null,
      model: loop.model ?? null,
      auditorModel: loop.auditorModel ?? null,
      currentSessionId: loop.currentSessionId ?? null,
      sandbox: loop.sandbox ?? false,
      terminationReason: loop.terminationReason ?? null,
      errorCount: loop.errorCount ?? 0,
      consecutiveStalls: loop.consecutiveStalls ?? 0,
      supervisorId: loop.supervisorId ?? null,
      leaseExpiresAt: loop.leaseExpiresAt ?? null,
      createdAt: now,
      updatedAt: now,
      endedAt: loop.endedAt ?? null,
      state: loop.state ?? {},
    };
    if (tx.get('SELECT 1 AS taken FROM loops WHERE project_id = ? AND name = ?', [projectId, loop.name])) {
      throw new LoopNameTakenError(projectId, loop.name);
    }
    tx.run(INSERT_LOOP, [projectId, loop.name, ...loopValues(row)]);
    return row;
  };

  const write = (tx: SqlExecutor, row: LoopRow): LoopRow => {
    tx.run(UPDATE_LOOP, [...loopValues(row), row.projectId, row.name]);
    return row;
  };

  return {
    create: (projectId, loop) => db.transaction((tx) => insert(tx, projectId, loop)),

    reserve: (projectId, desiredName, loop) =>
      db.transaction((tx) => {
        // Probe candidates one by one (indexed lookups) instead of loading every name.
        const taken: string[] = [];
        for (;;) {
          const candidate = uniqueLoopName(desiredName, taken);
          if (!tx.get('SELECT 1 AS taken FROM loops WHERE project_id = ? AND name = ?', [projectId, candidate])) {
            return insert(tx, projectId, { ...loop, name: candidate });
          }
          taken.push(candidate);
        }
      }),

    get,

    list: (projectId, options = {}) => {
      const statuses = options.status === undefined ? [] : typeof options.status === 'string' ? [options.status] : [...options.status];
      const where = statuses.length > 0 ? ` AND status IN (${statuses.map(() => '?').join(', ')})` : '';
      const limit = options.limit === undefined ? -1 : Math.max(0, Math.floor(options.limit));
      return db
        .query(
          `SELECT * FROM loops WHERE project_id = ?${where}
           ORDER BY CASE WHEN status IN ('running', 'starting') THEN 0 ELSE 1 END, updated_at DESC, name LIMIT ?`,
          [projectId, ...statuses, limit],
        )
        .map(toLoopRow);
    },

    update: (projectId, name, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, name);
        const next: LoopRow = { ...current, ...stripUndefined(patch), projectId, name, updatedAt: clock.now() };
        return write(tx, next);
      }),

    mergeState: (projectId, name, patch) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, name);
        const state: Record<string, unknown> = { ...current.state };
        for (const [key, value] of Object.entries(patch)) {
          if (value === undefined) delete state[key];
          else state[key] = value;
        }
        return write(tx, { ...current, state, updatedAt: clock.now() });
      }),

    terminate: (projectId, name, outcome) =>
      db.transaction((tx) => {
        const current = mustGet(tx, projectId, name);
        const now = clock.now();
        return write(tx, {
          ...current,
          status: outcome.status,
          terminationReason: outcome.terminationReason,
          endedAt: now,
          updatedAt: now,
          supervisorId: null,
          leaseExpiresAt: null,
        });
      }),

    delete: (projectId, name) =>
      db.transaction((tx) => {
        for (const table of LOOP_OWNED_TABLES) {
          tx.run(`DELETE FROM ${table} WHERE project_id = ? AND loop_name = ?`, [projectId, name]);
        }
        return tx.run('DELETE FROM loops WHERE project_id = ? AND name = ?', [projectId, name]).changes > 0;
      }),

    getLargeFields: (projectId, name) =>
      toLargeFields(db.get('SELECT * FROM loop_large_fields WHERE project_id = ? AND loop_name = ?', [projectId, name])),

    setLargeFields: (projectId, name, fields) =>
      db.transaction((tx) => {
        mustGet(tx, projectId, name);
        const current = toLargeFields(
          tx.get('SELECT * FROM loop_large_fields WHERE project_id = ? AND loop_name = ?', [projectId, name]),
        );
        const next: LoopLargeFields = { ...current, ...stripUndefined(fields) };
        tx.run(
          `INSERT INTO loop_large_fields
             (project_id, loop_name, plan_text, goal_text, last_audit_summary, last_coder_handoff, completion_summary, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (project_id, loop_name) DO UPDATE SET
             plan_text = excluded.plan_text, goal_text = excluded.goal_text,
             last_audit_summary = excluded.last_audit_summary, last_coder_handoff = excluded.last_coder_handoff,
             completion_summary = excluded.completion_summary, updated_at = excluded.updated_at`,
          [
            projectId,
            name,
            next.planText,
            next.goalText,
            next.lastAuditSummary,
            next.lastCoderHandoff,
            next.completionSummary,
            clock.now(),
          ],
        );
        return next;
      }),

    acquireLease: (projectId, name, supervisorId, ttlMs) => {
      const now = clock.now();
      return (
        db.run(
          `UPDATE loops SET supervisor_id = ?, lease_expires_at = ?
           WHERE project_id = ? AND name = ?
             AND (supervisor_id IS NULL OR supervisor_id = ? OR lease_expires_at IS NULL OR lease_expires_at <= ?)`,
          [supervisorId, now + ttlMs, projectId, name, supervisorId, now],
        ).changes > 0
      );
    },

    releaseLease: (projectId, name, supervisorId) =>
      db.run(
        `UPDATE loops SET supervisor_id = NULL, lease_expires_at = NULL
         WHERE project_id = ? AND name = ? AND supervisor_id = ?`,
        [projectId, name, supervisorId],
      ).changes > 0,

    listUnsupervised: (projectId) =>
      db
        .query(
          `SELECT * FROM loops WHERE project_id = ? AND status = 'running'
             AND (supervisor_id IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?)
           ORDER BY updated_at DESC, name`,
          [projectId, clock.now()],
        )
        .map(toLoopRow),
  };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
