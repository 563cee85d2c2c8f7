/**
 * Feature groups, the scheduler: which features start now and which can never start. Pure:
 * statuses and dependencies in, a decision out; the group runner does what it says.
 */
import type { FeatureGroupStatus, FeatureStatus } from '../vocabulary/group-vocabulary';

export interface SchedulerFeature {
  id: string;
  status: FeatureStatus;
  dependsOn: readonly string[];
}

export interface ScheduleDecision {
  /** Pending features to start now, in split order, at most the free slots. */
  start: string[];
  /** Pending features that can never start: a feature they depend on failed (or was blocked, cancelled). */
  block: Array<{ id: string; because: string }>;
}

/** Features that hold a slot: a running loop, or a paused one that a resume restarts. */
const ACTIVE: readonly FeatureStatus[] = ['running', 'paused'];
/** A dependency in one of these states will never complete. */
const DEAD: readonly FeatureStatus[] = ['failed', 'blocked', 'cancelled'];

export function schedule(features: readonly SchedulerFeature[], cap: number): ScheduleDecision {
  const status = new Map(features.map((f) => [f.id, f.status]));
  const block: ScheduleDecision['block'] = [];
  // Blocking spreads: a feature blocked now blocks those that depend on it.
  for (let changed = true; changed; ) {
    changed = false;
    for (const f of features) {
      if (status.get(f.id) !== 'pending') continue;
      const dead = f.dependsOn.find((d) => DEAD.includes(status.get(d) ?? 'failed'));
      if (dead === undefined) continue;
      status.set(f.id, 'blocked');
      const why = status.get(dead) === 'blocked' ? 'was blocked' : status.get(dead) === 'cancelled' ? 'was cancelled' : 'failed';
      block.push({ id: f.id, because: `it depends on "${dead}", which ${why}` });
      changed = true;
    }
  }
  let free = Math.max(0, cap - features.filter((f) => ACTIVE.includes(f.status)).length);
  const start: string[] = [];
  for (const f of features) {
    if (free === 0) break;
    if (status.get(f.id) !== 'pending') continue;
    if (f.dependsOn.every((d) => status.get(d) === 'completed')) {
      start.push(f.id);
      free--;
    }
  }
  return { start, block };
}

/**
 * Where a running group stands once a decision was applied: `completed` when every feature
 * completed, `failed` when nothing runs and nothing more can start, null while work goes on.
 */
export function groupOutcome(features: readonly SchedulerFeature[], cap: number): Extract<FeatureGroupStatus, 'completed' | 'failed'> | null {
  if (features.every((f) => f.status === 'completed')) return 'completed';
  if (features.some((f) => ACTIVE.includes(f.status))) return null;
  const next = schedule(features, cap);
  if (next.start.length > 0) return null;
  // Pending features left without a startable path are blocked by the decision above.
  return 'failed';
}
