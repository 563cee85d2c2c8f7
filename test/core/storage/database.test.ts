import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import initSqlJs from 'sql.js';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import type { SqlExecutor } from '../../../src/core/storage/sql-executor';
import { isForgeDatabaseError } from '../../../src/core/storage/errors';
import { defaultSqlWasmPath } from '../../../src/core/storage/sqljs-loader';
import { collectWarnings, makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

/** The connection's semantics: transactions, persistence, compaction, and several connections on one file. */

function put(db: SqlExecutor, key: string, value: unknown = key): void {
  db.run(
    `INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', ?, ?, 1)
     ON CONFLICT (project_id, key) DO UPDATE SET value = excluded.value`,
    [key, JSON.stringify(value)],
  );
}

function keys(db: ForgeDatabase): string[] {
  return db.query<{ key: string }>(`SELECT key FROM preferences WHERE project_id = 'p' ORDER BY key`).map((row) => row.key);
}

describe('storage: database connection', function () {
  this.timeout(60_000);
  let data: TempDataDir;
  const open: ForgeDatabase[] = [];

  async function connect(options: Partial<Parameters<typeof openForgeDatabase>[0]> = {}): Promise<ForgeDatabase> {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false, ...options });
    open.push(db);
    return db;
  }

  beforeEach(() => {
    data = makeTempDataDir();
  });

  afterEach(async () => {
    for (const db of open.splice(0)) await db.close();
    data.cleanup();
  });

  it('persists committed transactions across reopen, journal only and after compaction', async () => {
    const db = await connect();
    put(db, 'a');
    db.transaction((tx) => {
      put(tx, 'b');
      put(tx, 'c');
    });
    await db.close();
    const reopened = await connect();
    assert.deepEqual(keys(reopened), ['a', 'b', 'c']);
    await reopened.compact();
    assert.equal(reopened.diagnostics().journalBytes, 0);
    assert.ok(reopened.diagnostics().snapshotBytes > 0);
    put(reopened, 'd');
    await reopened.close();
    const third = await connect();
    assert.deepEqual(keys(third), ['a', 'b', 'c', 'd']);
  });

  it('rolls back a transaction that throws, journals nothing for it, and leaves no lock behind', async () => {
    const db = await connect();
    put(db, 'kept');
    const before = db.diagnostics();
    assert.throws(
      () =>
        db.transaction((tx) => {
          tx.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'lost', '1', 1)`);
          throw new Error('changed my mind');
        }),
      /changed my mind/,
    );
    assert.deepEqual(keys(db), ['kept']);
    assert.deepEqual(db.diagnostics(), before);
    assert.equal(fs.existsSync(`${data.dbPath}.lock`), false);
  });

  it('joins nested transactions into the outer one', async () => {
    const db = await connect();
    const seqBefore = db.diagnostics().lastSeq;
    assert.throws(() =>
      db.transaction((tx) => {
        tx.transaction((inner) => inner.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'inner', '1', 1)`));
        throw new Error('outer fails');
      }),
    );
    assert.deepEqual(keys(db), []);
    db.transaction((tx) => {
      tx.transaction((inner) => inner.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'x', '1', 1)`));
      tx.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'y', '1', 1)`);
    });
    assert.equal(db.diagnostics().lastSeq, seqBefore + 1, 'one journal record for the whole transaction');
  });

  it('keeps a statement that failed inside a transaction out of the journal', async () => {
    const db = await connect();
    db.transaction((tx) => {
      tx.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'one', '1', 1)`);
      assert.throws(() => tx.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'one', '2', 1)`), /UNIQUE/);
      tx.run(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'two', '1', 1)`);
    });
    await db.close();
    const reopened = await connect(); // replays the journal: the failed statement must not break it
    assert.deepEqual(keys(reopened), ['one', 'two']);
  });

  it('refuses writes through query/get, async transaction bodies and unstorable parameters', async () => {
    const db = await connect();
    assert.throws(() => db.query(`INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'sneaky', '1', 1)`), /readonly/);
    assert.throws(
      () => db.transaction((tx) => tx.get(`DELETE FROM preferences RETURNING *`)),
      /readonly/,
      'reads stay read-only inside transactions too',
    );
    assert.throws(
      () => db.transaction(async () => undefined),
      (error: unknown) => isForgeDatabaseError(error, 'invalid_use') && /must be synchronous/.test(error.message),
    );
    for (const bad of [undefined, Number.NaN, Infinity, 10n, { a: 1 }]) {
      assert.throws(
        () => db.run('INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)', ['p', 'k', bad as never, 1]),
        (error: unknown) => isForgeDatabaseError(error, 'invalid_use') && /Parameter 3 .* cannot be stored/.test(error.message),
      );
    }
    assert.deepEqual(keys(db), []);
  });

  it('stores booleans as 0/1 and blobs byte for byte, through the journal', async () => {
    const db = await connect();
    const blob = new Uint8Array([0, 1, 2, 250, 255]);
    db.run('CREATE TABLE IF NOT EXISTS blobs (b BLOB, f INTEGER)');
    db.run('INSERT INTO blobs (b, f) VALUES (?, ?)', [blob, true]);
    blob[0] = 99; // the caller reusing its buffer changes nothing stored
    await db.close();
    const reopened = await connect();
    const row = reopened.get<{ b: Uint8Array; f: number }>('SELECT b, f FROM blobs');
    assert.deepEqual([...row!.b], [0, 1, 2, 250, 255]);
    assert.equal(row!.f, 1);
  });

  it('returns changes and the inserted rowid from run()', async () => {
    const db = await connect();
    const inserted = db.run(
      `INSERT INTO loop_transitions (project_id, loop_name, event, iteration, at) VALUES ('p', 'l', 'start', 1, 1)`,
    );
    assert.equal(inserted.changes, 1);
    assert.equal(inserted.lastInsertRowid, 1);
    assert.equal(db.run(`UPDATE loop_transitions SET event = 'x' WHERE project_id = 'p'`).changes, 1);
    assert.equal(db.run(`DELETE FROM loop_transitions WHERE project_id = 'nobody'`).changes, 0);
  });

  it('fails clearly when used after close', async () => {
    const db = await openForgeDatabase({ path: data.dbPath });
    await db.close();
    await db.close(); // idempotent
    assert.throws(() => keys(db), (error: unknown) => isForgeDatabaseError(error, 'closed') && error.message.includes(data.dbPath));
  });

  it('sees other connections’ writes at the next read, and writes on top of them', async () => {
    const a = await connect();
    const b = await connect();
    put(a, 'from-a');
    assert.deepEqual(keys(b), ['from-a']);
    put(b, 'from-b');
    assert.deepEqual(keys(a), ['from-a', 'from-b']);
    // Read-modify-write from both sides loses nothing.
    for (let i = 0; i < 10; i++) {
      for (const db of [a, b]) {
        db.transaction((tx) => {
          const current = Number(JSON.parse(String(tx.get<{ value: string }>(`SELECT value FROM preferences WHERE key = 'n'`)?.value ?? '0')));
          tx.run(
            `INSERT INTO preferences (project_id, key, value, updated_at) VALUES ('p', 'n', ?, 1)
             ON CONFLICT (project_id, key) DO UPDATE SET value = excluded.value`,
            [JSON.stringify(current + 1)],
          );
        });
      }
    }
    assert.equal(a.get<{ value: string }>(`SELECT value FROM preferences WHERE key = 'n'`)?.value, '20');
  });

  it('follows another connection’s compaction without reloading, and writes after it', async () => {
    const a = await connect();
    const b = await connect();
    put(a, 'one');
    assert.deepEqual(keys(b), ['one']);
    put(a, 'two');
    await a.compact(); // new snapshot + new journal file
    put(a, 'three');
    assert.deepEqual(keys(b), ['one', 'three', 'two']);
    assert.equal(b.diagnostics().journalBaseSeq, a.diagnostics().journalBaseSeq, 'b switched to the new journal');
    assert.equal(b.diagnostics().snapshotLoads, 1, 'by reading the rest of the old journal, not by reloading the snapshot');
    put(b, 'four');
    assert.deepEqual(keys(a), ['four', 'one', 'three', 'two']);
  });

  it('catches up a connection that slept through several compactions (reloads the snapshot)', async () => {
    const a = await connect();
    const sleeper = await connect();
    assert.deepEqual(keys(sleeper), []);
    for (const key of ['w1', 'w2', 'w3']) {
      put(a, key);
      await a.compact();
    }
    put(a, 'last');
    assert.deepEqual(keys(sleeper), ['last', 'w1', 'w2', 'w3']);
    assert.equal(sleeper.diagnostics().lastSeq, a.diagnostics().lastSeq);
    assert.equal(sleeper.diagnostics().snapshotLoads, 2);
  });

  it('lets writes continue while a compaction writes its snapshot, and keeps them', async () => {
    const a = await connect();
    const b = await connect();
    put(a, 'before');
    const compaction = a.compact();
    put(a, 'during-a'); // while the snapshot is being written asynchronously
    put(b, 'during-b');
    await compaction;
    const diagnostics = a.diagnostics();
    assert.ok(diagnostics.journalBytes > 0, 'the writes made during compaction were carried into the new journal');
    await a.close();
    await b.close();
    const reopened = await connect();
    assert.deepEqual(keys(reopened), ['before', 'during-a', 'during-b']);
  });

  it('compacts automatically once the journal passes its threshold, after the write returns', async () => {
    const db = await connect({ autoCompact: true, compactAfterJournalBytes: 4_000, compactAtSnapshotFraction: 0 });
    for (let i = 0; i < 40; i++) put(db, `k${i}`, 'x'.repeat(100));
    assert.ok(db.diagnostics().journalBytes >= 4_000, 'writes themselves never compact');
    await new Promise((resolve) => setImmediate(resolve));
    // Wait for the background compaction (its snapshot write is asynchronous).
    for (let i = 0; i < 200 && db.diagnostics().journalBytes >= 4_000; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.ok(db.diagnostics().journalBytes < 4_000, `journal still ${db.diagnostics().journalBytes} bytes`);
    assert.ok(fs.existsSync(data.dbPath));
    assert.equal(keys(db).length, 40);
  });

  it('rewrites the database from memory if someone deletes the journal under it', async () => {
    const warnings = collectWarnings();
    const db = await connect({ onWarning: warnings.onWarning });
    put(db, 'a');
    put(db, 'b');
    fs.unlinkSync(`${data.dbPath}.journal`);
    put(db, 'c');
    assert.match(warnings.messages.join('\n'), /disappeared; Forge rewrote the database from memory/);
    await db.close();
    const reopened = await connect();
    assert.deepEqual(keys(reopened), ['a', 'b', 'c']);
  });

  it('removes temp files left by dead processes, and keeps everything else', async () => {
    await (await openForgeDatabase({ path: data.dbPath })).close();
    const deadPid = 2 ** 22 + 12345; // above Linux's pid_max default, so never alive
    const leftover = path.join(data.dir, `forge.db.tmp-${deadPid}-abcd`);
    const liveOnes = path.join(data.dir, `forge.db.journal.tmp-${process.pid}-beef`);
    const unrelated = path.join(data.dir, 'notes.txt');
    for (const file of [leftover, liveOnes, unrelated]) fs.writeFileSync(file, 'x');
    await connect();
    assert.equal(fs.existsSync(leftover), false);
    assert.equal(fs.existsSync(liveOnes), true);
    assert.equal(fs.existsSync(unrelated), true);
  });

  it('loads sql.js from an explicit wasm path, from wasm bytes, or a shared module; a missing wasm file is a clear error', async () => {
    const wasmPath = defaultSqlWasmPath();
    const copy = path.join(data.dir, 'sql-wasm.wasm');
    fs.copyFileSync(wasmPath, copy); // as the extension bundle does, next to dist/extension.cjs
    put(await connect({ wasmPath: copy }), 'by-path');
    assert.deepEqual(keys(await connect({ wasmBinary: fs.readFileSync(wasmPath) })), ['by-path']);
    assert.deepEqual(keys(await connect({ sqlJs: await initSqlJs() })), ['by-path']);
    const missing = path.join(data.dir, 'nowhere', 'sql-wasm.wasm');
    await assert.rejects(
      openForgeDatabase({ path: data.dbPath, wasmPath: missing }),
      (error: unknown) => isForgeDatabaseError(error, 'unreadable') && error.message.includes(missing) && /Reinstall Forge/.test(error.message),
    );
  });
});
