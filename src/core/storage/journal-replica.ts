import fs from 'node:fs';
import path from 'node:path';
import type { Database, SqlJsStatic } from 'sql.js';
import { isProcessAlive, type CrossProcessLock } from './cross-process-lock';
import { tempFileOwnerPid, type DatabaseFiles } from './database-files';
import { errorMessage, moveAside, readRange, unlinkQuietly } from './durable-io';
import { ForgeDatabaseError, describeFileSystemError, systemErrorCode } from './errors';
import {
  describeUnreadTail,
  installJournal,
  lostChangesText,
  scanJournalBytes,
  tryOpenJournal,
  unreadTailText,
  type JournalHandle,
  type PendingRecord,
} from './journal-file';
import { decodeStatements, hasValidRecordAfter } from './journal-format';
import { SqlJsConnection } from './sqljs-connection';
import { createBootstrapDatabase, moveDamagedSnapshotAside, openSnapshot, readSnapshotFile, writeSnapshotSync } from './snapshot-file';

/*
 * One connection's replica of the database: loading the snapshot, replaying
 * the journal onto it, catching up with the records other processes append,
 * and recovering from what a crash or damage leaves in the files.
 *
 * Opening loads the snapshot and replays the journal records whose sequence
 * number is above the snapshot's (idempotent). A record torn by a crash
 * (short, or bad checksum with nothing valid after it) is dropped only when
 * the process that held the lock died (this acquisition took the lock over
 * from it): that write was never acknowledged. Without a dead writer the
 * same tail lost acknowledged changes (a cut or damaged file), and like a bad
 * record with valid ones after it, it is damage: the readable changes are
 * kept, the journal is moved aside whole and the loss is named (see
 * handleJournalDamageLocked).
 *
 * Reads catch up without the lock (a stat, then only the new bytes) and apply
 * only complete, checksummed records, each batch inside one SQLite
 * transaction, so a reader never sees a torn state. Anything unusual (a
 * replaced journal it lags behind, damage, a shrunken file) is left to the
 * lock holder. The write path and compaction build on this in database.ts.
 */

/** Damage found while reading the journal; handled by the lock holder. */
class JournalDamage extends Error {
  constructor(
    message: string,
    /** What the damage cost, when more is known than "the changes after it are in the moved file". */
    readonly lost?: string,
  ) {
    super(message);
  }
}

/** A reader hit something only the lock holder may resolve (replaced journal it lags behind, damage, shrink). */
const NEEDS_LOCK = 'needs-lock';

/**
 * Applies journal records to `sql` in one SQLite transaction (with the new
 * `last_seq`), so readers never observe half of a batch.
 */
export function applyRecordsTo(sql: SqlJsConnection, records: readonly PendingRecord[], journalPath: string): void {
  if (records.length === 0) return;
  const last = records[records.length - 1]!;
  let current: PendingRecord | undefined;
  sql.setWritable(true);
  sql.execSimple('BEGIN');
  try {
    for (current of records) {
      for (const [statement, params] of decodeStatements(current.payload)) sql.execRun(statement, params);
    }
    sql.execRun(`UPDATE forge_meta SET value = ? WHERE key = 'last_seq'`, [last.seq]);
    sql.execSimple('COMMIT');
  } catch (error) {
    sql.rollbackQuietly();
    throw new ForgeDatabaseError(
      'replay_failed',
      journalPath,
      `Forge could not apply change #${current?.seq ?? '?'} from ${journalPath}: ${errorMessage(error)}. ` +
        `This happens when Forge versions with different database schemas share the data folder; update Forge in ` +
        `every VS Code window and the CLI to the same version.`,
      { cause: error },
    );
  } finally {
    sql.setWritable(false);
  }
}

export abstract class JournalReplica {
  protected readonly sql: SqlJsConnection;
  protected journal: JournalHandle | null = null;
  /** Sequence number of the last change applied to `sql`. */
  protected lastSeq = 0;
  protected snapshotBytes = 0;
  protected snapshotLoads = 0;

  protected constructor(
    protected readonly sqlJs: SqlJsStatic,
    protected readonly files: DatabaseFiles,
    protected readonly lock: CrossProcessLock,
    protected readonly warn: (message: string) => void,
  ) {
    this.sql = new SqlJsConnection(files.snapshot);
  }

