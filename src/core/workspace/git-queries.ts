/**
 * Questions the worktree service asks git, one process each: a branch's tip (or several), the
 * registered worktrees, whether one commit is an ancestor of another, and the identity a commit
 * needs. Its own file because creating worktrees and merging both ask them, and neither writes.
 */
import { firstLine, parseWorktreeList, type WorktreeEntry } from './git-output';
import type { GitRunner } from './git-runner';
import { WorkspaceError } from './workspace-error';
import type { CommitIdentity } from './worktree-types';

export async function branchCommit(git: GitRunner, cwd: string, branch: string): Promise<string | null> {
  const sha = firstLine((await git.run(cwd, ['rev-parse', '--verify', '-q', `refs/heads/${branch}^{commit}`])).stdout);
  return sha === '' ? null : sha;
}

/** The tips of those of `branches` that exist, in one git process. */
export async function branchCommits(git: GitRunner, cwd: string, branches: string[]): Promise<Map<string, string>> {
  // --head: HEAD always matches, so show-ref exits 0 also when none of the branches exists.
  const output = await git.ok(cwd, ['show-ref', '--head', ...branches.map((b) => `refs/heads/${b}`)]);
  const tips = new Map<string, string>();
  for (const line of output.split('\n')) {
    const space = line.indexOf(' ');
    if (space < 0) continue;
    const ref = line.slice(space + 1);
    if (ref.startsWith('refs/heads/')) tips.set(ref.slice('refs/heads/'.length), line.slice(0, space));
  }
  return new Map(branches.filter((b) => tips.has(b)).map((b) => [b, tips.get(b)!]));
}

export async function listWorktrees(git: GitRunner, cwd: string): Promise<WorktreeEntry[]> {
  return parseWorktreeList(await git.ok(cwd, ['worktree', 'list', '--porcelain']));
}

export async function isAncestor(git: GitRunner, cwd: string, ancestor: string, descendant: string): Promise<boolean> {
  const result = await git.run(cwd, ['merge-base', '--is-ancestor', ancestor, descendant]);
  if (result.exitCode > 1) throw new WorkspaceError('git_failed', `git merge-base failed in ${cwd}: ${result.stderr.trim()}`);
  return result.exitCode === 0;
}

/** `-c` settings giving Forge's identity, only when the user has no email configured for `cwd`. */
export async function identityConfig(git: GitRunner, cwd: string, identity: CommitIdentity): Promise<string[]> {
  const email = firstLine((await git.run(cwd, ['config', '--get', 'user.email'])).stdout).trim();
  if (email !== '') return [];
  return [`user.name=${identity.name}`, `user.email=${identity.email}`];
}
