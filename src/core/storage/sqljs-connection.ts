import type { Database, Statement } from 'sql.js';
import { ForgeDatabaseError } from './errors';
import type { JournalValue } from './journal-format';
import type { RunResult } from './sql-executor';

const STATEMENT_CACHE_LIMIT = 200;

/**
 * The in-memory sql.js database of one connection, with a bounded cache of
 * prepared statements (preparing is the costly part of a small query). Knows
 * nothing of files or the journal.
 */
export class SqlJsConnection {
  private db: Database | null = null;
  private readonly statements = new Map<string, Statement>();

  constructor(private readonly path: string) {}

  get isOpen(): boolean {
    return this.db !== null;
  }

  /** Switches to `db` (a freshly loaded state), closing the previous one. */
  replace(db: Database): void {
    this.close();
    this.db = db;
  }

  close(): void {
    for (const statement of this.statements.values()) statement.free();
    this.statements.clear();
    this.db?.close();
    this.db = null;
  }

  requireDb(): Database {
    if (this.db === null) throw new ForgeDatabaseError('closed', this.path, `The Forge database ${this.path} is not open.`);
    return this.db;
  }

  private prepared(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.requireDb().prepare(sql);
      if (this.statements.size >= STATEMENT_CACHE_LIMIT) {
        const [oldestSql, oldest] = this.statements.entries().next().value as [string, Statement];
        oldest.free();
        this.statements.delete(oldestSql);
      }
      this.statements.set(sql, statement);
    }
    return statement;
  }

  execRows<T extends object>(sql: string, params: readonly JournalValue[]): T[] {
    const statement = this.prepared(sql);
    const rows: T[] = [];
    try {
      statement.bind(params as JournalValue[]);
      while (statement.step()) rows.push(statement.getAsObject() as T);
    } finally {
      statement.reset();
    }
    return rows;
  }

  execRun(sql: string, params: readonly JournalValue[]): RunResult {
    const statement = this.prepared(sql);
    try {
      statement.bind(params as JournalValue[]);
      while (statement.step()) {
        // drain RETURNING rows, if any
      }
    } finally {
      statement.reset();
    }
    const db = this.requireDb();
    const changes = db.getRowsModified();
    const rowid = this.prepared('SELECT last_insert_rowid()');
    let lastInsertRowid = 0;
    try {
      if (rowid.step()) lastInsertRowid = Number(rowid.get()[0]);
    } finally {
      rowid.reset();
    }
    return { changes, lastInsertRowid };
  }

  execSimple(sql: string): void {
    const statement = this.prepared(sql);
    try {
      statement.step();
    } finally {
      statement.reset();
    }
  }

  /** `query_only` stays on except around journaled writes, so a write slipped into query()/get() fails loudly. */
  setWritable(writable: boolean): void {
    this.execSimple(writable ? 'PRAGMA query_only = 0' : 'PRAGMA query_only = 1');
  }

  rollbackQuietly(): void {
    try {
      this.execSimple('ROLLBACK');
    } catch {
      // SQLite may already have rolled back (e.g. out of memory); nothing left to undo
    }
  }
}
