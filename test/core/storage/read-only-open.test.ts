import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { isForgeDatabaseError } from '../../../src/core/storage/errors';
import { JOURNAL_HEADER_BYTES, readRecordAt } from '../../../src/core/storage/journal-format';
import { LATEST_SCHEMA_VERSION } from '../../../src/core/storage/migrations';
import { collectWarnings, makeTempDataDir, spawnStorageChild, type TempDataDir } from '../../support/storage-fixtures';

/**
 * A read-only open (forge status, forge findings) never changes a file, even
 * a damaged one, and says truthfully what it could not read.
 */

function writeValue(db: ForgeDatabase, key: string): void {
  db.run('INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)', ['p', key, '"v"', 1]);
}

function keys(db: ForgeDatabase): string[] {
  return db.query<{ key: string }>('SELECT key FROM preferences ORDER BY key').map((row) => row.key);
}

function recordOffsets(journalPath: string): { start: number; end: number }[] {
  const bytes = fs.readFileSync(journalPath).subarray(JOURNAL_HEADER_BYTES);
  const offsets: { start: number; end: number }[] = [];
  let position = 0;
  for (;;) {
    const result = readRecordAt(bytes, position);
    if (result.kind !== 'record') return offsets;
    offsets.push({ start: JOURNAL_HEADER_BYTES + position, end: JOURNAL_HEADER_BYTES + result.end });
    position = result.end;
  }
}

