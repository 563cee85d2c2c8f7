/**
 * The end of a loop's scope in git: the last commit, the merge a completed loop asked for, and
 * the worktree's removal when the settings ask for it. Failures become loop notices: the loop
 * has ended either way.
 */
import type { LoopRow } from '../storage/repositories';
import { loopTeardownMessage, type WorktreeService } from '../workspace';
import type { ForgeRepositories } from '../storage/repositories';
import { recordAgentGitChanges } from './agent-git-findings';
import { readExtras } from './loop-extras';
import type { LoopRef, LoopRuntimeEvent } from './runtime-types';
import { terminationReasonToString, type LoopState, type TerminationReason } from './state';

export interface TeardownDeps {
  worktrees: WorktreeService;
  emit: (event: LoopRuntimeEvent) => void;
  ref: LoopRef;
  /** Where findings of what the agent did to the worktree's git go. */
  repos?: Pick<ForgeRepositories, 'reviewFindings'>;
}

/** Commits what is left and merges a completed loop as configured. */
export async function commitAndMerge(deps: TeardownDeps, loop: LoopRow, reason: TerminationReason, state: LoopState): Promise<string | null> {
  const extras = readExtras(loop);
  if (!loop.worktreeDir) return null;
  try {
    const message = loopTeardownMessage(loop.name, terminationReasonToString(reason), state.iteration);
    const repos = deps.repos;
    const sha = await deps.worktrees.commitAll(loop.worktreeDir, message, {
      likelyClean: true,
      ...(repos ? { onAgentGitChanges: (changes: ReadonlyArray<{ kind: string; path: string; detail: string }>) => recordAgentGitChanges({ repos, emit: deps.emit }, deps.ref, changes) } : {}),
    });
    if (sha) deps.emit({ type: 'loop.commit', loop: deps.ref, sha, message: message.split('\n')[0]! });
  } catch (error) {
    deps.emit({ type: 'loop.notice', loop: deps.ref, level: 'warning', message: `could not commit the loop's last changes: ${(error as Error).message}` });
  }
  let mergeText: string | null = null;
  if (reason.kind === 'completed' && extras.merge !== 'never' && loop.repoDir && loop.branch) {
    try {
      const result = await deps.worktrees.mergeIntoBase({ repoDir: loop.repoDir, branch: loop.branch, baseBranch: loop.baseBranch, loopName: loop.name }, extras.merge);
      mergeText = result.message;
      deps.emit({ type: 'loop.notice', loop: deps.ref, level: result.kind === 'refused' ? 'warning' : 'info', message: result.message });
    } catch (error) {
      mergeText = `merge failed: ${(error as Error).message}`;
      deps.emit({ type: 'loop.notice', loop: deps.ref, level: 'warning', message: mergeText });
    }
  }
  return mergeText;
}

export async function removeWorktreeIfAsked(deps: TeardownDeps, loop: LoopRow): Promise<void> {
  if (!loop.worktreeDir || !readExtras(loop).cleanupWorktree) return;
  try {
    await deps.worktrees.removeWorktree(loop.worktreeDir);
  } catch (error) {
    deps.emit({ type: 'loop.notice', loop: deps.ref, level: 'warning', message: `could not remove the worktree: ${(error as Error).message}` });
  }
}
