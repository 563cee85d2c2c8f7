import assert from 'node:assert/strict';
import fs from 'node:fs';
import { openForgeDatabase } from '../../../src/core/storage/database';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { collectWarnings, makeTempDataDir, sleep, spawnStorageChild, type StorageChild, type TempDataDir } from '../../support/storage-fixtures';

/**
 * Real processes, real files, real SIGKILL: the guarantees of SPEC §6 and the
 * storage issue (a kill at any instant leaves a consistent database holding
 * every acknowledged write; two writers never lose each other's writes; a
 * reader never sees a torn state).
 */

const PROJECT = 'durability-project'; // same as test/support/storage-worker.ts
const KILLS = 30;

interface Tally {
  transitions: number;
  messages: number;
  preferences: number;
  counter: number;
  presentIterations: Set<number>;
}

async function tallyWriter(dbPath: string, writer: string, warnings: string[]): Promise<Tally & { integrity: string; journalBaseSeq: number }> {
  const db = await openForgeDatabase({ path: dbPath, onWarning: (m) => warnings.push(m) });
  try {
    const repos = createForgeRepositories(db);
    const integrity = String(db.get<{ integrity_check: string }>('PRAGMA integrity_check')?.integrity_check);
    const prefs = repos.preferences.list(PROJECT, `w-${writer}-`);
    return {
      integrity,
      transitions: repos.transitions.listByLoop(PROJECT, writer).length,
      messages: repos.sessionUsage.totalsForLoop(PROJECT, writer).messages,
      preferences: prefs.length,
      counter: repos.preferences.get<number>(PROJECT, 'counter') ?? 0,
      presentIterations: new Set(prefs.map((p) => (p.value as { i: number }).i)),
      journalBaseSeq: db.diagnostics().journalBaseSeq,
    };
  } finally {
    await db.close();
  }
}

function lastAck(child: StorageChild): number {
  let last = 0;
  for (const line of child.lines) {
    const match = /^ack (\d+)$/.exec(line);
    if (match) last = Math.max(last, Number(match[1]));
  }
  return last;
}

