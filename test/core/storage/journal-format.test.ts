import assert from 'node:assert/strict';
import { crc32 } from '../../../src/core/storage/crc32';
import {
  JOURNAL_HEADER_BYTES,
  RECORD_OVERHEAD_BYTES,
  decodeJournalHeader,
  decodeStatements,
  encodeJournalHeader,
  encodeRecord,
  encodeStatements,
  hasValidRecordAfter,
  readRecordAt,
} from '../../../src/core/storage/journal-format';

describe('storage: journal format', () => {
  it('computes the standard CRC-32', () => {
    assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926);
    assert.equal(crc32(Buffer.alloc(0)), 0);
  });

  it('round-trips the file header, including sequence numbers above 2^32', () => {
    const header = { journalId: '0123456789abcdef', baseSeq: 2 ** 40 + 7 };
    const bytes = encodeJournalHeader(header);
    assert.equal(bytes.length, JOURNAL_HEADER_BYTES);
    assert.deepEqual(decodeJournalHeader(bytes), { ok: true, header });
    const damaged = Buffer.from(bytes);
    damaged[20] = damaged[20]! ^ 1;
    assert.deepEqual(decodeJournalHeader(damaged), { ok: false, reason: 'its header checksum does not match' });
    assert.match((decodeJournalHeader(bytes.subarray(0, 10)) as { reason: string }).reason, /10 bytes long/);
    assert.match((decodeJournalHeader(Buffer.alloc(32)) as { reason: string }).reason, /does not start with a Forge journal header/);
  });

  it('round-trips statements with every parameter type', () => {
    const statements = [
      ['INSERT INTO t VALUES (?, ?, ?, ?)', ['text ✓', 42.5, null, new Uint8Array([0, 255])]],
      ['DELETE FROM t', []],
    ] as const;
    const decoded = decodeStatements(encodeStatements(statements));
    assert.deepEqual(decoded[0]![1].slice(0, 3), ['text ✓', 42.5, null]);
    assert.ok(decoded[0]![1][3] instanceof Uint8Array);
    assert.deepEqual([...(decoded[0]![1][3] as Uint8Array)], [0, 255]);
    assert.deepEqual(decoded[1], ['DELETE FROM t', []]);
  });

  it('reads records, and tells an incomplete tail from an invalid record', () => {
    const one = encodeRecord(5, Buffer.from('first'));
    const two = encodeRecord(6, Buffer.from('second'));
    const both = Buffer.concat([one, two]);
    const first = readRecordAt(both, 0);
    assert.equal(first.kind, 'record');
    assert.equal(first.kind === 'record' && first.seq, 5);
    assert.equal(first.kind === 'record' && Buffer.from(first.payload).toString(), 'first');
    assert.equal(first.kind === 'record' && first.end, one.length);
    assert.equal(readRecordAt(both, both.length).kind, 'end');
    assert.equal(one.length, RECORD_OVERHEAD_BYTES + 5);

    for (let cut = 1; cut < two.length; cut++) {
      assert.equal(readRecordAt(Buffer.concat([one, two.subarray(0, cut)]), one.length).kind, 'incomplete', `cut at ${cut}`);
    }
    const flipped = Buffer.from(both);
    flipped[one.length + 18] = flipped[one.length + 18]! ^ 0x40;
    assert.deepEqual(readRecordAt(flipped, one.length), { kind: 'invalid', reason: 'record checksum mismatch' });
    assert.deepEqual(readRecordAt(Buffer.alloc(40), 0), { kind: 'invalid', reason: 'no record marker' });
  });

  it('finds valid records after a damaged one (middle damage) but not after a torn tail', () => {
    const records = [1, 2, 3].map((seq) => encodeRecord(seq, Buffer.from(`payload ${seq}`)));
    const middleDamage = Buffer.concat(records);
    middleDamage[records[0]!.length + 17] = 0;
    assert.equal(hasValidRecordAfter(middleDamage, records[0]!.length), true);
    const tornTail = Buffer.concat([records[0]!, records[1]!.subarray(0, 9)]);
    assert.equal(hasValidRecordAfter(tornTail, records[0]!.length), false);
    const garbageTail = Buffer.concat([records[0]!, Buffer.alloc(100, 0x46)]);
    assert.equal(hasValidRecordAfter(garbageTail, records[0]!.length), false);
  });
});
