import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tempFilePath, type DatabaseFiles } from './database-files';
import { fsyncDirectory, readRange, unlinkQuietly, writeFileDurablySync } from './durable-io';
import { describeFileSystemError, systemErrorCode } from './errors';
import { JOURNAL_HEADER_BYTES, decodeJournalHeader, encodeJournalHeader, peekRecordHeader, readRecordAt } from './journal-format';

/*
 * The journal file `forge.db.journal` as a connection sees it: an open
 * descriptor, how far it has been read, and the scan of newly appended bytes
 * into records. The byte format itself is in journal-format.ts.
 */

export interface JournalHandle {
  readonly fd: number;
  readonly ino: number;
  readonly journalId: string;
  readonly baseSeq: number;
  /** File offset just past the last record this connection has read (applied or skipped). */
  offset: number;
  /** Sequence number of that record (baseSeq when none). */
  fileSeq: number;
}

export interface PendingRecord {
  readonly seq: number;
  readonly payload: Uint8Array;
}

/** Opens the journal at its path (`'r'`: for reading only) and checks its header. Never modifies anything. */
export function tryOpenJournal(files: DatabaseFiles, flags: 'r' | 'r+' = 'r+'): JournalHandle | 'missing' | string {
  let fd: number;
  try {
    fd = fs.openSync(files.journal, flags);
  } catch (error) {
    if (systemErrorCode(error) === 'ENOENT') return 'missing';
    throw describeFileSystemError(error, files.journal, 'open') ?? error;
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
    // A folder opens but cannot be read (EISDIR): the same one-line message as a failed open.
    throw describeFileSystemError(error, files.journal, 'open') ?? error;
  }
}

/**
 * Atomically installs a new journal holding `records` (raw record bytes)
 * after `baseSeq` and returns it opened. Lock held.
 */
export function installJournal(files: DatabaseFiles, baseSeq: number, records: Buffer, lastRecordSeq: number): JournalHandle {
  const journalId = randomBytes(8).toString('hex');
  const temp = tempFilePath(files.journal, randomBytes(4).toString('hex'));
  try {
    writeFileDurablySync(temp, Buffer.concat([encodeJournalHeader({ journalId, baseSeq }), records]));
    fs.renameSync(temp, files.journal);
    fsyncDirectory(files.directory);
  } catch (error) {
    unlinkQuietly(temp);
    throw describeFileSystemError(error, files.journal, 'write') ?? error;
  }
  const fd = fs.openSync(files.journal, 'r+');
  const { ino } = fs.fstatSync(fd);
  return { fd, ino, journalId, baseSeq, offset: JOURNAL_HEADER_BYTES + records.length, fileSeq: lastRecordSeq };
}

/** Offset of the first record with a sequence above `seq` in an already validated journal. */
export function findRecordAfter(journal: JournalHandle, seq: number): number {
  const bytes = readRange(journal.fd, JOURNAL_HEADER_BYTES, journal.offset);
  let position = 0;
  for (;;) {
    const result = readRecordAt(bytes, position);
    if (result.kind !== 'record' || result.seq > seq) return JOURNAL_HEADER_BYTES + position;
    position = result.end;
  }
}

export interface JournalScan {
  /** Records above `appliedSeq`, in order, ready to apply. */
  readonly pending: PendingRecord[];
  /** Offset in `bytes` just past the last valid record. */
  readonly position: number;
  /** Sequence number of that record. */
  readonly fileSeq: number;
  /** Why reading stopped before the end of `bytes`: a record cut short, or bytes that are not a record. */
  readonly stop?: { readonly kind: 'incomplete' | 'invalid'; readonly reason: string };
  /** A sequence that does not follow on: damage, whatever follows. */
  readonly damage?: string;
}

/**
 * Reads the records in `bytes` (journal bytes starting at file offset
 * `fileOffset`, after a record numbered `fileSeq`) up to the first thing that
 * is not the next valid record. Pure.
 */
export function scanJournalBytes(bytes: Uint8Array, fileOffset: number, fileSeq: number, appliedSeq: number): JournalScan {
  const pending: PendingRecord[] = [];
  let position = 0;
  for (;;) {
    const result = readRecordAt(bytes, position);
    if (result.kind === 'end') return { pending, position, fileSeq };
    if (result.kind !== 'record') return { pending, position, fileSeq, stop: result };
    if (result.seq !== fileSeq + 1) {
      return { pending, position, fileSeq, damage: `record #${result.seq} follows record #${fileSeq} at byte ${fileOffset + position}` };
    }
    if (result.seq > appliedSeq) {
      const expected = appliedSeq + pending.length + 1;
      if (result.seq !== expected) {
        return { pending, position, fileSeq, damage: `record #${result.seq} follows change #${expected - 1} at byte ${fileOffset + position}` };
      }
      pending.push({ seq: result.seq, payload: result.payload });
    }
    fileSeq = result.seq;
    position = result.end;
  }
}

/** The bytes at the end of a journal that are not a readable change record. */
export interface UnreadTail {
  /** File offset of the first unreadable byte (just past the last readable record). */
  readonly offset: number;
  readonly bytes: number;
  /** The change those bytes begin, when its record header is there. */
  readonly seq: number | undefined;
  /** How many bytes that change's record needs, when its header says. */
  readonly recordBytes: number | undefined;
}

/** Describes `bytes[position..]`, which start at file offset `fileOffset + position`. Pure. */
export function describeUnreadTail(bytes: Uint8Array, position: number, fileOffset: number): UnreadTail {
  const header = peekRecordHeader(bytes, position);
  return { offset: fileOffset + position, bytes: bytes.length - position, seq: header?.seq, recordBytes: header?.totalBytes };
}

/** "the last 1234 bytes, from byte 5678 on, are not a complete change: change #12 needs 2000 bytes". */
export function unreadTailText(tail: UnreadTail): string {
  const what =
    tail.seq !== undefined && tail.recordBytes !== undefined && tail.recordBytes > tail.bytes
      ? `they are the first ${tail.bytes} of the ${tail.recordBytes} bytes of change #${tail.seq}`
      : tail.seq !== undefined
        ? `they hold change #${tail.seq}, whose checksum does not match`
        : 'they are not a change record';
  return `the last ${tail.bytes} bytes of the journal, from byte ${tail.offset} on, cannot be read (${what})`;
}

/** What an unread tail means for the data when no process died writing it: acknowledged changes are gone. */
export function lostChangesText(tail: UnreadTail, lastGoodSeq: number): string {
  const first = tail.seq ?? lastGoodSeq + 1;
  return (
    `change #${first} and any change after it are lost from the database (how many followed cannot be known: ` +
    `the journal ends there), so loops they changed may show an older state, for example a loop that completed ` +
    `shown as still running`
  );
}
