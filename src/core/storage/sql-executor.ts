/**
 * What repositories see of the database: positional-parameter SQL and
 * synchronous transactions. Both the database and the handle a transaction
 * body receives implement it, so a repository method works the same whether
 * it runs alone or inside a caller's larger transaction.
 */

/** What SQLite hands back for a column. */
export type SqlValue = string | number | null | Uint8Array;
/** What a statement parameter may be (booleans are stored as 0/1). */
export type SqlParam = SqlValue | boolean;
export type SqlRow = Record<string, SqlValue>;

export interface RunResult {
  /** Rows inserted, updated or deleted by the statement. */
  readonly changes: number;
  /** Rowid of the last inserted row on this connection. */
  readonly lastInsertRowid: number;
}

export interface SqlExecutor {
  /**
   * Rows of a read-only statement. Writing through query/get fails with
   * SQLITE_READONLY: only `run` statements reach the journal, so a write
   * slipped into a read would exist in one process's memory and nowhere else.
   */
  query<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T[];
  get<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T | undefined;
  /**
   * A write statement. Outside a transaction it is its own transaction.
   * Statements must be deterministic (replay re-executes them in other
   * processes): pass times and ids as parameters, never use `random()`,
   * `datetime('now')` or an unordered INSERT … SELECT into an AUTOINCREMENT table.
   */
  run(sql: string, params?: readonly SqlParam[]): RunResult;
  /**
   * Runs `fn` as one atomic, durable transaction holding the cross-process
   * lock. `fn` must be synchronous. Nested calls join the outer transaction.
   */
  transaction<T>(fn: (tx: SqlExecutor) => T): T;
}
