import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import type { SqlJsStatic } from 'sql.js';
import { createCrossProcessLock } from './cross-process-lock';
import { assertDatabasePathFits, databaseFiles, tempFilePath, type DatabaseFiles } from './database-files';
import { errorMessage, fsyncDirectory, readRange, unlinkQuietly, writeAll, writeFileDurably } from './durable-io';
import { ForgeDatabaseError, describeFileSystemError, newerSchemaError } from './errors';
import { findRecordAfter } from './journal-file';
import { JOURNAL_HEADER_BYTES, encodeRecord, encodeStatements, type JournalStatement } from './journal-format';
import { JournalReplica } from './journal-replica';
import { FORGE_MIGRATIONS, type Migration } from './migrations';
import type { RunResult, SqlExecutor, SqlParam, SqlRow } from './sql-executor';
import { ReadOnlyDatabase } from './read-only-database';
import { loadSqlJs, type SqlJsSource } from './sqljs-loader';
import { isThenable, normaliseParams } from './statement-params';

/*
 * Durable, multi-process persistence for sql.js.
 *
 * sql.js keeps the whole database in memory. Exporting the file after every
 * write costs time proportional to the database's size and corrupts the file
 * if the process dies mid-write. Forge instead keeps two files:
 *
 * - `forge.db`, a snapshot: a plain SQLite file that is only ever replaced by
 *   temp file + fsync + atomic rename + directory fsync, so it is always
 *   either the old or the new complete file. Its `forge_meta.last_seq` row
 *   says which committed transaction it includes last.
 * - `forge.db.journal`, the committed transactions since (some) snapshot:
 *   each transaction's write statements, appended as one checksummed record
 *   and fdatasync'ed before the transaction returns. A write therefore costs
 *   one small append + one fsync, whatever the database's size.
 *
 * Opening loads the snapshot and replays the journal records whose sequence
 * number is above the snapshot's (idempotent). A record torn by a crash
 * (short, or bad checksum with nothing valid after it) whose writer died
 * holding the lock was never acknowledged and is dropped; the same tail with
 * no dead writer, or a bad record with valid ones after it, is real damage
 * (see handleJournalDamageLocked in journal-replica.ts).
 *
 * Several processes (VS Code windows, the CLI) share the files. Every write
 * transaction holds an exclusive cross-process lock, and before running it
 * catches up with the records other processes appended since its last look,
 * so it always writes on top of the latest state: nothing is lost and
 * read-modify-write in a transaction is safe. Reads catch up without the lock
 * (a stat, then only the new bytes) and apply only complete, checksummed
 * records, each batch inside one SQLite transaction, so a reader never sees a
 * torn state. Replay re-executes SQL, so every process must reach the same
 * state from the same statements: repositories pass times and ids as
 * parameters and never call random()/datetime('now').
 *
 * Compaction folds the journal into a new snapshot when the journal grows
 * past max(compactAfterJournalBytes, snapshot size × compactAtSnapshotFraction (¼)). It is O(database
 * size) but runs after the write that triggered it has returned (setImmediate)
 * and at most once per that many journal bytes, so its cost per write is
 * amortised O(record size). Only its first step (catch up + sql.js export,
 * synchronous, ~15 ms per MB on a small VM) and its last (rename + write the
 * short new journal) hold the lock; the snapshot file is written and fsync'ed
 * asynchronously in between. Crash windows:
 *   - before the snapshot rename: old snapshot + old journal, nothing changed;
 *   - between the snapshot rename and the journal rename: new snapshot (seq S)
 *     + old journal, whose records ≤ S are skipped on replay;
 *   - after: new snapshot + new journal (baseSeq S, holding records > S that
 *     other processes appended while the snapshot was being written).
 * Sequence numbers never restart, which is what makes all three consistent.
 *
 * Where things are: this file holds the public API, the lock-wrapped write
 * path, migrations and compaction; journal-replica.ts loading, replay,
 * catching up and recovery; read-only-database.ts the connection of commands
 * that only read (it never changes a file); snapshot-file.ts and journal-file.ts the two
 * files; sqljs-connection.ts the in-memory database; durable-io.ts fsync'ed
 * file primitives.
 */

