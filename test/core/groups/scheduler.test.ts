/**
 * The group scheduler (scheduler.ts), exhaustively over small groups: which features start, which
 * are blocked, and when a group is over. Pure, so every case is a table row.
 */
import { strict as assert } from 'node:assert';
import { groupOutcome, schedule, type SchedulerFeature } from '../../../src/core/groups/scheduler';
import { FEATURE_STATUSES, type FeatureStatus } from '../../../src/core/vocabulary/group-vocabulary';

const f = (id: string, status: FeatureStatus, dependsOn: string[] = []): SchedulerFeature => ({ id, status, dependsOn });

describe('group scheduler', () => {
  it('starts pending features in split order up to the free slots', () => {
    const features = [f('a', 'pending'), f('b', 'pending'), f('c', 'pending')];
    assert.deepEqual(schedule(features, 2), { start: ['a', 'b'], block: [] });
    assert.deepEqual(schedule(features, 3).start, ['a', 'b', 'c']);
    assert.deepEqual(schedule(features, 16).start, ['a', 'b', 'c']);
  });

  it('counts running and paused features against the cap', () => {
    assert.deepEqual(schedule([f('a', 'running'), f('b', 'pending'), f('c', 'pending')], 2).start, ['b']);
    assert.deepEqual(schedule([f('a', 'running'), f('b', 'paused'), f('c', 'pending')], 2).start, []);
    assert.deepEqual(schedule([f('a', 'completed'), f('b', 'failed'), f('c', 'pending')], 1).start, ['c']);
  });

  it('starts a feature only when every dependency completed', () => {
    for (const dep of FEATURE_STATUSES) {
      const decision = schedule([f('a', dep), f('b', 'pending', ['a'])], 4);
      assert.deepEqual(decision.start.includes('b'), dep === 'completed', `dependency ${dep}`);
    }
    assert.deepEqual(schedule([f('a', 'completed'), f('b', 'running'), f('c', 'pending', ['a', 'b'])], 4).start, []);
  });

  it('blocks the dependents of a failed, blocked or cancelled feature, transitively, with the reason', () => {
    const decision = schedule([f('a', 'failed'), f('b', 'pending', ['a']), f('c', 'pending', ['b']), f('d', 'pending')], 2);
    assert.deepEqual(decision.start, ['d']);
    assert.deepEqual(decision.block, [
      { id: 'b', because: 'it depends on "a", which failed' },
      { id: 'c', because: 'it depends on "b", which was blocked' },
    ]);
    assert.deepEqual(schedule([f('a', 'cancelled'), f('b', 'pending', ['a'])], 1).block, [{ id: 'b', because: 'it depends on "a", which was cancelled' }]);
  });

  it('never starts more than the cap, for every mix of statuses of three features and every cap', () => {
    for (const s1 of FEATURE_STATUSES) {
      for (const s2 of FEATURE_STATUSES) {
        for (const s3 of FEATURE_STATUSES) {
          for (const cap of [1, 2, 3]) {
            const features = [f('a', s1), f('b', s2, ['a']), f('c', s3)];
            const d = schedule(features, cap);
            const active = features.filter((x) => x.status === 'running' || x.status === 'paused').length;
            assert.ok(d.start.length + active <= Math.max(cap, active), `${s1}/${s2}/${s3} cap ${cap}`);
            for (const id of d.start) assert.equal(features.find((x) => x.id === id)!.status, 'pending');
            for (const b of d.block) assert.equal(features.find((x) => x.id === b.id)!.status, 'pending');
            assert.ok(!d.start.some((id) => d.block.some((b) => b.id === id)));
          }
        }
      }
    }
  });

  it('the outcome: completed when all completed, failed when nothing more can run, else still going', () => {
    assert.equal(groupOutcome([f('a', 'completed'), f('b', 'completed')], 2), 'completed');
    assert.equal(groupOutcome([f('a', 'completed'), f('b', 'running')], 2), null);
    assert.equal(groupOutcome([f('a', 'failed'), f('b', 'pending', ['a'])], 2), 'failed');
    assert.equal(groupOutcome([f('a', 'failed'), f('b', 'pending')], 2), null, 'an independent feature can still run');
    assert.equal(groupOutcome([f('a', 'failed'), f('b', 'paused')], 2), null);
    assert.equal(groupOutcome([f('a', 'completed'), f('b', 'blocked')], 2), 'failed');
    assert.equal(groupOutcome([], 2), 'completed');
  });
});
