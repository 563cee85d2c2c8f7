import path from 'node:path';
import { ForgeDatabaseError } from './errors';

/**
 * The files that make up one Forge database, all derived from the snapshot
 * path so that a database is one name in one folder:
 *
 *   forge.db                 snapshot (a plain SQLite file, replaced only by atomic rename)
 *   forge.db.journal         committed transactions since the snapshot (append-only)
 *   forge.db.lock            cross-process write lock (exists only while held)
 *   forge.db.lock.break      short-lived guard used while taking over a dead owner's lock
 *   forge.db.lock.takeover-… the new owner record, renamed over a dead owner's lock
 *   forge.db.tmp-<pid>-<id>  snapshot being written by a compaction
 *   forge.db.journal.tmp-…   journal being written by a compaction
 *   forge.db.corrupt-<time>  a damaged snapshot moved aside (never deleted by Forge)
 */
export interface DatabaseFiles {
  readonly snapshot: string;
  readonly journal: string;
  readonly lock: string;
  readonly lockBreaker: string;
  readonly directory: string;
}

/** Longest suffix Forge appends to the snapshot's file name (see names above). */
const LONGEST_SUFFIX = '.journal.corrupt-2000-01-01T00-00-00-000Z-99';
const TEMP_SUFFIX_PATTERN = /^\.(?:journal\.)?tmp-(\d+)-[0-9a-f]+$/;

export function databaseFiles(snapshotPath: string): DatabaseFiles {
  const snapshot = path.resolve(snapshotPath);
  return {
    snapshot,
    journal: `${snapshot}.journal`,
    lock: `${snapshot}.lock`,
    lockBreaker: `${snapshot}.lock.break`,
    directory: path.dirname(snapshot),
  };
}

export function tempFilePath(basePath: string, uniqueHex: string): string {
  return `${basePath}.tmp-${process.pid}-${uniqueHex}`;
}

/** The pid that wrote a temp file, or undefined if `name` is not one of our temp files. */
export function tempFileOwnerPid(snapshotBaseName: string, name: string): number | undefined {
  if (!name.startsWith(snapshotBaseName)) return undefined;
  const match = TEMP_SUFFIX_PATTERN.exec(name.slice(snapshotBaseName.length));
  return match ? Number(match[1]) : undefined;
}

/** A file name next to `filePath` for moving it aside, e.g. `forge.db.corrupt-2025-01-02T03-04-05-678Z`. */
export function corruptFileName(filePath: string, now: Date, attempt: number): string {
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  return `${filePath}.corrupt-${stamp}${attempt > 1 ? `-${attempt}` : ''}`;
}

interface PathLimits {
  /** Longest full path, in bytes (UTF-8) on POSIX, in UTF-16 units on Windows. */
  readonly maxPath: number;
  /** Longest single path component. */
  readonly maxComponent: number;
}

function platformPathLimits(platform: NodeJS.Platform): PathLimits {
  if (platform === 'win32') return { maxPath: 259, maxComponent: 255 }; // MAX_PATH without the long-path opt-in
  if (platform === 'darwin') return { maxPath: 1023, maxComponent: 255 };
  return { maxPath: 4095, maxComponent: 255 };
}

function pathLength(value: string, platform: NodeJS.Platform): number {
  return platform === 'win32' ? value.length : Buffer.byteLength(value, 'utf8');
}

/**
 * Rejects a database path whose derived files could not be created, before
 * anything is written: failing later (say, when a compaction's temp file or a
 * corrupt file's moved-aside name exceeds the limit) would leave the user with
 * a half-working database and a confusing error.
 */
export function assertDatabasePathFits(snapshotPath: string, platform: NodeJS.Platform = process.platform): void {
  const limits = platformPathLimits(platform);
  const longest = snapshotPath + LONGEST_SUFFIX;
  const tooLong = (message: string): never => {
    throw new ForgeDatabaseError(
      'path_too_long',
      snapshotPath,
      `Forge cannot use the database path ${snapshotPath}: ${message}. ` +
        `Choose a shorter data folder (setting forge.dataDir / option --data-dir).`,
    );
  };
  if (pathLength(longest, platform) > limits.maxPath) {
    tooLong(
      `with the names Forge derives from it (up to ${LONGEST_SUFFIX.length} more characters) it exceeds ` +
        `this system's limit of ${limits.maxPath} characters for a full path`,
    );
  }
  const components = snapshotPath.split(/[\\/]+/);
  components[components.length - 1] = path.basename(longest);
  for (const component of components) {
    if (pathLength(component, platform) > limits.maxComponent) {
      tooLong(
        `the name "${component.length > 60 ? `${component.slice(0, 57)}…` : component}" is longer than ` +
          `this system's limit of ${limits.maxComponent} characters for one folder or file name`,
      );
    }
  }
}