/** Every file of the data folder with its bytes. */
function folderContents(dir: string): Record<string, string> {
  const contents: Record<string, string> = {};
  for (const name of fs.readdirSync(dir).sort()) contents[name] = fs.readFileSync(path.join(dir, name)).toString('base64');
  return contents;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('storage: read-only open', function () {
  this.timeout(60_000);
  let data: TempDataDir;

  beforeEach(() => {
    data = makeTempDataDir();
  });

  afterEach(() => data.cleanup());

  /** A compacted snapshot holding 'a', then one journal record per key of `more`; returns the records. */
  async function databaseWithJournal(more: readonly string[]): Promise<{ start: number; end: number }[]> {
    let db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    writeValue(db, 'a');
    await db.compact();
    await db.close();
    db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    for (const key of more) writeValue(db, key);
    await db.close();
    return recordOffsets(`${data.dbPath}.journal`);
  }

  it('of a journal cut in the middle: leaves both files byte-identical and says which changes cannot be read', async () => {
    const records = await databaseWithJournal(['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    const journal = `${data.dbPath}.journal`;
    const cutRecord = records[4]!;
    const cutAt = cutRecord.start + Math.floor((cutRecord.end - cutRecord.start) / 2);
    fs.truncateSync(journal, cutAt);
    const before = folderContents(data.dir);

    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, readOnly: true, onWarning: warnings.onWarning });
    assert.deepEqual(keys(db), ['a', 'b', 'c', 'd', 'e'], 'every readable change');
    assert.deepEqual(keys(db), ['a', 'b', 'c', 'd', 'e']);
    const lastReadable = db.diagnostics().lastSeq;
    await db.close();

    assert.equal(warnings.messages.length, 1, `reported once: ${warnings.messages.join('\n')}`);
    const message = warnings.messages[0]!;
    assert.match(
      message,
      new RegExp(
        `cannot read the end of its journal ${escape(journal)}: the last ${cutAt - cutRecord.start} bytes of the journal, ` +
          `from byte ${cutRecord.start} on, cannot be read \\(they are the first ${cutAt - cutRecord.start} of the ` +
          `${cutRecord.end - cutRecord.start} bytes of change #${lastReadable + 1}\\), and no Forge process died while writing it`,
      ),
    );
    assert.match(message, new RegExp(`change #${lastReadable + 1} and any change after it are lost from the database`));
    assert.match(message, /loops they changed may show an older state/);
    assert.match(message, new RegExp(`This shows the database as of change #${lastReadable}\\. Forge changed nothing`));
    assert.doesNotMatch(message, /No acknowledged change was lost/i);
    assert.deepEqual(folderContents(data.dir), before, 'no file changed, none created (not even the lock), none moved');

    // The damage is still there for the next writer, which keeps the cut file and says the same.
    try {
      await openForgeDatabase({ path: data.dbPath });
      assert.fail('the writer should report the damage');
    } catch (error) {
      assert.ok(isForgeDatabaseError(error, 'corrupt'), String(error));
      assert.match(error.message, new RegExp(`change #${lastReadable + 1} and any change after it are lost`));
      assert.deepEqual(fs.readFileSync(error.movedTo[0]!).toString('base64'), before['forge.db.journal']);
    }
  });

  it('of a journal whose writer died mid-append: says the change was never acknowledged, and changes nothing', async () => {
    const records = await databaseWithJournal(['b', 'c']);
    const journal = `${data.dbPath}.journal`;
    fs.truncateSync(journal, records[1]!.end - 5);
    const dead = spawnStorageChild('storage-worker.ts', ['no-such-mode']);
    await dead.exited;
    fs.writeFileSync(`${data.dbPath}.lock`, JSON.stringify({ pid: dead.process.pid, host: os.hostname(), token: 'dead', startTime: null }));
    const before = folderContents(data.dir);

    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, readOnly: true, onWarning: warnings.onWarning });
    assert.deepEqual(keys(db), ['a', 'b']);
    await db.close();
    assert.equal(warnings.messages.length, 1);
    assert.match(warnings.messages[0]!, new RegExp(`ends with an unfinished write: .*Process ${dead.process.pid} died while writing it .*no acknowledged change was lost`));
    assert.deepEqual(folderContents(data.dir), before);
  });

  it('of a journal a live writer is appending to right now: reads what is complete, reports nothing, then sees the rest', async () => {
    const records = await databaseWithJournal(['b', 'c']);
    const journal = `${data.dbPath}.journal`;
    const full = fs.readFileSync(journal);
    const last = records[1]!;
    const half = last.start + Math.floor((last.end - last.start) / 2);
    fs.truncateSync(journal, half); // the append of 'c' is half written...
    // ...by a live process holding the lock (the test process plays it).
    fs.writeFileSync(`${data.dbPath}.lock`, JSON.stringify({ pid: process.pid, host: os.hostname(), token: 'writing', startTime: null }));

    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, readOnly: true, onWarning: warnings.onWarning });
    assert.deepEqual(keys(db), ['a', 'b']);
    fs.appendFileSync(journal, full.subarray(half)); // the append completes
    fs.unlinkSync(`${data.dbPath}.lock`); // and the writer releases the lock
    assert.deepEqual(keys(db), ['a', 'b', 'c']);
    await db.close();
    assert.deepEqual(warnings.messages, [], 'an append in progress is no damage');
  });

  it('of a damaged snapshot: a clear error, and the file stays where it is', async () => {
    await databaseWithJournal(['b']);
    fs.writeFileSync(data.dbPath, Buffer.from('not a database '.repeat(20)));
    const before = folderContents(data.dir);
    try {
      await openForgeDatabase({ path: data.dbPath, readOnly: true });
      assert.fail('expected an error');
    } catch (error) {
      assert.ok(isForgeDatabaseError(error, 'corrupt'), String(error));
      assert.match(error.message, /it is not an SQLite database file\. Forge changed nothing, as this command only reads; the next Forge command that writes/);
      assert.deepEqual(error.movedTo, []);
    }
    assert.deepEqual(folderContents(data.dir), before);
  });

  it('of an empty folder or an older schema: migrates in memory only, creates nothing, refuses writes', async () => {
    const db = await openForgeDatabase({ path: data.dbPath, readOnly: true });
    assert.equal(db.schemaVersion(), LATEST_SCHEMA_VERSION);
    assert.deepEqual(keys(db), []);
    assert.throws(() => writeValue(db, 'x'), (error: unknown) => isForgeDatabaseError(error, 'invalid_use') && /opened read-only/.test(error.message));
    assert.deepEqual(fs.readdirSync(data.dir), [], 'nothing created');

    // Another process creates the database meanwhile: the read-only connection reloads and sees it.
    const writer = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    writeValue(writer, 'from-writer');
    assert.deepEqual(keys(db), ['from-writer']);
    await writer.close();
    await db.close();
  });

  it('follows another connection’s writes and compactions', async () => {
    await databaseWithJournal([]);
    const writer = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    const reader = await openForgeDatabase({ path: data.dbPath, readOnly: true });
    writeValue(writer, 'b');
    assert.deepEqual(keys(reader), ['a', 'b']);
    await writer.compact();
    writeValue(writer, 'c');
    assert.deepEqual(keys(reader), ['a', 'b', 'c']);
    await writer.close();
    await reader.close();
  });

  it('a read-write connection that only read leaves the files as it found them at close (no compaction)', async () => {
    await databaseWithJournal(['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    const before = folderContents(data.dir);
    // A journal well past a quarter of this threshold: a connection that wrote would compact at close.
    const looker = await openForgeDatabase({ path: data.dbPath, compactAfterJournalBytes: 64, compactAtSnapshotFraction: 0 });
    assert.deepEqual(keys(looker), ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']);
    await looker.close();
    assert.deepEqual(folderContents(data.dir), before);

    const writer = await openForgeDatabase({ path: data.dbPath, compactAfterJournalBytes: 64, compactAtSnapshotFraction: 0 });
    const journalBytes = writer.diagnostics().journalBytes;
    await writer.close();
    assert.deepEqual(folderContents(data.dir), before, 'no write, no compaction');
    // Threshold above the journal (no compaction after the write) but within 4× of it: close() compacts.
    const closer = await openForgeDatabase({ path: data.dbPath, compactAfterJournalBytes: 2 * journalBytes, compactAtSnapshotFraction: 0 });
    writeValue(closer, 'j');
    await closer.close();
    assert.notDeepEqual(folderContents(data.dir)['forge.db'], before['forge.db'], 'one that wrote compacts at close');
    const check = await openForgeDatabase({ path: data.dbPath });
    assert.equal(check.diagnostics().journalBytes, 0);
    await check.close();
  });
});
