import fs from 'node:fs';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { ForgeDatabaseError, describeFileSystemError, systemErrorCode } from './errors';

/**
 * An exclusive lock shared by every process that opens one database: a lock
 * file created with O_EXCL (`'wx'`), holding the owner's pid, process start
 * time and host name.
 *
 * Why a lock file and not OS advisory locks: Node has no flock/fcntl API and
 * Forge must not ship a native module. The cost is stale-lock handling: a
 * process killed while holding the lock leaves the file behind, so a waiter
 * checks whether the owner still lives (same host: `kill(pid, 0)`, plus the
 * process start time from /proc on Linux so a recycled pid is not mistaken for
 * the owner, plus the zombie state so an unreaped child counts as dead) and
 * removes a dead owner's lock.
 *
 * Taking over a stale lock is itself raced: two waiters may both decide the
 * same lock is stale, and the slower one could replace the lock the faster one
 * has just taken. A second O_EXCL file, the breaker, serialises takeovers, and
 * the taker re-reads the lock under the breaker and replaces it (atomic
 * rename of its own record) only if it is still the same stale content. The breaker is held for microseconds; if its
 * owner dies in that window the breaker is removed once its owner is dead too.
 *
 * The lock is only ever held inside synchronous sections (a write transaction,
 * the install step of a compaction), so waiting is a short synchronous
 * back-off (Atomics.wait) and never spans an `await`.
 *
 * A waiter never gives up because the machine is busy: with many processes
 * writing to one data folder on a loaded machine, one write may wait for many
 * others, each holding the lock briefly. It waits as long as holders come and
 * go (every acquisition writes a new token) and fails only when one
 * acquisition lasts longer than `stuckAfterMs` (default 120 s, thousands of
 * times longer than a write): that holder is alive but stuck, and the error
 * names its pid. A dead holder's lock is taken over at once.
 */
export interface LockOwner {
  readonly pid: number;
  /** Process start time in clock ticks since boot (Linux), null elsewhere. */
  readonly startTime: string | null;
  readonly host: string;
  readonly token: string;
  readonly acquiredAt: number;
}

export interface CrossProcessLockOptions {
  readonly lockPath: string;
  readonly breakerPath: string;
  /**
   * How long one acquisition by another process (the same lock token) may
   * last before acquire() calls its holder stuck and fails with `lock_stuck`.
   */
  readonly stuckAfterMs: number;
  readonly onWarning: (message: string) => void;
}

export interface CrossProcessLock {
  acquire(): void;
  release(): void;
  readonly held: boolean;
  /**
   * The dead process whose lock the last acquire() removed, or null. Whatever
   * that process left half-written (a torn journal append) is explained by its
   * death; the same damage without a dead holder is not.
   */
  readonly tookOverFrom: LockOwner | null;
}

/** An unparsable lock file younger than this may be a lock being written right now. */
const UNPARSABLE_LOCK_GRACE_MS = 5_000;
// Short: a write holds the lock for about one fsync, so a long sleep mostly wastes the free lock.
const MAX_BACKOFF_MS = 4;
// After this much waiting the lock is contended (many writers, a busy machine): poll less
// often, so waiters do not take the CPU the holder needs to finish.
const CONTENDED_AFTER_MS = 250;
const MAX_CONTENDED_BACKOFF_MS = 25;

/**
 * How long the current acquisition of a lock has lasted, as one waiter sees
 * it: the same lock file content (owner token) seen continuously since the
 * first sighting. A different content is a new acquisition: the holders are
 * making progress. Pure (the caller passes the clock).
 */
export class HolderWatch {
  private text: string | undefined;
  private since = 0;

  /** Records a sighting of the lock file's content at `now`; returns how long that content has been held. */
  observe(text: string, now: number): number {
    if (text !== this.text) {
      this.text = text;
      this.since = now;
    }
    return now - this.since;
  }
}

function readProcStat(pid: number | 'self'): { startTime: string; zombie: boolean } | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces and parentheses).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    const startTime = fields[19];
    return startTime === undefined ? undefined : { startTime, zombie: state === 'Z' || state === 'X' };
  } catch {
    return undefined;
  }
}

/** This process as an owner record (for resources other than locks: owner-records.ts). */
export function currentProcessOwner(): LockOwner {
  return { pid: process.pid, startTime: readProcStat('self')?.startTime ?? null, host: os.hostname(), token: randomBytes(8).toString('hex'), acquiredAt: Date.now() };
}

