/**
 * Feature groups, the merge queue's decisions (issue 14 part 4). Pure: the features' statuses
 * and merge states in, what to do next out; merge-queue.ts does what it says (git, the loop
 * runtime, storage).
 *
 * The queue merges completed features into the group's integration branch one at a time, first
 * queued first merged. A merge that conflicts or whose checks fail on the combined tree sends the
 * feature's loop back to coding with that as a finding, as soon as the group's cap has a free
 * slot for it (a reopened loop runs like any other); once it completes again it is queued again.
 * After `MAX_MERGE_REOPENS` such returns the feature fails, with the last reason.
 */
import type { FeatureMerge, GroupFeature } from '../storage/repositories';
import type { FeatureGroupStatus, FeatureStatus } from '../vocabulary/group-vocabulary';
import { groupOutcome } from './scheduler';

export const MAX_MERGE_REOPENS = 3;
/** Attempts in a row while the integration branch keeps moving under the queue. */
export const MAX_MOVED_RETRIES = 3;

export type QueueFeature = Pick<GroupFeature, 'id' | 'status' | 'dependsOn'> & { merge?: FeatureMerge | null };

/** What a merge attempt came to (merge-integration.ts's result, without its git details). */
export type MergeAttempt =
  | { kind: 'merged' | 'up_to_date'; commit: string; message: string }
  | { kind: 'conflict' | 'check_failed' | 'moved' | 'failed'; message: string };

const ACTIVE: readonly FeatureStatus[] = ['running', 'paused'];

/** Whether every feature `id` depends on is merged into the integration branch (what a dependent starts from). */
export function dependenciesMerged(features: readonly QueueFeature[], id: string): boolean {
  const f = features.find((x) => x.id === id);
  return !!f && f.dependsOn.every((d) => features.find((x) => x.id === d)?.merge?.state === 'merged');
}

/** A feature's merge state once its loop completed (again): queued, unless it is in already. */
export function queuedOnCompletion(previous: FeatureMerge | null | undefined, now: number): FeatureMerge {
  if (previous?.state === 'merged') return previous;
  return { state: 'queued', message: null, commit: null, reopened: previous?.reopened ?? 0, awaitingReopen: false, at: now };
}

/** Whether the queue still has to merge this completed feature (a feature without a merge state counts as queued). */
export function isQueued(f: QueueFeature): boolean {
  return f.status === 'completed' && (!f.merge || f.merge.state === 'queued');
}

/** The next feature to merge: the earliest queued (split order among those without a time), or null. */
export function nextMerge(features: readonly QueueFeature[]): string | null {
  let best: { id: string; at: number; index: number } | null = null;
  features.forEach((f, index) => {
    if (!isQueued(f)) return;
    const at = f.merge?.at ?? Number.POSITIVE_INFINITY;
    if (!best || at < best.at || (at === best.at && index < best.index)) best = { id: f.id, at, index };
  });
  return (best as { id: string } | null)?.id ?? null;
}

export interface MergeDecision {
  merge: FeatureMerge;
  /** The feature's status from now on (`failed` when the queue gives up on it). */
  status: FeatureStatus;
  error: string | null;
  /** Try the same merge again at once (the integration branch moved under it). */
  retry: boolean;
}

/** What a merge attempt means for the feature. `moves`: how many times in a row the branch had moved. */
export function afterMergeAttempt(previous: FeatureMerge | null | undefined, attempt: MergeAttempt, now: number, moves = 0): MergeDecision {
  const reopened = previous?.reopened ?? 0;
  const base = { reopened, at: now, awaitingReopen: false };
  switch (attempt.kind) {
    case 'merged':
    case 'up_to_date':
      return { merge: { ...base, state: 'merged', message: attempt.message, commit: attempt.commit }, status: 'completed', error: null, retry: false };
    case 'moved':
      if (moves + 1 < MAX_MOVED_RETRIES) return { merge: { ...base, state: 'queued', message: attempt.message, commit: null }, status: 'completed', error: null, retry: true };
      return {
        merge: { ...base, state: 'queued', message: attempt.message, commit: null },
        status: 'failed',
        error: `Its merge was given up: the integration branch moved under the merge queue ${MAX_MOVED_RETRIES} times in a row (something else writes to it). Its work is kept on its loop branch.`,
        retry: false,
      };
    case 'failed':
      return { merge: { ...base, state: 'queued', message: attempt.message, commit: null }, status: 'failed', error: `Its merge failed: ${attempt.message}`, retry: false };
    case 'conflict':
    case 'check_failed': {
      if (reopened >= MAX_MERGE_REOPENS) {
        return {
          merge: { ...base, state: attempt.kind, message: attempt.message, commit: null },
          status: 'failed',
          error: `Its merge still did not hold after ${reopened} return${reopened === 1 ? '' : 's'} to coding: ${attempt.message} Its work is kept on its loop branch.`,
          retry: false,
        };
      }
      return { merge: { ...base, state: attempt.kind, message: attempt.message, commit: null, awaitingReopen: true }, status: 'completed', error: null, retry: false };
    }
  }
}

