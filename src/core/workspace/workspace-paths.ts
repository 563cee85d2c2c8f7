/**
 * The file-system questions the worktree service asks of paths: does one exist, is one strictly
 * inside another. Its own file because the service and its merge both ask them.
 */
import { lstat } from 'node:fs/promises';
import path from 'node:path';

/** Whether `target` exists (a dangling link counts: it is not followed). */
export async function pathExists(target: string): Promise<boolean> {
  try {
    await lstat(target);
    return true;
  } catch {
    return false;
  }
}

/** Whether `child` is strictly inside `parent` (not `parent` itself). */
export function isInside(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}
