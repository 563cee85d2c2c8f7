import fs from 'node:fs';
import type { Database, SqlJsStatic } from 'sql.js';
import { currentLockHolder } from './cross-process-lock';
import type { DatabaseFiles } from './database-files';
import { errorMessage, readRange } from './durable-io';
import { ForgeDatabaseError, newerSchemaError, systemErrorCode } from './errors';
import { describeUnreadTail, lostChangesText, scanJournalBytes, tryOpenJournal, unreadTailText, type JournalHandle } from './journal-file';
import { JOURNAL_HEADER_BYTES, hasValidRecordAfter } from './journal-format';
import { applyRecordsTo } from './journal-replica';
import type { Migration } from './migrations';
import type { DatabaseDiagnostics, ForgeDatabase } from './database';
import type { RunResult, SqlExecutor, SqlParam, SqlRow } from './sql-executor';
import { SqlJsConnection } from './sqljs-connection';
import { createBootstrapDatabase, openSnapshot, readSnapshotFile } from './snapshot-file';
import { normaliseParams } from './statement-params';

/*
 * A connection for commands that only read (`forge status`, `forge findings`).
 * It never changes a file: no lock file, no repair, no compaction, no
 * migration on disk. It loads the snapshot and every readable journal record
 * (the journal opened for reading only), and catches up before each read like
 * any reader. What it cannot read it reports, truthfully and once, and leaves
 * for the next connection that writes, which keeps the damaged bytes in a
 * moved file (journal-replica.ts).
 *
 * A database behind this Forge's schema gets the missing migrations applied in
 * memory only; as soon as the journal changes, the connection reloads from the
 * files (replaying another process's migrations onto ours would fail).
 */

const NOT_CHANGED = `Forge changed nothing, as this command only reads`;
const NEXT_WRITER = `the next Forge command that writes (forge run, or VS Code)`;
/** A compaction replaces the snapshot, then the journal: a reader between the two renames retries. */
const LOAD_ATTEMPTS = 5;

export interface ReadOnlyDatabaseOptions {
  readonly warn: (message: string) => void;
  readonly migrations: readonly Migration[];
  readonly now: () => number;
}

export class ReadOnlyDatabase implements ForgeDatabase {
  readonly path: string;
  private readonly sql: SqlJsConnection;
  private journal: JournalHandle | null = null;
  /** The journal file this connection could not use (damaged header, ahead of the snapshot): not reloaded for again. */
  private skippedJournal: { ino: number; size: number } | null = null;
  private lastSeq = 0;
  private snapshotBytes = 0;
  private snapshotLoads = 0;
  private migratedInMemory = false;
  private readonly reported = new Set<string>();
  private closed = false;

  constructor(
    private readonly sqlJs: SqlJsStatic,
    private readonly files: DatabaseFiles,
    private readonly options: ReadOnlyDatabaseOptions,
  ) {
    this.path = files.snapshot;
    this.sql = new SqlJsConnection(files.snapshot);
  }

  open(): void {
    this.load(true);
  }

  // ---------------------------------------------------------------- ForgeDatabase

  query<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T[] {
    this.assertOpen();
    const bound = normaliseParams(sql, params);
    this.catchUp();
    return this.sql.execRows<T>(sql, bound);
  }

  get<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T | undefined {
    return this.query<T>(sql, params)[0];
  }

  run(sql: string): RunResult {
    throw this.readOnlyError(sql);
  }

  transaction<T>(fn: (tx: SqlExecutor) => T): T {
    void fn;
    throw this.readOnlyError('a transaction');
  }

  schemaVersion(): number {
    this.assertOpen();
    this.catchUp();
    return Number(this.sql.execRows<{ v: number | null }>('SELECT max(id) AS v FROM migrations', [])[0]?.v ?? 0);
  }

  /** Never compacts: that rewrites both files. */
  compact(): Promise<void> {
    this.assertOpen();
    return Promise.resolve();
  }

