#!/usr/bin/env node
// Storage write cost versus database size (issue: "a write's cost does not grow with the
// database's size").
//
// For databases of about 1 MB, 10 MB and 100 MB, measures the median wall time of one small
// write (one INSERT of a ~200-byte finding, committed and acknowledged):
//   - Forge: openForgeDatabase's journaled persistence (append one record + fdatasync);
//   - naive: the same INSERT in plain sql.js followed by db.export() + fs.writeFileSync of the
//     whole file (no fsync, which flatters the baseline).
// Also reports Forge's compaction at each size (O(size), runs after the write returns, once
// per max(8 MiB, size/4) of journal) and its cost amortised over the writes that trigger it.
// Prints a table and the ratio of the 100 MB cost to the 1 MB cost for each.
// Targets: Forge's ratio ≤ 1.5, and Forge's 100 MB write ≥ 20× cheaper than the naive one.
//
//   node bench/storage.mjs [--writes 200] [--sizes 1,10,100] [--quick] [--timeout S]   (sizes in MB)
// (--quick: 20 writes at 1 and 2 MB)
// Exit code 0 even when a target is missed (it is a measurement, not a test); the verdict is printed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, median, stringArg } from './bench-common.mjs';

const run = benchRun('bench:storage', { timeoutS: 1800, quickTimeoutS: 120 });
run.step('load the modules');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (file) => import(path.join(root, file));
const { openForgeDatabase } = await load('src/core/storage/database.ts');
const { loadSqlJs } = await load('src/core/storage/sqljs-loader.ts');

const FORGE_WRITES = run.quick ? 20 : Number(stringArg('writes', '200'));
const SIZES_MB = (run.quick ? '1,2' : stringArg('sizes', '1,10,100')).split(',').map(Number);
const FILL_ROW_BYTES = 1000;
const MB = 1_000_000;

const now = () => Number(process.hrtime.bigint()) / 1e6;
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const fmt = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

const INSERT = `INSERT INTO review_findings (project_id, loop_name, file, line, severity, description, scenario, status,
  section_index, recurrence_count, fingerprint, created_at, updated_at) VALUES (?, ?, ?, ?, 'bug', ?, NULL, 'open', 0, 1, ?, ?, ?)`;
const insertParams = (i) => [
  'bench',
  'bench-loop',
  `src/module-${i % 50}.ts`,
  i,
  `Measured write ${i}: the handler forgets to release the lease when the session errors out.`,
  `fp-${i}`,
  1_700_000_000_000 + i,
  1_700_000_000_000 + i,
];

/** Fills a fresh Forge database to about `megabytes` and compacts it into a snapshot. */
async function buildDatabase(dbPath, megabytes) {
  const db = await openForgeDatabase({ path: dbPath, autoCompact: false });
  const rows = Math.round((megabytes * MB) / (FILL_ROW_BYTES * 1.33)); // ~1330 bytes per row on disk, indexes included
  // One deterministic statement (one journal record); then a compaction writes the snapshot.
  db.run(
    `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?)
     INSERT INTO review_findings (project_id, loop_name, file, line, severity, description, status, section_index,
       recurrence_count, fingerprint, created_at, updated_at)
     SELECT 'bench', 'filler-' || (x % 40), 'src/file-' || (x % 500) || '.ts', x, 'warning',
       printf('%.*c', ?, char(65 + x % 26)) || x, 'resolved', x % 24, 1, 'filler-' || x, x, x
     FROM n ORDER BY x`,
    [rows, FILL_ROW_BYTES],
  );
  await db.compact();
  await db.close();
  return fs.statSync(dbPath).size;
}

/**
 * Forge writes at every size, interleaved round-robin, so that load from other processes
 * on the machine (fsync latency varies a lot on shared VMs) hits all sizes alike.
 */
async function measureForge(databases) {
  const connections = [];
  for (const database of databases) connections.push(await openForgeDatabase({ path: database.dbPath, autoCompact: false }));
  for (const db of connections) for (let i = 0; i < 10; i++) db.run(INSERT, insertParams(-1 - i)); // warm-up
  const journalBefore = connections.map((db) => db.diagnostics().journalBytes);
  const times = connections.map(() => []);
  for (let i = 0; i < FORGE_WRITES; i++) {
    connections.forEach((db, k) => {
      const started = now();
      db.run(INSERT, insertParams(i));
      times[k].push(now() - started);
    });
  }
  const results = [];
  for (const [k, db] of connections.entries()) {
    const recordBytes = (db.diagnostics().journalBytes - journalBefore[k]) / FORGE_WRITES;
    const threshold = db.diagnostics().compactionThresholdBytes;
    const started = now();
    await db.compact(); // the O(size) step, done once per `threshold` journal bytes
    const compactMs = now() - started;
    await db.close();
    results.push({ times: times[k], recordBytes, threshold, compactMs });
  }
  return results;
}

