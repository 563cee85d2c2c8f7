/**
 * The end of a loop's scope in git: the last commit, the merge a completed loop asked for, and
 * the worktree's removal when the settings ask for it. Failures become loop notices: the loop
 * has ended either way.
 */
import type { ForgeRepositories, LoopLargeFields, LoopRow } from '../storage/repositories';
import { loopTeardownMessage, type StagedChanges, type WorktreeService } from '../workspace';
import { parsePlan } from './plan';
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
  /** What the loop set out to do and the section it was on, for its last commit's message. */
  about?: (sectionIndex: number | null) => LoopAbout;
}

export interface LoopAbout {
  objective: string | null;
  sectionTitle: string | null;
}

/** What the loop set out to do: the plan's objective (else its title), a goal loop's goal. */
export function objectiveOf(fields: Pick<LoopLargeFields, 'planText' | 'goalText'>): string | null {
  if (fields.goalText) return fields.goalText;
  if (!fields.planText) return null;
  try {
    const plan = parsePlan(fields.planText);
    return plan.objective ?? plan.title;
  } catch {
    return null;
  }
}

/** What a loop is about, from its stored plan and section rows. */
export function loopAbout(repos: Pick<ForgeRepositories, 'loops' | 'sectionPlans'>, ref: LoopRef, sectionIndex: number | null): LoopAbout {
  return {
    objective: objectiveOf(repos.loops.getLargeFields(ref.projectId, ref.name)),
    sectionTitle: sectionIndex === null ? null : (repos.sectionPlans.get(ref.projectId, ref.name, sectionIndex)?.title ?? null),
  };
}

/** The last commit's message, written from what it stages (checkpoint-message.ts). */
export function teardownMessageWriter(loopName: string, reason: string, iterations: number, about: LoopAbout): (changes: StagedChanges) => string {
  return (changes) => loopTeardownMessage({ loopName, reason, iterations, objective: about.objective, sectionTitle: reason === 'completed' ? null : about.sectionTitle, changes });
}

/** Commits what is left and merges a completed loop as configured. */
export async function commitAndMerge(deps: TeardownDeps, loop: LoopRow, reason: TerminationReason, state: LoopState): Promise<string | null> {
  const extras = readExtras(loop);
  if (!loop.worktreeDir) return null;
  try {
    const about = deps.about?.(state.sectionIndex) ?? { objective: null, sectionTitle: null };
    const write = teardownMessageWriter(loop.name, terminationReasonToString(reason), state.iteration, about);
    let message = '';
    const repos = deps.repos;
    const sha = await deps.worktrees.commitAll(loop.worktreeDir, (changes) => (message = write(changes)), {
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
