/**
 * Feature groups, the runner (an adapter over the loop runtime and storage): it starts a
 * running group's features as plan loops under the group's cap as the scheduler says, follows
 * their loops' ends, blocks the dependents of a feature that failed, and governs the group's
 * budget over all its loops. Each group's steps run one after another (a chain per group), so a
 * burst of loop events never starts more loops than the cap allows.
 */
import type { LoopRuntime, LoopRuntimeEvent } from '../loop/runtime-types';
import { terminationReasonToString } from '../loop/state';
import type { FeatureGroupRow, ForgeRepositories, GroupFeaturePatch } from '../storage/repositories';
import type { FeatureStatus } from '../vocabulary/group-vocabulary';
import { groupBudgetDecision, groupSpend, hasGroupBudget, loopSpend } from './group-spend';
import type { GroupEvent, GroupRef } from './group-types';
import { createMergeQueue, groupMergeEvent, type MergeQueueDeps } from './merge-queue';
import { integrationBranchOf } from '../workspace/merge-integration';
import { dependenciesMerged, mergedGroupOutcome, queuedOnCompletion } from './merge-queue-order';
import { groupOutcome, schedule } from './scheduler';

export interface GroupRunnerDeps {
  repos: ForgeRepositories;
  runtime: LoopRuntime;
  emit(event: GroupEvent): void;
  log: { info(m: string): void; warn(m: string): void };
  /** The merge queue's git (issue 14 part 4); without it completed features are not merged (unit tests of the scheduling). */
  worktrees?: MergeQueueDeps['worktrees'];
  /** Where the merge queue runs the merged tree's checks (merge-queue.ts). */
  mergeCheckExecutor?: MergeQueueDeps['mergeCheckExecutor'];
}

export interface GroupRunner {
  /** Drives a group this process runs: schedules now and after every loop event of its features. */
  drive(ref: GroupRef): Promise<void>;
  /**
   * Follows the ends of a group's loops without scheduling yet: a resume restarts its loops
   * first, and a loop that ends while the others restart must still be taken as its feature's.
   */
  watch(ref: GroupRef): void;
  /** Whether this process drives the group. */
  isDriving(ref: GroupRef): boolean;
  /** The groups this process drives now. */
  drivenGroups(): GroupRef[];
  /** The driven group a loop belongs to (a feature's loop), if any. */
  drivenGroupOf(projectId: string, loopName: string): GroupRef | undefined;
  /** The loop name of a group's feature. */
  loopNameOf(groupId: string, featureId: string): string;
  /** Stops driving (engine shutdown): running groups become paused with reason `interrupted`. */
  dispose(): void;
}

const key = (projectId: string, id: string) => `${projectId}\u0000${id}`;