/** Whether a process with this pid runs on this machine (zombies count as dead). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if (systemErrorCode(error) === 'ESRCH') return false;
  }
  return readProcStat(pid)?.zombie !== true;
}

/** Whether the process that wrote `owner` may still be running. Unknown counts as alive. */
export function isLockOwnerAlive(owner: LockOwner): boolean {
  if (owner.host !== os.hostname()) return true; // another machine sharing the folder: cannot tell
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    if (systemErrorCode(error) === 'ESRCH') return false;
    // EPERM: the pid exists but belongs to another user; fall through to the start-time check.
  }
  const stat = readProcStat(owner.pid);
  if (stat === undefined) return true;
  if (stat.zombie) return false;
  return owner.startTime === null || owner.startTime === stat.startTime;
}

export function parseOwner(text: string): LockOwner | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockOwner>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.token === 'string') {
      return {
        pid: value.pid,
        host: value.host,
        token: value.token,
        startTime: typeof value.startTime === 'string' ? value.startTime : null,
        acquiredAt: typeof value.acquiredAt === 'number' ? value.acquiredAt : 0,
      };
    }
  } catch {
    // fall through
  }
  return undefined;
}

/**
 * Who holds the lock at `lockPath` right now, without taking it: null when it
 * is free. `alive` false means its holder died (the lock is stale). For
 * connections that never write and so never take the lock.
 */
export function currentLockHolder(lockPath: string): { owner: LockOwner | undefined; alive: boolean } | null {
  let text: string;
  let mtimeMs: number;
  try {
    text = fs.readFileSync(lockPath, 'utf8');
    mtimeMs = fs.statSync(lockPath).mtimeMs;
  } catch (error) {
    if (systemErrorCode(error) === 'ENOENT') return null;
    throw describeFileSystemError(error, lockPath, 'read the lock file') ?? error;
  }
  const owner = parseOwner(text);
  if (owner === undefined) return { owner, alive: Date.now() - mtimeMs <= UNPARSABLE_LOCK_GRACE_MS };
  return { owner, alive: isLockOwnerAlive(owner) };
}

function formatSeconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

