/**
 * The merge queue's decisions (merge-queue-order.ts), exhaustively over small groups: which
 * feature merges next, what a merge attempt means for its feature, which failed merges go back
 * to coding under the cap, and when a group with a merge queue is over. Also the embedded
 * coder's conflict resolution and the reopened loop's state. Pure, so every case is a table row.
 */
import { strict as assert } from 'node:assert';
import {
  afterMergeAttempt,
  dependenciesMerged,
  checkFailedFinding,
  conflictFinding,
  isQueued,
  MAX_MERGE_REOPENS,
  MAX_MOVED_RETRIES,
  mergedGroupOutcome,
  nextMerge,
  queuedOnCompletion,
  reopened,
  reopenNow,
  type MergeAttempt,
  type QueueFeature,
} from '../../../src/core/groups/merge-queue-order';
import { groupOutcome } from '../../../src/core/groups/scheduler';
import { reopenState } from '../../../src/core/loop/transitions';
import { initialState } from '../../../src/core/loop/state';
import { fileBlocks, hasConflictMarkers, resolveConflictMarkers } from '../../../src/core/opencode/embedded-model';
import type { FeatureMerge } from '../../../src/core/storage/repositories';
import { FEATURE_MERGE_STATES, FEATURE_STATUSES, type FeatureMergeState, type FeatureStatus } from '../../../src/core/vocabulary/group-vocabulary';

const merge = (state: FeatureMergeState, at = 0, extra: Partial<FeatureMerge> = {}): FeatureMerge => ({ state, message: null, commit: null, reopened: 0, awaitingReopen: false, at, ...extra });
const f = (id: string, status: FeatureStatus, m?: FeatureMerge | null, dependsOn: string[] = []): QueueFeature => ({ id, status, dependsOn, merge: m ?? null });
/** Every merge state a feature can have, none included, each also awaiting a reopen. */
const MERGES: Array<FeatureMerge | null> = [null, ...FEATURE_MERGE_STATES.flatMap((s) => [merge(s, 5), merge(s, 5, { awaitingReopen: true })])];