export function createGroupRunner(deps: GroupRunnerDeps): GroupRunner {
  const { repos, runtime, emit } = deps;
  /** Groups this process drives, with the chain their steps run on. */
  const driven = new Map<string, { ref: GroupRef; chain: Promise<void> }>();
  /** Which group and feature a loop belongs to (loops of driven groups). */
  const loops = new Map<string, { groupId: string; featureId: string }>();
  let disposed = false;
  const queue = deps.worktrees ? createMergeQueue({ repos, runtime, worktrees: deps.worktrees, emit, log: deps.log, ...(deps.mergeCheckExecutor ? { mergeCheckExecutor: deps.mergeCheckExecutor } : {}) }) : null;
  /** A feature whose loop completed: with a merge queue, it is queued to merge. */
  const completedPatch = (f: { merge?: GroupFeaturePatch['merge'] }): GroupFeaturePatch => ({ status: 'completed', error: null, ...(queue ? { merge: queuedOnCompletion(f.merge, Date.now()) } : {}) });

  const loopNameOf = (groupId: string, featureId: string) => `${groupId}-${featureId}`;

  function setFeature(g: FeatureGroupRow, featureId: string, patch: GroupFeaturePatch): FeatureGroupRow {
    const row = repos.featureGroups.updateFeature(g.projectId, g.id, featureId, patch);
    const f = row.features.find((x) => x.id === featureId)!;
    emit({ type: 'group.feature', group: { projectId: g.projectId, id: g.id }, featureId, status: f.status, loopName: f.loopName });
    // Queued to merge (its loop completed): the merge queue's first state, as an event of its own.
    if (patch.merge) emit(groupMergeEvent({ projectId: g.projectId, id: g.id }, featureId, f.loopName, patch.merge));
    return row;
  }

  function enqueue(ref: GroupRef): Promise<void> {
    const entry = driven.get(key(ref.projectId, ref.id));
    if (!entry) return Promise.resolve();
    entry.chain = entry.chain.then(() => step(ref)).catch((error: unknown) => deps.log.warn(`[group ${ref.id}] ${(error as Error).stack ?? String(error)}`));
    return entry.chain;
  }

  function end(g: FeatureGroupRow): void {
    driven.delete(key(g.projectId, g.id));
    for (const f of g.features) if (f.loopName) loops.delete(key(g.projectId, f.loopName));
    emit({ type: 'group.ended', group: { projectId: g.projectId, id: g.id }, status: g.status, pauseReason: g.pauseReason });
  }

  /** The budget is spent: nothing new starts, and each running loop is capped at what it spent, so it pauses at its next hand-over. */
  function pauseForBudget(g: FeatureGroupRow, message: string): FeatureGroupRow {
    const row = repos.featureGroups.update(g.projectId, g.id, { status: 'paused', pauseReason: 'budget_reached' });
    const ref = { projectId: g.projectId, id: g.id };
    emit({ type: 'group.budget', group: ref, level: 'paused', message });
    emit({ type: 'group.changed', group: ref });
    for (const f of row.features) {
      if (f.status !== 'running' || !f.loopName || !repos.loops.get(g.projectId, f.loopName)) continue;
      const spent = loopSpend(repos, g.projectId, f.loopName);
      repos.loops.mergeState(g.projectId, f.loopName, {
        budget: { money: g.budgetMoney !== null ? spent.cost : null, tokens: g.budgetTokens !== null ? spent.tokens : null, auditorShare: null },
        // The group gave its own warning; the loop's would only repeat it.
        budgetWarned: true,
      });
    }
    return row;
  }

  async function startFeature(g: FeatureGroupRow, featureId: string): Promise<void> {
    const f = g.features.find((x) => x.id === featureId)!;
    const loopName = loopNameOf(g.id, f.id);
    loops.set(key(g.projectId, loopName), { groupId: g.id, featureId });
    setFeature(g, featureId, { status: 'running', loopName, error: null });
    try {
      await runtime.start({
        kind: 'plan',
        repoPath: g.repoDir,
        planText: f.plan,
        planSource: f.planPath || `feature ${f.id}`,
        name: loopName,
        ...(g.loopOptions.model ? { model: g.loopOptions.model } : {}),
        ...(g.loopOptions.auditorModel ? { auditorModel: g.loopOptions.auditorModel } : {}),
        ...(g.loopOptions.sandbox !== undefined ? { sandbox: g.loopOptions.sandbox } : {}),
        // The group's budget governs its loops; a loop of its own has none.
        budget: { money: null, tokens: null, auditorShare: null },
        // The merge queue brings its work into the integration branch; never into the user's branch (forge.loop.merge).
        ...(queue ? { merge: 'never' as const } : {}),
        // A dependent builds on its dependencies' work: it starts from the integration branch, which holds them merged.
        ...(queue && f.dependsOn.length > 0 ? { baseCommit: integrationBranchOf(g.id) } : {}),
      });
    } catch (error) {
      loops.delete(key(g.projectId, loopName));
      const current = repos.featureGroups.get(g.projectId, g.id)!;
      setFeature(current, featureId, { status: 'failed', error: `Its loop could not start: ${(error as Error).message}` });
    }
  }

  /**
   * A feature marked running whose loop has ended without this process seeing it (it ended
   * while a resume was restarting the others, or under another process): take its end from the
   * loop's row, as onLoopEnded would have.
   */
  function reconcile(g: FeatureGroupRow): FeatureGroupRow {
    for (const f of g.features) {
      if (f.status !== 'running' || !f.loopName) continue;
      const loop = repos.loops.get(g.projectId, f.loopName);
      if (!loop || runtime.isSupervising({ projectId: g.projectId, name: f.loopName })) continue;
      if (loop.status === 'completed') g = setFeature(g, f.id, completedPatch(f));
      else if (loop.status === 'paused') g = setFeature(g, f.id, { status: 'paused', error: null });
      else if (loop.status === 'errored' || loop.status === 'stalled' || loop.status === 'cancelled') {
        g = setFeature(g, f.id, {
          status: g.status === 'cancelled' ? 'cancelled' : 'failed',
          error: `Its loop ${loop.name} ended ${loop.status}${loop.terminationReason ? ` (${loop.terminationReason})` : ''} after ${loop.iteration} iteration${loop.iteration === 1 ? '' : 's'}.`,
        });
      }
    }
    return g;
  }

  async function step(ref: GroupRef): Promise<void> {
    let g = repos.featureGroups.get(ref.projectId, ref.id);
    if (!g || disposed) return;
    g = reconcile(g);
    if (g.status === 'running') {
      const budget = { money: g.budgetMoney, tokens: g.budgetTokens };
      if (hasGroupBudget(budget)) {
        const spend = groupSpend(repos, g.projectId, g.features.flatMap((f) => (f.loopName ? [f.loopName] : [])));
        const decision = groupBudgetDecision(g.id, budget, spend, g.budgetWarned);
        if (decision.kind === 'warn') {
          g = repos.featureGroups.update(g.projectId, g.id, { budgetWarned: true });
          emit({ type: 'group.budget', group: ref, level: 'warning', message: decision.message });
        } else if (decision.kind === 'pause') {
          g = pauseForBudget(g, decision.message);
        }
      }
    }
    // The merge queue first: completed features merge one at a time, failed merges go back to coding.
    if (queue) g = await queue.step(g);
    if (g.status === 'running') {
      const decision = schedule(g.features, g.maxConcurrent);
      // With a merge queue a dependency counts once it is merged (then the integration branch the dependent starts from holds it).
      const features = g.features;
      if (queue) decision.start = decision.start.filter((id) => dependenciesMerged(features, id));
      for (const b of decision.block) g = setFeature(g, b.id, { status: 'blocked', error: `Blocked: ${b.because}.` });
      for (const id of decision.start) {
        await startFeature(g, id);
        g = repos.featureGroups.get(ref.projectId, ref.id)!;
        if (g.status !== 'running' || disposed) return;
      }
      const outcome = queue ? mergedGroupOutcome(g.features, g.maxConcurrent) : groupOutcome(g.features, g.maxConcurrent);
      if (outcome) {
        g = repos.featureGroups.update(g.projectId, g.id, { status: outcome, pauseReason: null });
        emit({ type: 'group.changed', group: ref });
        end(g);
      }
      return;
    }
    // Paused or cancelled: the group has ended once none of its loops runs any more.
    if (g.features.some((f) => f.status === 'running')) return;
    if (g.status === 'paused' && g.features.every((f) => f.status === 'completed' && (!queue || f.merge?.state === 'merged'))) {
      g = repos.featureGroups.update(g.projectId, g.id, { status: 'completed', pauseReason: null });
      emit({ type: 'group.changed', group: ref });
    }
    end(g);
  }

  function onLoopEnded(e: LoopRuntimeEvent & { type: 'loop.ended' }, owner: { groupId: string; featureId: string }): void {
    const g = repos.featureGroups.get(e.loop.projectId, owner.groupId);
    const f = g?.features.find((x) => x.id === owner.featureId);
    if (!g || !f || f.status !== 'running') return;
    // A shutdown is this process going away, not the feature failing: a resume restarts it.
    if (e.reason.kind === 'shutdown') return;
    let status: FeatureStatus;
    let error: string | null = null;
    if (e.status === 'completed') {
      setFeature(g, f.id, completedPatch(f));
      return;
    }
    if (e.status === 'paused') status = 'paused';
    else if (g.status === 'cancelled') status = 'cancelled';
    else {
      status = 'failed';
      error = `Its loop ${e.loop.name} ended ${e.status} (${terminationReasonToString(e.reason)}) after ${e.iterations} iteration${e.iterations === 1 ? '' : 's'}.`;
    }
    setFeature(g, f.id, { status, error });
  }

  /** Maps the group's loops to their features; scheduling starts only with drive. */
  function watch(ref: GroupRef): void {
    const g = repos.featureGroups.get(ref.projectId, ref.id);
    for (const f of g?.features ?? []) if (f.loopName) loops.set(key(ref.projectId, f.loopName), { groupId: ref.id, featureId: f.id });
  }

  const unsubscribe = runtime.subscribe((e) => {
    if (disposed || (e.type !== 'loop.ended' && e.type !== 'loop.usage')) return;
    const owner = loops.get(key(e.loop.projectId, e.loop.name));
    if (!owner) return;
    const ref = { projectId: e.loop.projectId, id: owner.groupId };
    if (e.type === 'loop.ended') onLoopEnded(e, owner);
    void enqueue(ref);
  });

  return {
    loopNameOf,
    watch,
    drive(ref) {
      const k = key(ref.projectId, ref.id);
      if (!driven.has(k)) driven.set(k, { ref, chain: Promise.resolve() });
      watch(ref);
      return enqueue(ref);
    },
    isDriving: (ref) => driven.has(key(ref.projectId, ref.id)),
    drivenGroups: () => [...driven.values()].map((d) => d.ref),
    drivenGroupOf(projectId, loopName) {
      const owner = loops.get(key(projectId, loopName));
      return owner && driven.has(key(projectId, owner.groupId)) ? { projectId, id: owner.groupId } : undefined;
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      unsubscribe();
      for (const { ref } of driven.values()) {
        const g = repos.featureGroups.get(ref.projectId, ref.id);
        if (g?.status !== 'running') continue;
        const paused = repos.featureGroups.update(ref.projectId, ref.id, { status: 'paused', pauseReason: 'interrupted' });
        emit({ type: 'group.ended', group: ref, status: paused.status, pauseReason: paused.pauseReason });
      }
      driven.clear();
      loops.clear();
    },
  };
}
