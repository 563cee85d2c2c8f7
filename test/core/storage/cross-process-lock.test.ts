import assert from 'node:assert/strict';
import fs from 'node:fs';
import { HolderWatch } from '../../../src/core/storage/cross-process-lock';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { isForgeDatabaseError } from '../../../src/core/storage/errors';
import { collectWarnings, makeTempDataDir, spawnStorageChild, type StorageChild, type TempDataDir } from '../../support/storage-fixtures';

/**
 * Waiting for the cross-process lock with real processes: a waiter keeps
 * waiting while a live holder works (a busy machine is no error), takes over
 * from a holder that died, and reports a holder stuck with the lock by pid.
 */

function writeValue(db: ForgeDatabase, key: string): void {
  db.run('INSERT INTO preferences (project_id, key, value, updated_at) VALUES (?, ?, ?, ?)', ['p', key, '"v"', 1]);
}

describe('storage: waiting for the cross-process lock', function () {
  this.timeout(120_000);
  let data: TempDataDir;
  const children: StorageChild[] = [];

  beforeEach(async () => {
    data = makeTempDataDir();
    await (await openForgeDatabase({ path: data.dbPath })).close();
  });

  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
      await child.exited;
    }
    data.cleanup();
  });

  async function holder(ms: number): Promise<StorageChild> {
    const child = spawnStorageChild('storage-worker.ts', ['hold-lock', '--db', data.dbPath, '--ms', String(ms)]);
    children.push(child);
    await child.waitForLine((line) => line === 'holding');
    return child;
  }

  it('keeps waiting past the old 15 s limit while a live process holds the lock, and writes once it is released', async () => {
    const db = await openForgeDatabase({ path: data.dbPath, autoCompact: false });
    const child = await holder(16_000);
    const started = Date.now();
    writeValue(db, 'after-wait'); // blocks until the child releases
    const waited = Date.now() - started;
    assert.ok(waited >= 15_000, `the write waited ${waited} ms, so the lock was really held past 15 s`);
    assert.deepEqual(db.query<{ key: string }>('SELECT key FROM preferences').map((r) => r.key), ['after-wait']);
    await db.close();
    await child.waitForLine((line) => line === 'released');
    assert.equal((await child.exited).code, 0);
  });

  it('takes the lock over from a process killed while holding it', async () => {
    const child = await holder(0);
    const deadPid = child.process.pid!;
    child.process.kill('SIGKILL');
    await child.exited;
    assert.ok(fs.existsSync(`${data.dbPath}.lock`), 'the killed holder left its lock file behind');

    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning, lockStuckAfterMs: 60_000 });
    writeValue(db, 'after-takeover');
    await db.close();
    assert.deepEqual(warnings.messages.length, 1);
    assert.match(warnings.messages[0]!, new RegExp(`removed the lock .* left by process ${deadPid}, which is no longer running`));
  });

  it('reports a live holder that keeps the lock without a break beyond the stuck limit, with its pid', async () => {
    const child = await holder(0);
    const started = Date.now();
    let caught: unknown;
    try {
      await openForgeDatabase({ path: data.dbPath, lockStuckAfterMs: 1_500 });
    } catch (error) {
      caught = error;
    }
    const waited = Date.now() - started;
    assert.ok(isForgeDatabaseError(caught, 'lock_stuck'), `expected lock_stuck, got ${String(caught)}`);
    assert.ok(waited >= 1_500, `gave up after ${waited} ms, before the stuck limit`);
    assert.match(caught.message, new RegExp(`process ${child.process.pid} is alive and has held it without a break for 1\\.\\d s`));
    assert.match(caught.message, new RegExp(`kill ${child.process.pid}`));
    assert.ok(fs.existsSync(`${data.dbPath}.lock`), 'a live holder keeps its lock');
  });
});

describe('storage: HolderWatch (how long one acquisition has lasted)', () => {
  it('counts from the first sighting of a lock content and restarts at every new content (progress)', () => {
    const watch = new HolderWatch();
    assert.equal(watch.observe('A', 1_000), 0);
    assert.equal(watch.observe('A', 3_000), 2_000);
    assert.equal(watch.observe('B', 3_500), 0, 'another acquisition: the holders make progress');
    assert.equal(watch.observe('B', 200_000), 196_500);
    assert.equal(watch.observe('A', 200_001), 0, 'a content seen before but not continuously is a new acquisition');
  });
});