describe('merge queue decisions', () => {
  it('queues a feature whose loop completed, keeping how often it went back; a merged one stays merged', () => {
    assert.deepEqual(queuedOnCompletion(null, 7), merge('queued', 7));
    assert.deepEqual(queuedOnCompletion(merge('conflict', 1, { reopened: 2, message: 'x' }), 9), merge('queued', 9, { reopened: 2 }));
    const done = merge('merged', 1, { commit: 'abc' });
    assert.equal(queuedOnCompletion(done, 9), done);
  });

  it('only a completed feature that is queued (or has no merge state yet) waits to merge, for every status and merge state', () => {
    for (const status of FEATURE_STATUSES) {
      for (const m of MERGES) {
        assert.equal(isQueued(f('a', status, m)), status === 'completed' && (m === null || m.state === 'queued'), `${status} ${JSON.stringify(m)}`);
      }
    }
  });

  it('merges the earliest queued first, split order among those without a time, nothing when none waits', () => {
    assert.equal(nextMerge([]), null);
    assert.equal(nextMerge([f('a', 'running'), f('b', 'completed', merge('merged'))]), null);
    assert.equal(nextMerge([f('a', 'completed', merge('queued', 30)), f('b', 'completed', merge('queued', 10)), f('c', 'completed', merge('queued', 20))]), 'b');
    assert.equal(nextMerge([f('a', 'completed', merge('queued', 10)), f('b', 'completed', merge('queued', 10))]), 'a');
    assert.equal(nextMerge([f('a', 'completed'), f('b', 'completed', merge('queued', 10))]), 'b');
    assert.equal(nextMerge([f('a', 'completed'), f('b', 'completed')]), 'a');
    assert.equal(nextMerge([f('a', 'completed', merge('conflict', 1, { awaitingReopen: true })), f('b', 'failed', merge('queued', 1)), f('c', 'completed', merge('queued', 2))]), 'c');
  });

  it('reads each merge attempt: merged, a retry when the branch moved (then gives up), a failure, a conflict or failed check back to coding (then gives up)', () => {
    const attempts: MergeAttempt[] = [
      { kind: 'merged', commit: 'c1', message: 'm' },
      { kind: 'up_to_date', commit: 'c2', message: 'u' },
      { kind: 'moved', message: 'moved' },
      { kind: 'failed', message: 'gone' },
      { kind: 'conflict', message: 'conflicts in a.txt' },
      { kind: 'check_failed', message: 'grep failed' },
    ];
    for (const attempt of attempts) {
      for (let previousReopens = 0; previousReopens <= MAX_MERGE_REOPENS; previousReopens++) {
        for (let moves = 0; moves < MAX_MOVED_RETRIES; moves++) {
          const d = afterMergeAttempt(merge('queued', 1, { reopened: previousReopens }), attempt, 50, moves);
          const label = `${attempt.kind} after ${previousReopens} reopens, ${moves} moves`;
          assert.equal(d.merge.at, 50, label);
          assert.equal(d.merge.reopened, previousReopens, label);
          switch (attempt.kind) {
            case 'merged':
            case 'up_to_date':
              assert.deepEqual([d.merge.state, d.merge.commit, d.status, d.retry, d.merge.awaitingReopen], ['merged', attempt.commit, 'completed', false, false], label);
              break;
            case 'moved':
              assert.equal(d.merge.state, 'queued', label);
              assert.equal(d.retry, moves + 1 < MAX_MOVED_RETRIES, label);
              assert.equal(d.status, d.retry ? 'completed' : 'failed', label);
              if (!d.retry) assert.match(d.error!, /moved under the merge queue 3 times in a row/);
              break;
            case 'failed':
              assert.deepEqual([d.status, d.retry], ['failed', false], label);
              assert.equal(d.error, 'Its merge failed: gone');
              break;
            case 'conflict':
            case 'check_failed': {
              const givesUp = previousReopens >= MAX_MERGE_REOPENS;
              assert.equal(d.merge.state, attempt.kind, label);
              assert.equal(d.merge.message, attempt.message, label);
              assert.equal(d.merge.awaitingReopen, !givesUp, label);
              assert.equal(d.status, givesUp ? 'failed' : 'completed', label);
              assert.equal(d.retry, false, label);
              if (givesUp) assert.match(d.error!, new RegExp(`after ${MAX_MERGE_REOPENS} returns to coding: ${attempt.message}`));
              break;
            }
          }
        }
      }
    }
  });

  it('sends failed merges back to coding only into free slots of the cap, first failed first', () => {
    const waiting = (id: string, at: number) => f(id, 'completed', merge('conflict', at, { awaitingReopen: true }));
    assert.deepEqual(reopenNow([waiting('a', 2), waiting('b', 1)], 2), ['b', 'a']);
    assert.deepEqual(reopenNow([waiting('a', 2), waiting('b', 1)], 1), ['b']);
    assert.deepEqual(reopenNow([f('x', 'running'), waiting('a', 2), waiting('b', 1)], 1), []);
    assert.deepEqual(reopenNow([f('x', 'paused'), waiting('a', 2)], 2), ['a']);
    assert.deepEqual(reopenNow([f('x', 'completed', merge('conflict', 1)), f('y', 'failed', merge('conflict', 1, { awaitingReopen: true }))], 4), []);
    // Exhaustively over three features: never more active than the cap after the reopens.
    for (const s1 of FEATURE_STATUSES) {
      for (const s2 of FEATURE_STATUSES) {
        for (const m of MERGES) {
          for (const cap of [1, 2, 3]) {
            const features = [f('a', s1), f('b', s2), f('c', 'completed', m)];
            const out = reopenNow(features, cap);
            const active = features.filter((x) => x.status === 'running' || x.status === 'paused').length;
            assert.ok(active + out.length <= Math.max(cap, active), `${s1}/${s2}/${JSON.stringify(m)} cap ${cap}`);
            assert.deepEqual(out, m?.awaitingReopen === true && active < cap ? ['c'] : [], `${s1}/${s2}/${JSON.stringify(m)} cap ${cap}`);
          }
        }
      }
    }
  });

  it('a dependent may start only once every dependency is merged, for every status and merge state of the dependency', () => {
    for (const status of FEATURE_STATUSES) {
      for (const m of MERGES) {
        const features = [f('a', status, m), f('b', 'pending', null, ['a']), f('c', 'pending')];
        assert.equal(dependenciesMerged(features, 'b'), m?.state === 'merged', `${status} ${JSON.stringify(m)}`);
        assert.equal(dependenciesMerged(features, 'c'), true);
      }
    }
    assert.equal(dependenciesMerged([f('b', 'pending', null, ['gone'])], 'b'), false);
    assert.equal(dependenciesMerged([], 'nobody'), false);
  });

  it('a reopened feature counts the return and waits no more', () => {
    assert.deepEqual(reopened(merge('conflict', 1, { awaitingReopen: true, reopened: 1, message: 'm' }), 8), merge('conflict', 8, { reopened: 2, message: 'm' }));
  });

  it('a group completes only when every feature completed and merged; otherwise as the scheduler says, unless the queue still has work', () => {
    for (const s1 of FEATURE_STATUSES) {
      for (const m1 of MERGES) {
        for (const s2 of FEATURE_STATUSES) {
          for (const m2 of MERGES) {
            const features = [f('a', s1, m1), f('b', s2, m2, ['a'])];
            const out = mergedGroupOutcome(features, 2);
            const base = groupOutcome(features, 2);
            const queueWork = features.some((x) => x.status === 'completed' && x.merge?.state !== 'merged');
            const label = `${s1} ${JSON.stringify(m1)} / ${s2} ${JSON.stringify(m2)}`;
            if (out === 'completed') assert.ok(features.every((x) => x.status === 'completed' && x.merge?.state === 'merged'), label);
            if (queueWork) assert.equal(out, null, label);
            else assert.equal(out, base, label);
          }
        }
      }
    }
  });

  it('a conflict finding names the files and shows each as the merge left it, in a block the embedded coder reads', () => {
    const content = '<<<<<<< HEAD\nsearch\n=======\nnotes\n>>>>>>> refs/heads/forge/group/shop\n';
    const finding = conflictFinding({ integration: 'forge/group/shop', loopBranch: 'forge/shop-search', merged: ['notes'], files: [{ path: 'shared.txt', content }, { path: 'logo.png', content: null }] });
    assert.equal(finding.file, 'shared.txt');
    assert.match(finding.description, /^Merge conflict: .*forge\/group\/shop \(which holds the features merged before it: notes\) in shared\.txt, logo\.png\./);
    assert.match(finding.description, /logo\.png: not shown/);
    const blocks = fileBlocks(finding.description);
    assert.deepEqual(blocks, [{ path: 'shared.txt', content }]);
    const failed = checkFailedFinding({ integration: 'forge/group/shop', merged: [], failure: 'Check "grep" failed', mergedIntoLoop: true });
    assert.match(failed.description, /A verification check failed on the combined tree/);
    assert.match(failed.description, /Forge merged forge\/group\/shop into this worktree/);
  });
});