  protected removeDeadTempFiles(): void {
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


  /**
   * (Re)builds the in-memory database from the files: snapshot, then every
   * journal record after it. Lock held.
   */
  protected loadFromDiskLocked(verify: boolean): void {
    const snapshot = readSnapshotFile(this.files);
    this.snapshotLoads++;
    let db: Database;
    let seq: number;
    if (snapshot === null) {
      db = createBootstrapDatabase(this.sqlJs);
      seq = 0;
    } else {
      const opened = openSnapshot(this.sqlJs, snapshot, verify);
      if ('problem' in opened) moveDamagedSnapshotAside(this.files, opened.problem);
      ({ db, seq } = opened);
    }
    db.run('PRAGMA query_only = 1');
    this.sql.replace(db);
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

  /** Opens the journal, creating it if absent. Lock held. */
  protected openJournalLocked(snapshotExists: boolean): JournalHandle {
    const opened = tryOpenJournal(this.files);
    if (opened === 'missing') {
      if (!snapshotExists && this.lastSeq !== 0) throw new Error('unreachable: no snapshot but lastSeq > 0');
      return this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
    }
    if (typeof opened === 'string') {
      const moved = moveAside(this.files.journal, this.files.directory);
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
      const moved = moveAside(this.files.journal, this.files.directory);
      throw new ForgeDatabaseError(
        'corrupt',
        this.files.journal,
        `Forge's journal ${this.files.journal} continues from change #${opened.baseSeq}, but the database ` +
          `${this.files.snapshot} only holds changes up to #${this.lastSeq} (was the database file emptied, or replaced by an older ` +
          `copy or deleted?). Forge moved the journal to ${moved} and will open the database as it is next time.`,
        { movedTo: [moved] },
      );
    }
    return opened;
  }

  /**
   * Atomically installs a new journal holding `records` (raw record bytes)
   * after `baseSeq`, and switches this connection to it. Lock held.
   */
  protected replaceJournalLocked(baseSeq: number, records: Buffer, lastRecordSeq = baseSeq): JournalHandle {
    const next = installJournal(this.files, baseSeq, records, lastRecordSeq);
    if (this.journal !== null) fs.closeSync(this.journal.fd);
    this.journal = next;
    return next;
  }

  // ---------------------------------------------------------------- catching up

  protected currentJournal(): JournalHandle {
    if (this.journal === null) {
      throw new ForgeDatabaseError('closed', this.files.snapshot, `The Forge database ${this.files.snapshot} is unusable after an earlier error; open it again.`);
    }
    return this.journal;
  }

  protected catchUpForRead(): void {
    if (this.catchUp(false) !== NEEDS_LOCK) return;
    this.lock.acquire();
    try {
      this.catchUpLocked();
    } finally {
      this.lock.release();
    }
  }

  protected catchUpLocked(): void {
    try {
      this.catchUp(true);
    } catch (error) {
      if (error instanceof JournalDamage) this.handleJournalDamageLocked(error.message, error.lost);
      throw error;
    }
  }

  /**
   * Applies the records other processes appended since our last look. With the
   * lock, also repairs (drops a torn tail) or reports damage; without it,
   * stops at anything unusual and asks for the lock.
   */
  protected catchUp(locked: boolean): void | typeof NEEDS_LOCK {
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
        const next = tryOpenJournal(this.files);
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
  protected applyNewBytes(journal: JournalHandle, size: number, repair: boolean): void {
    const bytes = readRange(journal.fd, journal.offset, size);
    const { pending, position, fileSeq, stop, damage } = scanJournalBytes(bytes, journal.offset, journal.fileSeq, this.lastSeq);
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
    const tail = describeUnreadTail(bytes, position, journal.offset - position);
    const diedWriting = this.lock.tookOverFrom;
    if (diedWriting === null) {
      // Nobody died holding the lock, so no append was interrupted: the file
      // lost bytes after they were acknowledged (cut short, a partial copy or
      // restore, a disk fault). Keep the file, and say what is lost.
      throw new JournalDamage(
        `${unreadTailText(tail)}, and no Forge process died while writing it (the lock was free)`,
        lostChangesText(tail, this.lastSeq),
      );
    }
    // A torn tail: the process that held the lock died in the middle of an
    // append, before it acknowledged the write. Drop it so our own append
    // lands after a valid record.
    fs.ftruncateSync(journal.fd, journal.offset);
    fs.fdatasyncSync(journal.fd);
    this.warn(
      `Forge dropped an unfinished write at the end of ${this.files.journal}: ${unreadTailText(tail)}. ` +
        `Process ${diedWriting.pid} died while writing it (it still held the lock), so that change was never ` +
        `acknowledged. No acknowledged change was lost.`,
    );
  }

  /** Applies complete records in one SQLite transaction, so readers never observe half of a batch. */
  protected applyRecords(records: readonly PendingRecord[]): void {
    if (records.length === 0) return;
    applyRecordsTo(this.sql, records, this.files.journal);
    this.lastSeq = records[records.length - 1]!.seq;
  }

  protected journalMissingLocked(): void {
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
  protected handleJournalDamageLocked(reason: string, lost?: string): never {
    this.writeSnapshotSyncLocked();
    const moved = moveAside(this.files.journal, this.files.directory);
    this.replaceJournalLocked(this.lastSeq, Buffer.alloc(0));
    const cost =
      lost === undefined
        ? `changes after the damage are only in that moved file`
        : `${lost}. The moved file keeps the unreadable bytes as they were`;
    throw new ForgeDatabaseError(
      'corrupt',
      this.files.journal,
      `Forge found damage in its journal ${this.files.journal}: ${reason}. Forge kept every change before the damage ` +
        `(up to change #${this.lastSeq}) in ${this.files.snapshot} and moved the journal to ${moved}; ${cost}. ` +
        `Forge will open normally next time; keep the moved file if you need to investigate.`,
      { movedTo: [moved] },
    );
  }

  protected writeSnapshotSyncLocked(): void {
    const bytes = this.sql.requireDb().export();
    writeSnapshotSync(this.files, bytes);
    this.snapshotBytes = bytes.length;
  }

}
