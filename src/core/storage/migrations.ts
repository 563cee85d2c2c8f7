import type { SqlExecutor } from './sql-executor';

/**
 * Schema migrations, registered explicitly in execution order (never
 * discovered from file names) and recorded in the `migrations` table.
 *
 * Rules:
 * - Append only. Never edit or reorder a migration that has shipped: databases
 *   in the field have run it.
 * - Each migration runs as one journaled transaction, so other processes
 *   replay it like any other write; it must be deterministic (no `random()`,
 *   no `datetime('now')`).
 * - Prefer additive changes (new tables, columns, indexes). An older Forge
 *   still running in another window replays newer migrations and keeps
 *   writing with its own SQL; additive changes keep that working.
 */
export interface Migration {
  readonly id: number;
  readonly name: string;
  up(tx: SqlExecutor): void;
}

function statements(tx: SqlExecutor, sql: readonly string[]): void {
  for (const statement of sql) tx.run(statement);
}

const baseSchema: Migration = {
  id: 1,
  name: 'base schema',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE loops (
        project_id TEXT NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        phase TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('plan', 'goal')),
        iteration INTEGER NOT NULL DEFAULT 0,
        max_iterations INTEGER NOT NULL DEFAULT 15,
        section_index INTEGER,
        worktree_dir TEXT,
        branch TEXT,
        base_branch TEXT,
        base_commit TEXT,
        repo_dir TEXT,
        model TEXT,
        auditor_model TEXT,
        current_session_id TEXT,
        sandbox INTEGER NOT NULL DEFAULT 0,
        termination_reason TEXT,
        error_count INTEGER NOT NULL DEFAULT 0,
        consecutive_stalls INTEGER NOT NULL DEFAULT 0,
        supervisor_id TEXT,
        lease_expires_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        ended_at INTEGER,
        state TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (project_id, name)
      )`,
      `CREATE TABLE loop_large_fields (
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        plan_text TEXT,
        goal_text TEXT,
        last_audit_summary TEXT,
        last_coder_handoff TEXT,
        completion_summary TEXT,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, loop_name)
      )`,
      `CREATE TABLE plans (
        project_id TEXT NOT NULL,
        key TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, key)
      )`,
      `CREATE TABLE review_findings (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        file TEXT NOT NULL,
        line INTEGER NOT NULL,
        severity TEXT NOT NULL CHECK (severity IN ('bug', 'warning')),
        description TEXT NOT NULL,
        scenario TEXT,
        status TEXT NOT NULL CHECK (status IN ('open', 'resolved', 'dismissed')),
        section_index INTEGER,
        recurrence_count INTEGER NOT NULL DEFAULT 1,
        fingerprint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      )`,
      `CREATE INDEX review_findings_by_loop ON review_findings (project_id, loop_name, status)`,
      `CREATE TABLE section_plans (
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        idx INTEGER NOT NULL,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'in_progress', 'done')),
        attempts INTEGER NOT NULL DEFAULT 0,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, loop_name, idx)
      )`,
      `CREATE TABLE loop_transitions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        event TEXT NOT NULL,
        from_phase TEXT,
        to_phase TEXT,
        iteration INTEGER NOT NULL,
        section_index INTEGER,
        status TEXT,
        reason TEXT,
        at INTEGER NOT NULL
      )`,
      `CREATE TABLE plan_amendments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        section_index INTEGER,
        before_json TEXT NOT NULL,
        after_json TEXT NOT NULL,
        rationale TEXT NOT NULL,
        at INTEGER NOT NULL
      )`,
      `CREATE TABLE loop_session_usage (
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('code', 'auditor')),
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        messages INTEGER NOT NULL DEFAULT 0,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, loop_name, session_id, model)
      )`,
      `CREATE TABLE feature_groups (
        project_id TEXT NOT NULL,
        id TEXT NOT NULL,
        title TEXT NOT NULL,
        status TEXT NOT NULL,
        features TEXT NOT NULL DEFAULT '[]',
        current_index INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, id)
      )`,
      `CREATE TABLE loop_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        kind TEXT NOT NULL,
        iteration INTEGER NOT NULL,
        section_index INTEGER,
        attempt INTEGER NOT NULL,
        session_id TEXT,
        model TEXT,
        outcome TEXT NOT NULL,
        error TEXT,
        started_at INTEGER NOT NULL,
        ended_at INTEGER
      )`,
      `CREATE TABLE preferences (
        project_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, key)
      )`,
    ]),
};

/** Handoffs became first-class rows (they were only the last one, in loop_large_fields). */
const loopHandoffs: Migration = {
  id: 2,
  name: 'loop handoffs',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE loop_handoffs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('code', 'auditor')),
        session_id TEXT NOT NULL,
        iteration INTEGER NOT NULL,
        section_index INTEGER,
        payload TEXT NOT NULL,
        at INTEGER NOT NULL
      )`,
      `CREATE INDEX loop_handoffs_by_loop ON loop_handoffs (project_id, loop_name, role, id)`,
    ]),
};

