/**
 * The conflict radar's adapter (issue 14 part 4): which files a live loop's worktree changed
 * against the loop's base commit — committed, staged, unstaged and untracked (not ignored) —
 * and, over a group's live loops, which of those files overlap (overlap.ts).
 *
 * Strictly read-only: the loops are working in these worktrees. Every git command runs with
 * GIT_OPTIONAL_LOCKS=0 and none of them writes the index. `git diff <base>` against the work
 * tree is not used: it refreshes and rewrites the index when a file's stat data changed but its
 * content did not, even with GIT_OPTIONAL_LOCKS=0 (seen on git 2.39). `git status` honours the
 * variable (it compares contents in memory and writes nothing), and `git diff-tree` compares two
 * commits without touching the index or the work tree.
 */
import { createGitRunner, type GitRunner } from '../workspace/git-runner';
import { createWorktreeGitDirs } from '../workspace/worktree-git-dirs';
import { findOverlaps, type FileOverlap } from './overlap';

/** A live loop of a group, as storage knows it. */
export interface RadarLoop {
  featureId: string;
  loopName: string;
  worktreeDir: string | null;
  baseCommit: string | null;
}

export interface RadarScan {
  overlaps: FileOverlap[];
  /** Per loop: the files it changed (sorted), or why they could not be read. */
  loops: Array<{ featureId: string; loopName: string; files: string[] } | { featureId: string; loopName: string; error: string }>;
}

/** A git runner whose commands take no optional locks (so `git status` writes no index). */
export function createReadOnlyGitRunner(env: Readonly<Record<string, string | undefined>> = process.env): GitRunner {
  const gitEnv = { ...env, GIT_OPTIONAL_LOCKS: '0' };
  // It reads loop worktrees: hardened git on Forge's own git dir (issue 26).
  return createGitRunner({ env: gitEnv, worktreeTarget: createWorktreeGitDirs({ env: gitEnv }).targetFor });
}

const split0 = (out: string) => out.split('\0').filter((s) => s.length > 0);

/**
 * The files the worktree at `worktreeDir` changed since `baseCommit`: the commits on its branch
 * (base..HEAD) and its work tree against HEAD (staged, unstaged, untracked; ignored files are
 * not changes). Repository-relative, `/`-separated, sorted, each once. A file changed in a
 * commit and changed back in the work tree still counts: the radar errs towards warning.
 */
export async function changedFiles(git: GitRunner, worktreeDir: string, baseCommit: string): Promise<string[]> {
  if (!/^[0-9a-f]{7,64}$/i.test(baseCommit)) throw new Error(`"${baseCommit}" is not a commit id.`);
  const committed = await git.ok(worktreeDir, ['diff-tree', '-r', '-z', '--name-only', '--no-renames', '--no-commit-id', baseCommit, 'HEAD', '--']);
  // Porcelain v1 with -z: "XY path\0"; with --no-renames no entry carries a second path.
  const status = await git.ok(worktreeDir, ['status', '--porcelain=v1', '-z', '--no-renames', '--untracked-files=all', '--ignore-submodules=all']);
  const files = new Set(split0(committed));
  for (const entry of split0(status)) if (entry.length > 3) files.add(entry.slice(3));
  return [...files].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Reads each live loop's changes and finds the overlaps. A loop without a worktree yet (still
 * starting) changed nothing; a worktree git cannot read is reported in `loops` and left out.
 */
export async function scanLoops(git: GitRunner, loops: readonly RadarLoop[]): Promise<RadarScan> {
  const results: RadarScan['loops'] = await Promise.all(
    loops.map(async (loop): Promise<RadarScan['loops'][number]> => {
      if (!loop.worktreeDir || !loop.baseCommit) return { featureId: loop.featureId, loopName: loop.loopName, files: [] };
      try {
        return { featureId: loop.featureId, loopName: loop.loopName, files: await changedFiles(git, loop.worktreeDir, loop.baseCommit) };
      } catch (error) {
        return { featureId: loop.featureId, loopName: loop.loopName, error: (error as Error).message };
      }
    }),
  );
  const readable = results.flatMap((r) => ('files' in r ? [{ featureId: r.featureId, loopName: r.loopName, files: r.files }] : []));
  return { overlaps: findOverlaps(readable), loops: results };
}
