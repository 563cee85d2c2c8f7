import type { SqlExecutor, SqlRow } from '../sql-executor';
import { integer, optionalText, systemClock, text, type Clock } from './row-values';

export type PlanDraftStatus = 'drafting' | 'drafted' | 'no_plan' | 'failed' | 'interrupted';

/** Tokens and cost of a drafting session (the session's totals, as a loop session's usage). */
export interface PlanDraftUsage {
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cost: number;
  messages: number;
}

/**
 * An architect session drafting a plan (issue 15). The plan text is the `plans` row keyed by
 * `id`; this row is what `forge plan --continue ID` needs and what the drafting cost.
 */
export interface PlanDraftRow extends PlanDraftUsage {
  readonly projectId: string;
  readonly id: string;
  readonly repoDir: string;
  readonly request: string;
  readonly sessionId: string | null;
  readonly model: string | null;
  readonly status: PlanDraftStatus;
  readonly outPath: string;
  /** Prompts sent to the architect (1 after the first draft, +1 per --continue). */
  readonly turns: number;
  /** The architect's last message (its questions, or what it did). */
  readonly lastReply: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface NewPlanDraft {
  id: string;
  repoDir: string;
  request: string;
  model: string | null;
  outPath: string;
}

export interface PlanDraftUpdate {
  sessionId?: string;
  status?: PlanDraftStatus;
  turns?: number;
  lastReply?: string | null;
  usage?: PlanDraftUsage;
}

export interface PlanDraftsRepository {
  create(projectId: string, draft: NewPlanDraft): PlanDraftRow;
  get(projectId: string, id: string): PlanDraftRow | undefined;
  /** A draft by id in any project (to say "that draft belongs to another repository"). */
  findById(id: string): PlanDraftRow | undefined;
  update(projectId: string, id: string, update: PlanDraftUpdate): PlanDraftRow;
  /** Most recently updated first. */
  list(projectId: string): PlanDraftRow[];
}

function toDraft(row: SqlRow): PlanDraftRow {
  return {
    projectId: text(row.project_id),
    id: text(row.id),
    repoDir: text(row.repo_dir),
    request: text(row.request),
    sessionId: optionalText(row.session_id),
    model: optionalText(row.model),
    status: text(row.status) as PlanDraftStatus,
    outPath: text(row.out_path),
    turns: integer(row.turns),
    lastReply: optionalText(row.last_reply),
    inputTokens: integer(row.input_tokens),
    outputTokens: integer(row.output_tokens),
    reasoningTokens: integer(row.reasoning_tokens),
    cacheReadTokens: integer(row.cache_read_tokens),
    cacheWriteTokens: integer(row.cache_write_tokens),
    cost: Number(row.cost ?? 0),
    messages: integer(row.messages),
    createdAt: integer(row.created_at),
    updatedAt: integer(row.updated_at),
  };
}

export function createPlanDraftsRepository(db: SqlExecutor, clock: Clock = systemClock): PlanDraftsRepository {
  const get = (projectId: string, id: string): PlanDraftRow | undefined => {
    const row = db.get('SELECT * FROM plan_drafts WHERE project_id = ? AND id = ?', [projectId, id]);
    return row ? toDraft(row) : undefined;
  };
  return {
    create(projectId, draft) {
      const now = clock.now();
      db.run(
        `INSERT INTO plan_drafts (project_id, id, repo_dir, request, model, status, out_path, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'drafting', ?, ?, ?)`,
        [projectId, draft.id, draft.repoDir, draft.request, draft.model, draft.outPath, now, now],
      );
      return get(projectId, draft.id)!;
    },
    get,
    findById(id) {
      const row = db.get('SELECT * FROM plan_drafts WHERE id = ? ORDER BY updated_at DESC', [id]);
      return row ? toDraft(row) : undefined;
    },
    update(projectId, id, update) {
      const sets: string[] = ['updated_at = ?'];
      const values: Array<string | number | null> = [clock.now()];
      if (update.sessionId !== undefined) (sets.push('session_id = ?'), values.push(update.sessionId));
      if (update.status !== undefined) (sets.push('status = ?'), values.push(update.status));
      if (update.turns !== undefined) (sets.push('turns = ?'), values.push(update.turns));
      if (update.lastReply !== undefined) (sets.push('last_reply = ?'), values.push(update.lastReply));
      if (update.usage) {
        const u = update.usage;
        sets.push('input_tokens = ?', 'output_tokens = ?', 'reasoning_tokens = ?', 'cache_read_tokens = ?', 'cache_write_tokens = ?', 'cost = ?', 'messages = ?');
        values.push(u.inputTokens, u.outputTokens, u.reasoningTokens, u.cacheReadTokens, u.cacheWriteTokens, u.cost, u.messages);
      }
      db.run(`UPDATE plan_drafts SET ${sets.join(', ')} WHERE project_id = ? AND id = ?`, [...values, projectId, id]);
      const row = get(projectId, id);
      if (!row) throw new Error(`No plan draft "${id}".`);
      return row;
    },
    list: (projectId) => db.query('SELECT * FROM plan_drafts WHERE project_id = ? ORDER BY updated_at DESC, id', [projectId]).map(toDraft),
  };
}