async function measureNaive(sqlJs, snapshotPath, naivePath, writes) {
  const db = new sqlJs.Database(fs.readFileSync(snapshotPath));
  const statement = db.prepare(INSERT);
  const times = [];
  for (let i = 0; i < writes + 1; i++) {
    const started = now();
    statement.run(insertParams(i));
    fs.writeFileSync(naivePath, db.export());
    if (i > 0) times.push(now() - started); // the first one warms up
  }
  statement.free();
  db.close();
  return times;
}

const sqlJs = await loadSqlJs({});
console.log(`Forge storage benchmark — ${os.cpus().length} CPU(s), node ${process.version}, ${os.tmpdir()}`);
const root_ = fs.mkdtempSync(path.join(os.tmpdir(), 'forge-bench-storage-'));
run.cleanup(() => fs.rmSync(root_, { recursive: true, force: true }));
const results = [];
try {
  const databases = [];
  for (const megabytes of SIZES_MB) {
    const dbPath = path.join(root_, `${megabytes}mb`, 'forge.db');
    run.step(`build a ${megabytes} MB database`, 'the fill and its compaction');
    process.stdout.write(`  building ${megabytes} MB… `);
    const bytes = await buildDatabase(dbPath, megabytes);
    console.log(`${(bytes / MB).toFixed(1)} MB`);
    databases.push({ megabytes, dbPath, bytes });
  }
  run.step(`Forge: ${FORGE_WRITES} writes per size, interleaved`, 'the writes and each size\'s compaction');
  process.stdout.write(`  Forge: ${FORGE_WRITES} writes per size, interleaved… `);
  const forge = await measureForge(databases);
  console.log('done');
  for (const [k, database] of databases.entries()) {
    const naiveWrites = run.quick ? 3 : database.megabytes >= 100 ? 9 : database.megabytes >= 10 ? 25 : 60;
    run.step(`naive: ${naiveWrites} writes at ${database.megabytes} MB`, 'export + write of the whole file');
    process.stdout.write(`  naive: ${naiveWrites} writes at ${database.megabytes} MB… `);
    const naive = await measureNaive(sqlJs, database.dbPath, path.join(root_, `naive-${database.megabytes}.db`), naiveWrites);
    console.log('done');
    const f = forge[k];
    const writesPerCompaction = f.threshold / f.recordBytes;
    results.push({
      megabytes: database.megabytes,
      bytes: database.bytes,
      forgeMedian: median(f.times),
      forgeP90: quantile(f.times, 0.9),
      naiveMedian: median(naive),
      compactMs: f.compactMs,
      amortisedCompactMs: f.compactMs / writesPerCompaction,
      writesPerCompaction,
    });
  }
} finally {
  fs.rmSync(root_, { recursive: true, force: true });
}

console.log('');
if (run.quick) console.log('QUICK MODE (20 writes at 1 and 2 MB): figures not representative');
console.log('| database | Forge write median (p90) | naive export+write median | naive / Forge | Forge compaction (every N writes → amortised per write) |');
console.log('|---|---|---|---|---|');
for (const r of results) {
  console.log(
    `| ${(r.bytes / MB).toFixed(1)} MB | ${fmt(r.forgeMedian)} ms (${fmt(r.forgeP90)} ms) | ${fmt(r.naiveMedian)} ms | ` +
      `${(r.naiveMedian / r.forgeMedian).toFixed(0)}× | ${fmt(r.compactMs)} ms every ${Math.round(r.writesPerCompaction)} writes → ` +
      `${(r.amortisedCompactMs * 1000).toFixed(0)} µs |`,
  );
}
const smallest = results[0];
const largest = results[results.length - 1];
if (results.length >= 2) {
  const forgeRatio = largest.forgeMedian / smallest.forgeMedian;
  const naiveRatio = largest.naiveMedian / smallest.naiveMedian;
  const speedup = largest.naiveMedian / largest.forgeMedian;
  console.log('');
  console.log(`ratio ${largest.megabytes} MB / ${smallest.megabytes} MB write cost: Forge ${forgeRatio.toFixed(2)}, naive ${naiveRatio.toFixed(1)}`);
  if (run.quick) console.log('targets: not judged in quick mode');
  else console.log(
    `targets: Forge ratio ≤ 1.5 → ${forgeRatio <= 1.5 ? 'met' : 'MISSED'}; ` +
      `Forge ${largest.megabytes} MB write ≥ 20× cheaper than naive → ${speedup.toFixed(0)}× ${speedup >= 20 ? 'met' : 'MISSED'}`,
  );
}
run.done();
