import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Database, SqlJsStatic } from 'sql.js';
import { tempFilePath, type DatabaseFiles } from './database-files';
import { errorMessage, fsyncDirectory, moveAside, unlinkQuietly, writeFileDurablySync } from './durable-io';
import { ForgeDatabaseError, describeFileSystemError, systemErrorCode } from './errors';

/*
 * The snapshot file `forge.db`: a plain SQLite file whose `forge_meta.last_seq`
 * row says which committed change it includes last. Read whole, validated,
 * and only ever replaced by temp file + fsync + atomic rename.
 */

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Bootstrap schema, identical in every process; everything else is created by journaled migrations. */
const BOOTSTRAP_SQL = [
  `CREATE TABLE forge_meta (key TEXT PRIMARY KEY, value NOT NULL)`,
  `INSERT INTO forge_meta (key, value) VALUES ('last_seq', 0)`,
  `CREATE TABLE migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
];

/** The state before any change: what every process starts from when there is no snapshot. */
export function createBootstrapDatabase(sqlJs: SqlJsStatic): Database {
  const db = new sqlJs.Database();
  for (const sql of BOOTSTRAP_SQL) db.run(sql);
  return db;
}

/**
 * The snapshot's bytes, or null when there is none. A zero-length file is no
 * snapshot either (something created or emptied it before any compaction
 * wrote one): the journal is then replayed onto the empty state, and only if
 * it does not start at change #0 is something missing (reported by the caller).
 */
export function readSnapshotFile(files: DatabaseFiles): Buffer | null {
  try {
    const bytes = fs.readFileSync(files.snapshot);
    return bytes.length === 0 ? null : bytes;
  } catch (error) {
    const code = systemErrorCode(error);
    if (code === 'ENOENT') return null;
    if (code === 'EACCES' || code === 'EPERM' || code === 'EISDIR' || code === 'EIO') {
      throw new ForgeDatabaseError(
        'unreadable',
        files.snapshot,
        `Forge cannot read its database ${files.snapshot} (${code === 'EISDIR' ? 'it is a folder' : code === 'EIO' ? 'I/O error' : 'permission denied'}). ` +
          `Nothing was changed or moved. Make it a readable file (for example \`chmod u+rw ${files.snapshot}\`), ` +
          `or point Forge's data folder (setting forge.dataDir / option --data-dir) elsewhere.`,
        { cause: error },
      );
    }
    throw describeFileSystemError(error, files.snapshot, 'read') ?? error;
  }
}

export type SnapshotOpenResult = { readonly db: Database; readonly seq: number } | { readonly problem: string };

/** Loads snapshot bytes into sql.js and checks they are a Forge database (`verify`: also SQLite's quick_check). */
export function openSnapshot(sqlJs: SqlJsStatic, bytes: Buffer, verify: boolean): SnapshotOpenResult {
  if (bytes.length < 100 || !bytes.subarray(0, SQLITE_HEADER.length).equals(SQLITE_HEADER)) {
    return { problem: bytes.length === 0 ? 'the file is empty' : 'it is not an SQLite database file' };
  }
  let db: Database | undefined;
  let problem: string | undefined;
  let seq = Number.NaN;
  try {
    db = new sqlJs.Database(bytes);
    const meta = db.exec(`SELECT value FROM forge_meta WHERE key = 'last_seq'`);
    seq = Number(meta[0]?.values[0]?.[0]);
    if (verify) {
      const check = db.exec('PRAGMA quick_check');
      const verdict = check[0]?.values.map((row) => String(row[0])) ?? [];
      if (verdict.length !== 1 || verdict[0] !== 'ok') problem = `SQLite's integrity check failed: ${verdict.slice(0, 3).join('; ')}`;
    }
    if (problem === undefined && !(Number.isSafeInteger(seq) && seq >= 0)) problem = 'its Forge bookkeeping row is missing or invalid';
  } catch (error) {
    const message = errorMessage(error);
    problem = /no such table: forge_meta/.test(message) ? 'it is an SQLite file but not a Forge database' : `SQLite cannot read it (${message})`;
  }
  if (problem !== undefined || db === undefined) {
    db?.close();
    return { problem: problem ?? 'unknown damage' };
  }
  return { db, seq };
}

/** Moves a damaged snapshot (and the journal that continues it) aside and throws. */
export function moveDamagedSnapshotAside(files: DatabaseFiles, reason: string): never {
  const moved = [moveAside(files.snapshot, files.directory)];
  if (fs.existsSync(files.journal)) moved.push(moveAside(files.journal, files.directory));
  throw new ForgeDatabaseError(
    'corrupt',
    files.snapshot,
    `Forge could not use its database ${files.snapshot}: ${reason}. ` +
      `Forge moved it to ${moved[0]}${moved[1] ? ` (and its journal to ${moved[1]})` : ''} and will start with an ` +
      `empty database next time. Restore the moved file from a backup if you need its history.`,
    { movedTo: moved },
  );
}

/** Replaces the snapshot with `bytes` atomically (temp file, fsync, rename, directory fsync). */
export function writeSnapshotSync(files: DatabaseFiles, bytes: Uint8Array): void {
  const temp = tempFilePath(files.snapshot, randomBytes(4).toString('hex'));
  try {
    writeFileDurablySync(temp, bytes);
    fs.renameSync(temp, files.snapshot);
    fsyncDirectory(files.directory);
  } catch (error) {
    unlinkQuietly(temp);
    throw describeFileSystemError(error, files.snapshot, 'write') ?? error;
  }
}
