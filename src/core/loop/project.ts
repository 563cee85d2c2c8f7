import { createHash } from 'node:crypto';

/**
 * A project is one git repository, whatever worktree or subfolder it is opened from: its id is
 * derived from the repository's shared `.git` folder, so the user's checkout and every loop
 * worktree of it see the same loops.
 */
export function projectIdFor(gitCommonDir: string): string {
  return createHash('sha256').update(gitCommonDir).digest('hex').slice(0, 16);
}