describe('storage durability (child processes)', function () {
  this.timeout(600_000);
  let data: TempDataDir;
  const children: StorageChild[] = [];

  beforeEach(() => {
    data = makeTempDataDir();
  });

  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
      await child.exited;
    }
    data.cleanup();
  });

  it(`keeps every acknowledged write and stays consistent across ${KILLS} SIGKILLs at random instants`, async () => {
    // A small compaction threshold makes compactions (snapshot write, renames)
    // frequent, so kills also land inside them, not only inside appends.
    const warnings: string[] = [];
    let acknowledged = 0;
    let killsAfterReady = 0;
    let killsDuringOpen = 0;
    let survived = 0;
    let compactions = 0; // rounds in which the writer installed a new snapshot
    let lastBaseSeq = 0;
    for (let round = 1; round <= KILLS; round++) {
      const child = spawnStorageChild('storage-worker.ts', [
        'writer',
        '--db',
        data.dbPath,
        '--id',
        'w',
        '--count',
        '0',
        '--compact-bytes',
        '2000',
      ]);
      children.push(child);
      if (round % 5 === 0) {
        // Kill while the child is opening: replaying the journal, taking over a stale lock, migrating.
        await sleep(150 + Math.random() * 600);
        killsDuringOpen++;
      } else {
        // Random instants relative to the work rather than the clock, so that a slow,
        // shared machine still gets kills in the middle of writing and compacting.
        await child.waitForLine((line) => line === 'ready');
        // The writer numbers its writes on from the rows it found (survived + 1, …).
        const killAfterAck = survived + Math.floor(Math.random() * 12);
        await child.waitForLine((line) => /^ack \d+$/.test(line) && Number(line.slice(4)) >= killAfterAck);
        await sleep(Math.random() * 40);
        killsAfterReady++;
      }
      child.process.kill('SIGKILL');
      const exit = await child.exited;
      assert.equal(exit.signal, 'SIGKILL', `round ${round}: the writer died on its own: ${child.stderr()}\n${child.lines.join('\n')}`);
      assert.deepEqual(
        child.lines.filter((line) => line.startsWith('violation') || line.startsWith('fatal')),
        [],
        `round ${round}: the writer saw an inconsistent state`,
      );
      const rowsBefore = survived;
      acknowledged = Math.max(acknowledged, lastAck(child));
      warnings.push(...child.lines.filter((line) => line.startsWith('warning')));

      const tally = await tallyWriter(data.dbPath, 'w', warnings);
      assert.equal(tally.integrity, 'ok', `round ${round}: SQLite integrity check`);
      // Every transaction is all-or-nothing...
      assert.equal(tally.transitions, tally.messages, `round ${round}: transitions vs usage messages`);
      assert.equal(tally.transitions, tally.preferences, `round ${round}: transitions vs preferences`);
      assert.equal(tally.counter, tally.transitions, `round ${round}: counter vs transitions`);
      // ...nothing that was there before the round is lost...
      assert.ok(tally.transitions >= rowsBefore, `round ${round}: ${tally.transitions} rows, ${rowsBefore} before the round`);
      // ...every acknowledged write is there...
      for (let i = 1; i <= acknowledged; i++) {
        assert.ok(tally.presentIterations.has(i), `round ${round}: acknowledged write #${i} is missing`);
      }
      // ...and at most the one write in flight at the kill is there unacknowledged (the
      // writer numbers on from the rows it found, so writes are iterations rowsBefore+1, …).
      const lastWritten = Math.max(rowsBefore, lastAck(child));
      assert.ok(
        tally.transitions <= lastWritten + 1,
        `round ${round}: ${tally.transitions} rows, but the writer acknowledged up to #${lastWritten}`,
      );
      assert.deepEqual([...tally.presentIterations].sort((x, y) => x - y), Array.from({ length: tally.transitions }, (_, k) => k + 1));
      survived = tally.transitions;
      if (tally.journalBaseSeq > lastBaseSeq) compactions++;
      lastBaseSeq = tally.journalBaseSeq;
    }
    // Sanity of the experiment itself: writes happened, kills landed both during open and while writing.
    assert.ok(acknowledged > 0, 'no write was ever acknowledged');
    assert.ok(killsAfterReady >= 20 && killsDuringOpen >= 5);
    assert.ok(compactions > 0, `no compaction happened in ${survived} transactions, so no kill could land in one`);
    assert.ok(!fs.existsSync(`${data.dbPath}.lock`), 'the last verifier left the lock behind');
    console.log(
      `      ${KILLS} kills (${killsDuringOpen} during open); ${survived} transactions survived; ${compactions} rounds compacted; ` +
        `${warnings.filter((w) => /unfinished write/.test(w)).length} torn tails dropped; ` +
        `${warnings.filter((w) => /removed the lock/.test(w)).length} stale locks removed`,
    );
  });

  it('two writer processes interleaving on one file lose nothing, and a third process never reads a torn state', async () => {
    const count = 150;
    const common = ['--db', data.dbPath, '--ids', 'a,b', '--count', String(count), '--compact-bytes', '20000', '--reserve-every', '15'];
    // Create the database first so the three processes do not all race through creation.
    await (await openForgeDatabase({ path: data.dbPath })).close();
    const reader = spawnStorageChild('storage-worker.ts', ['reader', '--db', data.dbPath, '--ids', 'a,b', '--expect', String(2 * count)]);
    children.push(reader);
    await reader.waitForLine((line) => line === 'ready');
    const a = spawnStorageChild('storage-worker.ts', ['writer', '--id', 'a', ...common]);
    const b = spawnStorageChild('storage-worker.ts', ['writer', '--id', 'b', ...common]);
    children.push(a, b);
    const [exitA, exitB, exitReader] = await Promise.all([a.exited, b.exited, reader.exited]);
    for (const [name, child, exit] of [
      ['a', a, exitA],
      ['b', b, exitB],
      ['reader', reader, exitReader],
    ] as const) {
      assert.equal(exit.code, 0, `${name} failed: ${child.stderr()}\n${child.lines.filter((l) => !l.startsWith('ack')).join('\n')}`);
      assert.deepEqual(child.lines.filter((line) => line.startsWith('violation')), [], `${name} saw a torn state`);
    }
    // The writers really interleaved: each saw the other's rows while it was still writing.
    const interleaved = (x: StorageChild) => x.lines.indexOf('done') > x.lines.indexOf(`ack ${count}`);
    assert.ok(interleaved(a) && interleaved(b));
    const checked = Number(/^checked (\d+)$/.exec(reader.lines.find((l) => l.startsWith('checked')) ?? '')?.[1] ?? 0);
    assert.ok(checked > 10, `the reader only checked ${checked} times`);

    const warnings = collectWarnings();
    const db = await openForgeDatabase({ path: data.dbPath, onWarning: warnings.onWarning });
    try {
      const repos = createForgeRepositories(db);
      for (const writer of ['a', 'b']) {
        assert.equal(repos.transitions.listByLoop(PROJECT, writer).length, count, `transitions of ${writer}`);
        assert.equal(repos.sessionUsage.totalsForLoop(PROJECT, writer).messages, count, `usage of ${writer}`);
        assert.equal(repos.preferences.list(PROJECT, `w-${writer}-`).length, count, `preferences of ${writer}`);
      }
      // Read-modify-write under the lock: no increment lost.
      assert.equal(repos.preferences.get<number>(PROJECT, 'counter'), 2 * count);
      // Racing reservations of one name all got distinct names.
      const reserved = [...a.lines, ...b.lines].filter((l) => l.startsWith('reserved ')).map((l) => l.slice('reserved '.length));
      assert.equal(reserved.length, 2 * (count / 15));
      assert.equal(new Set(reserved).size, reserved.length, `duplicate reservations: ${reserved.join(', ')}`);
      const names = repos.loops.list(PROJECT).map((loop) => loop.name).sort();
      assert.deepEqual(names, [...reserved].sort());
      assert.ok(names.includes('race') && names.includes(`race-${reserved.length}`));
    } finally {
      await db.close();
    }
  });
});
