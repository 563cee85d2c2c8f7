import { crc32 } from './crc32';

/**
 * Byte format of `forge.db.journal` (pure encoding/decoding, no I/O).
 *
 * File header (32 bytes, written once, atomically with the file via temp + rename):
 *   0  u32  magic 'FJH1'
 *   4  u32  format version (1)
 *   8  8 B  journal id (random; tells two generations of the file apart in diagnostics)
 *  16  u32  base sequence, high 32 bits   } the snapshot sequence this journal continues:
 *  20  u32  base sequence, low 32 bits    } its first record is baseSeq + 1
 *  24  u32  reserved (0)
 *  28  u32  CRC-32 of bytes 0..27
 *
 * Record (one committed transaction, appended with a single write + fdatasync):
 *   0  u32  magic 'FJR1'
 *   4  u32  payload length n
 *   8  u32  sequence, high 32 bits
 *  12  u32  sequence, low 32 bits
 *  16  n B  payload (UTF-8 JSON, see encodeStatements)
 *  16+n u32 CRC-32 of bytes 0..16+n-1
 *
 * Sequence numbers are global and never restart: a compaction writes a
 * snapshot that says "I contain everything up to seq S" and a new journal
 * with baseSeq S. Replay applies exactly the records with seq > the
 * snapshot's, which makes it idempotent and makes every crash window of a
 * compaction recoverable (see database.ts).
 *
 * All integers are little-endian.
 */
export const JOURNAL_HEADER_BYTES = 32;
export const RECORD_HEADER_BYTES = 16;
export const RECORD_TRAILER_BYTES = 4;
export const RECORD_OVERHEAD_BYTES = RECORD_HEADER_BYTES + RECORD_TRAILER_BYTES;

const HEADER_MAGIC = 0x3148_4a46; // 'FJH1' read as little-endian
const RECORD_MAGIC = 0x3152_4a46; // 'FJR1' read as little-endian
const FORMAT_VERSION = 1;
/** A payload longer than this is not something Forge writes; treat the length as garbage. */
const MAX_PAYLOAD_BYTES = 512 * 1024 * 1024;
const TWO_POW_32 = 0x1_0000_0000;

export interface JournalHeader {
  readonly journalId: string;
  readonly baseSeq: number;
}

export function encodeJournalHeader(header: JournalHeader): Buffer {
  const buf = Buffer.alloc(JOURNAL_HEADER_BYTES);
  buf.writeUInt32LE(HEADER_MAGIC, 0);
  buf.writeUInt32LE(FORMAT_VERSION, 4);
  Buffer.from(header.journalId, 'hex').copy(buf, 8, 0, 8);
  buf.writeUInt32LE(Math.floor(header.baseSeq / TWO_POW_32), 16);
  buf.writeUInt32LE(header.baseSeq % TWO_POW_32, 20);
  buf.writeUInt32LE(crc32(buf, 0, 28), 28);
  return buf;
}

export type HeaderDecodeResult =
  | { readonly ok: true; readonly header: JournalHeader }
  | { readonly ok: false; readonly reason: string };

export function decodeJournalHeader(buf: Uint8Array): HeaderDecodeResult {
  if (buf.length < JOURNAL_HEADER_BYTES) {
    return { ok: false, reason: `the file is ${buf.length} bytes long, shorter than its ${JOURNAL_HEADER_BYTES}-byte header` };
  }
  const view = Buffer.from(buf.buffer, buf.byteOffset, JOURNAL_HEADER_BYTES);
  if (view.readUInt32LE(0) !== HEADER_MAGIC) return { ok: false, reason: 'it does not start with a Forge journal header' };
  if (view.readUInt32LE(28) !== crc32(view, 0, 28)) return { ok: false, reason: 'its header checksum does not match' };
  const version = view.readUInt32LE(4);
  if (version !== FORMAT_VERSION) return { ok: false, reason: `it uses journal format ${version}, which this Forge does not know` };
  return {
    ok: true,
    header: {
      journalId: view.subarray(8, 16).toString('hex'),
      baseSeq: view.readUInt32LE(16) * TWO_POW_32 + view.readUInt32LE(20),
    },
  };
}

export function encodeRecord(seq: number, payload: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(RECORD_OVERHEAD_BYTES + payload.length);
  buf.writeUInt32LE(RECORD_MAGIC, 0);
  buf.writeUInt32LE(payload.length, 4);
  buf.writeUInt32LE(Math.floor(seq / TWO_POW_32), 8);
  buf.writeUInt32LE(seq % TWO_POW_32, 12);
  buf.set(payload, RECORD_HEADER_BYTES);
  const crcAt = RECORD_HEADER_BYTES + payload.length;
  buf.writeUInt32LE(crc32(buf, 0, crcAt), crcAt);
  return buf;
}

