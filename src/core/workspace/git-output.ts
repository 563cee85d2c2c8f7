/**
 * Git's output, parsed: the first line of a command's output, `git worktree list --porcelain`
 * and `git diff --name-status -z`. Its own file because these are pure functions of text, shared
 * by the service's parts and testable without a repository.
 */
import type { ChangedFile } from './worktree-types';

/** One entry of `git worktree list --porcelain`. */
export interface WorktreeEntry {
  path: string;
  head: string | null;
  branch: string | null;
  bare: boolean;
  locked: boolean;
  prunable: boolean;
}

export const firstLine = (text: string): string => text.split(/\r?\n/, 1)[0] ?? '';

export function parseWorktreeList(output: string): WorktreeEntry[] {
  const entries: WorktreeEntry[] = [];
  let current: WorktreeEntry | null = null;
  for (const line of output.split(/\r?\n/)) {
    if (line.startsWith('worktree ')) {
      current = { path: line.slice('worktree '.length), head: null, branch: null, bare: false, locked: false, prunable: false };
      entries.push(current);
    } else if (current === null) {
      continue;
    } else if (line.startsWith('HEAD ')) {
      current.head = line.slice('HEAD '.length);
    } else if (line.startsWith('branch ')) {
      current.branch = line.slice('branch '.length);
    } else if (line === 'bare') {
      current.bare = true;
    } else if (line === 'locked' || line.startsWith('locked ')) {
      current.locked = true;
    } else if (line === 'prunable' || line.startsWith('prunable ')) {
      current.prunable = true;
    }
  }
  return entries;
}

export function parseNameStatus(output: string): ChangedFile[] {
  const fields = output.split('\0');
  const changes: ChangedFile[] = [];
  for (let i = 0; i < fields.length; ) {
    const code = fields[i++];
    if (!code) continue;
    const status = code[0] as ChangedFile['status'];
    if (status === 'R' || status === 'C') {
      const oldPath = fields[i++] ?? '';
      const newPath = fields[i++] ?? '';
      changes.push({ status, path: newPath, oldPath });
    } else {
      changes.push({ status, path: fields[i++] ?? '' });
    }
  }
  return changes;
}
