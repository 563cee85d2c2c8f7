/**
 * Child process for the storage durability tests (not a test itself).
 *
 *   writer: --db PATH --id NAME [--count N (0 = until killed)] [--compact-bytes N] [--reserve-every K]
 *     Each iteration i (numbered on from earlier runs) is one transaction that appends a transition, adds one
 *     message to a usage row, stores preference `w-NAME-i`, and increments the
 *     shared preference `counter` (read-modify-write). After the transaction
 *     returns (= acknowledged) it prints `ack i`. Every K iterations it also
 *     reserves a loop named "race" and prints `reserved NAME`. After each
 *     iteration it checks the invariants in one query and prints `violation …`
 *     on a mismatch.
 *   reader: --db PATH --expect TOTAL --ids A,B
 *     Reads in a tight loop, checking the invariants, until the counter reaches
 *     TOTAL; prints `checked N` and one `violation …` line per torn state seen.
 *   open: --db PATH
 *     Opens the database and prints `opened` or `error CODE MESSAGE` (read-only folder test).
 *   hold-lock: --db PATH [--ms N (0 = until killed)]
 *     Takes the database's cross-process lock, prints `holding`, keeps it N ms
 *     (the process stays alive and responsive meanwhile), releases it and prints `released`.
 */
import { createCrossProcessLock } from '../../src/core/storage/cross-process-lock';
import { openForgeDatabase } from '../../src/core/storage/database';
import { databaseFiles } from '../../src/core/storage/database-files';
import { isForgeDatabaseError } from '../../src/core/storage/errors';
import { createForgeRepositories } from '../../src/core/storage/repositories';
import type { SqlExecutor } from '../../src/core/storage/sql-executor';

export const PROJECT = 'durability-project';

function argument(name: string, fallback?: string): string {
  const index = process.argv.indexOf(`--${name}`);
  const value = index === -1 ? fallback : process.argv[index + 1];
  if (value === undefined) throw new Error(`missing --${name}`);
  return value;
}

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** One consistent view (a single statement) of everything one writer wrote, plus the shared counter. */
function checkInvariants(db: SqlExecutor, ids: readonly string[]): string[] {
  const violations: string[] = [];
  const parts = ids.map(
    (_, i) => `(SELECT count(*) FROM loop_transitions WHERE project_id = ?1 AND loop_name = ?${i + 3}) AS t${i},
      (SELECT coalesce(sum(messages), 0) FROM loop_session_usage WHERE project_id = ?1 AND loop_name = ?${i + 3}) AS m${i},
      (SELECT count(*) FROM preferences WHERE project_id = ?1 AND substr(key, 1, length('w-' || ?${i + 3} || '-')) = 'w-' || ?${i + 3} || '-') AS p${i}`,
  );
  const row = db.get<Record<string, number | string | null>>(
    `SELECT ${parts.join(', ')}, (SELECT value FROM preferences WHERE project_id = ?1 AND key = ?2) AS counter`,
    [PROJECT, 'counter', ...ids],
  );
  if (!row) return ['no row'];
  let total = 0;
  ids.forEach((id, i) => {
    const t = Number(row[`t${i}`]);
    const m = Number(row[`m${i}`]);
    const p = Number(row[`p${i}`]);
    if (t !== m || t !== p) violations.push(`${id}: transitions ${t}, messages ${m}, preferences ${p}`);
    total += t;
  });
  const counter = row.counter === null ? 0 : Number(JSON.parse(String(row.counter)));
  if (counter !== total) violations.push(`counter ${counter} != total ${total}`);
  return violations;
}

