/**
 * Which process owns a resource Forge makes outside its database (a throw-away merge worktree, a
 * merge-check sandbox): a small JSON file naming the owner's pid, start time and host, written
 * before the resource exists and removed after it is gone. After a crash (kill -9), the start-up
 * cleanup removes a resource only when its owner is provably dead; a live owner, an owner on
 * another machine or an unreadable start time count as alive.
 */
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { currentProcessOwner, isLockOwnerAlive, parseOwner } from '../storage/cross-process-lock';

/** Records this process as the owner of the resource `file` stands for. */
export async function writeOwnerRecord(file: string): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, JSON.stringify(currentProcessOwner()));
}

export async function removeOwnerRecord(file: string): Promise<void> {
  await fs.rm(file, { force: true });
}

/**
 * Whether the owner recorded in `file` may still run: 'alive', 'dead', or 'none' (no readable
 * record: a resource of a Forge from before owner records, or one whose owner died between the
 * record's removal and the resource's).
 */
export function ownerState(file: string): 'alive' | 'dead' | 'none' {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return 'none';
  }
  const owner = parseOwner(text);
  if (!owner) return 'none';
  return isLockOwnerAlive(owner) ? 'alive' : 'dead';
}
