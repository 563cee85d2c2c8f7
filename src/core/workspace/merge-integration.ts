/**
 * A feature group's integration branch (`forge/group/<id>`, issue 14 part 4): created at launch
 * from the commit the group started from, and moved only by the group's merge queue, one loop
 * at a time, through merge-into-base.ts's throw-away worktree and compare-and-swap
 * (`mergeWithoutCheckout`) with the loop's checks run on the merged tree before the branch
 * moves. The user's own working tree and branches are never touched here.
 *
 * When a loop does not merge cleanly, Forge starts that same merge in the loop's own worktree
 * (`startMergeInLoop`), so the loop's next coder resolves it where it works: the conflicted
 * files keep git's markers, the merge stays in progress, and the loop's next commit (any commit
 * Forge makes there, see worktree-service's commitAll) completes it. After that the loop's
 * branch holds everything already integrated, so the queue's next attempt merges cleanly.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { firstLine } from './git-output';
import { branchCommit, identityConfig, isAncestor } from './git-queries';
import { mergeWithoutCheckout, type MergeContext } from './merge-into-base';

export const INTEGRATION_BRANCH_PREFIX = 'forge/group/';

/** `forge/group/<id>`. */
export const integrationBranchOf = (groupId: string): string => `${INTEGRATION_BRANCH_PREFIX}${groupId}`;

export type IntegrationMergeResult =
  | { kind: 'merged'; commit: string; message: string }
  /** Everything on the loop's branch is in already. */
  | { kind: 'up_to_date'; commit: string; message: string }
  | { kind: 'conflict'; conflicts: string[]; message: string }
  | { kind: 'check_failed'; failure: string; message: string }
  /** The integration branch moved while Forge merged (someone else wrote to it): nothing changed. */
  | { kind: 'moved'; message: string }
  | { kind: 'failed'; message: string };

/** What a merged tree must pass: a sentence per failure, none when it is fine. */
export type MergedTreeCheck = (scratchDir: string) => Promise<string | null>;

export interface ConflictedFile {
  path: string;
  /** The file as the merge left it (with git's markers); null when it is gone or not text. */
  content: string | null;
}

export type LoopMergeStart =
  /** The merge conflicted; it stays in progress in the worktree for the coder to resolve. */
  | { kind: 'conflict'; files: ConflictedFile[] }
  /** It merged cleanly and was committed (the loop's branch now holds the integration branch). */
  | { kind: 'merged'; commit: string }
  | { kind: 'up_to_date' }
  | { kind: 'failed'; message: string };

const MAX_FILE_IN_FINDING = 20_000;

