import assert from 'node:assert/strict';
import { describeUnreadTail, lostChangesText, scanJournalBytes, unreadTailText } from '../../../src/core/storage/journal-file';
import { RECORD_OVERHEAD_BYTES, encodeRecord, peekRecordHeader } from '../../../src/core/storage/journal-format';

/** The pure parts of reading a journal: the record scan and what an unreadable tail means. */

const FILE_OFFSET = 32; // the bytes below start just after the journal header
const payload = (n: number) => Buffer.from(`[["UPDATE t SET v = ?",[${n}]]]`);
const records = (from: number, to: number) => Buffer.concat(Array.from({ length: to - from + 1 }, (_, i) => encodeRecord(from + i, payload(from + i))));

describe('storage: journal scan and unread tails', () => {
  it('scans whole records, skipping those already applied', () => {
    const bytes = records(1, 4);
    const scan = scanJournalBytes(bytes, FILE_OFFSET, 0, 2);
    assert.deepEqual(scan.pending.map((r) => r.seq), [3, 4]);
    assert.equal(scan.position, bytes.length);
    assert.equal(scan.fileSeq, 4);
    assert.equal(scan.stop, undefined);
    assert.equal(scan.damage, undefined);
  });

  it('stops before a record cut short and before bytes that are not a record', () => {
    const whole = records(1, 3);
    const cut = whole.subarray(0, whole.length - 9);
    const cutScan = scanJournalBytes(cut, FILE_OFFSET, 0, 0);
    assert.deepEqual(cutScan.pending.map((r) => r.seq), [1, 2]);
    assert.equal(cutScan.stop?.kind, 'incomplete');
    const garbage = Buffer.concat([records(1, 1), Buffer.from('not a record at all')]);
    const garbageScan = scanJournalBytes(garbage, FILE_OFFSET, 0, 0);
    assert.deepEqual(garbageScan.pending.map((r) => r.seq), [1]);
    assert.equal(garbageScan.stop?.kind, 'invalid');
  });

  it('reports a sequence gap as damage, with its file offset', () => {
    const bytes = Buffer.concat([records(1, 2), records(4, 4)]);
    const scan = scanJournalBytes(bytes, FILE_OFFSET, 0, 0);
    assert.deepEqual(scan.pending.map((r) => r.seq), [1, 2]);
    assert.equal(scan.damage, `record #4 follows record #2 at byte ${FILE_OFFSET + records(1, 2).length}`);
  });

  it('describes a tail cut inside a record: offset, size, and the change it begins', () => {
    const good = records(1, 2);
    const third = encodeRecord(3, payload(3));
    const bytes = Buffer.concat([good, third.subarray(0, 30)]);
    const tail = describeUnreadTail(bytes, good.length, FILE_OFFSET);
    assert.deepEqual(tail, { offset: FILE_OFFSET + good.length, bytes: 30, seq: 3, recordBytes: third.length });
    assert.equal(
      unreadTailText(tail),
      `the last 30 bytes of the journal, from byte ${FILE_OFFSET + good.length} on, cannot be read (they are the first 30 of the ${third.length} bytes of change #3)`,
    );
    assert.match(lostChangesText(tail, 2), /^change #3 and any change after it are lost from the database .* loops they changed may show an older state/);
  });

  it('describes a tail too short for a record header, and a whole record with a bad checksum', () => {
    const good = records(1, 1);
    const short = describeUnreadTail(Buffer.concat([good, Buffer.from([0x46, 0x4a, 0x52])]), good.length, FILE_OFFSET);
    assert.deepEqual(short, { offset: FILE_OFFSET + good.length, bytes: 3, seq: undefined, recordBytes: undefined });
    assert.match(unreadTailText(short), /\(they are not a change record\)$/);
    assert.match(lostChangesText(short, 1), /^change #2 and any change after it/, 'the next change when the header is gone');

    const second = encodeRecord(2, payload(2));
    second[second.length - 1] = second[second.length - 1]! ^ 0xff;
    const bad = describeUnreadTail(Buffer.concat([good, second]), good.length, FILE_OFFSET);
    assert.equal(bad.recordBytes, bad.bytes);
    assert.match(unreadTailText(bad), /\(they hold change #2, whose checksum does not match\)$/);
  });

  it('peeks the header of a record cut short', () => {
    const record = encodeRecord(2 ** 33 + 5, payload(1));
    assert.deepEqual(peekRecordHeader(record.subarray(0, 16), 0), { seq: 2 ** 33 + 5, totalBytes: RECORD_OVERHEAD_BYTES + payload(1).length });
    assert.equal(peekRecordHeader(record.subarray(0, 15), 0), undefined);
    assert.equal(peekRecordHeader(Buffer.alloc(16), 0), undefined);
  });
});