async function runWriter(): Promise<void> {
  const id = argument('id');
  const count = Number(argument('count', '0'));
  const reserveEvery = Number(argument('reserve-every', '0'));
  const db = await openForgeDatabase({
    path: argument('db'),
    compactAfterJournalBytes: Number(argument('compact-bytes', String(8 * 1024 * 1024))),
    compactAtSnapshotFraction: 0,
    onWarning: (message) => print(`warning ${message.replace(/\n/g, ' ')}`),
  });
  const ids = argument('ids', id).split(',');
  print('ready');
  const padding = 'x'.repeat(200);
  // Continue the numbering of earlier runs (the kill test restarts the writer many times).
  const first = createForgeRepositories(db).transitions.listByLoop(PROJECT, id).length + 1;
  let lastBaseSeq = db.diagnostics().journalBaseSeq;
  for (let i = first; count === 0 || i < first + count; i++) {
    db.transaction((tx) => {
      const repos = createForgeRepositories(tx);
      repos.transitions.append(PROJECT, { loopName: id, event: 'tick', fromPhase: 'coding', toPhase: 'auditing', iteration: i });
      repos.sessionUsage.add(PROJECT, { loopName: id, sessionId: 'session', role: 'code', model: 'model' }, { messages: 1, inputTokens: i });
      repos.preferences.set(PROJECT, `w-${id}-${i}`, { i, padding });
      repos.preferences.set(PROJECT, 'counter', (repos.preferences.get<number>(PROJECT, 'counter') ?? 0) + 1);
    });
    print(`ack ${i}`);
    const baseSeq = db.diagnostics().journalBaseSeq;
    if (baseSeq !== lastBaseSeq) print(`compacted ${baseSeq}`);
    lastBaseSeq = baseSeq;
    if (reserveEvery > 0 && i % reserveEvery === 0) {
      const loop = createForgeRepositories(db).loops.reserve(PROJECT, 'Race', { kind: 'plan' });
      print(`reserved ${loop.name}`);
    }
    for (const violation of checkInvariants(db, ids)) print(`violation ${violation}`);
    // Yield between writes, as the extension does between events, so background compaction runs.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await db.close();
  print('done');
}

async function runReader(): Promise<void> {
  const expect = Number(argument('expect'));
  const ids = argument('ids').split(',');
  const db = await openForgeDatabase({ path: argument('db'), onWarning: (message) => print(`warning ${message}`) });
  print('ready');
  let checks = 0;
  const deadline = Date.now() + 120_000;
  for (;;) {
    const violations = checkInvariants(db, ids);
    checks++;
    for (const violation of violations) print(`violation ${violation}`);
    const counter = createForgeRepositories(db).preferences.get<number>(PROJECT, 'counter') ?? 0;
    if (counter >= expect || Date.now() > deadline) break;
    if (checks % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await db.close();
  print(`checked ${checks}`);
}

async function runOpen(): Promise<void> {
  try {
    const db = await openForgeDatabase({ path: argument('db') });
    await db.close();
    print('opened');
  } catch (error) {
    if (isForgeDatabaseError(error)) print(`error ${error.code} ${error.message}`);
    else print(`error unexpected ${error instanceof Error ? error.stack : String(error)}`);
  }
}

async function runHoldLock(): Promise<void> {
  const files = databaseFiles(argument('db'));
  const lock = createCrossProcessLock({
    lockPath: files.lock,
    breakerPath: files.lockBreaker,
    stuckAfterMs: 120_000,
    onWarning: (message) => print(`warning ${message}`),
  });
  lock.acquire();
  print('holding');
  const ms = Number(argument('ms', '0'));
  await new Promise((resolve) => setTimeout(resolve, ms === 0 ? 2 ** 31 - 1 : ms));
  lock.release();
  print('released');
}

const mode = process.argv[2];
const modes: Record<string, () => Promise<void>> = { writer: runWriter, reader: runReader, open: runOpen, 'hold-lock': runHoldLock };
const run = mode === undefined ? undefined : modes[mode];
if (!run) throw new Error(`unknown mode ${mode}`);
run().catch((error: unknown) => {
  print(`fatal ${error instanceof Error ? error.stack?.replace(/\n/g, ' | ') : String(error)}`);
  process.exitCode = 1;
});
