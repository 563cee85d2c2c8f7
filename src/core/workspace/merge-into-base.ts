/**
 * Merging a loop's branch into the branch it started from, as the loop's merge setting asks:
 * kept, fast-forwarded or merged, in the base branch's own working tree when it is checked out
 * (never one with uncommitted work) and in a throw-away worktree when it is not. Its own file
 * because it is the one place Forge writes to the user's branches, with its own refusals.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { firstLine } from './git-output';
import { branchCommit, identityConfig, isAncestor, listWorktrees } from './git-queries';
import type { GitRunner } from './git-runner';
import { pathExists } from './workspace-paths';
import { WorkspaceError } from './workspace-error';
import { claimMergeScratch, MERGE_SCRATCH_PREFIX, releaseMergeScratch } from './merge-scratch';
import { LOOP_BRANCH_PREFIX, type CommitIdentity, type LoopWorktree, type MergeMode, type MergeResult, type WorkspaceLog } from './worktree-types';

/** What merging needs of the worktree service. */
export interface MergeContext {
  git: GitRunner;
  log: WorkspaceLog;
  identity: CommitIdentity;
  /** `<dataDir>/worktrees`, where a merge without checkout makes its throw-away worktree. */
  worktreesRoot(): Promise<string>;
}

/** The loop whose branch is merged (its label names the throw-away worktree, else the branch does). */
export type MergeSource = Pick<LoopWorktree, 'repoDir' | 'branch' | 'baseBranch'> & { loopName?: string };

