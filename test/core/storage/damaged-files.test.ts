import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { ForgeDatabaseError, isForgeDatabaseError, type ForgeDatabaseErrorCode } from '../../../src/core/storage/errors';
import { JOURNAL_HEADER_BYTES, readRecordAt } from '../../../src/core/storage/journal-format';
import { LATEST_SCHEMA_VERSION } from '../../../src/core/storage/migrations';
import { collectWarnings, makeTempDataDir, spawnStorageChild, type TempDataDir } from '../../support/storage-fixtures';

/** Every way the files can be damaged or unusable gives a clear error (or, for a torn tail, a warning). */

async function expectError(promise: Promise<unknown>, code: ForgeDatabaseErrorCode): Promise<ForgeDatabaseError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(isForgeDatabaseError(error), `expected a ForgeDatabaseError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected a ${code} error`);
}

function writeValue(db: ForgeDatabase, key: string): void {
  db.run('INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)', ['p', key, '"v"', 1]);
}

function keys(db: ForgeDatabase): string[] {
  return db.query<{ key: string }>('SELECT key FROM preferences ORDER BY key').map((row) => row.key);
}

/** File offsets of the records in a journal file. */
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

function movedFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((name) => name.includes('.corrupt-'));
}

describe('storage: damaged and unusable files', function () {
  this.timeout(60_000);
  let data: TempDataDir;

  beforeEach(() => {
    data = makeTempDataDir();
  });

  afterEach(() => data.cleanup());

  async function databaseWithCompactedSnapshot(keysToWrite: readonly string[]): Promise<void> {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    for (const key of keysToWrite) writeValue(db, key);
    await db.compact();
    await db.close();
  }

  it('moves a snapshot that is not a database aside, says so and what to do, and starts empty next time', async () => {
    await databaseWithCompactedSnapshot(['a']);
    const garbage = Buffer.from('this is not a database, it is a note the user saved here by mistake'.repeat(10));
    fs.writeFileSync(data.dbPath, garbage);

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, new RegExp(`^Forge could not use its database ${escape(data.dbPath)}: it is not an SQLite database file`));
    assert.match(error.message, /moved it to .*forge\.db\.corrupt-/);
    assert.match(error.message, /start with an empty database next time\. Restore the moved file from a backup/);
    assert.equal(error.filePath, data.dbPath);
    assert.equal(error.movedTo.length, 2, 'snapshot and the journal that continues it');
    assert.deepEqual(fs.readFileSync(error.movedTo[0]!), garbage, 'the damaged file is kept byte for byte');
    assert.ok(error.movedTo.every((moved) => error.message.includes(moved)));
    assert.equal(fs.existsSync(data.dbPath), false);

    const db = await openForgeDatabase({ path: data.dbPath });
    assert.deepEqual(keys(db), []);
    assert.equal(db.schemaVersion(), LATEST_SCHEMA_VERSION);
    await db.close();
    assert.deepEqual(fs.readFileSync(error.movedTo[0]!), garbage, 'never overwritten later either');
  });

  it('detects damaged pages inside a real SQLite snapshot', async () => {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    db.transaction((tx) => {
      for (let i = 0; i < 400; i++) {
        tx.run('INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)', ['p', `k${i}`, JSON.stringify('x'.repeat(300)), i]);
      }
    });
    await db.compact();
    await db.close();
    const bytes = fs.readFileSync(data.dbPath);
    const pageSize = bytes.readUInt16BE(16);
    // Scribble over every page from the third on (leaving the header and schema page intact).
    for (let offset = 2 * pageSize; offset < bytes.length; offset += pageSize) bytes.fill(0xa5, offset, offset + 64);
    fs.writeFileSync(data.dbPath, bytes);

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, /integrity check failed|SQLite cannot read it/);
    assert.equal(movedFiles(data.dir).length, 2);
  });

  it('refuses an SQLite file that is not a Forge database, moving it aside', async () => {
    const initSqlJs = (await import('sql.js')).default;
    const SQL = await initSqlJs();
    const foreign = new SQL.Database();
    foreign.run('CREATE TABLE notes (body TEXT)');
    fs.writeFileSync(data.dbPath, foreign.export());
    foreign.close();

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, /it is an SQLite file but not a Forge database/);
    assert.equal(error.movedTo.length, 1);
  });

  it('replays a valid journal onto an empty (zero-length) database file: an empty file is no snapshot yet', async () => {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    for (const key of ['a', 'b', 'c']) writeValue(db, key);
    await db.close();
    const journal = `${data.dbPath}.journal`;
    const journalBytes = fs.readFileSync(journal);
    fs.writeFileSync(data.dbPath, Buffer.alloc(0));

    const warnings = collectWarnings();
    const reopened = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning, autoCompact: false });
    assert.deepEqual(keys(reopened), ['a', 'b', 'c'], 'every change of the journal is there');
    assert.equal(reopened.schemaVersion(), LATEST_SCHEMA_VERSION);
    assert.deepEqual(warnings.messages, []);
    assert.deepEqual(movedFiles(data.dir), [], 'nothing was moved aside');
    assert.deepEqual(fs.readFileSync(journal), journalBytes, 'the journal is kept as it was');
    writeValue(reopened, 'd');
    await reopened.compact();
    await reopened.close();

    const again = await openForgeDatabase({ path: data.dbPath });
    assert.deepEqual(keys(again), ['a', 'b', 'c', 'd']);
    await again.close();
    assert.ok(fs.statSync(data.dbPath).size > 0, 'the compaction wrote a real snapshot');
  });

  it('drops a torn journal tail (a crash mid-append) with a warning and keeps everything before it', async () => {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    for (const key of ['a', 'b', 'c']) writeValue(db, key);
    await db.close();
    const journal = `${data.dbPath}.journal`;
    const records = recordOffsets(journal);
    const last = records[records.length - 1]!;
    fs.truncateSync(journal, last.end - 7); // the last record lost its checksum and some payload
    // What a crash mid-append leaves: the writer's lock, held by a process that is gone.
    const dead = spawnStorageChild('storage-worker.ts', ['no-such-mode']);
    await dead.exited;
    fs.writeFileSync(`${data.dbPath}.lock`, JSON.stringify({ pid: dead.process.pid, host: os.hostname(), token: 'dead', startTime: null }));

    const warnings = collectWarnings();
    const reopened = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning });
    assert.deepEqual(keys(reopened), ['a', 'b']);
    assert.equal(warnings.messages.length, 2, warnings.messages.join('\n'));
    assert.match(warnings.messages[0]!, /removed the lock/);
    assert.match(
      warnings.messages[1]!,
      new RegExp(
        `unfinished write at the end of ${escape(journal)}: the last ${last.end - 7 - last.start} bytes of the journal, ` +
          `from byte ${last.start} on, cannot be read .*Process ${dead.process.pid} died while writing it.*No acknowledged change was lost`,
      ),
    );
    assert.equal(fs.statSync(journal).size, last.start, 'the torn bytes were cut off');
    writeValue(reopened, 'd'); // appends after the last valid record
    await reopened.close();

    const again = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning });
    assert.deepEqual(keys(again), ['a', 'b', 'd']);
    assert.equal(warnings.messages.length, 2, 'no new warning');
    await again.close();
  });

  it('a journal cut short with no writer dying is damage: read-write open keeps the good changes, keeps the cut file and names what is lost', async () => {
    await databaseWithCompactedSnapshot(['a']);
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    const written = ['b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'];
    for (const key of written) writeValue(db, key);
    const lastSeqBefore = db.diagnostics().lastSeq;
    await db.close();
    const journal = `${data.dbPath}.journal`;
    const records = recordOffsets(journal);
    assert.equal(records.length, written.length);
    const cutRecord = records[4]!; // 'f': 'b'..'e' stay whole
    const cutAt = cutRecord.start + Math.floor((cutRecord.end - cutRecord.start) / 2);
    fs.truncateSync(journal, cutAt);
    const cut = fs.readFileSync(journal);
    const firstLost = lastSeqBefore - written.length + 5;

    const warnings = collectWarnings();
    const error = await expectError(openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning }), 'corrupt');
    assert.match(
      error.message,
      new RegExp(
        `damage in its journal ${escape(journal)}: the last ${cutAt - cutRecord.start} bytes of the journal, from byte ` +
          `${cutRecord.start} on, cannot be read \\(they are the first ${cutAt - cutRecord.start} of the ` +
          `${cutRecord.end - cutRecord.start} bytes of change #${firstLost}\\), and no Forge process died while writing it`,
      ),
    );
    assert.match(error.message, new RegExp(`kept every change before the damage \\(up to change #${firstLost - 1}\\)`));
    assert.match(error.message, new RegExp(`change #${firstLost} and any change after it are lost from the database`));
    assert.match(error.message, /loops they changed may show an older state/);
    assert.doesNotMatch(error.message, /No acknowledged change was lost/);
    assert.deepEqual(warnings.messages, []);
    assert.equal(error.movedTo.length, 1);
    assert.deepEqual(fs.readFileSync(error.movedTo[0]!), cut, 'the cut journal is kept byte for byte, unread tail included');

    const reopened = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning });
    assert.deepEqual(keys(reopened), ['a', 'b', 'c', 'd', 'e']);
    await reopened.close();
    assert.deepEqual(warnings.messages, [], 'opens normally next time');
  });

  it('treats a journal truncated into its header as damaged: moved aside, snapshot kept', async () => {
    await databaseWithCompactedSnapshot(['a']);
    const journal = `${data.dbPath}.journal`;
    fs.truncateSync(journal, 10);

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, new RegExp(`Forge could not use its journal ${escape(journal)}: the file is 10 bytes long`));
    assert.match(error.message, /Forge will open normally next time/);
    assert.equal(fs.existsSync(journal), false);
    assert.equal(fs.statSync(error.movedTo[0]!).size, 10);

    const db = await openForgeDatabase({ path: data.dbPath });
    assert.deepEqual(keys(db), ['a']);
    await db.close();
  });

  it('reports damage in the middle of the journal, keeps the changes before it and moves the journal aside', async () => {
    await databaseWithCompactedSnapshot(['a']);
    let db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    for (const key of ['b', 'c', 'd', 'e']) writeValue(db, key);
    await db.close();
    const journal = `${data.dbPath}.journal`;
    const records = recordOffsets(journal);
    assert.equal(records.length, 4);
    const bytes = fs.readFileSync(journal);
    const damagedAt = records[2]!.start + 20; // inside the record of 'd'; 'e' follows intact
    bytes[damagedAt] = bytes[damagedAt]! ^ 0xff;
    fs.writeFileSync(journal, bytes);

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, new RegExp(`damage in its journal ${escape(journal)}: record checksum mismatch .* with valid records after it`));
    assert.match(error.message, /kept every change before the damage/);
    assert.deepEqual(fs.readFileSync(error.movedTo[0]!), bytes, 'the damaged journal is kept as it was');

    db = await openForgeDatabase({ path: data.dbPath });
    assert.deepEqual(keys(db), ['a', 'b', 'c']);
    await db.close();
  });

  it('refuses a journal that continues a newer snapshot than the one on disk (database file replaced by an old copy)', async () => {
    await databaseWithCompactedSnapshot(['a']);
    const oldSnapshot = fs.readFileSync(data.dbPath);
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    writeValue(db, 'b');
    await db.compact();
    writeValue(db, 'c');
    await db.close();
    fs.writeFileSync(data.dbPath, oldSnapshot);

    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'corrupt');
    assert.match(error.message, /continues from change #\d+, but the database .* only holds changes up to #\d+/);
    const reopened = await openForgeDatabase({ path: data.dbPath });
    assert.deepEqual(keys(reopened), ['a']);
    await reopened.close();
  });

  it('says a database path that is a folder is unreadable and moves nothing', async () => {
    fs.mkdirSync(data.dbPath);
    const error = await expectError(openForgeDatabase({ path: data.dbPath }), 'unreadable');
    assert.match(error.message, new RegExp(`Forge cannot read its database ${escape(data.dbPath)} \\(it is a folder\\)\\. Nothing was changed or moved`));
    assert.ok(fs.statSync(data.dbPath).isDirectory());
    assert.deepEqual(movedFiles(data.dir), []);
  });

  it('gives a clear error for a read-only data folder', async () => {
    const readOnlyDir = path.join(data.dir, 'read-only');
    fs.mkdirSync(readOnlyDir);
    fs.chmodSync(readOnlyDir, 0o555);
    const dbPath = path.join(readOnlyDir, 'forge.db');
    let code: string;
    let message: string;
    if (process.getuid?.() === 0) {
      // root ignores permission bits: try as an unprivileged user in a child process.
      fs.chmodSync(data.dir, 0o755);
      const child = spawnStorageChild('storage-worker.ts', ['open', '--db', dbPath], { uid: 65534, gid: 65534 });
      const line = await child.waitForLine((l) => l.startsWith('opened') || l.startsWith('error'));
      await child.exited;
      [, code = '', message = ''] = /^(?:error (\S+) )?(.*)$/.exec(line) ?? [];
    } else {
      const error = await expectError(openForgeDatabase({ path: dbPath }), 'readonly');
      code = error.code;
      message = error.message;
    }
    assert.equal(code, 'readonly', message);
    assert.match(message, new RegExp(`Forge cannot create the lock file ${escape(dbPath)}\\.lock: permission denied`));
    assert.match(message, /Make the folder and its files writable .* or point Forge's data folder/);
    assert.deepEqual(fs.readdirSync(readOnlyDir), []);
  });

  it('rejects a path too long for the system before creating anything', async () => {
    const longName = 'n'.repeat(300);
    const componentError = await expectError(openForgeDatabase({ path: path.join(data.dir, longName, 'forge.db') }), 'path_too_long');
    assert.match(componentError.message, /longer than this system's limit of 255 characters for one folder or file name/);
    assert.match(componentError.message, /Choose a shorter data folder/);

    const deep = path.join(data.dir, ...Array.from({ length: 40 }, () => 'd'.repeat(100)), 'forge.db');
    const fullError = await expectError(openForgeDatabase({ path: deep }), 'path_too_long');
    assert.ok(fullError.message.startsWith(`Forge cannot use the database path ${deep}`));
    assert.match(fullError.message, /limit of \d+ characters for a full path/);
    // A file name that only overflows once Forge adds its suffixes is caught too.
    const nearLimit = path.join(data.dir, 'f'.repeat(230));
    await expectError(openForgeDatabase({ path: nearLimit }), 'path_too_long');
    assert.deepEqual(fs.readdirSync(data.dir), []);
  });

  it('reports a live holder that keeps the lock without a break as stuck, naming its pid', async () => {
    await (await openForgeDatabase({ path: data.dbPath })).close();
    // The test process itself plays the other process: alive, same host, never releasing.
    fs.writeFileSync(`${data.dbPath}.lock`, JSON.stringify({ pid: process.pid, host: os.hostname(), token: 'other', startTime: null }));
    const error = await expectError(openForgeDatabase({ path: data.dbPath, lockStuckAfterMs: 300 }), 'lock_stuck');
    assert.match(error.message, new RegExp(`waited 0\\.\\d s for the database lock ${escape(data.dbPath)}\\.lock: process ${process.pid} is alive and has held it without a break`));
    assert.match(error.message, new RegExp(`kill ${process.pid}`));
    fs.unlinkSync(`${data.dbPath}.lock`);
  });

  it('takes over the lock of a process that died holding it', async () => {
    await (await openForgeDatabase({ path: data.dbPath })).close();
    const dead = spawnStorageChild('storage-worker.ts', ['no-such-mode']);
    await dead.exited;
    const deadPid = dead.process.pid!;
    fs.writeFileSync(`${data.dbPath}.lock`, JSON.stringify({ pid: deadPid, host: os.hostname(), token: 'dead', startTime: null }));
    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning });
    writeValue(db, 'after-takeover');
    assert.deepEqual(keys(db), ['after-takeover']);
    await db.close();
    assert.equal(warnings.messages.length, 1);
    assert.match(warnings.messages[0]!, new RegExp(`removed the lock .* left by process ${deadPid}, which is no longer running`));
    assert.equal(fs.existsSync(`${data.dbPath}.lock`), false);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
