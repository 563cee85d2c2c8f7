import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { GitRunner } from './git-runner';
import { WorkspaceError } from './workspace-error';

/** What Forge needs to know about the repository a loop starts from. */
export interface RepositoryInfo {
  /** The working tree's top-level folder (canonical path). */
  repoDir: string;
  /** The repository's shared `.git` folder (the main one, also when `repoDir` is a linked worktree). */
  gitCommonDir: string;
  /** The commit HEAD points at. */
  headCommit: string;
  /** The checked-out branch, or null when HEAD is detached. */
  currentBranch: string | null;
  /** What the working tree holds beyond HEAD; only when asked for (`workingTreeChanges`). */
  workingTreeChanges?: WorkingTreeChanges;
}

/** Files of the user's working tree that a loop, which starts from HEAD, does not get. */
export interface WorkingTreeChanges {
  /** Tracked files with staged or unstaged changes (modified, added, deleted, renamed …). */
  changed: number;
  /** Untracked files that are not ignored. */
  untracked: number;
}

export interface InspectRepositoryOptions {
  /** Also count uncommitted and untracked files (one `git status`, which walks the tree). */
  workingTreeChanges?: boolean;
}

/**
 * Counts `git status --porcelain=v1 -z` entries: `?? path` is untracked, `!! path` ignored,
 * anything else a tracked file with changes. A rename or copy (R/C in either column) is
 * followed by a field with its original path, which is not a file of its own.
 */
export function countWorkingTreeChanges(porcelainZ: string): WorkingTreeChanges {
  const fields = porcelainZ.split('\0');
  let changed = 0;
  let untracked = 0;
  for (let i = 0; i < fields.length; i++) {
    const entry = fields[i]!;
    if (entry.length < 4) continue;
    const xy = entry.slice(0, 2);
    if (xy === '??') untracked++;
    else if (xy !== '!!') changed++;
    if (/[RC]/.test(xy)) i++;
  }
  return { changed, untracked };
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * The start notice telling the user that uncommitted and untracked files are not in the loop's
 * worktree (it starts from HEAD); null when the working tree is clean.
 */
export function workingTreeChangesNotice(repo: Pick<RepositoryInfo, 'repoDir' | 'headCommit' | 'currentBranch'>, changes: WorkingTreeChanges): string | null {
  const parts = [
    ...(changes.changed > 0 ? [plural(changes.changed, 'file with uncommitted changes', 'files with uncommitted changes')] : []),
    ...(changes.untracked > 0 ? [plural(changes.untracked, 'untracked file', 'untracked files')] : []),
  ];
  if (parts.length === 0) return null;
  const total = changes.changed + changes.untracked;
  const head = `HEAD ${repo.headCommit.slice(0, 7)}${repo.currentBranch ? ` (${repo.currentBranch})` : ''}`;
  const how = changes.untracked > 0 ? 'Commit them, or stash them with git stash --include-untracked,' : 'Commit or stash them';
  return `${parts.join(' and ')} in ${repo.repoDir} ${total === 1 ? 'is' : 'are'} not part of the loop: it starts from ${head}. ${how} first if the loop needs them.`;
}

const trimLine = (text: string): string => text.replace(/\r?\n$/, '');

/** Resolves symlinks when the path exists; otherwise resolves what does exist of it. */
export async function canonicalPath(target: string): Promise<string> {
  const absolute = path.resolve(target);
  try {
    return await realpath(absolute);
  } catch {
    const parent = path.dirname(absolute);
    if (parent === absolute) return absolute;
    return path.join(await canonicalPath(parent), path.basename(absolute));
  }
}

/**
 * Checks, before anything is created, that `target` is a folder inside a
 * non-bare git repository with at least one commit. Each failure is its own
 * `WorkspaceError` code with a message saying how to fix it.
 */
export async function inspectRepository(git: GitRunner, target: string, options: InspectRepositoryOptions = {}): Promise<RepositoryInfo> {
  const folder = path.resolve(target);
  try {
    const info = await stat(folder);
    if (!info.isDirectory()) {
      throw new WorkspaceError(
        'not_a_directory',
        `${folder} is a file, not a folder. Point Forge at the folder of your git repository.`,
      );
    }
  } catch (error) {
    if (error instanceof WorkspaceError) throw error;
    throw new WorkspaceError(
      'path_not_found',
      `The folder ${folder} does not exist. Check the path, or open the folder of your git repository.`,
      { cause: error },
    );
  }

  const probe = await git.run(folder, ['rev-parse', '--is-bare-repository', '--is-inside-work-tree', '--absolute-git-dir', '--git-common-dir']);
  if (probe.exitCode !== 0) {
    const stderr = probe.stderr;
    if (/dubious ownership/i.test(stderr)) {
      throw new WorkspaceError(
        'unsafe_repository',
        `git refuses to use the repository at ${folder} because it belongs to another user ("dubious ownership"). If you trust it, run: git config --global --add safe.directory ${folder}`,
      );
    }
    if (/not a git repository/i.test(stderr)) {
      throw new WorkspaceError(
        'not_a_git_repository',
        `${folder} is not a git repository. Forge runs loops on a git branch: create one with "git init" (and a first commit) in that folder, or open a folder that is a git repository.`,
      );
    }
    throw new WorkspaceError('git_failed', `git could not read the repository at ${folder}: ${stderr.trim() || `exit code ${probe.exitCode}`}`);
  }

  const [isBare, isInsideWorkTree, gitDir, commonDirOutput] = probe.stdout.split(/\r?\n/);
  if (isBare === 'true') {
    throw new WorkspaceError(
      'bare_repository',
      `${folder} is a bare repository (it has no working tree). Clone it into a normal folder ("git clone ${folder} my-project") and run the loop there.`,
    );
  }
  if (isInsideWorkTree !== 'true' || gitDir === undefined || commonDirOutput === undefined) {
    throw new WorkspaceError(
      'not_a_work_tree',
      `${folder} is inside a repository's .git folder, not its working tree. Open the repository's own folder (the one that contains .git) instead.`,
    );
  }
  const gitCommonDir = await canonicalPath(path.resolve(folder, commonDirOutput));

  // The rest are independent reads: asked at once (each is a git process), checked in order.
  const [topLevel, headResult, branchResult, status] = await Promise.all([
    git.ok(folder, ['rev-parse', '--show-toplevel']),
    git.run(folder, ['rev-parse', '--verify', '-q', 'HEAD^{commit}']),
    git.run(folder, ['symbolic-ref', '-q', '--short', 'HEAD']),
    // Every untracked file counts (not just its folder); ignored files do not. Run from `folder`,
    // status still covers the whole working tree.
    options.workingTreeChanges ? git.ok(folder, ['status', '--porcelain=v1', '-z', '--untracked-files=all']) : Promise.resolve(null),
  ]);
  const repoDir = await canonicalPath(trimLine(topLevel));

  const head = trimLine(headResult.stdout);
  if (head === '') {
    throw new WorkspaceError(
      'no_commits',
      `The repository at ${repoDir} has no commits yet, so there is nothing to branch a loop from. Make a first commit (e.g. git add -A && git commit -m "Initial commit") and start the loop again.`,
    );
  }

  const branch = trimLine(branchResult.stdout);
  const info: RepositoryInfo = { repoDir, gitCommonDir, headCommit: head, currentBranch: branch === '' ? null : branch };
  if (status !== null) info.workingTreeChanges = countWorkingTreeChanges(status);
  return info;
}