/** Why `dir` (a working tree with the base branch checked out) must not be touched, or null when it is clean. */
async function dirtyReason(git: GitRunner, dir: string): Promise<string | null> {
  for (const marker of ['MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'rebase-merge', 'rebase-apply', 'BISECT_LOG']) {
    const markerPath = path.resolve(dir, firstLine(await git.ok(dir, ['rev-parse', '--git-path', marker])));
    if (await pathExists(markerPath)) return `a merge, rebase, cherry-pick, revert or bisect is in progress in ${dir}`;
  }
  // Untracked files do not count: git itself refuses a merge that would overwrite one.
  const status = await git.ok(dir, ['status', '--porcelain=v1', '-z', '--untracked-files=no']);
  return status === '' ? null : `${dir} has uncommitted changes`;
}

/**
 * What a merge without checkout asks of the merged tree before the base branch moves (a
 * group's merge queue runs the loop's checks there): null to go on, or the refusal to return.
 */
export type VerifyMergedTree = (scratchDir: string, mergeCommit: string) => Promise<MergeResult | null>;

/**
 * Merges in a throw-away detached worktree, then moves the base branch (compare-and-swap) to the merge.
 * `verify`, when given, looks at the merged tree first and may refuse it (the branch then stays).
 */
export async function mergeWithoutCheckout(
  ctx: MergeContext,
  repoDir: string,
  base: string,
  baseTip: string,
  branch: string,
  message: string,
  loopLabel: string,
  verify?: VerifyMergedTree,
): Promise<MergeResult> {
  const { git, identity } = ctx;
  const root = await ctx.worktreesRoot();
  const scratch = path.join(root, `${MERGE_SCRATCH_PREFIX}${loopLabel}-${randomBytes(4).toString('hex')}`);
  // Owned from before it exists: a crash leaves it to the next start's cleanup (merge-scratch.ts).
  await claimMergeScratch(root, scratch);
  try {
    await git.ok(repoDir, ['worktree', 'add', '--detach', scratch, baseTip]);
  } catch (error) {
    await releaseMergeScratch(root, scratch);
    throw error;
  }
  try {
    const merged = await git.run(scratch, ['merge', '--no-ff', '--no-edit', '-m', message, `refs/heads/${branch}`], {
      config: await identityConfig(git, scratch, identity),
    });
    if (merged.exitCode !== 0) {
      const conflicts = (await git.ok(scratch, ['diff', '--name-only', '--diff-filter=U', '-z'])).split('\0').filter(Boolean);
      const detail = (merged.stderr.trim() || merged.stdout.trim()).replace(/\s+/g, ' ');
      return conflicts.length > 0
        ? {
            kind: 'refused',
            conflicts,
            message: `Merging ${branch} into ${base} conflicts in ${conflicts.join(', ')}; nothing was changed. The work is kept on ${branch}: merge it yourself (git merge ${branch}) and resolve the conflicts.`,
          }
        : { kind: 'refused', message: `Merging ${branch} into ${base} failed: ${detail}. The work is kept on ${branch}.` };
    }
    const mergeCommit = firstLine(await git.ok(scratch, ['rev-parse', 'HEAD']));
    const refused = verify ? await verify(scratch, mergeCommit) : null;
    if (refused) return refused;
    const moved = await git.run(repoDir, ['update-ref', '-m', `forge: merge ${branch}`, `refs/heads/${base}`, mergeCommit, baseTip]);
    if (moved.exitCode !== 0) {
      return { kind: 'refused', message: `${base} changed while Forge was merging ${branch}; nothing was changed. The work is kept on ${branch}: merge it yourself (git merge ${branch}).` };
    }
    return { kind: 'merged', commit: mergeCommit, message: `Merged ${branch} into ${base} (${mergeCommit.slice(0, 12)}).` };
  } finally {
    const removed = await git.run(repoDir, ['worktree', 'remove', '--force', scratch]);
    if (removed.exitCode === 0) await releaseMergeScratch(root, scratch);
  }
}

/**
 * One commit on top of `baseTip` whose tree is `baseTip` merged with `branchTip` (git merge-tree,
 * no working tree touched), or the files that conflict. Only objects are written: nothing moves.
 */
async function squashCommit(ctx: MergeContext, repoDir: string, baseTip: string, branchTip: string, message: string): Promise<{ kind: 'commit'; commit: string } | { kind: 'conflicts'; conflicts: string[] }> {
  const merged = await ctx.git.run(repoDir, ['merge-tree', '--write-tree', '--name-only', '-z', baseTip, branchTip]);
  if (merged.exitCode > 1) throw new WorkspaceError('git_failed', `git merge-tree failed in ${repoDir}: ${merged.stderr.trim().replace(/\s+/g, ' ')}`);
  const fields = merged.stdout.split('\0');
  if (merged.exitCode === 1) {
    // -z --name-only: the tree, the conflicted files, an empty field, then the messages.
    const end = fields.indexOf('', 1);
    return { kind: 'conflicts', conflicts: fields.slice(1, end < 0 ? undefined : end).filter(Boolean) };
  }
  const tree = firstLine(fields[0] ?? '');
  const commit = await ctx.git.ok(repoDir, ['commit-tree', tree, '-p', baseTip, '-m', message], { config: await identityConfig(ctx.git, repoDir, ctx.identity) });
  return { kind: 'commit', commit: firstLine(commit) };
}

/** The service's `mergeIntoBase`. */
export function createMergeIntoBase(ctx: MergeContext) {
  const { git, log, identity } = ctx;
  /**
   * Brings the loop's work into the branch it started from, as configured:
   * `never` keeps the branch; `fast-forward` moves the base branch only when it
   * is an ancestor of the loop branch; `merge` fast-forwards when possible and
   * otherwise makes a merge commit, aborting (and restoring) on conflicts. Never
   * forces, never touches a working tree with uncommitted changes, never deletes
   * the loop branch. `squash` (mode `merge`, `forge accept --squash`): when the base cannot be
   * fast-forwarded, one commit on top of the base with the branch's tree merged in, which the
   * base is then fast-forwarded to — the same path, so the same refusals.
   */
  return async function mergeIntoBase(
    loop: MergeSource,
    mode: MergeMode,
    options: { message?: string; squash?: boolean } = {},
  ): Promise<MergeResult> {
    const { repoDir, branch, baseBranch } = loop;
    const keep = `The work is kept on ${branch}.`;
    if (mode === 'never') {
      return { kind: 'kept', message: `Merging is off; the loop's work is on ${branch}. Review it and merge it yourself (git merge ${branch}).` };
    }
    if (baseBranch === null) {
      return { kind: 'refused', message: `The loop started from a detached HEAD, so there is no base branch to merge into. ${keep}` };
    }
    const branchTip = await branchCommit(git, repoDir, branch);
    if (branchTip === null) {
      return { kind: 'refused', message: `The loop branch ${branch} no longer exists in ${repoDir}; there is nothing to merge.` };
    }
    const baseTip = await branchCommit(git, repoDir, baseBranch);
    if (baseTip === null) {
      return { kind: 'refused', message: `The base branch ${baseBranch} no longer exists in ${repoDir}. ${keep}` };
    }
    if (await isAncestor(git, repoDir, branchTip, baseTip)) {
      return { kind: 'kept', message: `${baseBranch} already contains everything on ${branch}; nothing to merge.` };
    }

    let canFastForward = await isAncestor(git, repoDir, baseTip, branchTip);
    // What the base moves to: the loop branch's tip, or the squashed commit.
    let target = branchTip;
    let targetRef = `refs/heads/${branch}`;
    if (options.squash && mode === 'merge' && !canFastForward) {
      const squashed = await squashCommit(ctx, repoDir, baseTip, branchTip, options.message ?? `Squashed ${branch} into ${baseBranch}`);
      if (squashed.kind === 'conflicts') {
        return {
          kind: 'refused',
          conflicts: squashed.conflicts,
          message: `Squashing ${branch} into ${baseBranch} conflicts in ${squashed.conflicts.join(', ')}; nothing was changed. ${keep} Merge it yourself (git merge ${branch}) and resolve the conflicts.`,
        };
      }
      target = targetRef = squashed.commit;
      canFastForward = true;
    }
    if (mode === 'fast-forward' && !canFastForward) {
      return {
        kind: 'refused',
        message: `${baseBranch} has commits that ${branch} does not have, so it cannot be fast-forwarded. ${keep} Merge or rebase it yourself (git merge ${branch}).`,
      };
    }

    const fastForwarded = (squashed: string | null): MergeResult =>
      squashed === null
        ? { kind: 'fast-forwarded', commit: branchTip, message: `Fast-forwarded ${baseBranch} to ${branch} (${branchTip.slice(0, 12)}).` }
        : { kind: 'merged', commit: squashed, message: `Squashed ${branch} into ${baseBranch} (${squashed.slice(0, 12)}).` };
    const checkout = (await listWorktrees(git, repoDir)).find((entry) => entry.branch === `refs/heads/${baseBranch}` && !entry.prunable);
    const mergeMessage = options.message ?? `Merge branch '${branch}' into ${baseBranch}`;

    if (checkout) {
      const dir = checkout.path;
      const dirty = await dirtyReason(git, dir);
      if (dirty !== null) {
        // Info, not warn: every caller reports the refusal it returns (once, in its own words).
        log.info(`workspace: not merging ${branch}: ${dirty}`);
        return {
          kind: 'refused',
          message: `Forge did not merge ${branch} into ${baseBranch}: ${dirty}, and Forge never touches a working tree with uncommitted work. ${keep} Commit or stash your changes, then run: git merge ${branch}`,
        };
      }
      if (canFastForward) {
        const result = await git.run(dir, ['merge', '--ff-only', targetRef]);
        if (result.exitCode !== 0) {
          const detail = (result.stderr.trim() || result.stdout.trim()).replace(/\s+/g, ' ');
          return { kind: 'refused', message: `git refused to fast-forward ${baseBranch} in ${dir}: ${detail}. ${keep}` };
        }
        log.info(`workspace: fast-forwarded ${baseBranch} to ${target === branchTip ? branch : target} in ${dir}`);
        return fastForwarded(target === branchTip ? null : target);
      }
      const merged = await git.run(dir, ['merge', '--no-ff', '--no-edit', '-m', mergeMessage, `refs/heads/${branch}`], { config: await identityConfig(git, dir, identity) });
      if (merged.exitCode !== 0) {
        const conflicts = (await git.ok(dir, ['diff', '--name-only', '--diff-filter=U', '-z'])).split('\0').filter(Boolean);
        const mergeHead = path.resolve(dir, firstLine(await git.ok(dir, ['rev-parse', '--git-path', 'MERGE_HEAD'])));
        if (await pathExists(mergeHead)) await git.ok(dir, ['merge', '--abort']);
        const detail = (merged.stderr.trim() || merged.stdout.trim()).replace(/\s+/g, ' ');
        log.info(`workspace: merge of ${branch} into ${baseBranch} ${conflicts.length > 0 ? `conflicted in ${conflicts.join(', ')}` : `failed: ${detail}`}; aborted`);
        return conflicts.length > 0
          ? {
              kind: 'refused',
              conflicts,
              message: `Merging ${branch} into ${baseBranch} conflicts in ${conflicts.join(', ')}; Forge aborted the merge and ${dir} is as it was. ${keep} Merge it yourself (git merge ${branch}) and resolve the conflicts.`,
            }
          : { kind: 'refused', message: `git refused to merge ${branch} into ${baseBranch} in ${dir}: ${detail}. ${keep}` };
      }
      const commit = firstLine(await git.ok(dir, ['rev-parse', 'HEAD']));
      log.info(`workspace: merged ${branch} into ${baseBranch} in ${dir} (${commit.slice(0, 12)})`);
      return { kind: 'merged', commit, message: `Merged ${branch} into ${baseBranch} (${commit.slice(0, 12)}).` };
    }

    if (canFastForward) {
      const moved = await git.run(repoDir, ['update-ref', '-m', `forge: fast-forward to ${branch}`, `refs/heads/${baseBranch}`, target, baseTip]);
      if (moved.exitCode !== 0) {
        return { kind: 'refused', message: `${baseBranch} changed while Forge was fast-forwarding it; nothing was changed. ${keep}` };
      }
      log.info(`workspace: fast-forwarded ${baseBranch} to ${target === branchTip ? branch : target}`);
      return fastForwarded(target === branchTip ? null : target);
    }
    const label = loop.loopName ?? branch.slice(LOOP_BRANCH_PREFIX.length).replace(/[^a-z0-9-]/g, '-');
    const result = await mergeWithoutCheckout(ctx, repoDir, baseBranch, baseTip, branch, mergeMessage, label);
    if (result.kind === 'merged') log.info(`workspace: ${result.message}`);
    else log.info(`workspace: ${result.message}`);
    return result;
  };
}