export function createIntegrationMerges(ctx: MergeContext) {
  const { git, log, identity } = ctx;

  /** Creates `forge/group/<id>` at `commit` when it does not exist; its tip either way. */
  async function ensureIntegrationBranch(repoDir: string, groupId: string, commit: string): Promise<string> {
    const branch = integrationBranchOf(groupId);
    const tip = await branchCommit(git, repoDir, branch);
    if (tip !== null) return tip;
    // The all-zero old value: created only if nobody made it in between.
    await git.ok(repoDir, ['update-ref', '-m', `forge: integration branch of group ${groupId}`, `refs/heads/${branch}`, commit, '0'.repeat(40)]);
    log.info(`workspace: created ${branch} at ${commit.slice(0, 12)}`);
    return commit;
  }

  /**
   * Merges the loop's branch into the integration branch (`--no-ff`) in a throw-away worktree,
   * runs `check` on the merged tree, and only then moves the integration branch (compare-and-swap).
   */
  async function mergeIntoIntegration(request: { repoDir: string; groupId: string; loopBranch: string; loopName: string; check: MergedTreeCheck }): Promise<IntegrationMergeResult> {
    const { repoDir, loopBranch } = request;
    const integration = integrationBranchOf(request.groupId);
    const tip = await branchCommit(git, repoDir, integration);
    if (tip === null) return { kind: 'failed', message: `The group's integration branch ${integration} no longer exists in ${repoDir}; the work is kept on ${loopBranch}.` };
    const loopTip = await branchCommit(git, repoDir, loopBranch);
    if (loopTip === null) return { kind: 'failed', message: `The loop branch ${loopBranch} no longer exists in ${repoDir}; there is nothing to merge.` };
    if (await isAncestor(git, repoDir, loopTip, tip)) return { kind: 'up_to_date', commit: tip, message: `${integration} already holds everything on ${loopBranch}.` };
    let failure: string | null = null;
    const result = await mergeWithoutCheckout(ctx, repoDir, integration, tip, loopBranch, `Merge ${loopBranch} into ${integration}`, `${request.loopName}-integration`, async (scratch) => {
      failure = await request.check(scratch);
      return failure === null ? null : { kind: 'refused', message: failure };
    });
    if (result.kind === 'merged' && result.commit) return { kind: 'merged', commit: result.commit, message: `Merged ${loopBranch} into ${integration} (${result.commit.slice(0, 12)}); its checks passed on the merged tree.` };
    if (failure !== null) return { kind: 'check_failed', failure, message: `Merging ${loopBranch} into ${integration}: a check failed on the merged tree; ${integration} was not moved. ${failure}` };
    if (result.conflicts && result.conflicts.length > 0) return { kind: 'conflict', conflicts: result.conflicts, message: `Merging ${loopBranch} into ${integration} conflicts in ${result.conflicts.join(', ')}; ${integration} was not moved.` };
    if ((await branchCommit(git, repoDir, integration)) !== tip) return { kind: 'moved', message: `${integration} moved while Forge was merging ${loopBranch}; nothing was changed, and the merge is tried again.` };
    return { kind: 'failed', message: result.message };
  }

  /**
   * Starts merging the integration branch into the loop's own worktree: clean, it is committed
   * at once; conflicted, it stays in progress with the conflicted files' markers for the coder.
   */
  async function startMergeInLoop(request: { worktreeDir: string; groupId: string }): Promise<LoopMergeStart> {
    const { worktreeDir } = request;
    const integration = integrationBranchOf(request.groupId);
    const config = await identityConfig(git, worktreeDir, identity);
    const mergeHead = path.resolve(worktreeDir, firstLine(await git.ok(worktreeDir, ['rev-parse', '--git-path', 'MERGE_HEAD'])));
    const inProgress = await readFile(mergeHead, 'utf8').then(() => true, () => false);
    if (!inProgress) {
      const head = firstLine(await git.ok(worktreeDir, ['rev-parse', 'HEAD']));
      const tip = await branchCommit(git, worktreeDir, integration);
      if (tip === null) return { kind: 'failed', message: `The group's integration branch ${integration} no longer exists.` };
      if (await isAncestor(git, worktreeDir, tip, head)) return { kind: 'up_to_date' };
      const merged = await git.run(worktreeDir, ['merge', '--no-ff', '--no-edit', '-m', `Merge ${integration} (the group's work so far) into this loop`, `refs/heads/${integration}`], { config });
      if (merged.exitCode === 0) return { kind: 'merged', commit: firstLine(await git.ok(worktreeDir, ['rev-parse', 'HEAD'])) };
    }
    const conflicts = (await git.ok(worktreeDir, ['diff', '--name-only', '--diff-filter=U', '-z'])).split('\0').filter(Boolean);
    if (conflicts.length === 0) {
      if (inProgress) {
        // A merge left in progress with nothing unmerged (its resolution staged but never committed): complete it.
        const done = await git.run(worktreeDir, ['commit', '--no-edit'], { config });
        if (done.exitCode === 0) return { kind: 'merged', commit: firstLine(await git.ok(worktreeDir, ['rev-parse', 'HEAD'])) };
        return { kind: 'failed', message: `a merge is in progress in ${worktreeDir} and git could not complete it: ${(done.stderr.trim() || done.stdout.trim()).replace(/\s+/g, ' ')}` };
      }
      // Not a conflict (an untracked file in the way, say): leave the worktree as it was.
      await git.run(worktreeDir, ['merge', '--abort']);
      return { kind: 'failed', message: `git could not merge ${integration} into ${worktreeDir}.` };
    }
    const files: ConflictedFile[] = [];
    for (const file of conflicts) {
      const content = await readFile(path.join(worktreeDir, file), 'utf8').catch(() => null);
      files.push({ path: file, content: content !== null && content.length <= MAX_FILE_IN_FINDING && !content.includes('\0') ? content : null });
    }
    return { kind: 'conflict', files };
  }

  return { ensureIntegrationBranch, mergeIntoIntegration, startMergeInLoop };
}

export type IntegrationMerges = ReturnType<typeof createIntegrationMerges>;