/** Indexes for the dashboard's per-loop history queries and findings-by-file diagnostics. */
const historyIndexes: Migration = {
  id: 3,
  name: 'history and lookup indexes',
  up: (tx) =>
    statements(tx, [
      `CREATE INDEX loops_by_status ON loops (project_id, status, updated_at)`,
      `CREATE INDEX loop_transitions_by_loop ON loop_transitions (project_id, loop_name, id)`,
      `CREATE INDEX plan_amendments_by_loop ON plan_amendments (project_id, loop_name, id)`,
      `CREATE INDEX loop_attempts_by_loop ON loop_attempts (project_id, loop_name, id)`,
      `CREATE INDEX review_findings_by_file ON review_findings (project_id, file, line)`,
      `CREATE INDEX review_findings_by_fingerprint ON review_findings (project_id, loop_name, fingerprint)`,
    ]),
};

/**
 * The verification gate (issue 13): every run of every check, and where a finding comes from
 * ('auditor', or 'check': a failed check, which only its passing resolves).
 */
const verificationChecks: Migration = {
  id: 4,
  name: 'check runs and finding sources',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE check_runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        iteration INTEGER NOT NULL,
        section_index INTEGER,
        gate TEXT NOT NULL CHECK (gate IN ('section', 'final')),
        check_id TEXT NOT NULL,
        label TEXT NOT NULL,
        kind TEXT NOT NULL,
        command TEXT,
        status TEXT NOT NULL,
        message TEXT NOT NULL,
        exit_code INTEGER,
        signal TEXT,
        duration_ms INTEGER NOT NULL,
        output_tail TEXT NOT NULL,
        output_bytes INTEGER NOT NULL,
        started_at INTEGER NOT NULL
      )`,
      `CREATE INDEX check_runs_by_loop ON check_runs (project_id, loop_name, id)`,
      `ALTER TABLE review_findings ADD COLUMN source TEXT NOT NULL DEFAULT 'auditor'`,
    ]),
};

/** Issue 16: a restart may change the loop's models and variant; each attempt records its variant beside its model. */
const attemptVariants: Migration = {
  id: 5,
  name: 'attempt variants',
  up: (tx) => statements(tx, [`ALTER TABLE loop_attempts ADD COLUMN variant TEXT`]),
};


/**
 * Plan authoring (issue 15): an architect session drafting a plan of record outside any loop.
 * The plan itself lives in `plans` under the draft's id; this row keeps what `forge plan
 * --continue` needs (the opencode session, the repository, the file) and what it cost.
 */
const planDrafts: Migration = {
  id: 7,
  name: 'plan drafts',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE plan_drafts (
        project_id TEXT NOT NULL,
        id TEXT NOT NULL,
        repo_dir TEXT NOT NULL,
        request TEXT NOT NULL,
        session_id TEXT,
        model TEXT,
        status TEXT NOT NULL CHECK (status IN ('drafting', 'drafted', 'no_plan', 'failed', 'interrupted')),
        out_path TEXT NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        last_reply TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        messages INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (project_id, id)
      )`,
      `CREATE INDEX plan_drafts_by_id ON plan_drafts (id)`,
    ]),
};