export interface OpenForgeDatabaseOptions extends SqlJsSource {
  /** The snapshot file, e.g. `<dataDir>/forge.db`; the journal and lock live next to it. */
  readonly path: string;
  /** Recoveries that need no action (dropped torn tail, removed stale lock, failed background compaction). */
  readonly onWarning?: (message: string) => void;
  /**
   * A write waits for the lock as long as other processes take turns holding
   * it; it fails only when one live process holds it without a break for this
   * long (stuck). Default 120 s.
   */
  readonly lockStuckAfterMs?: number;
  /** Journal size that triggers a compaction, at least. Default 8 MiB. */
  readonly compactAfterJournalBytes?: number;
  /**
   * The threshold also grows to this fraction of the snapshot's size
   * (default 0.25), so compaction, O(size), happens once per Θ(size) journal
   * bytes and costs each write amortised O(record size).
   */
  readonly compactAtSnapshotFraction?: number;
  /** Compact automatically after writes and at close(). Default true. */
  readonly autoCompact?: boolean;
  /** Migrations to apply, in order. Default: all of Forge's. Tests pass a prefix to build older schemas. */
  readonly migrations?: readonly Migration[];
  /** Clock for `migrations.applied_at`. Default Date.now. */
  readonly now?: () => number;
  /**
   * For commands that only read (forge status, forge findings): never change
   * a file (no lock, repair, compaction or migration on disk); report what
   * cannot be read instead of repairing it. Writes fail. Default false.
   */
  readonly readOnly?: boolean;
}

export interface DatabaseDiagnostics {
  readonly snapshotPath: string;
  readonly journalPath: string;
  /** Sequence number of the last transaction this connection has applied. */
  readonly lastSeq: number;
  /** The snapshot sequence the current journal continues from. */
  readonly journalBaseSeq: number;
  /** Bytes of records in the current journal (excluding its header). */
  readonly journalBytes: number;
  /** Size of the snapshot this connection last loaded or wrote. */
  readonly snapshotBytes: number;
  /** Journal size at which a compaction is scheduled. */
  readonly compactionThresholdBytes: number;
  /** How often this connection has (re)built its state from the snapshot file (1 after open). */
  readonly snapshotLoads: number;
}

export interface ForgeDatabase extends SqlExecutor {
  readonly path: string;
  /** Highest migration id applied. */
  schemaVersion(): number;
  /** Folds the journal into a new snapshot now (also done automatically). */
  compact(): Promise<void>;
  diagnostics(): DatabaseDiagnostics;
  /** Waits for a running compaction, compacts a large journal, and releases everything. */
  close(): Promise<void>;
}

const DEFAULT_LOCK_STUCK_AFTER_MS = 120_000;
const DEFAULT_COMPACT_AFTER_JOURNAL_BYTES = 8 * 1024 * 1024;
const DEFAULT_COMPACT_AT_SNAPSHOT_FRACTION = 0.25;
class JournaledDatabase extends JournalReplica implements ForgeDatabase {
  readonly path: string;
  private readonly compactAfterJournalBytes: number;
  private readonly compactAtSnapshotFraction: number;
  private readonly autoCompact: boolean;
  private readonly now: () => number;
  /** Write statements of the running transaction; non-null exactly while a transaction runs. */
  private recorder: JournalStatement[] | null = null;
  private sqlTransactionOpen = false;
  private compaction: Promise<void> | null = null;
  private compactionTimer: NodeJS.Immediate | null = null;
  private closed = false;
  /** Whether this connection has committed a change (only then does close() compact). */
  private wrote = false;
  private readonly tx: SqlExecutor;

