import { posix } from 'node:path';

/**
 * A file assertion's path as written, made canonical (`./src//a.ts` → `src/a.ts`), or why it is
 * refused. Pure: it only looks at the text. Paths are relative to the worktree root and may not
 * leave it; symbolic links are judged when the check runs (runner.ts), on the real files.
 */
export function normaliseWorktreePath(written: string): { path: string } | { error: string } {
  const path = written.trim();
  if (path === '') return { error: 'the path is empty: name a file relative to the repository root, e.g. src/cli.ts' };
  if (path.includes('\0') || path.includes('\n')) return { error: 'the path contains a NUL or newline character' };
  if (path.startsWith('/') || /^[A-Za-z]:[\\/]/.test(path)) {
    return {
      error: `the path "${path}" is absolute; Forge checks files inside the loop's worktree only: write it relative to the repository root (e.g. src/cli.ts)`,
    };
  }
  if (path === '~' || path.startsWith('~/')) {
    return { error: `the path "${path}" names your home folder; Forge checks files inside the loop's worktree only: write it relative to the repository root` };
  }
  const normalised = posix.normalize(path).replace(/\/+$/, '');
  if (normalised === '..' || normalised.startsWith('../')) {
    return {
      error: `the path "${path}" leaves the worktree through ".."; Forge checks files inside the loop's worktree only: write a path inside the repository`,
    };
  }
  return { path: normalised === '' ? '.' : normalised };
}