describe('the embedded coder resolves a conflict by keeping both sides, the integrated side first', () => {
  it('keeps both sides of each hunk, the forge/group side first, a shared line once, without markers or the diff3 base', () => {
    assert.equal(resolveConflictMarkers('<<<<<<< HEAD\nsearch\n=======\nnotes\n>>>>>>> refs/heads/forge/group/shop\n'), 'notes\nsearch\n');
    assert.equal(resolveConflictMarkers('<<<<<<< forge/group/shop\nnotes\n=======\nsearch\n>>>>>>> other\n'), 'notes\nsearch\n');
    assert.equal(resolveConflictMarkers('top\n<<<<<<< HEAD\na\nsame\n||||||| base\nold\n=======\nsame\nb\n>>>>>>> theirs\nmiddle\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> theirs\nend'), 'top\nsame\nb\na\nmiddle\ny\nx\nend');
    assert.equal(resolveConflictMarkers('no conflict\n'), 'no conflict\n');
    assert.equal(hasConflictMarkers('<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n'), true);
    assert.equal(hasConflictMarkers('======= a heading underline\n'), false);
  });
});

describe('a completed loop reopened', () => {
  it('a plan goes to fixing its final audit one iteration on, a goal back to coding, with fresh budgets', () => {
    const plan = { ...initialState('plan', 3), phase: 'final_auditing' as const, iteration: 5, sectionIndex: 2, modelErrors: 2, missedHandoffs: 1 };
    const p = reopenState(plan);
    assert.deepEqual([p.phase, p.iteration, p.sectionIndex, p.modelErrors, p.missedHandoffs, p.iterationsBeforeRestart], ['final_audit_fix', 6, 2, 0, 0, 5]);
    const goal = { ...initialState('goal', 0), phase: 'auditing' as const, iteration: 3 };
    const g = reopenState(goal);
    assert.deepEqual([g.phase, g.iteration, g.sectionIndex, g.iterationsBeforeRestart], ['coding', 4, null, 3]);
  });
});