  diagnostics(): DatabaseDiagnostics {
    this.assertOpen();
    return {
      snapshotPath: this.files.snapshot,
      journalPath: this.files.journal,
      lastSeq: this.lastSeq,
      journalBaseSeq: this.journal?.baseSeq ?? this.lastSeq,
      journalBytes: this.journal === null ? 0 : this.journal.offset - JOURNAL_HEADER_BYTES,
      snapshotBytes: this.snapshotBytes,
      compactionThresholdBytes: Number.POSITIVE_INFINITY,
      snapshotLoads: this.snapshotLoads,
    };
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.sql.close();
      this.closeJournal();
    }
    return Promise.resolve();
  }

  // ---------------------------------------------------------------- loading

  private load(verify: boolean): void {
    for (let attempt = 1; ; attempt++) {
      const snapshot = readSnapshotFile(this.files);
      let db: Database;
      let seq = 0;
      if (snapshot === null) {
        db = createBootstrapDatabase(this.sqlJs);
      } else {
        const opened = openSnapshot(this.sqlJs, snapshot, verify);
        if ('problem' in opened) {
          throw new ForgeDatabaseError(
            'corrupt',
            this.files.snapshot,
            `Forge could not use its database ${this.files.snapshot}: ${opened.problem}. ${NOT_CHANGED}; ${NEXT_WRITER} ` +
              `moves it aside and starts with an empty database. Copy it somewhere safe first if you need its history.`,
          );
        }
        ({ db, seq } = opened);
      }
      db.run('PRAGMA query_only = 1');
      this.sql.replace(db);
      this.lastSeq = seq;
      this.snapshotBytes = snapshot?.length ?? 0;
      this.snapshotLoads++;
      this.migratedInMemory = false;
      this.skippedJournal = null;
      this.closeJournal();
      const journal = tryOpenJournal(this.files, 'r');
      if (journal === 'missing') break;
      if (typeof journal === 'string') {
        this.skipJournal(
          `header:${journal}`,
          `Forge cannot read its journal ${this.files.journal}: ${journal}. This shows the database as of its last ` +
            `compaction (change #${seq}); changes made since then are only in the journal. ${NOT_CHANGED}; ${NEXT_WRITER} ` +
            `moves the journal aside.`,
        );
        break;
      }
      if (journal.baseSeq > seq) {
        fs.closeSync(journal.fd);
        if (attempt < LOAD_ATTEMPTS) continue; // a compaction installed a new snapshot meanwhile: read it
        this.skipJournal(
          `ahead:${journal.baseSeq}:${seq}`,
          `Forge's journal ${this.files.journal} continues from change #${journal.baseSeq}, but the database ` +
            `${this.files.snapshot} only holds changes up to #${seq} (was the database file emptied, or replaced by an ` +
            `older copy?). This shows the database as it is. ${NOT_CHANGED}; ${NEXT_WRITER} moves the journal aside.`,
        );
        break;
      }
      this.journal = journal;
      break;
    }
    this.readNewRecords();
    this.migrateInMemory();
  }

  private skipJournal(key: string, message: string): void {
    try {
      const { ino, size } = fs.statSync(this.files.journal);
      this.skippedJournal = { ino, size };
    } catch {
      this.skippedJournal = null;
    }
    this.report(key, message);
  }

  private catchUp(): void {
    let stat: fs.Stats | undefined;
    try {
      stat = fs.statSync(this.files.journal);
    } catch (error) {
      if (systemErrorCode(error) !== 'ENOENT') throw error;
    }
    if (stat === undefined) {
      if (this.journal !== null) this.load(false); // replaced right now, or deleted: start over from the files
      return;
    }
    if (this.journal === null) {
      const skipped = this.skippedJournal;
      if (skipped === null || skipped.ino !== stat.ino || skipped.size !== stat.size) this.load(false);
      return;
    }
    if (stat.ino !== this.journal.ino || stat.size < this.journal.offset) {
      this.load(false); // compacted (or repaired) by a writer: its new snapshot has what we lack
      return;
    }
    if (stat.size === this.journal.offset) return;
    if (this.migratedInMemory) {
      this.load(false); // another process's records would not replay onto our in-memory schema changes
      return;
    }
    this.readNewRecords();
  }

  /** Applies the complete records past what was read; reports what cannot be read (once). */
  private readNewRecords(): void {
    const journal = this.journal;
    if (journal === null) return;
    const size = fs.fstatSync(journal.fd).size;
    if (size <= journal.offset) return;
    const start = journal.offset;
    const bytes = readRange(journal.fd, start, size);
    const { pending, position, fileSeq, stop, damage } = scanJournalBytes(bytes, start, journal.fileSeq, this.lastSeq);
    applyRecordsTo(this.sql, pending, this.files.journal);
    if (pending.length > 0) this.lastSeq = pending[pending.length - 1]!.seq;
    journal.offset += position;
    journal.fileSeq = fileSeq;
    if (damage === undefined && stop === undefined) return;
    const key = `${journal.ino}:${journal.offset}`;
    if (damage !== undefined || (stop?.kind === 'invalid' && hasValidRecordAfter(bytes, position))) {
      this.report(
        key,
        `Forge found damage in its journal ${this.files.journal}: ${damage ?? `${stop!.reason} at byte ${journal.offset}, with valid records after it`}. ` +
          `This shows every change before the damage (up to change #${this.lastSeq}); changes after it cannot be read. ` +
          `${NOT_CHANGED}; ${NEXT_WRITER} keeps the journal in a moved file and continues from change #${this.lastSeq}.`,
      );
      return;
    }
    const holder = currentLockHolder(this.files.lock);
    if (holder?.alive === true) return; // a write being appended right now: read it at the next look
    // The writer may have finished (and released the lock) between our read and our look at the lock.
    if (fs.fstatSync(journal.fd).size !== size) return;
    const tail = describeUnreadTail(bytes, position, start);
    if (holder !== null && holder.owner !== undefined) {
      this.report(
        key,
        `Forge's journal ${this.files.journal} ends with an unfinished write: ${unreadTailText(tail)}. Process ` +
          `${holder.owner.pid} died while writing it (it still holds the lock), so that change was never acknowledged; ` +
          `no acknowledged change was lost. ${NOT_CHANGED}; ${NEXT_WRITER} drops it.`,
      );
      return;
    }
    this.report(
      key,
      `Forge cannot read the end of its journal ${this.files.journal}: ${unreadTailText(tail)}, and no Forge process died ` +
        `while writing it (the lock is free), so the journal was cut short or damaged after it was written: ` +
        `${lostChangesText(tail, this.lastSeq)}. This shows the database as of change #${this.lastSeq}. ${NOT_CHANGED}; ` +
        `${NEXT_WRITER} keeps the cut journal in a moved file and continues from change #${this.lastSeq}.`,
    );
  }

  /** Brings the in-memory schema up to this Forge's, without writing anything anywhere. */
  private migrateInMemory(): void {
    const { migrations, now } = this.options;
    const applied = new Set(this.sql.execRows<{ id: number }>('SELECT id FROM migrations', []).map((row) => row.id));
    const known = new Set(migrations.map((m) => m.id));
    const unknown = [...applied].filter((id) => !known.has(id));
    if (unknown.length > 0) throw newerSchemaError(this.path, unknown);
    const pending = migrations.filter((m) => !applied.has(m.id));
    if (pending.length === 0) return;
    const tx: SqlExecutor = {
      query: <T extends object>(sql: string, params?: readonly SqlParam[]) => this.sql.execRows<T>(sql, normaliseParams(sql, params)),
      get: <T extends object>(sql: string, params?: readonly SqlParam[]): T | undefined => this.sql.execRows<T>(sql, normaliseParams(sql, params))[0],
      run: (sql, params) => this.sql.execRun(sql, normaliseParams(sql, params)),
      transaction: (fn) => fn(tx),
    };
    this.sql.setWritable(true);
    this.sql.execSimple('BEGIN');
    try {
      for (const migration of pending) {
        migration.up(tx);
        tx.run('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)', [migration.id, migration.name, now()]);
      }
      this.sql.execSimple('COMMIT');
    } catch (error) {
      this.sql.rollbackQuietly();
      throw new ForgeDatabaseError(
        'migration_failed',
        this.path,
        `Forge could not read the database ${this.path} with this version's schema: ${errorMessage(error)}. ` +
          `${NOT_CHANGED}. Please report this as a Forge bug.`,
        { cause: error },
      );
    } finally {
      this.sql.setWritable(false);
    }
    this.migratedInMemory = true;
  }

  // ---------------------------------------------------------------- helpers

  private report(key: string, message: string): void {
    if (this.reported.has(key)) return;
    this.reported.add(key);
    this.options.warn(message);
  }

  private closeJournal(): void {
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = null;
  }

  private assertOpen(): void {
    if (this.closed) throw new ForgeDatabaseError('closed', this.path, `The Forge database ${this.path} was used after it was closed.`);
  }

  private readOnlyError(what: string): ForgeDatabaseError {
    return new ForgeDatabaseError(
      'invalid_use',
      this.path,
      `The Forge database ${this.path} was opened read-only (for a command that only reads, such as forge status), ` +
        `so it cannot run ${what}. This is a Forge bug: please report it.`,
    );
  }
}