/** Features whose failed merge goes back to coding now: as many as the cap's free slots, first failed first. */
export function reopenNow(features: readonly QueueFeature[], cap: number): string[] {
  let free = Math.max(0, cap - features.filter((f) => ACTIVE.includes(f.status)).length);
  const waiting = features
    .map((f, index) => ({ f, index }))
    .filter(({ f }) => f.status === 'completed' && f.merge?.awaitingReopen === true)
    .sort((a, b) => a.f.merge!.at - b.f.merge!.at || a.index - b.index);
  const out: string[] = [];
  for (const { f } of waiting) {
    if (free === 0) break;
    out.push(f.id);
    free--;
  }
  return out;
}

/** The merge state of a feature reopened just now. */
export function reopened(previous: FeatureMerge, now: number): FeatureMerge {
  return { ...previous, reopened: previous.reopened + 1, awaitingReopen: false, at: now };
}

/**
 * Where a running group stands with its merge queue: `completed` only when every feature
 * completed AND merged; `failed` as the scheduler says, unless the queue still has work (a
 * completed feature waiting to merge or to go back to coding); null while work goes on.
 */
export function mergedGroupOutcome(features: readonly QueueFeature[], cap: number): Extract<FeatureGroupStatus, 'completed' | 'failed'> | null {
  const outcome = groupOutcome(features, cap);
  const queueWork = features.some((f) => f.status === 'completed' && f.merge?.state !== 'merged');
  if (outcome === 'completed') return queueWork ? null : 'completed';
  if (outcome === 'failed' && queueWork) return null;
  return outcome;
}

/** The finding a conflict hands back to the loop's coder, with each conflicted file as the merge left it. */
export function conflictFinding(request: {
  integration: string;
  loopBranch: string;
  merged: readonly string[];
  files: ReadonlyArray<{ path: string; content: string | null }>;
}): { file: string; description: string } {
  const fence = (content: string) => (content.includes('```') ? '~~~~' : '```');
  const names = request.files.map((f) => f.path).join(', ');
  const lines = [
    `Merge conflict: this loop's work conflicts with the group's integration branch ${request.integration}${request.merged.length > 0 ? ` (which holds the features merged before it: ${request.merged.join(', ')})` : ''} in ${names}.`,
    `Forge started that merge in this worktree (git merge ${request.integration}); it is in progress and the conflicted files carry git's conflict markers.`,
    "Resolve every conflicted file so that both the work already integrated and this loop's work are kept, and remove the markers; do not run git merge --abort or commit yourself. Forge's next commit completes the merge, and the merge queue then merges this loop again.",
  ];
  for (const f of request.files) {
    if (f.content === null) {
      lines.push('', `${f.path}: not shown (binary, gone or too large); open it in the worktree.`);
      continue;
    }
    const marker = fence(f.content);
    lines.push('', `${f.path} as the merge left it:`, `${marker}text file=${f.path}`, f.content.replace(/\n$/, ''), marker);
  }
  return { file: request.files[0]?.path ?? '', description: lines.join('\n') };
}

/** The finding a check that failed on the merged tree hands back to the loop's coder. */
export function checkFailedFinding(request: { integration: string; merged: readonly string[]; failure: string; mergedIntoLoop: boolean }): { file: string; description: string } {
  return {
    file: '',
    description: [
      `A verification check failed on the combined tree: merged with the group's integration branch ${request.integration}${request.merged.length > 0 ? ` (features ${request.merged.join(', ')})` : ''}, this loop's work does not pass.`,
      request.failure,
      request.mergedIntoLoop
        ? `Forge merged ${request.integration} into this worktree (committed), so the failure can be reproduced here: fix it so the checks pass with both the integrated work and this loop's.`
        : `Fix it so the checks pass with both the integrated work and this loop's.`,
    ].join('\n'),
  };
}

/** The fingerprint of a group's merge finding on a loop (one finding per loop, reopened each time). */
export const mergeFindingFingerprint = (groupId: string): string => `merge-queue:${groupId}`;