export type RecordReadResult =
  /** A complete record whose checksum matches. `end` is the offset just past it. */
  | { readonly kind: 'record'; readonly seq: number; readonly payload: Uint8Array; readonly end: number }
  /** Exactly at the end of the bytes: nothing more to read. */
  | { readonly kind: 'end' }
  /** The bytes stop inside a record: an append in progress, or a torn tail after a crash. */
  | { readonly kind: 'incomplete'; readonly reason: string }
  /** The bytes are there but are not a valid record. */
  | { readonly kind: 'invalid'; readonly reason: string };

/** Reads the record starting at `offset` in `buf` (which holds journal bytes from some file offset). */
export function readRecordAt(buf: Uint8Array, offset: number): RecordReadResult {
  const available = buf.length - offset;
  if (available === 0) return { kind: 'end' };
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  if (available < RECORD_HEADER_BYTES) {
    return { kind: 'incomplete', reason: `only ${available} bytes of a ${RECORD_HEADER_BYTES}-byte record header` };
  }
  if (view.readUInt32LE(offset) !== RECORD_MAGIC) return { kind: 'invalid', reason: 'no record marker' };
  const length = view.readUInt32LE(offset + 4);
  if (length > MAX_PAYLOAD_BYTES) return { kind: 'invalid', reason: `implausible record length ${length}` };
  const total = RECORD_OVERHEAD_BYTES + length;
  if (available < total) return { kind: 'incomplete', reason: `only ${available} of the record's ${total} bytes` };
  const crcAt = offset + RECORD_HEADER_BYTES + length;
  if (view.readUInt32LE(crcAt) !== crc32(view, offset, crcAt)) return { kind: 'invalid', reason: 'record checksum mismatch' };
  const seq = view.readUInt32LE(offset + 8) * TWO_POW_32 + view.readUInt32LE(offset + 12);
  return { kind: 'record', seq, payload: view.subarray(offset + RECORD_HEADER_BYTES, crcAt), end: offset + total };
}

/** The sequence number and total size a record header at `offset` announces (even if the record is cut short), if one is there. */
export function peekRecordHeader(buf: Uint8Array, offset: number): { seq: number; totalBytes: number } | undefined {
  if (buf.length - offset < RECORD_HEADER_BYTES) return undefined;
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  if (view.readUInt32LE(offset) !== RECORD_MAGIC) return undefined;
  return {
    seq: view.readUInt32LE(offset + 8) * TWO_POW_32 + view.readUInt32LE(offset + 12),
    totalBytes: RECORD_OVERHEAD_BYTES + view.readUInt32LE(offset + 4),
  };
}

/**
 * Whether any valid record starts somewhere after `from`. Distinguishes a torn
 * tail (garbage only at the end: normal after a crash mid-append) from damage
 * in the middle of the journal (valid records follow a bad one).
 */
export function hasValidRecordAfter(buf: Uint8Array, from: number): boolean {
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.length);
  const marker = Buffer.alloc(4);
  marker.writeUInt32LE(RECORD_MAGIC, 0);
  let at = view.indexOf(marker, from + 1);
  while (at !== -1) {
    if (readRecordAt(buf, at).kind === 'record') return true;
    at = view.indexOf(marker, at + 1);
  }
  return false;
}

// ---------------------------------------------------------------------------
// Payload: the write statements of one transaction, as JSON.

/** A value bindable to a statement parameter and representable in the journal. */
export type JournalValue = string | number | null | Uint8Array;
export type JournalStatement = readonly [sql: string, params: readonly JournalValue[]];

const BLOB_TAG = '$forgeBlob';

export function encodeStatements(statements: readonly JournalStatement[]): Buffer {
  const json = JSON.stringify(statements, (_key, value: unknown) =>
    value instanceof Uint8Array ? { [BLOB_TAG]: Buffer.from(value.buffer, value.byteOffset, value.length).toString('base64') } : value,
  );
  return Buffer.from(json, 'utf8');
}

export function decodeStatements(payload: Uint8Array): JournalStatement[] {
  const text = Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('utf8');
  const value: unknown = JSON.parse(text, (_key, raw: unknown) => {
    if (raw !== null && typeof raw === 'object' && !Array.isArray(raw) && BLOB_TAG in raw) {
      return new Uint8Array(Buffer.from(String((raw as Record<string, unknown>)[BLOB_TAG]), 'base64'));
    }
    return raw;
  });
  if (!Array.isArray(value)) throw new Error('journal payload is not a statement list');
  return value.map((entry): JournalStatement => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !Array.isArray(entry[1])) {
      throw new Error('journal payload holds a malformed statement');
    }
    return [entry[0], entry[1] as JournalValue[]];
  });
}