export function createCrossProcessLock(options: CrossProcessLockOptions): CrossProcessLock {
  const { lockPath, breakerPath, stuckAfterMs, onWarning } = options;
  const ownStartTime = readProcStat('self')?.startTime ?? null;
  const sleepCell = new Int32Array(new SharedArrayBuffer(4));
  let heldToken: string | null = null;
  let tookOverFrom: LockOwner | null = null;

  const sleep = (ms: number): void => {
    Atomics.wait(sleepCell, 0, 0, ms);
  };

  const ownerRecord = (): LockOwner => ({
    pid: process.pid,
    startTime: ownStartTime,
    host: os.hostname(),
    token: randomBytes(8).toString('hex'),
    acquiredAt: Date.now(),
  });

  /** Creates `filePath` exclusively with our owner record; false if it exists. */
  const tryCreate = (filePath: string, owner: LockOwner): boolean => {
    let fd: number;
    try {
      fd = fs.openSync(filePath, 'wx');
    } catch (error) {
      if (systemErrorCode(error) === 'EEXIST') return false;
      throw describeFileSystemError(error, filePath, 'create the lock file') ?? error;
    }
    try {
      fs.writeSync(fd, JSON.stringify(owner));
    } finally {
      fs.closeSync(fd);
    }
    return true;
  };

  const readLock = (filePath: string): { text: string; mtimeMs: number } | undefined => {
    try {
      const text = fs.readFileSync(filePath, 'utf8');
      const { mtimeMs } = fs.statSync(filePath);
      return { text, mtimeMs };
    } catch (error) {
      if (systemErrorCode(error) === 'ENOENT') return undefined;
      throw describeFileSystemError(error, filePath, 'read the lock file') ?? error;
    }
  };

  const isStale = (lock: { text: string; mtimeMs: number }): boolean => {
    const owner = parseOwner(lock.text);
    if (owner === undefined) return Date.now() - lock.mtimeMs > UNPARSABLE_LOCK_GRACE_MS;
    return !isLockOwnerAlive(owner);
  };

  const unlinkIfPresent = (filePath: string): void => {
    try {
      fs.unlinkSync(filePath);
    } catch (error) {
      if (systemErrorCode(error) !== 'ENOENT') throw error;
    }
  };

  /**
   * Takes the lock over if it still holds `staleText`, serialised by the
   * breaker file: our owner record replaces the stale one by an atomic rename,
   * so no other waiter can slip in between the dead holder and us (whoever
   * holds the lock next must be the one who knows the holder died). Returns
   * our record when we now hold the lock.
   */
  const takeOverStaleLock = (staleText: string): LockOwner | undefined => {
    if (!tryCreate(breakerPath, ownerRecord())) {
      const breaker = readLock(breakerPath);
      if (breaker !== undefined && isStale(breaker)) unlinkIfPresent(breakerPath);
      return undefined; // retry on the next round
    }
    try {
      const current = readLock(lockPath);
      if (current !== undefined && current.text === staleText) {
        const mine = ownerRecord();
        const temp = `${lockPath}.takeover-${mine.token}`;
        try {
          fs.writeFileSync(temp, JSON.stringify(mine), { flag: 'wx' });
          fs.renameSync(temp, lockPath);
        } catch (error) {
          try {
            fs.unlinkSync(temp);
          } catch {
            // never created
          }
          throw describeFileSystemError(error, lockPath, 'take over the lock file') ?? error;
        }
        const owner = parseOwner(staleText);
        onWarning(
          `Forge removed the lock ${lockPath} left by ${owner ? `process ${owner.pid}, which is no longer running` : 'a process that died while creating it'}.`,
        );
        return mine;
      }
      return undefined;
    } finally {
      unlinkIfPresent(breakerPath);
    }
  };

  return {
    get held() {
      return heldToken !== null;
    },

    get tookOverFrom() {
      return tookOverFrom;
    },

    acquire() {
      if (heldToken !== null) throw new Error(`lock ${lockPath} is already held by this connection`);
      tookOverFrom = null;
      const startedAt = Date.now();
      const holderWatch = new HolderWatch();
      let backoffMs = 1;
      for (;;) {
        const owner = ownerRecord();
        if (tryCreate(lockPath, owner)) {
          heldToken = owner.token;
          return;
        }
        const current = readLock(lockPath);
        if (current === undefined) continue; // released between our attempts: retry at once
        if (isStale(current)) {
          const mine = takeOverStaleLock(current.text);
          if (mine !== undefined) {
            heldToken = mine.token;
            tookOverFrom = parseOwner(current.text) ?? null; // unparsable: it died creating the lock, before any write
            return;
          }
          continue;
        }
        const now = Date.now();
        const heldForMs = holderWatch.observe(current.text, now);
        if (heldForMs >= stuckAfterMs) {
          const holder = parseOwner(current.text);
          const who = holder ? `process ${holder.pid}${holder.host === os.hostname() ? '' : ` on ${holder.host}`}` : 'an unknown process';
          throw new ForgeDatabaseError(
            'lock_stuck',
            lockPath,
            `Forge waited ${formatSeconds(now - startedAt)} for the database lock ${lockPath}: ${who} is alive and has held it ` +
              `without a break for ${formatSeconds(heldForMs)}, while a write holds it for milliseconds, so that process ` +
              `looks stuck. Stop it${holder ? ` (for example \`kill ${holder.pid}\`)` : ''} and try again; ` +
              `Forge takes the lock over from a process that is no longer running. ` +
              `If no Forge process is running at all, delete ${lockPath}.`,
          );
        }
        sleep(backoffMs);
        const cap = now - startedAt >= CONTENDED_AFTER_MS ? MAX_CONTENDED_BACKOFF_MS : MAX_BACKOFF_MS;
        backoffMs = Math.min(backoffMs * 2, cap);
      }
    },

    release() {
      const token = heldToken;
      if (token === null) return;
      heldToken = null;
      let text: string | undefined;
      try {
        text = fs.readFileSync(lockPath, 'utf8');
      } catch (error) {
        if (systemErrorCode(error) !== 'ENOENT') throw error;
      }
      if (text === undefined || parseOwner(text)?.token !== token) {
        onWarning(
          `Forge's lock ${lockPath} was removed by another process while this process held it ` +
            `(it judged this process dead). Writes stay consistent, but check for clock or pid-namespace oddities.`,
        );
        return;
      }
      unlinkIfPresent(lockPath);
    },
  };
}