/**
 * The shell-hang watchdog (issue 16): each time it killed (or, in dry-run, would have killed)
 * the processes of a builtin shell call that ran past its threshold, or found nothing to kill.
 */
const shellInterventions: Migration = {
  id: 6,
  name: 'shell watchdog interventions',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE shell_interventions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        session_id TEXT,
        call_id TEXT,
        command TEXT NOT NULL,
        mode TEXT NOT NULL,
        action TEXT NOT NULL,
        elapsed_ms INTEGER NOT NULL,
        threshold_ms INTEGER NOT NULL,
        processes TEXT NOT NULL,
        at INTEGER NOT NULL
      )`,
      `CREATE INDEX shell_interventions_by_loop ON shell_interventions (project_id, loop_name, id)`,
    ]),
};

/**
 * Feature groups (issue 14 part 3, issue 16's group budget): what a group needs beyond the
 * base schema's row — where it came from, its cap, its budget over all its loops, why it is
 * paused, the options its loops start with. `features` (JSON) now holds id, title, dependsOn,
 * plan, planPath, status, loopName and error per feature.
 */
const featureGroupRuns: Migration = {
  id: 8,
  name: 'feature group runs',
  up: (tx) =>
    statements(tx, [
      `ALTER TABLE feature_groups ADD COLUMN source TEXT NOT NULL DEFAULT ''`,
      `ALTER TABLE feature_groups ADD COLUMN repo_dir TEXT NOT NULL DEFAULT ''`,
      `ALTER TABLE feature_groups ADD COLUMN review_dir TEXT NOT NULL DEFAULT ''`,
      `ALTER TABLE feature_groups ADD COLUMN max_concurrent INTEGER NOT NULL DEFAULT 3`,
      `ALTER TABLE feature_groups ADD COLUMN budget_money REAL`,
      `ALTER TABLE feature_groups ADD COLUMN budget_tokens INTEGER`,
      `ALTER TABLE feature_groups ADD COLUMN budget_warned INTEGER NOT NULL DEFAULT 0`,
      `ALTER TABLE feature_groups ADD COLUMN pause_reason TEXT`,
      `ALTER TABLE feature_groups ADD COLUMN splitter_model TEXT`,
      `ALTER TABLE feature_groups ADD COLUMN loop_options TEXT NOT NULL DEFAULT '{}'`,
    ]),
};

/**
 * Accepting a loop's work (issue 29 item 4, `forge accept`, *Accept Loop*): who (the OS user),
 * when, how (fast-forward, merge, squash, push) and the resulting commit. Append-only.
 */
const loopAccepts: Migration = {
  id: 9,
  name: 'loop accepts',
  up: (tx) =>
    statements(tx, [
      `CREATE TABLE loop_accepts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        project_id TEXT NOT NULL,
        loop_name TEXT NOT NULL,
        accepted_by TEXT NOT NULL,
        how TEXT NOT NULL,
        into_branch TEXT,
        remote TEXT,
        commit_sha TEXT,
        at INTEGER NOT NULL
      )`,
      `CREATE INDEX loop_accepts_by_loop ON loop_accepts (project_id, loop_name, id)`,
    ]),
};

/**
 * The user's review (issue 29 items 2–3): a finding of source 'user' spans a line range
 * (`line` .. `line_end`) and carries the coder's answer (`reply`, through the review_reply tool);
 * only the user resolves or dismisses it.
 */
const userReviewFindings: Migration = {
  id: 10,
  name: 'user review findings',
  up: (tx) =>
    statements(tx, [
      `ALTER TABLE review_findings ADD COLUMN line_end INTEGER`,
      `ALTER TABLE review_findings ADD COLUMN reply TEXT`,
      `ALTER TABLE review_findings ADD COLUMN replied_at INTEGER`,
    ]),
};

export const FORGE_MIGRATIONS: readonly Migration[] = [baseSchema, loopHandoffs, historyIndexes, verificationChecks, attemptVariants, shellInterventions, planDrafts, featureGroupRuns, loopAccepts, userReviewFindings];

export const LATEST_SCHEMA_VERSION = FORGE_MIGRATIONS[FORGE_MIGRATIONS.length - 1]!.id;
