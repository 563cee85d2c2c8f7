/**
 * Feature groups (issue 14 part 3), the service the CLI and the VS Code surfaces call: split a
 * PRD with the read-only feature splitter, keep the plans for review (files under the data
 * folder the user may edit), launch, resume, cancel. The runner (group-runner.ts) drives a
 * launched group's loops; the checks are pure (feature-split.ts, scheduler.ts, group-spend.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ForgeSettings } from '../config/settings';
import { budgetProblem } from '../loop/budget';
import type { LoopRuntime } from '../loop/runtime-types';
import { supervisorOf } from '../loop/lease-holder';
import type { FeaturesWriteArgs } from '../opencode/forge-tools';
import { ReadOnlyTurnError, runReadOnlyTurn, type ReadOnlyTurnDeps } from '../plan-draft/read-only-turn';
import type { FeatureGroupRow, ForgeRepositories, GroupFeature } from '../storage/repositories';
import { checkCap, checkFeatureSplit, defaultGroupId, describeSplitProblems, groupIdProblem, planErrors, reviewFileName, splitError, type SplitFeature, type SplitProblem } from './feature-split';
import { integrationBranchOf } from '../workspace/merge-integration';
import { createGroupRunner } from './group-runner';
import type { MergeQueueDeps } from './merge-queue';
import { queuedOnCompletion } from './merge-queue-order';
import { groupSpend, noBudgetRoom } from './group-spend';
import { GroupError, MAX_PRD_BYTES, type FeatureGroupService, type FeatureGroupView, type GroupBudget, type GroupEvent, type GroupRef, type LaunchGroupOptions } from './group-types';
import { buildSplitterPrompt, splitterSessionTitle } from './splitter-prompt';
import { createReadOnlyGitRunner, scanLoops, type RadarLoop } from './conflict-radar';
import { sameOverlaps, type FileOverlap } from './overlap';

/** Where the splitter's `forge_features_write` calls land, keyed by the split's scope key. */
export interface FeatureSplitInbox {
  /** The tool's answer to the agent: the problems to fix, or a confirmation. */
  write(scopeKey: string, args: FeaturesWriteArgs): string;
}

interface SplitAttempt {
  features: SplitFeature[];
  problems: SplitProblem[];
}

export interface FeatureGroupServiceDeps extends ReadOnlyTurnDeps {
  dataDir: string;
  repos: ForgeRepositories;
  runtime: LoopRuntime;
  settings(): ForgeSettings;
  /** The splitter's model: the requested one, else the configured one, else the embedded model; null: opencode's default. */
  resolveSplitterModel(requested: string | null, repoPath: string): Promise<string | null>;
  /** The merge queue's git: the integration branch `forge/group/<id>` and the merges into it (absent: no merge queue). */
  worktrees?: MergeQueueDeps['worktrees'];
  /** Where the merge queue runs the merged tree's checks: the loops' confinement (the engine's sandbox port). */
  mergeCheckExecutor?: MergeQueueDeps['mergeCheckExecutor'];
}

export interface FeatureGroupServiceHandle extends FeatureGroupService {
  /** For the engine's tool backend: where the splitter's writes go. */
  readonly inbox: FeatureSplitInbox;
  /** Engine shutdown: groups this process drives become paused (`interrupted`). */
  dispose(): void;
}

const orNull = (n: number) => (n > 0 ? n : null);
/** How often the conflict radar reads the live worktrees of a group this process drives. */
const RADAR_POLL_MS = 3_000;