  constructor(sqlJs: SqlJsStatic, files: DatabaseFiles, options: OpenForgeDatabaseOptions) {
    const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, 'ForgeDatabaseWarning'));
    const lock = createCrossProcessLock({
      lockPath: files.lock,
      breakerPath: files.lockBreaker,
      stuckAfterMs: options.lockStuckAfterMs ?? DEFAULT_LOCK_STUCK_AFTER_MS,
      onWarning: warn,
    });
    super(sqlJs, files, lock, warn);
    this.path = files.snapshot;
    this.compactAfterJournalBytes = options.compactAfterJournalBytes ?? DEFAULT_COMPACT_AFTER_JOURNAL_BYTES;
    this.compactAtSnapshotFraction = options.compactAtSnapshotFraction ?? DEFAULT_COMPACT_AT_SNAPSHOT_FRACTION;
    this.autoCompact = options.autoCompact ?? true;
    this.now = options.now ?? Date.now;
    this.tx = {
      query: <T extends object>(sql: string, params?: readonly SqlParam[]) => this.sql.execRows<T>(sql, normaliseParams(sql, params)),
      get: <T extends object>(sql: string, params?: readonly SqlParam[]): T | undefined => {
        const rows: T[] = this.sql.execRows<T>(sql, normaliseParams(sql, params));
        return rows[0];
      },
      run: (sql, params) => this.runInTransaction(sql, params),
      transaction: (fn) => this.transaction(fn),
    };
  }

  // ---------------------------------------------------------------- public API

  query<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T[] {
    this.assertOpen();
    const bound = normaliseParams(sql, params);
    if (this.recorder === null) this.catchUpForRead();
    return this.sql.execRows<T>(sql, bound);
  }

  get<T extends object = SqlRow>(sql: string, params?: readonly SqlParam[]): T | undefined {
    return this.query<T>(sql, params)[0];
  }

  run(sql: string, params?: readonly SqlParam[]): RunResult {
    return this.transaction((tx) => tx.run(sql, params));
  }

  transaction<T>(fn: (tx: SqlExecutor) => T): T {
    this.assertOpen();
    if (this.recorder !== null) return fn(this.tx); // nested: join the outer transaction
    this.lock.acquire();
    try {
      this.catchUpLocked();
      return this.writeLocked(fn);
    } finally {
      this.lock.release();
      this.scheduleCompactionIfDue();
    }
  }

  schemaVersion(): number {
    this.assertOpen();
    if (this.recorder === null) this.catchUpForRead();
    return Number(this.sql.execRows<{ v: number | null }>('SELECT max(id) AS v FROM migrations', [])[0]?.v ?? 0);
  }

  diagnostics(): DatabaseDiagnostics {
    this.assertOpen();
    const journal = this.currentJournal();
    return {
      snapshotPath: this.files.snapshot,
      journalPath: this.files.journal,
      lastSeq: this.lastSeq,
      journalBaseSeq: journal.baseSeq,
      journalBytes: journal.offset - JOURNAL_HEADER_BYTES,
      snapshotBytes: this.snapshotBytes,
      compactionThresholdBytes: this.compactionThreshold(),
      snapshotLoads: this.snapshotLoads,
    };
  }

  compact(): Promise<void> {
    this.assertOpen();
    if (this.compaction === null) {
      this.compaction = this.runCompaction().finally(() => {
        this.compaction = null;
      });
    }
    return this.compaction;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.compactionTimer !== null) {
      clearImmediate(this.compactionTimer);
      this.compactionTimer = null;
    }
    if (this.compaction !== null) await this.compaction.catch(() => undefined);
    // Leave a short journal behind so the next open replays little; a tiny
    // journal is not worth an O(size) snapshot at every shutdown. Only a
    // connection that wrote does it: one that only read (a VS Code window that
    // just looked) leaves the files as it found them.
    if (this.autoCompact && this.wrote && this.currentJournal().offset - JOURNAL_HEADER_BYTES >= this.compactionThreshold() / 4) {
      await this.compact().catch((error: unknown) => this.warn(`Forge could not compact ${this.path} at close: ${errorMessage(error)}`));
    }
    this.closed = true;
    this.releaseResources();
  }

  // ---------------------------------------------------------------- opening

  /** Loads snapshot + journal, removes dead processes' temp files and applies migrations, all under the lock. */
  openLocked(migrations: readonly Migration[]): void {
    this.lock.acquire();
    try {
      this.removeDeadTempFiles();
      this.loadFromDiskLocked(true);
      this.migrateLocked(migrations);
    } finally {
      this.lock.release();
    }
  }

  releaseResources(): void {
    this.sql.close();
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = null;
    this.lock.release();
  }

  private migrateLocked(migrations: readonly Migration[]): void {
    for (let i = 1; i < migrations.length; i++) {
      if (migrations[i]!.id <= migrations[i - 1]!.id) throw new Error('migrations must have strictly increasing ids');
    }
    const applied = new Set(this.sql.execRows<{ id: number }>('SELECT id FROM migrations', []).map((row) => row.id));
    const known = new Set(migrations.map((m) => m.id));
    const unknown = [...applied].filter((id) => !known.has(id));
    if (unknown.length > 0) {
      throw newerSchemaError(this.path, unknown);
    }
    for (const migration of migrations) {
      if (applied.has(migration.id)) continue;
      try {
        this.writeLocked((tx) => {
          migration.up(tx);
          tx.run('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)', [migration.id, migration.name, this.now()]);
        });
      } catch (error) {
        if (error instanceof ForgeDatabaseError) throw error;
        throw new ForgeDatabaseError(
          'migration_failed',
          this.path,
          `Forge could not update the database ${this.path} to schema version ${migration.id} (${migration.name}): ` +
            `${errorMessage(error)}. The database is unchanged (still at the previous version). Please report this as a Forge bug.`,
          { cause: error },
        );
      }
    }
  }

  // ---------------------------------------------------------------- writing

  private writeLocked<T>(fn: (tx: SqlExecutor) => T): T {
    const recorder: JournalStatement[] = [];
    this.recorder = recorder;
    this.sql.execSimple('BEGIN');
    this.sqlTransactionOpen = true;
    try {
      const result = fn(this.tx);
      if (isThenable(result)) {
        throw new ForgeDatabaseError(
          'invalid_use',
          this.path,
          'A Forge database transaction body must be synchronous; it returned a promise. Do the async work first, then write.',
        );
      }
      if (recorder.length === 0) {
        this.sql.execSimple('COMMIT');
        this.sqlTransactionOpen = false;
        return result;
      }
      const seq = this.lastSeq + 1;
      this.sql.setWritable(true);
      try {
        this.sql.execRun(`UPDATE forge_meta SET value = ? WHERE key = 'last_seq'`, [seq]);
      } finally {
        this.sql.setWritable(false);
      }
      // Durable first, then visible: if the append fails, the transaction rolls back and nothing happened.
      this.appendRecordLocked(seq, encodeStatements(recorder));
      try {
        this.sql.execSimple('COMMIT');
        this.sqlTransactionOpen = false;
        this.lastSeq = seq;
        this.wrote = true;
      } catch {
        // The record is on disk but sql.js failed to commit it (out of memory):
        // rebuild from disk, which applies it, so memory matches what was acknowledged.
        this.sqlTransactionOpen = false;
        this.loadFromDiskLocked(false);
      }
      return result;
    } catch (error) {
      if (this.sqlTransactionOpen) {
        this.sql.rollbackQuietly();
        this.sqlTransactionOpen = false;
      }
      throw error;
    } finally {
      this.recorder = null;
    }
  }

  private runInTransaction(sql: string, params: readonly SqlParam[] | undefined): RunResult {
    const recorder = this.recorder;
    if (recorder === null) return this.run(sql, params);
    const bound = normaliseParams(sql, params);
    this.sql.setWritable(true);
    let result: RunResult;
    try {
      result = this.sql.execRun(sql, bound);
    } finally {
      this.sql.setWritable(false);
    }
    recorder.push([sql, bound]); // only statements that succeeded: a failed one changed nothing
    return result;
  }

  private appendRecordLocked(seq: number, payload: Uint8Array): void {
    const journal = this.currentJournal();
    const record = encodeRecord(seq, payload);
    try {
      writeAll(journal.fd, record, journal.offset);
      fs.fdatasyncSync(journal.fd);
    } catch (error) {
      try {
        fs.ftruncateSync(journal.fd, journal.offset);
      } catch {
        // a partial record left here is a torn tail, dropped by the next lock holder
      }
      throw describeFileSystemError(error, this.files.journal, 'write to') ?? error;
    }
    journal.offset += record.length;
    journal.fileSeq = seq;
  }

  // ---------------------------------------------------------------- compaction

  private compactionThreshold(): number {
    return Math.max(this.compactAfterJournalBytes, Math.floor(this.snapshotBytes * this.compactAtSnapshotFraction));
  }

  private scheduleCompactionIfDue(): void {
    if (!this.autoCompact || !this.wrote || this.closed || this.compaction !== null || this.compactionTimer !== null || this.journal === null) return;
    if (this.journal.offset - JOURNAL_HEADER_BYTES < this.compactionThreshold()) return;
    this.compactionTimer = setImmediate(() => {
      this.compactionTimer = null;
      if (this.closed) return;
      this.compact().catch((error: unknown) =>
        this.warn(`Forge could not compact ${this.path} (it will retry after later writes): ${errorMessage(error)}`),
      );
    });
  }

  private async runCompaction(): Promise<void> {
    // 1. Under the lock: catch up and take a consistent image at sequence `seq`.
    let seq: number;
    let image: Uint8Array;
    let cut: { ino: number; offset: number };
    this.lock.acquire();
    try {
      this.catchUpLocked();
      const journal = this.currentJournal();
      if (journal.offset === JOURNAL_HEADER_BYTES && journal.baseSeq === this.lastSeq) return; // nothing to fold in
      seq = this.lastSeq;
      image = this.sql.requireDb().export();
      cut = { ino: journal.ino, offset: journal.offset };
    } finally {
      this.lock.release();
    }

    // 2. Without the lock: write the snapshot to a temp file and fsync it. Other
    //    processes (and this one) keep writing to the journal meanwhile.
    const tempSnapshot = tempFilePath(this.files.snapshot, randomBytes(4).toString('hex'));
    try {
      await writeFileDurably(tempSnapshot, image);
    } catch (error) {
      await fsp.rm(tempSnapshot, { force: true }).catch(() => undefined);
      throw describeFileSystemError(error, tempSnapshot, 'write') ?? error;
    }
    if (this.closed) {
      unlinkQuietly(tempSnapshot);
      return;
    }

    // 3. Under the lock: install the snapshot, then a new journal holding the
    //    records appended after `seq` (copied byte for byte).
    this.lock.acquire();
    try {
      this.catchUpLocked();
      const journal = this.currentJournal();
      if (journal.baseSeq >= seq) {
        unlinkQuietly(tempSnapshot); // another process installed a snapshot at least as recent
        return;
      }
      const tailStart = journal.ino === cut.ino ? cut.offset : findRecordAfter(journal, seq);
      const tail = readRange(journal.fd, tailStart, journal.offset);
      fs.renameSync(tempSnapshot, this.files.snapshot);
      fsyncDirectory(this.files.directory);
      this.snapshotBytes = image.length;
      this.replaceJournalLocked(seq, tail, journal.fileSeq);
    } catch (error) {
      unlinkQuietly(tempSnapshot);
      if (error instanceof ForgeDatabaseError) throw error;
      throw describeFileSystemError(error, this.files.snapshot, 'write') ?? error;
    } finally {
      this.lock.release();
    }
  }

  // ---------------------------------------------------------------- sql.js access

  private assertOpen(): void {
    if (this.closed || !this.sql.isOpen) {
      throw new ForgeDatabaseError('closed', this.path, `The Forge database ${this.path} was used after it was closed.`);
    }
  }
}

/**
 * Opens (creating if needed) the Forge database at `options.path`, replays
 * its journal, and brings its schema up to date.
 */
export async function openForgeDatabase(options: OpenForgeDatabaseOptions): Promise<ForgeDatabase> {
  const files = databaseFiles(options.path);
  assertDatabasePathFits(files.snapshot);
  const sqlJs = await loadSqlJs(options);
  if (options.readOnly === true) {
    const readOnly = new ReadOnlyDatabase(sqlJs, files, {
      warn: options.onWarning ?? ((message: string) => process.emitWarning(message, 'ForgeDatabaseWarning')),
      migrations: options.migrations ?? FORGE_MIGRATIONS,
      now: options.now ?? Date.now,
    });
    try {
      readOnly.open();
    } catch (error) {
      await readOnly.close();
      throw error;
    }
    return readOnly;
  }
  try {
    fs.mkdirSync(files.directory, { recursive: true });
  } catch (error) {
    throw describeFileSystemError(error, files.directory, 'create the data folder') ?? error;
  }
  const database = new JournaledDatabase(sqlJs, files, options);
  try {
    database.openLocked(options.migrations ?? FORGE_MIGRATIONS);
  } catch (error) {
    database.releaseResources();
    throw error;
  }
  return database;
}
