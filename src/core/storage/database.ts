import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Database, SqlJsStatic, Statement } from 'sql.js';
import { createCrossProcessLock, isProcessAlive, type CrossProcessLock } from './cross-process-lock';
import {
  assertDatabasePathFits,
  corruptFileName,
  databaseFiles,
  tempFileOwnerPid,
  tempFilePath,
  type DatabaseFiles,
} from './database-files';
import { ForgeDatabaseError, describeFileSystemError, systemErrorCode } from './errors';
import {
  JOURNAL_HEADER_BYTES,
  decodeJournalHeader,
  decodeStatements,
  encodeJournalHeader,
  encodeRecord,
  encodeStatements,
  hasValidRecordAfter,
  readRecordAt,
  type JournalStatement,
  type JournalValue,
} from './journal-format';
import { FORGE_MIGRATIONS, type Migration } from './migrations';
import type { RunResult, SqlExecutor, SqlParam, SqlRow } from './sql-executor';
import { loadSqlJs, type SqlJsSource } from './sqljs-loader';

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
 * (short, or bad checksum with nothing valid after it) was never
 * acknowledged and is dropped; a bad record with valid ones after it is real
 * damage (see handleJournalDamageLocked).
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
 */

export interface OpenForgeDatabaseOptions extends SqlJsSource {
  /** The snapshot file, e.g. `<dataDir>/forge.db`; the journal and lock live next to it. */
  readonly path: string;
  /** Recoveries that need no action (dropped torn tail, removed stale lock, failed background compaction). */
  readonly onWarning?: (message: string) => void;
  /** How long a write waits for another process's lock. Default 15 s. */
  readonly lockTimeoutMs?: number;
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

const DEFAULT_LOCK_TIMEOUT_MS = 15_000;
const DEFAULT_COMPACT_AFTER_JOURNAL_BYTES = 8 * 1024 * 1024;
const DEFAULT_COMPACT_AT_SNAPSHOT_FRACTION = 0.25;
const STATEMENT_CACHE_LIMIT = 200;
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Bootstrap schema, identical in every process; everything else is created by journaled migrations. */
const BOOTSTRAP_SQL = [
  `CREATE TABLE forge_meta (key TEXT PRIMARY KEY, value NOT NULL)`,
  `INSERT INTO forge_meta (key, value) VALUES ('last_seq', 0)`,
  `CREATE TABLE migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
];

interface JournalHandle {
  readonly fd: number;
  readonly ino: number;
  readonly journalId: string;
  readonly baseSeq: number;
  /** File offset just past the last record this connection has read (applied or skipped). */
  offset: number;
  /** Sequence number of that record (baseSeq when none). */
  fileSeq: number;
}

/** Damage found while reading the journal; handled by the lock holder. */
class JournalDamage extends Error {}

/** A reader hit something only the lock holder may resolve (replaced journal it lags behind, damage, shrink). */
const NEEDS_LOCK = 'needs-lock';

interface PendingRecord {
  readonly seq: number;
  readonly payload: Uint8Array;
}

function normaliseParams(sql: string, params: readonly SqlParam[] | undefined): JournalValue[] {
  if (params === undefined) return [];
  if (!Array.isArray(params)) {
    throw new ForgeDatabaseError('invalid_use', sql, `Statement parameters must be an array (statement: ${sql})`);
  }
  return params.map((value, index): JournalValue => {
    if (value === null || typeof value === 'string') return value;
    if (typeof value === 'number') {
      if (Number.isFinite(value)) return value;
    } else if (typeof value === 'boolean') {
      return value ? 1 : 0;
    } else if (value instanceof Uint8Array) {
      return new Uint8Array(value); // own copy: the caller may reuse its buffer after we journaled it
    }
    throw new ForgeDatabaseError(
      'invalid_use',
      sql,
      `Parameter ${index + 1} (${String(value)}) cannot be stored: use a string, finite number, boolean, ` +
        `null or Uint8Array (statement: ${sql})`,
    );
  });
}

function isThenable(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

function readRange(fd: number, start: number, end: number): Buffer {
  const buf = Buffer.allocUnsafe(Math.max(0, end - start));
  let filled = 0;
  while (filled < buf.length) {
    const n = fs.readSync(fd, buf, filled, buf.length - filled, start + filled);
    if (n === 0) break; // the file shrank meanwhile
    filled += n;
  }
  return buf.subarray(0, filled);
}

function writeAll(fd: number, buf: Uint8Array, position: number): void {
  let written = 0;
  while (written < buf.length) {
    written += fs.writeSync(fd, buf, written, buf.length - written, position + written);
  }
}

function fsyncDirectory(directory: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(directory, 'r');
    fs.fsyncSync(fd);
  } catch (error) {
    // Windows cannot open or fsync a directory; renames there are durable through NTFS's own log.
    if (process.platform !== 'win32') throw error;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

function writeFileDurablySync(filePath: string, data: Uint8Array): void {
  const fd = fs.openSync(filePath, 'wx');
  try {
    writeAll(fd, data, 0);
    fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

async function writeFileDurably(filePath: string, data: Uint8Array): Promise<void> {
  const handle = await fsp.open(filePath, 'wx');
  try {
    await handle.writeFile(data);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

function unlinkQuietly(filePath: string): void {
  try {
    fs.unlinkSync(filePath);
  } catch {
    // best effort: a leftover temp file is removed at the next open
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

class JournaledDatabase implements ForgeDatabase {
  readonly path: string;
  private readonly files: DatabaseFiles;
  private readonly lock: CrossProcessLock;
  private readonly warn: (message: string) => void;
  private readonly compactAfterJournalBytes: number;
  private readonly compactAtSnapshotFraction: number;
  private readonly autoCompact: boolean;
  private readonly now: () => number;
  private db: Database | null = null;
  private readonly statements = new Map<string, Statement>();
  private journal: JournalHandle | null = null;
  private lastSeq = 0;
  private snapshotBytes = 0;
  private snapshotLoads = 0;
  /** Write statements of the running transaction; non-null exactly while a transaction runs. */
  private recorder: JournalStatement[] | null = null;
  private sqlTransactionOpen = false;
  private compaction: Promise<void> | null = null;
  private compactionTimer: NodeJS.Immediate | null = null;
  private closed = false;
  private readonly tx: SqlExecutor;

  constructor(
    private readonly sqlJs: SqlJsStatic,
    files: DatabaseFiles,
    options: OpenForgeDatabaseOptions,
  ) {
    this.files = files;
    this.path = files.snapshot;
    this.warn = options.onWarning ?? ((message) => process.emitWarning(message, 'ForgeDatabaseWarning'));
    this.compactAfterJournalBytes = options.compactAfterJournalBytes ?? DEFAULT_COMPACT_AFTER_JOURNAL_BYTES;
    this.compactAtSnapshotFraction = options.compactAtSnapshotFraction ?? DEFAULT_COMPACT_AT_SNAPSHOT_FRACTION;
    this.autoCompact = options.autoCompact ?? true;
    this.now = options.now ?? Date.now;
    this.lock = createCrossProcessLock({
      lockPath: files.lock,
      breakerPath: files.lockBreaker,
      timeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
      onWarning: this.warn,
    });
    this.tx = {
      query: <T extends object>(sql: string, params?: readonly SqlParam[]) => this.execRows<T>(sql, normaliseParams(sql, params)),
      get: <T extends object>(sql: string, params?: readonly SqlParam[]): T | undefined => {
        const rows: T[] = this.execRows<T>(sql, normaliseParams(sql, params));
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
    return this.execRows<T>(sql, bound);
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
    return Number(this.execRows<{ v: number | null }>('SELECT max(id) AS v FROM migrations', [])[0]?.v ?? 0);
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
    // journal is not worth an O(size) snapshot at every shutdown.
    if (this.autoCompact && this.currentJournal().offset - JOURNAL_HEADER_BYTES >= this.compactionThreshold() / 4) {
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
    for (const statement of this.statements.values()) statement.free();
    this.statements.clear();
    this.db?.close();
    this.db = null;
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = null;
    this.lock.release();
  }

  private removeDeadTempFiles(): void {
    const baseName = this.files.snapshot.slice(this.files.directory.length + 1);
    let names: string[];
    try {
      names = fs.readdirSync(this.files.directory);
    } catch (error) {
      throw describeFileSystemError(error, this.files.directory, 'list the data folder') ?? error;
    }
    for (const name of names) {
      const pid = tempFileOwnerPid(baseName, name);
      if (pid === undefined || pid === process.pid || isProcessAlive(pid)) continue;
      unlinkQuietly(path.join(this.files.directory, name));
    }
  }

  private migrateLocked(migrations: readonly Migration[]): void {
    for (let i = 1; i < migrations.length; i++) {
      if (migrations[i]!.id <= migrations[i - 1]!.id) throw new Error('migrations must have strictly increasing ids');
    }
    const applied = new Set(this.execRows<{ id: number }>('SELECT id FROM migrations', []).map((row) => row.id));
    const known = new Set(migrations.map((m) => m.id));
    const unknown = [...applied].filter((id) => !known.has(id));
    if (unknown.length > 0) {
      throw new ForgeDatabaseError(
        'newer_schema',
        this.path,
        `The database ${this.path} was updated by a newer version of Forge (schema changes ${unknown.join(', ')} ` +
          `are unknown to this version). Update Forge in every VS Code window and the CLI to the latest version.`,
      );
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

  /**
   * (Re)builds the in-memory database from the files: snapshot, then every
   * journal record after it. Lock held.
   */
  private loadFromDiskLocked(verify: boolean): void {
    const snapshot = this.readSnapshotFile();
    this.snapshotLoads++;
    let db: Database;
    let seq: number;
    if (snapshot === null) {
      db = new this.sqlJs.Database();
      for (const sql of BOOTSTRAP_SQL) db.run(sql);
      seq = 0;
    } else {
      ({ db, seq } = this.openSnapshot(snapshot, verify));
    }
    db.run('PRAGMA query_only = 1');
    this.replaceDatabase(db);
    this.lastSeq = seq;
    this.snapshotBytes = snapshot?.length ?? 0;
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = null;
    this.journal = this.openJournalLocked(snapshot !== null);
    this.catchUpLocked();
    if (this.currentJournal().fileSeq < this.lastSeq) {
      // The journal ends before the snapshot does (left over from the crash
      // window of a compaction): everything in it is already in the snapshot.
      this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
    }
  }

  private replaceDatabase(db: Database): void {
    for (const statement of this.statements.values()) statement.free();
    this.statements.clear();
    this.db?.close();
    this.db = db;
  }

  private readSnapshotFile(): Buffer | null {
    try {
      return fs.readFileSync(this.files.snapshot);
    } catch (error) {
      const code = systemErrorCode(error);
      if (code === 'ENOENT') return null;
      if (code === 'EACCES' || code === 'EPERM' || code === 'EISDIR' || code === 'EIO') {
        throw new ForgeDatabaseError(
          'unreadable',
          this.files.snapshot,
          `Forge cannot read its database ${this.files.snapshot} (${code === 'EISDIR' ? 'it is a folder' : code === 'EIO' ? 'I/O error' : 'permission denied'}). ` +
            `Nothing was changed or moved. Make it a readable file (for example \`chmod u+rw ${this.files.snapshot}\`), ` +
            `or point Forge's data folder (setting forge.dataDir / option --data-dir) elsewhere.`,
          { cause: error },
        );
      }
      throw describeFileSystemError(error, this.files.snapshot, 'read') ?? error;
    }
  }

  private openSnapshot(bytes: Buffer, verify: boolean): { db: Database; seq: number } {
    if (bytes.length < 100 || !bytes.subarray(0, SQLITE_HEADER.length).equals(SQLITE_HEADER)) {
      this.snapshotDamaged(bytes.length === 0 ? 'the file is empty' : 'it is not an SQLite database file');
    }
    let db: Database | undefined;
    let problem: string | undefined;
    let seq = Number.NaN;
    try {
      db = new this.sqlJs.Database(bytes);
      const meta = db.exec(`SELECT value FROM forge_meta WHERE key = 'last_seq'`);
      seq = Number(meta[0]?.values[0]?.[0]);
      if (verify) {
        const check = db.exec('PRAGMA quick_check');
        const verdict = check[0]?.values.map((row) => String(row[0])) ?? [];
        if (verdict.length !== 1 || verdict[0] !== 'ok') problem = `SQLite's integrity check failed: ${verdict.slice(0, 3).join('; ')}`;
      }
      if (problem === undefined && !(Number.isSafeInteger(seq) && seq >= 0)) problem = 'its Forge bookkeeping row is missing or invalid';
    } catch (error) {
      const message = errorMessage(error);
      problem = /no such table: forge_meta/.test(message)
        ? 'it is an SQLite file but not a Forge database'
        : `SQLite cannot read it (${message})`;
    }
    if (problem !== undefined || db === undefined) {
      db?.close();
      return this.snapshotDamaged(problem ?? 'unknown damage');
    }
    return { db, seq };
  }

  /** Moves a damaged snapshot (and the journal that continues it) aside and throws. */
  private snapshotDamaged(reason: string): never {
    const moved = [this.moveAside(this.files.snapshot)];
    if (fs.existsSync(this.files.journal)) moved.push(this.moveAside(this.files.journal));
    throw new ForgeDatabaseError(
      'corrupt',
      this.files.snapshot,
      `Forge could not use its database ${this.files.snapshot}: ${reason}. ` +
        `Forge moved it to ${moved[0]}${moved[1] ? ` (and its journal to ${moved[1]})` : ''} and will start with an ` +
        `empty database next time. Restore the moved file from a backup if you need its history.`,
      { movedTo: moved },
    );
  }

  private moveAside(filePath: string): string {
    const now = new Date();
    for (let attempt = 1; attempt < 1000; attempt++) {
      const target = corruptFileName(filePath, now, attempt);
      if (fs.existsSync(target)) continue;
      try {
        fs.renameSync(filePath, target);
        fsyncDirectory(this.files.directory);
        return target;
      } catch (error) {
        throw new ForgeDatabaseError(
          'corrupt',
          filePath,
          `Forge found ${filePath} damaged and could not move it aside to ${target} (${errorMessage(error)}). ` +
            `Move or rename that file yourself, then start Forge again.`,
          { cause: error },
        );
      }
    }
    throw new ForgeDatabaseError('corrupt', filePath, `Forge found ${filePath} damaged and could not find a free name to move it to. Move it yourself.`);
  }

  /** Opens the journal, creating it if absent. Lock held. */
  private openJournalLocked(snapshotExists: boolean): JournalHandle {
    const opened = this.tryOpenJournal();
    if (opened === 'missing') {
      if (!snapshotExists && this.lastSeq !== 0) throw new Error('unreachable: no snapshot but lastSeq > 0');
      return this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
    }
    if (typeof opened === 'string') {
      const moved = this.moveAside(this.files.journal);
      throw new ForgeDatabaseError(
        'corrupt',
        this.files.journal,
        `Forge could not use its journal ${this.files.journal}: ${opened}. Forge moved it to ${moved}; the database ` +
          `${this.files.snapshot} is intact but lacks the changes made since its last compaction, which are only in ` +
          `the moved file. Forge will open normally next time; keep the moved file if you need to investigate.`,
        { movedTo: [moved] },
      );
    }
    if (opened.baseSeq > this.lastSeq) {
      fs.closeSync(opened.fd);
      const moved = this.moveAside(this.files.journal);
      throw new ForgeDatabaseError(
        'corrupt',
        this.files.journal,
        `Forge's journal ${this.files.journal} continues from change #${opened.baseSeq}, but the database ` +
          `${this.files.snapshot} only holds changes up to #${this.lastSeq} (was the database file replaced by an older ` +
          `copy or deleted?). Forge moved the journal to ${moved} and will open the database as it is next time.`,
        { movedTo: [moved] },
      );
    }
    return opened;
  }

  /** Opens the journal at its path and checks its header. Never modifies anything. */
  private tryOpenJournal(): JournalHandle | 'missing' | string {
    let fd: number;
    try {
      fd = fs.openSync(this.files.journal, 'r+');
    } catch (error) {
      if (systemErrorCode(error) === 'ENOENT') return 'missing';
      throw describeFileSystemError(error, this.files.journal, 'open') ?? error;
    }
    try {
      const decoded = decodeJournalHeader(readRange(fd, 0, JOURNAL_HEADER_BYTES));
      if (!decoded.ok) {
        fs.closeSync(fd);
        return decoded.reason;
      }
      const { ino } = fs.fstatSync(fd);
      const { journalId, baseSeq } = decoded.header;
      return { fd, ino, journalId, baseSeq, offset: JOURNAL_HEADER_BYTES, fileSeq: baseSeq };
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
  }

  /**
   * Atomically installs a new journal holding `records` (raw record bytes)
   * after `baseSeq`, and switches this connection to it. Lock held.
   */
  private replaceJournalLocked(baseSeq: number, records: Buffer, lastRecordSeq = baseSeq): JournalHandle {
    const journalId = randomBytes(8).toString('hex');
    const temp = tempFilePath(this.files.journal, randomBytes(4).toString('hex'));
    try {
      writeFileDurablySync(temp, Buffer.concat([encodeJournalHeader({ journalId, baseSeq }), records]));
      fs.renameSync(temp, this.files.journal);
      fsyncDirectory(this.files.directory);
    } catch (error) {
      unlinkQuietly(temp);
      throw describeFileSystemError(error, this.files.journal, 'write') ?? error;
    }
    const fd = fs.openSync(this.files.journal, 'r+');
    const { ino } = fs.fstatSync(fd);
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = {
      fd,
      ino,
      journalId,
      baseSeq,
      offset: JOURNAL_HEADER_BYTES + records.length,
      fileSeq: lastRecordSeq,
    };
    return this.journal;
  }

  // ---------------------------------------------------------------- catching up

  private currentJournal(): JournalHandle {
    if (this.journal === null) {
      throw new ForgeDatabaseError('closed', this.path, `The Forge database ${this.path} is unusable after an earlier error; open it again.`);
    }
    return this.journal;
  }

  private catchUpForRead(): void {
    if (this.catchUp(false) !== NEEDS_LOCK) return;
    this.lock.acquire();
    try {
      this.catchUpLocked();
    } finally {
      this.lock.release();
    }
  }

  private catchUpLocked(): void {
    try {
      this.catchUp(true);
    } catch (error) {
      if (error instanceof JournalDamage) this.handleJournalDamageLocked(error.message);
      throw error;
    }
  }

  /**
   * Applies the records other processes appended since our last look. With the
   * lock, also repairs (drops a torn tail) or reports damage; without it,
   * stops at anything unusual and asks for the lock.
   */
  private catchUp(locked: boolean): void | typeof NEEDS_LOCK {
    let journal = this.currentJournal();
    let size: number;
    try {
      const stat = fs.statSync(this.files.journal);
      if (stat.ino !== journal.ino) {
        // Another process compacted (or repaired) and installed a new journal.
        // Finish reading the old file through our descriptor first: records
        // appended to it before the switch are copied into the new one, and
        // reading them here usually spares a full snapshot reload.
        try {
          this.applyNewBytes(journal, fs.fstatSync(journal.fd).size, false);
        } catch (error) {
          // Damage in a retired file is not ours to repair; the snapshot that replaced it is authoritative.
          if (!(error instanceof JournalDamage)) throw error;
        }
        const next = this.tryOpenJournal();
        if (typeof next === 'string') {
          // 'missing' (replaced again meanwhile) or a damaged header.
          if (!locked) return NEEDS_LOCK;
          if (next === 'missing') {
            this.journalMissingLocked();
            return;
          }
          throw new JournalDamage(`its header is damaged (${next})`);
        }
        if (next.baseSeq > this.lastSeq) {
          // The new journal starts after what we have: only its snapshot has the changes in between.
          fs.closeSync(next.fd);
          if (!locked) return NEEDS_LOCK;
          this.loadFromDiskLocked(false);
          return;
        }
        fs.closeSync(journal.fd);
        this.journal = next;
        journal = next;
        size = fs.fstatSync(next.fd).size;
      } else {
        size = stat.size;
      }
    } catch (error) {
      if (systemErrorCode(error) !== 'ENOENT') throw error;
      if (!locked) return NEEDS_LOCK;
      this.journalMissingLocked();
      return;
    }
    if (size < journal.offset) {
      if (!locked) return NEEDS_LOCK;
      throw new JournalDamage(`it is shorter (${size} bytes) than the part already applied (${journal.offset} bytes)`);
    }
    if (size > journal.offset) {
      try {
        this.applyNewBytes(journal, size, locked);
      } catch (error) {
        if (!locked && error instanceof JournalDamage) return NEEDS_LOCK;
        throw error;
      }
    }
  }

  /**
   * Reads records in [journal.offset, size), applies the new ones, and deals
   * with whatever follows the last valid record. `repair` = we hold the lock
   * and this is the current journal.
   */
  private applyNewBytes(journal: JournalHandle, size: number, repair: boolean): void {
    const bytes = readRange(journal.fd, journal.offset, size);
    const pending: PendingRecord[] = [];
    let position = 0;
    let fileSeq = journal.fileSeq;
    let stop: { kind: 'incomplete' | 'invalid'; reason: string } | undefined;
    let damage: string | undefined;
    for (;;) {
      const result = readRecordAt(bytes, position);
      if (result.kind === 'end') break;
      if (result.kind !== 'record') {
        stop = result;
        break;
      }
      if (result.seq !== fileSeq + 1) {
        damage = `record #${result.seq} follows record #${fileSeq} at byte ${journal.offset + position}`;
        break;
      }
      if (result.seq > this.lastSeq) {
        const expected = this.lastSeq + pending.length + 1;
        if (result.seq !== expected) {
          damage = `record #${result.seq} follows change #${expected - 1} at byte ${journal.offset + position}`;
          break;
        }
        pending.push({ seq: result.seq, payload: result.payload });
      }
      fileSeq = result.seq;
      position = result.end;
    }
    // Apply what is valid before reporting anything after it, so a damage
    // report keeps every good change.
    this.applyRecords(pending);
    journal.offset += position;
    journal.fileSeq = fileSeq;
    if (damage !== undefined) throw new JournalDamage(damage);
    if (stop === undefined || !repair) return;
    if (stop.kind === 'invalid' && hasValidRecordAfter(bytes, position)) {
      throw new JournalDamage(`${stop.reason} at byte ${journal.offset}, with valid records after it`);
    }
    // A torn tail: a process stopped in the middle of an append, before it
    // acknowledged the write. Drop it so our own append lands after a valid record.
    fs.ftruncateSync(journal.fd, journal.offset);
    fs.fdatasyncSync(journal.fd);
    this.warn(
      `Forge dropped ${bytes.length - position} bytes of an unfinished write at the end of ${this.files.journal} ` +
        `(${stop.reason}); a process stopped while writing. No acknowledged change was lost.`,
    );
  }

  /** Applies complete records in one SQLite transaction, so readers never observe half of a batch. */
  private applyRecords(records: readonly PendingRecord[]): void {
    if (records.length === 0) return;
    const last = records[records.length - 1]!;
    let current: PendingRecord | undefined;
    this.setWritable(true);
    this.execSimple('BEGIN');
    try {
      for (current of records) {
        for (const [sql, params] of decodeStatements(current.payload)) this.execRun(sql, params);
      }
      this.execRun(`UPDATE forge_meta SET value = ? WHERE key = 'last_seq'`, [last.seq]);
      this.execSimple('COMMIT');
    } catch (error) {
      this.rollbackQuietly();
      throw new ForgeDatabaseError(
        'replay_failed',
        this.files.journal,
        `Forge could not apply change #${current?.seq ?? '?'} from ${this.files.journal}: ${errorMessage(error)}. ` +
          `This happens when Forge versions with different database schemas share the data folder; update Forge in ` +
          `every VS Code window and the CLI to the same version.`,
        { cause: error },
      );
    } finally {
      this.setWritable(false);
    }
    this.lastSeq = last.seq;
  }

  private journalMissingLocked(): void {
    // Someone deleted the journal. Our memory holds every change, so write it
    // all to a fresh snapshot rather than lose what only the journal had.
    this.warn(`Forge's journal ${this.files.journal} disappeared; Forge rewrote the database from memory.`);
    this.writeSnapshotSyncLocked();
    this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
  }

  /**
   * Damage in the middle of the journal (a bad record followed by valid ones,
   * a sequence gap, a shrunken file). Everything before it has been applied:
   * keep that in a fresh snapshot, move the journal aside (never delete it)
   * and report. The connection stays consistent and usable.
   */
  private handleJournalDamageLocked(reason: string): never {
    this.writeSnapshotSyncLocked();
    const moved = this.moveAside(this.files.journal);
    this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
    throw new ForgeDatabaseError(
      'corrupt',
      this.files.journal,
      `Forge found damage in its journal ${this.files.journal}: ${reason}. Forge kept every change before the damage ` +
        `(up to change #${this.lastSeq}) in ${this.files.snapshot} and moved the journal to ${moved}; changes after the ` +
        `damage are only in that moved file. Forge will open normally next time; keep the moved file if you need to investigate.`,
      { movedTo: [moved] },
    );
  }

  private writeSnapshotSyncLocked(): void {
    const bytes = this.requireDb().export();
    const temp = tempFilePath(this.files.snapshot, randomBytes(4).toString('hex'));
    try {
      writeFileDurablySync(temp, bytes);
      fs.renameSync(temp, this.files.snapshot);
      fsyncDirectory(this.files.directory);
    } catch (error) {
      unlinkQuietly(temp);
      throw describeFileSystemError(error, this.files.snapshot, 'write') ?? error;
    }
    this.snapshotBytes = bytes.length;
  }

  // ---------------------------------------------------------------- writing

  private writeLocked<T>(fn: (tx: SqlExecutor) => T): T {
    const recorder: JournalStatement[] = [];
    this.recorder = recorder;
    this.execSimple('BEGIN');
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
        this.execSimple('COMMIT');
        this.sqlTransactionOpen = false;
        return result;
      }
      const seq = this.lastSeq + 1;
      this.setWritable(true);
      try {
        this.execRun(`UPDATE forge_meta SET value = ? WHERE key = 'last_seq'`, [seq]);
      } finally {
        this.setWritable(false);
      }
      // Durable first, then visible: if the append fails, the transaction rolls back and nothing happened.
      this.appendRecordLocked(seq, encodeStatements(recorder));
      try {
        this.execSimple('COMMIT');
        this.sqlTransactionOpen = false;
        this.lastSeq = seq;
      } catch {
        // The record is on disk but sql.js failed to commit it (out of memory):
        // rebuild from disk, which applies it, so memory matches what was acknowledged.
        this.sqlTransactionOpen = false;
        this.loadFromDiskLocked(false);
      }
      return result;
    } catch (error) {
      if (this.sqlTransactionOpen) {
        this.rollbackQuietly();
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
    this.setWritable(true);
    let result: RunResult;
    try {
      result = this.execRun(sql, bound);
    } finally {
      this.setWritable(false);
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
    if (!this.autoCompact || this.closed || this.compaction !== null || this.compactionTimer !== null || this.journal === null) return;
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
      image = this.requireDb().export();
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
      const tailStart = journal.ino === cut.ino ? cut.offset : this.findRecordAfter(journal, seq);
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

  /** Offset of the first record with a sequence above `seq` in an already validated journal. */
  private findRecordAfter(journal: JournalHandle, seq: number): number {
    const bytes = readRange(journal.fd, JOURNAL_HEADER_BYTES, journal.offset);
    let position = 0;
    for (;;) {
      const result = readRecordAt(bytes, position);
      if (result.kind !== 'record' || result.seq > seq) return JOURNAL_HEADER_BYTES + position;
      position = result.end;
    }
  }

  // ---------------------------------------------------------------- sql.js access

  private assertOpen(): void {
    if (this.closed || this.db === null) {
      throw new ForgeDatabaseError('closed', this.path, `The Forge database ${this.path} was used after it was closed.`);
    }
  }

  private requireDb(): Database {
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

  private execRows<T extends object>(sql: string, params: readonly JournalValue[]): T[] {
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

  private execRun(sql: string, params: readonly JournalValue[]): RunResult {
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

  private execSimple(sql: string): void {
    const statement = this.prepared(sql);
    try {
      statement.step();
    } finally {
      statement.reset();
    }
  }

  /** `query_only` stays on except around journaled writes, so a write slipped into query()/get() fails loudly. */
  private setWritable(writable: boolean): void {
    this.execSimple(writable ? 'PRAGMA query_only = 0' : 'PRAGMA query_only = 1');
  }

  private rollbackQuietly(): void {
    try {
      this.execSimple('ROLLBACK');
    } catch {
      // SQLite may already have rolled back (e.g. out of memory); nothing left to undo
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