export function createFeatureGroupService(deps: FeatureGroupServiceDeps): FeatureGroupServiceHandle {
  const { repos, runtime } = deps;
  const listeners = new Set<(event: GroupEvent) => void>();
  const emit = (event: GroupEvent) => {
    for (const l of [...listeners]) {
      try {
        l(event);
      } catch (error) {
        deps.log.warn(`[groups] a listener failed: ${String(error)}`);
      }
    }
  };
  const runner = createGroupRunner({ repos, runtime, emit, log: deps.log, ...(deps.worktrees ? { worktrees: deps.worktrees } : {}), ...(deps.mergeCheckExecutor ? { mergeCheckExecutor: deps.mergeCheckExecutor } : {}) });
  /** The conflict radar: its last reading per group, and one reading at a time per group. */
  const radarGit = createReadOnlyGitRunner();
  const overlapsRead = new Map<string, FileOverlap[]>();
  const radarQueues = new Map<string, { chain: Promise<unknown>; refreshQueued: boolean }>();
  let radarStopped = false;
  let radarPoll: ReturnType<typeof setInterval> | undefined;

  /**
   * The group's integration branch, `forge/group/<id>`, made (when it does not exist yet) at the
   * commit the repository's HEAD is at now: where the group starts from. The merge queue is the
   * only writer; the user's branches are never moved.
   */
  async function ensureIntegrationBranch(g: FeatureGroupRow): Promise<void> {
    if (!deps.worktrees) return;
    const { headCommit } = await runtime.projectOf(g.repoDir);
    await deps.worktrees.integration.ensureIntegrationBranch(g.repoDir, g.id, headCommit);
  }
  const splits = new Map<string, { groupId: string; last: SplitAttempt | null }>();
  const endWaiters = new Map<string, Array<(view: FeatureGroupView) => void>>();
  const key = (ref: GroupRef) => `${ref.projectId}\u0000${ref.id}`;
  listeners.add((e) => {
    if (e.type !== 'group.ended') return;
    const waiting = endWaiters.get(key(e.group)) ?? [];
    endWaiters.delete(key(e.group));
    const v = view(e.group);
    if (v) for (const w of waiting) w(v);
  });

  const inbox: FeatureSplitInbox = {
    write(scopeKey, args) {
      const split = splits.get(scopeKey);
      if (!split) return 'No feature split is waiting for this session any more; end your turn.';
      const features: SplitFeature[] = args.features.map((f) => ({ id: f.id.trim(), title: f.title.trim(), dependsOn: f.dependsOn.map((d) => d.trim()), plan: f.plan }));
      const problems = checkFeatureSplit(features, split.groupId);
      split.last = { features, problems };
      if (problems.length > 0) return describeSplitProblems(problems);
      const lines = features.map((f) => `- ${f.id}: ${f.title}${f.dependsOn.length > 0 ? ` (after ${f.dependsOn.join(', ')})` : ''}`);
      return [`Forge stored ${features.length} feature${features.length === 1 ? '' : 's'}; the user reviews the plans before they run. End your turn.`, ...lines].join('\n');
    },
  };

  function row(ref: GroupRef): FeatureGroupRow {
    const g = repos.featureGroups.get(ref.projectId, ref.id);
    if (!g) throw new GroupError(`No feature group "${ref.id}" in this repository. "forge group status" lists the groups.`, 'not_found');
    return g;
  }

  function view(ref: GroupRef): FeatureGroupView | undefined {
    const g = repos.featureGroups.get(ref.projectId, ref.id);
    return g ? toView(g) : undefined;
  }

  function toView(g: FeatureGroupRow): FeatureGroupView {
    const loopNames = g.features.flatMap((f) => (f.loopName ? [f.loopName] : []));
    return {
      ref: { projectId: g.projectId, id: g.id },
      title: g.title,
      source: g.source,
      repoDir: g.repoDir,
      status: g.status,
      pauseReason: g.pauseReason,
      maxConcurrent: g.maxConcurrent,
      budget: { money: g.budgetMoney, tokens: g.budgetTokens },
      spend: groupSpend(repos, g.projectId, loopNames),
      budgetWarned: g.budgetWarned,
      features: g.features.map((f) => ({
        id: f.id,
        title: f.title,
        dependsOn: [...f.dependsOn],
        // In review the file is the plan: the user may have edited it.
        plan: g.status === 'review' ? readReviewCopy(f) : f.plan,
        planPath: f.planPath,
        status: f.status,
        loopName: f.loopName,
        error: f.error,
        merge: f.merge ? { state: f.merge.state, message: f.merge.message, commit: f.merge.commit, reopened: f.merge.reopened, awaitingReopen: f.merge.awaitingReopen } : null,
      })),
      reviewDir: g.reviewDir,
      createdAt: g.createdAt,
      updatedAt: g.updatedAt,
      overlaps: overlapsRead.get(key({ projectId: g.projectId, id: g.id })) ?? [],
    };
  }

  /** The group's live loops (features running or paused) with their worktrees, for the radar. */
  function liveLoops(g: FeatureGroupRow): RadarLoop[] {
    return g.features.flatMap((f) => {
      if ((f.status !== 'running' && f.status !== 'paused') || !f.loopName) return [];
      const loop = repos.loops.get(g.projectId, f.loopName);
      return [{ featureId: f.id, loopName: f.loopName, worktreeDir: loop?.worktreeDir ?? null, baseCommit: loop?.baseCommit ?? null }];
    });
  }

  /** One radar reading: stored as the group's overlaps, `group.overlap` when they changed. */
  async function readRadar(ref: GroupRef): Promise<FileOverlap[]> {
    const g = repos.featureGroups.get(ref.projectId, ref.id);
    if (!g) return [];
    const scan = await scanLoops(radarGit, liveLoops(g));
    for (const l of scan.loops) if ('error' in l) deps.log.warn(`[group ${ref.id}] the conflict radar could not read loop ${l.loopName}: ${l.error}`);
    const previous = overlapsRead.get(key(ref)) ?? [];
    overlapsRead.set(key(ref), scan.overlaps);
    if (!sameOverlaps(previous, scan.overlaps)) emit({ type: 'group.overlap', group: ref, overlaps: scan.overlaps });
    return scan.overlaps;
  }

  function radarQueue(ref: GroupRef): { chain: Promise<unknown>; refreshQueued: boolean } {
    let q = radarQueues.get(key(ref));
    if (!q) radarQueues.set(key(ref), (q = { chain: Promise.resolve(), refreshQueued: false }));
    return q;
  }

  /** A reading after a change; a burst of changes makes one reading after the current one. */
  function refreshRadar(ref: GroupRef): void {
    const q = radarQueue(ref);
    if (q.refreshQueued || radarStopped) return;
    q.refreshQueued = true;
    q.chain = q.chain
      .then(() => {
        q.refreshQueued = false;
        return readRadar(ref);
      })
      .catch((error: unknown) => deps.log.warn(`[group ${ref.id}] the conflict radar: ${String(error)}`));
  }

  /**
   * An agent's file writes raise no loop event (a check can hold a loop for minutes after its
   * last one), so while this process drives a group the radar also reads every few seconds.
   */
  function pollRadar(): void {
    if (radarPoll || radarStopped) return;
    radarPoll = setInterval(() => {
      const driven = runner.drivenGroups();
      if (driven.length === 0 || radarStopped) {
        clearInterval(radarPoll);
        radarPoll = undefined;
        return;
      }
      for (const ref of driven) refreshRadar(ref);
    }, RADAR_POLL_MS);
    radarPoll.unref?.();
  }

  // While this process drives a group, the radar reads again whenever a loop may have changed
  // files (a turn's usage, a phase, a commit, a check, its end), when a feature's status
  // changes (the set of live loops changes), and every few seconds.
  listeners.add((e) => {
    if (e.type === 'group.feature') {
      refreshRadar(e.group);
      pollRadar();
    } else if (e.type === 'group.ended') refreshRadar(e.group);
  });
  const radarEvents = new Set(['loop.started', 'loop.usage', 'loop.phase', 'loop.commit', 'loop.check', 'loop.ended']);
  const unsubscribeRadar = runtime.subscribe((e) => {
    if (!radarEvents.has(e.type)) return;
    const ref = runner.drivenGroupOf(e.loop.projectId, e.loop.name);
    if (ref) refreshRadar(ref);
  });

  function readReviewCopy(f: GroupFeature): string {
    try {
      return readFileSync(f.planPath, 'utf8');
    } catch {
      return f.plan;
    }
  }

  /** The cap and budget a launch or resume runs with: the options over what the group has. */
  function runOptions(g: FeatureGroupRow, options: LaunchGroupOptions): { maxConcurrent: number; budget: GroupBudget } {
    const maxConcurrent = checkCap(options.maxConcurrent ?? g.maxConcurrent);
    const budget: GroupBudget = { money: g.budgetMoney, tokens: g.budgetTokens, ...(options.budget ?? {}) };
    checkBudget(budget);
    return { maxConcurrent, budget };
  }

  function checkBudget(budget: Partial<GroupBudget>): void {
    const problem = budgetProblem(budget);
    if (problem) throw new GroupError(problem, 'bad_budget');
  }

  async function writeReviewCopy(path: string, content: string): Promise<void> {
    const temporary = `${path}.${process.pid}.tmp`;
    await writeFile(temporary, content.endsWith('\n') ? content : `${content}\n`);
    await rename(temporary, path);
  }

  async function split(request: Parameters<FeatureGroupService['split']>[0]): Promise<FeatureGroupView> {
    const settings = deps.settings();
    if (!request.prdText.trim()) throw new GroupError(`${request.prdSource} is empty: write the features you want built, then split it.`, 'bad_prd');
    if (Buffer.byteLength(request.prdText, 'utf8') > MAX_PRD_BYTES) {
      throw new GroupError(`${request.prdSource} is larger than ${MAX_PRD_BYTES / 1024} KB, more than one splitter request should carry: split it into smaller PRDs.`, 'bad_prd');
    }
    const maxConcurrent = checkCap(request.maxConcurrent ?? settings['forge.groups.maxConcurrentLoops']);
    const budget: GroupBudget = {
      money: request.budget?.money !== undefined ? request.budget.money : orNull(settings['forge.groups.budget.money']),
      tokens: request.budget?.tokens !== undefined ? request.budget.tokens : orNull(settings['forge.groups.budget.tokens']),
    };
    checkBudget(budget);
    const project = await runtime.projectOf(request.repoPath);
    const taken = new Set(repos.featureGroups.list(project.projectId).map((g) => g.id));
    let id: string;
    if (request.id !== undefined) {
      const problem = groupIdProblem(request.id);
      if (problem) throw new GroupError(problem, 'bad_prd');
      if (taken.has(request.id)) throw new GroupError(`A feature group "${request.id}" exists already in this repository; give another --name.`, 'bad_state');
      id = request.id;
    } else {
      id = defaultGroupId(request.prdText, request.prdSource, taken);
    }
    const model = await deps.resolveSplitterModel(request.model ?? null, request.repoPath);
    const splitId = randomBytes(4).toString('hex');
    const entry = { groupId: id, last: null as SplitAttempt | null };
    splits.set(splitId, entry);
    let reply: string;
    try {
      const turn = await runReadOnlyTurn(deps, {
        role: 'splitter',
        label: `split-${splitId}`,
        project,
        checkoutDir: join(deps.dataDir, 'group-splits', splitId),
        scopeKey: splitId,
        model,
        sessionId: null,
        sessionTitle: splitterSessionTitle(request.prdSource),
        prompt: (checkoutDir) => buildSplitterPrompt({ prdText: request.prdText, prdSource: request.prdSource, checkoutDir, headCommit: project.headCommit, groupId: id }),
        ...(request.signal ? { signal: request.signal } : {}),
        ...(request.onProgress ? { onProgress: request.onProgress } : {}),
      });
      reply = turn.reply;
    } catch (error) {
      if (error instanceof ReadOnlyTurnError) throw new GroupError(error.message, error.code === 'busy' ? 'interrupted' : 'opencode');
      throw error;
    } finally {
      splits.delete(splitId);
    }
    const written = entry.last;
    if (!written) {
      const said = reply.replace(/\s+/g, ' ').trim().slice(0, 400);
      throw new GroupError(
        `The feature splitter could not split ${request.prdSource} into features: it wrote none${said ? ` (it said: "${said}")` : ''}. Nothing was stored. Describe the features the PRD asks for (on the embedded model: "## Feature <id>: <title>" sections), or configure a real model with --splitter-model.`,
        'unsplittable',
      );
    }
    if (written.problems.length > 0) throw splitError(written.problems, request.prdSource);

    // The review copies first, then the row: a failure leaves no half group behind.
    const reviewDir = join(deps.dataDir, 'groups', project.projectId, id);
    await rm(reviewDir, { recursive: true, force: true });
    await mkdir(reviewDir, { recursive: true });
    const features: GroupFeature[] = [];
    try {
      for (const [i, f] of written.features.entries()) {
        const planPath = join(reviewDir, reviewFileName(i, f.id));
        await writeReviewCopy(planPath, f.plan);
        features.push({ id: f.id, title: f.title, dependsOn: f.dependsOn, plan: f.plan, planPath, status: 'pending', loopName: null, error: null });
      }
      const title = /^#\s+(.+?)\s*#*\s*$/m.exec(request.prdText)?.[1] ?? request.prdSource;
      const created = repos.featureGroups.create(project.projectId, {
        id,
        title,
        features,
        status: 'review',
        source: request.prdSource,
        repoDir: project.repoDir,
        reviewDir,
        maxConcurrent,
        budgetMoney: budget.money,
        budgetTokens: budget.tokens,
        splitterModel: model,
        loopOptions: {
          ...(request.loopModel ? { model: request.loopModel } : {}),
          ...(request.auditorModel ? { auditorModel: request.auditorModel } : {}),
          ...(request.sandbox !== undefined ? { sandbox: request.sandbox } : {}),
        },
      });
      emit({ type: 'group.changed', group: { projectId: project.projectId, id } });
      return toView(created);
    } catch (error) {
      await rm(reviewDir, { recursive: true, force: true }).catch(() => {});
      throw error;
    }
  }

  async function launch(ref: GroupRef, options: LaunchGroupOptions = {}): Promise<FeatureGroupView> {
    const g = row(ref);
    if (g.status !== 'review') throw new GroupError(`Group "${ref.id}" is ${g.status}; only a group in review can be launched${g.status === 'paused' ? ` (continue it with forge group resume ${ref.id})` : ''}.`, 'bad_state');
    const { maxConcurrent, budget } = runOptions(g, options);
    // The review copies are the plans now: the user's edits win, and are checked like any plan.
    const features: GroupFeature[] = [];
    for (const f of g.features) {
      let plan: string;
      try {
        plan = await readFile(f.planPath, 'utf8');
      } catch (error) {
        throw new GroupError(`The plan of feature "${f.id}" (${f.planPath}) cannot be read: ${(error as Error).message}. The group stays in review; restore the file and launch again.`, 'bad_plan');
      }
      const errors = planErrors(plan, f.planPath);
      if (errors.length > 0) throw new GroupError(`${errors.join(' ')} The group stays in review; fix the file and launch again.`, 'bad_plan');
      features.push({ ...f, plan });
    }
    try {
      await ensureIntegrationBranch(g);
    } catch (error) {
      throw new GroupError(`Forge could not create the group's integration branch ${integrationBranchOf(g.id)}: ${(error as Error).message} The group stays in review.`, 'bad_state');
    }
    repos.featureGroups.update(ref.projectId, ref.id, { status: 'running', features, maxConcurrent, budgetMoney: budget.money, budgetTokens: budget.tokens, pauseReason: null });
    emit({ type: 'group.changed', group: ref });
    await runner.drive(ref);
    return toView(row(ref));
  }

  async function resume(ref: GroupRef, options: LaunchGroupOptions = {}): Promise<FeatureGroupView> {
    const g = row(ref);
    if (runner.isDriving(ref)) throw new GroupError(`Group "${ref.id}" is running in this process already.`, 'bad_state');
    if (g.status !== 'paused' && g.status !== 'running') {
      throw new GroupError(`Group "${ref.id}" is ${g.status}; only a paused group (or one whose process went away) can be resumed${g.status === 'review' ? ` — launch it with forge group launch ${ref.id}` : ''}.`, 'bad_state');
    }
    if (g.status === 'running') {
      // Marked running: resumable only when no live process drives any of its loops.
      const alive = g.features.flatMap((f) => (f.loopName ? [repos.loops.get(ref.projectId, f.loopName)] : [])).find((l) => l && l.status === 'running' && supervisorOf(l).state === 'alive');
      if (alive) throw new GroupError(`Group "${ref.id}" is running: process ${(supervisorOf(alive) as { pid: number }).pid} drives its loop ${alive.name}.`, 'bad_state');
    }
    const { maxConcurrent, budget } = runOptions(g, options);
    const spend = groupSpend(repos, ref.projectId, g.features.flatMap((f) => (f.loopName ? [f.loopName] : [])));
    const room = noBudgetRoom(ref.id, budget, spend);
    if (room) throw new GroupError(room, 'no_budget_room');
    // A group launched before the merge queue existed gets its integration branch now.
    await ensureIntegrationBranch(g);
    const budgetChanged = budget.money !== g.budgetMoney || budget.tokens !== g.budgetTokens;
    repos.featureGroups.update(ref.projectId, ref.id, {
      status: 'running',
      pauseReason: null,
      maxConcurrent,
      budgetMoney: budget.money,
      budgetTokens: budget.tokens,
      ...(budgetChanged ? { budgetWarned: false } : {}),
    });
    emit({ type: 'group.changed', group: ref });
    // Followed before any restarts: a restarted loop can end (on a fast model, in seconds) while the next one restarts.
    runner.watch(ref);
    // Loops the pause or the process's end left behind go on where they stopped, without a loop budget (the group's governs).
    for (const f of row(ref).features) {
      if (f.status !== 'running' && f.status !== 'paused') continue;
      const loop = f.loopName ? repos.loops.get(ref.projectId, f.loopName) : undefined;
      const current = row(ref);
      if (!loop) {
        repos.featureGroups.updateFeature(ref.projectId, ref.id, f.id, { status: 'pending', loopName: null });
        continue;
      }
      if (loop.status === 'completed') {
        repos.featureGroups.updateFeature(ref.projectId, ref.id, f.id, { status: 'completed', ...(deps.worktrees ? { merge: queuedOnCompletion(f.merge, Date.now()) } : {}) });
        continue;
      }
      try {
        // Marked running first, so the loop's end (however soon) is taken as this feature's.
        repos.featureGroups.updateFeature(current.projectId, current.id, f.id, { status: 'running', error: null });
        await runtime.restart({ projectId: ref.projectId, name: loop.name }, { force: loop.status === 'running' || loop.status === 'starting', budget: { money: null, tokens: null } });
      } catch (error) {
        repos.featureGroups.updateFeature(current.projectId, current.id, f.id, { status: 'failed', error: `Its loop could not restart: ${(error as Error).message}` });
      }
      emit({ type: 'group.feature', group: ref, featureId: f.id, status: row(ref).features.find((x) => x.id === f.id)!.status, loopName: f.loopName });
    }
    await runner.drive(ref);
    return toView(row(ref));
  }

  async function cancel(ref: GroupRef): Promise<FeatureGroupView> {
    const g = row(ref);
    if (g.status === 'completed' || g.status === 'failed' || g.status === 'cancelled') throw new GroupError(`Group "${ref.id}" is ${g.status} already; there is nothing to cancel.`, 'bad_state');
    repos.featureGroups.update(ref.projectId, ref.id, { status: 'cancelled', pauseReason: null });
    for (const f of g.features) {
      if (f.status !== 'pending' && f.status !== 'running' && f.status !== 'paused') continue;
      const loop = f.loopName ? repos.loops.get(ref.projectId, f.loopName) : undefined;
      if (loop && (loop.status === 'running' || loop.status === 'starting' || loop.status === 'paused')) {
        await runtime.cancel({ projectId: ref.projectId, name: loop.name }).catch((e) => deps.log.warn(`[group ${ref.id}] cancelling ${loop.name}: ${String(e)}`));
      }
      repos.featureGroups.updateFeature(ref.projectId, ref.id, f.id, { status: 'cancelled' });
      emit({ type: 'group.feature', group: ref, featureId: f.id, status: 'cancelled', loopName: f.loopName });
    }
    emit({ type: 'group.changed', group: ref });
    const v = toView(row(ref));
    if (!runner.isDriving(ref)) emit({ type: 'group.ended', group: ref, status: 'cancelled', pauseReason: null });
    else await runner.drive(ref);
    return v;
  }

  return {
    inbox,
    split,
    launch,
    resume,
    cancel,
    get: (ref) => view(ref),
    list: (projectId) => repos.featureGroups.list(projectId).map(toView),
    waitForEnd(ref) {
      const v = view(ref);
      if (!v) return Promise.reject(new GroupError(`No feature group "${ref.id}".`, 'not_found'));
      if (!runner.isDriving(ref)) return Promise.resolve(v);
      return new Promise((resolve) => {
        const list = endWaiters.get(key(ref)) ?? [];
        list.push(resolve);
        endWaiters.set(key(ref), list);
      });
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async radar(ref) {
      row(ref);
      const q = radarQueue(ref);
      const reading = q.chain.then(() => readRadar(ref));
      q.chain = reading.catch(() => {});
      return reading;
    },
    dispose: () => {
      radarStopped = true;
      if (radarPoll) clearInterval(radarPoll);
      unsubscribeRadar();
      runner.dispose();
    },
  };
}
