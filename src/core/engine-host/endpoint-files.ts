/**
 * Where a data folder's engine is found: `<dataDir>/engine/` (mode 0700) holds its socket
 * (`engine.sock`, 0600), what it says about itself (`engine.json`), its secret (`secret`, 0600:
 * only the same user can read it and hand work over) and its claim (`claim`: the pid of the one
 * process that may listen; created exclusively, so two processes never both become the engine).
 *
 * Nothing here is trusted blindly: a file left by a dead process (stale socket, claim or info)
 * is recognised by its pid and ignored or cleared.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isProcessAlive } from '../storage/cross-process-lock';
import { engineInfoSchema, type EngineInfo } from './protocol';

export interface EndpointPaths {
  dir: string;
  socket: string;
  info: string;
  secret: string;
  claim: string;
}

export function endpointPaths(dataDir: string): EndpointPaths {
  const dir = join(dataDir, 'engine');
  return { dir, socket: join(dir, 'engine.sock'), info: join(dir, 'engine.json'), secret: join(dir, 'secret'), claim: join(dir, 'claim') };
}

/** The engine's info file, or null when there is none, it is malformed, or its process is gone. */
export function readLiveEngineInfo(paths: EndpointPaths): EngineInfo | null {
  const info = readEngineInfo(paths);
  return info && (info.pid === process.pid || isProcessAlive(info.pid)) ? info : null;
}

/** The engine's info file as written, alive or not (forge status tells which). Reads only. */
export function readEngineInfo(paths: EndpointPaths): EngineInfo | null {
  try {
    const parsed = engineInfoSchema.safeParse(JSON.parse(readFileSync(paths.info, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export function readSecret(paths: EndpointPaths): string | null {
  try {
    return readFileSync(paths.secret, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/**
 * Takes the data folder's claim for this process. False when a live process holds it (that
 * one is, or is becoming, the engine). A claim left by a dead process is moved aside and
 * removed; if, in between, another process replaced it with its own, that claim is put back.
 */
export function takeClaim(paths: EndpointPaths): boolean {
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  // mkdir's mode applies only when it creates the folder (and under the umask): make sure.
  chmodSync(paths.dir, 0o700);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(paths.claim, String(process.pid), { flag: 'wx', mode: 0o600 });
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readClaim(paths.claim);
    if (holder !== null && (holder === process.pid || isProcessAlive(holder))) return holder === process.pid;
    const aside = `${paths.claim}.${randomBytes(6).toString('hex')}.stale`;
    try {
      renameSync(paths.claim, aside);
    } catch {
      continue; // someone else moved it first
    }
    const moved = readClaim(aside);
    if (moved !== holder) {
      // Not the stale claim we judged: another process's fresh one. Give it back.
      try {
        renameSync(aside, paths.claim);
      } catch {
        /* it claimed again meanwhile */
      }
      return false;
    }
    unlinkQuietly(aside);
  }
  return false;
}

function readClaim(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Writes the secret and the info file (0600, each atomically); removes a stale socket. */
export function publishEndpoint(paths: EndpointPaths, info: EngineInfo): string {
  const secret = randomBytes(32).toString('hex');
  writeAtomically(paths.secret, secret);
  writeAtomically(paths.info, JSON.stringify(info));
  // Only the claim holder gets here: a socket file present is a dead engine's.
  unlinkQuietly(paths.socket);
  return secret;
}

/** Removes what this process published, the claim last (only while it is still ours). */
export function withdrawEndpoint(paths: EndpointPaths, info: EngineInfo): void {
  if (readEngineInfo(paths)?.supervisorId === info.supervisorId) {
    unlinkQuietly(paths.socket);
    unlinkQuietly(paths.info);
    unlinkQuietly(paths.secret);
  }
  if (readClaim(paths.claim) === process.pid) unlinkQuietly(paths.claim);
}

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    /* already gone */
  }
}
