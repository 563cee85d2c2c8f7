import type { Role } from '../../vocabulary/loop-vocabulary';
import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, systemClock, text, type Clock } from './row-values';

export interface UsageTotals {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly reasoningTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
  readonly cost: number;
  readonly messages: number;
}

/** Usage of one session with one model, within one loop. */
export interface LoopSessionUsageRow extends UsageTotals {
  readonly projectId: string;
  readonly loopName: string;
  readonly sessionId: string;
  readonly role: Role;
  readonly model: string;
  readonly updatedAt: number;
}

export interface SessionUsageKey {
  readonly loopName: string;
  readonly sessionId: string;
  readonly role: Role;
  readonly model: string;
}

export interface LoopUsageSummary extends UsageTotals {
  readonly sessions: number;
}

export interface LoopSessionUsageRepository {
  /** Sets the totals of (loop, session, model) to `usage` (cumulative figures from the session). */
  record(projectId: string, key: SessionUsageKey, usage: Partial<UsageTotals>): LoopSessionUsageRow;
  /** Adds `delta` to the totals of (loop, session, model). */
  add(projectId: string, key: SessionUsageKey, delta: Partial<UsageTotals>): LoopSessionUsageRow;
  listByLoop(projectId: string, loopName: string): LoopSessionUsageRow[];
  totalsForLoop(projectId: string, loopName: string): LoopUsageSummary;
  totalsByModel(projectId: string, loopName: string): (UsageTotals & { readonly model: string })[];
  totalsByRole(projectId: string, loopName: string): (UsageTotals & { readonly role: Role })[];
  /** One summary per loop of the project (the loop explorer). */
  totalsByLoop(projectId: string): (LoopUsageSummary & { readonly loopName: string })[];
}

const ZERO: UsageTotals = {
  inputTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cost: 0,
  messages: 0,
};

function totalsOf(row: SqlRow | undefined): UsageTotals {
  return {
    inputTokens: integer(row?.input_tokens ?? 0),
    outputTokens: integer(row?.output_tokens ?? 0),
    reasoningTokens: integer(row?.reasoning_tokens ?? 0),
    cacheReadTokens: integer(row?.cache_read_tokens ?? 0),
    cacheWriteTokens: integer(row?.cache_write_tokens ?? 0),
    cost: Number(row?.cost ?? 0),
    messages: integer(row?.messages ?? 0),
  };
}

function toUsage(row: SqlRow): LoopSessionUsageRow {
  return {
    ...totalsOf(row),
    projectId: text(row.project_id),
    loopName: text(row.loop_name),
    sessionId: text(row.session_id),
    role: text(row.role) as Role,
    model: text(row.model),
    updatedAt: integer(row.updated_at),
  };
}

const SUMS = `coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens,
  coalesce(sum(reasoning_tokens), 0) AS reasoning_tokens, coalesce(sum(cache_read_tokens), 0) AS cache_read_tokens,
  coalesce(sum(cache_write_tokens), 0) AS cache_write_tokens, coalesce(sum(cost), 0) AS cost,
  coalesce(sum(messages), 0) AS messages`;

const UPSERT = `INSERT INTO loop_session_usage (project_id, loop_name, session_id, role, model, input_tokens, output_tokens,
    reasoning_tokens, cache_read_tokens, cache_write_tokens, cost, messages, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (project_id, loop_name, session_id, model) DO UPDATE SET
    role = excluded.role, input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
    reasoning_tokens = excluded.reasoning_tokens, cache_read_tokens = excluded.cache_read_tokens,
    cache_write_tokens = excluded.cache_write_tokens, cost = excluded.cost, messages = excluded.messages,
    updated_at = excluded.updated_at`;

export function createLoopSessionUsageRepository(db: SqlExecutor, clock: Clock = systemClock): LoopSessionUsageRepository {
  const select = (tx: SqlExecutor, projectId: string, key: SessionUsageKey): SqlRow | undefined =>
    tx.get('SELECT * FROM loop_session_usage WHERE project_id = ? AND loop_name = ? AND session_id = ? AND model = ?', [
      projectId,
      key.loopName,
      key.sessionId,
      key.model,
    ]);

  const write = (projectId: string, key: SessionUsageKey, combine: (current: UsageTotals) => UsageTotals): LoopSessionUsageRow =>
    db.transaction((tx) => {
      const current = select(tx, projectId, key);
      const next = combine(current ? totalsOf(current) : ZERO);
      tx.run(UPSERT, [
        projectId,
        key.loopName,
        key.sessionId,
        key.role,
        key.model,
        next.inputTokens,
        next.outputTokens,
        next.reasoningTokens,
        next.cacheReadTokens,
        next.cacheWriteTokens,
        next.cost,
        next.messages,
        clock.now(),
      ]);
      return toUsage(select(tx, projectId, key)!);
    });

  return {
    record: (projectId, key, usage) => write(projectId, key, () => ({ ...ZERO, ...usage })),

    add: (projectId, key, delta) =>
      write(projectId, key, (current) => ({
        inputTokens: current.inputTokens + (delta.inputTokens ?? 0),
        outputTokens: current.outputTokens + (delta.outputTokens ?? 0),
        reasoningTokens: current.reasoningTokens + (delta.reasoningTokens ?? 0),
        cacheReadTokens: current.cacheReadTokens + (delta.cacheReadTokens ?? 0),
        cacheWriteTokens: current.cacheWriteTokens + (delta.cacheWriteTokens ?? 0),
        cost: current.cost + (delta.cost ?? 0),
        messages: current.messages + (delta.messages ?? 0),
      })),

    listByLoop: (projectId, loopName) =>
      db
        .query('SELECT * FROM loop_session_usage WHERE project_id = ? AND loop_name = ? ORDER BY updated_at, session_id, model', [
          projectId,
          loopName,
        ])
        .map(toUsage),

    totalsForLoop: (projectId, loopName) => {
      const row = db.get(
        `SELECT ${SUMS}, count(DISTINCT session_id) AS sessions FROM loop_session_usage WHERE project_id = ? AND loop_name = ?`,
        [projectId, loopName],
      );
      return { ...totalsOf(row), sessions: integer(row?.sessions ?? 0) };
    },

    totalsByModel: (projectId, loopName) =>
      db
        .query(`SELECT model, ${SUMS} FROM loop_session_usage WHERE project_id = ? AND loop_name = ? GROUP BY model ORDER BY model`, [
          projectId,
          loopName,
        ])
        .map((row) => ({ ...totalsOf(row), model: text(row.model) })),

    totalsByRole: (projectId, loopName) =>
      db
        .query(`SELECT role, ${SUMS} FROM loop_session_usage WHERE project_id = ? AND loop_name = ? GROUP BY role ORDER BY role`, [
          projectId,
          loopName,
        ])
        .map((row) => ({ ...totalsOf(row), role: text(row.role) as Role })),

    totalsByLoop: (projectId) =>
      db
        .query(
          `SELECT loop_name, ${SUMS}, count(DISTINCT session_id) AS sessions FROM loop_session_usage
           WHERE project_id = ? GROUP BY loop_name ORDER BY loop_name`,
          [projectId],
        )
        .map((row) => ({ ...totalsOf(row), sessions: integer(row.sessions), loopName: text(row.loop_name) })),
  };
}
