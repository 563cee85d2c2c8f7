/**
 * Feature groups, the merge queue (issue 14 part 4), an adapter: it runs in the process that
 * drives the group, on the group's chain of steps (group-runner.ts), so merges happen one at a
 * time. Each completed feature's loop branch is merged (`--no-ff`) into the group's integration
 * branch `forge/group/<id>` in a throw-away worktree; the checks of that loop and of every
 * feature merged before it run on the merged tree; only then does the integration branch move
 * (compare-and-swap). The user's own working tree and branches are never touched.
 *
 * A conflict or a failed check sends the loop back to coding in its own worktree (when the cap
 * has a slot): Forge merges the integration branch into the loop's worktree first. Why that way:
 * the coder (a real model, or Forge's embedded scripted one, which keeps both sides of each
 * conflict hunk it is shown) resolves the conflict where git left its markers, with the files as
 * they are in the finding; the loop's next commit completes the merge, so the loop's branch then
 * holds everything integrated and the queue's next attempt merges cleanly. A rebase would
 * rewrite the loop's history and stop at every conflicting commit instead.
 *
 * The merged tree's checks run code the agents wrote, so they run confined as the loops did:
 * through `mergeCheckExecutor`, the engine's port, in a short-lived sandbox of its own over the
 * scratch worktree when a loop whose work is in that tree ran sandboxed, on the host (without
 * credentials) only when none did. A sandbox that cannot start fails the merge attempt; the
 * checks never fall back to the host.
 */
import { hostCheckExecutor, runChecks, summariseCheckResults, type CheckExecutor, type CheckSpec } from '../checks';
import { readExtras } from '../loop/loop-extras';
import type { LoopRuntime } from '../loop/runtime-types';
import type { FeatureGroupRow, ForgeRepositories, GroupFeaturePatch, LoopRow } from '../storage/repositories';
import { integrationBranchOf, type IntegrationMergeResult, type IntegrationMerges } from '../workspace/merge-integration';
import type { EnsureWorktreeResult, MergeResult } from '../workspace/worktree-types';
import type { GroupEvent, GroupRef } from './group-types';
import { afterMergeAttempt, checkFailedFinding, conflictFinding, mergeFindingFingerprint, nextMerge, reopened, reopenNow } from './merge-queue-order';

export interface MergeQueueDeps {
  repos: ForgeRepositories;
  runtime: LoopRuntime;
  worktrees: {
    integration: IntegrationMerges;
    ensureWorktree(loop: { worktreeDir: string; branch: string; repoDir: string }): Promise<EnsureWorktreeResult>;
    /** What makes the worktree unsafe for git (issue 26); the queue merges only in a worktree without any. */
    verifyWorktree?(worktreeDir: string, repoDir?: string): Promise<ReadonlyArray<{ detail: string }>>;
  };
  emit(event: GroupEvent): void;
  log: { info(m: string): void; warn(m: string): void };
  /**
   * Where the merged tree's checks run (the engine's sandbox port). Absent (unit tests of the
   * queue): the host for a tree of unconfined loops only; a sandboxed loop's merge then fails.
   */
  mergeCheckExecutor?: MergeCheckExecutorPort;
}

/** An executor for the checks of one merged tree, held from before its first check to after its last. */
export interface MergeCheckRun {
  exec: CheckExecutor;
  /** Where the checks run, for the merge state's message ("in a bwrap sandbox", "on the host"). */
  where: string;
  /** Stops and removes what was started for these checks; called once, also after a failure. */
  release(): Promise<void>;
}

/**
 * Gives the checks of the merged tree in `dir` (the scratch worktree under `<dataDir>/worktrees/`)
 * the confinement of `loop`: its sandbox's driver and settings, over `dir`, for a sandboxed loop;
 * the host for an unconfined one. Rejects (nothing was run) when that confinement cannot be had.
 */
export type MergeCheckExecutorPort = (loop: LoopRow, dir: string) => Promise<MergeCheckRun>;

/** Without an engine port: the host for unconfined loops, nothing at all for a sandboxed one. */
const hostOnlyPort: MergeCheckExecutorPort = async (loop) => {
  if (loop.sandbox) throw new Error(`loop ${loop.name} runs sandboxed, and this Forge has no sandbox for the merge queue's checks`);
  return { exec: hostCheckExecutor(), where: 'on the host', release: async () => undefined };
};

/** The `group.merge` event of a feature's new merge state (the queue's, and the runner's `queued` on completion). */
export function groupMergeEvent(group: GroupRef, featureId: string, loopName: string | null, merge: NonNullable<GroupFeaturePatch['merge']>): GroupEvent {
  return { type: 'group.merge', group, featureId, loopName, state: merge.state, message: merge.message, commit: merge.commit, reopened: merge.reopened, awaitingReopen: merge.awaitingReopen };
}

export interface MergeQueue {
  /** Merges what is queued, one at a time, then sends failed merges back to coding as slots free. */
  step(g: FeatureGroupRow): Promise<FeatureGroupRow>;
}

const OUTPUT_IN_FINDING = 2_000;

/** Never called: a tree whose checks are file assertions only needs no executor (and gets one that runs nothing). */
const refuseCommands: CheckExecutor = async () => {
  throw new Error('no executor was given for commands');
};

export function createMergeQueue(deps: MergeQueueDeps): MergeQueue {
  const { repos, runtime, emit } = deps;
  const refOf = (g: FeatureGroupRow): GroupRef => ({ projectId: g.projectId, id: g.id });

  function update(g: FeatureGroupRow, featureId: string, patch: GroupFeaturePatch): FeatureGroupRow {
    const row = repos.featureGroups.updateFeature(g.projectId, g.id, featureId, patch);
    const f = row.features.find((x) => x.id === featureId)!;
    if (patch.status !== undefined) emit({ type: 'group.feature', group: refOf(g), featureId, status: f.status, loopName: f.loopName });
    if (patch.merge) emit(groupMergeEvent(refOf(g), featureId, f.loopName, patch.merge));
    return row;
  }

  /** The checks the merged tree must pass: the merging loop's and those of every feature merged before it. */
  function checksFor(g: FeatureGroupRow, featureId: string): Array<{ feature: string; loop: LoopRow; checks: CheckSpec[]; timeoutMs: number | undefined }> {
    const out: Array<{ feature: string; loop: LoopRow; checks: CheckSpec[]; timeoutMs: number | undefined }> = [];
    for (const f of g.features) {
      if (f.id !== featureId && f.merge?.state !== 'merged') continue;
      const loop = f.loopName ? repos.loops.get(g.projectId, f.loopName) : undefined;
      if (!loop) continue;
      const extras = readExtras(loop);
      out.push({ feature: f.id, loop, checks: extras.checks ?? [], timeoutMs: extras.checkTimeoutMs });
    }
    return out;
  }

  /**
   * Runs the checks on the merged tree in `dir`, confined as `merging` ran; when it ran
   * unconfined but the tree holds the work of a sandboxed loop merged before it, as that loop
   * ran (the tree holds its code too). The executor is held for all the checks and always released.
   */
  async function checkMergedTree(g: FeatureGroupRow, featureId: string, merging: LoopRow, dir: string, ran: { where: string | null }): Promise<string | null> {
    const all = checksFor(g, featureId);
    if (!all.some((c) => c.checks.some((spec) => spec.kind === 'command'))) return checksOn(all, dir, undefined);
    const confiner = merging.sandbox ? merging : (all.find((c) => c.loop.sandbox)?.loop ?? merging);
    let run: MergeCheckRun;
    try {
      run = await (deps.mergeCheckExecutor ?? hostOnlyPort)(confiner, dir);
    } catch (error) {
      throw new Error(
        `Forge could not start the sandbox for the checks of the merged tree (${(error as Error).message}). The checks did not run, not on the host either; ${integrationBranchOf(g.id)} was not moved and the work is kept on ${merging.branch ?? 'its loop branch'}.`,
      );
    }
    ran.where = run.where;
    try {
      return await checksOn(all, dir, run.exec);
    } finally {
      await run.release().catch((e) => deps.log.warn(`[group ${g.id}] merge queue: releasing what ran the checks (${run.where}): ${String(e)}`));
    }
  }

  async function checksOn(all: ReturnType<typeof checksFor>, dir: string, exec: CheckExecutor | undefined): Promise<string | null> {
    const failures: string[] = [];
    for (const { feature, checks, timeoutMs } of all) {
      if (checks.length === 0) continue;
      // File assertions need no executor (they read the tree in Node); commands always get one.
      const results = await runChecks(checks, { cwd: dir, ...(exec ? { exec } : { exec: refuseCommands }), ...(timeoutMs ? { timeoutMs } : {}) });
      const summary = summariseCheckResults(results);
      if (summary.passed) continue;
      for (const r of summary.failed) {
        const tail = r.outputTail.trim();
        failures.push(`Check "${r.label}" of feature ${feature} ${r.message}${tail ? `; its output ended:\n${tail.slice(-OUTPUT_IN_FINDING)}` : '.'}`);
      }
    }
    return failures.length > 0 ? failures.join('\n') : null;
  }

  async function mergeOne(g: FeatureGroupRow, featureId: string): Promise<FeatureGroupRow> {
    const f = g.features.find((x) => x.id === featureId)!;
    const loop = f.loopName ? repos.loops.get(g.projectId, f.loopName) : undefined;
    for (let moves = 0; ; moves++) {
      let attempt: IntegrationMergeResult;
      const ran: { where: string | null } = { where: null };
      if (!loop?.branch || !loop.repoDir) attempt = { kind: 'failed', message: `Its loop ${f.loopName ?? '(none)'} has no branch to merge.` };
      else {
        try {
          attempt = await deps.worktrees.integration.mergeIntoIntegration({
            repoDir: loop.repoDir,
            groupId: g.id,
            loopBranch: loop.branch,
            loopName: loop.name,
            check: (dir) => checkMergedTree(g, featureId, loop, dir, ran),
          });
          if (attempt.kind === 'merged' && ran.where) attempt = { ...attempt, message: `${attempt.message} They ran ${ran.where}.` };
        } catch (error) {
          attempt = { kind: 'failed', message: (error as Error).message };
        }
      }
      const current = repos.featureGroups.get(g.projectId, g.id)!.features.find((x) => x.id === featureId)!;
      const decision = afterMergeAttempt(current.merge, attempt, Date.now(), moves);
      deps.log.info(`[group ${g.id}] merge queue: ${featureId}: ${attempt.message}`);
      g = update(g, featureId, { merge: decision.merge, ...(decision.status !== current.status ? { status: decision.status, error: decision.error } : {}) });
      if (decision.merge.state === 'merged' && loop) repos.reviewFindings.resolveCheckFinding(g.projectId, loop.name, mergeFindingFingerprint(g.id));
      if (!decision.retry) return g;
    }
  }

  async function reopen(g: FeatureGroupRow, featureId: string): Promise<FeatureGroupRow> {
    const f = g.features.find((x) => x.id === featureId)!;
    const merge = f.merge!;
    const loop = f.loopName ? repos.loops.get(g.projectId, f.loopName) : undefined;
    const fail = (why: string) => update(g, featureId, { status: 'failed', error: why, merge: { ...merge, awaitingReopen: false } });
    if (!loop?.worktreeDir || !loop.branch || !loop.repoDir) return fail(`Its loop ${f.loopName ?? '(none)'} has no worktree to go back to.`);
    const integration = integrationBranchOf(g.id);
    const merged = g.features.filter((x) => x.merge?.state === 'merged').map((x) => x.id);
    let finding: { file: string; description: string };
    try {
      await deps.worktrees.ensureWorktree({ worktreeDir: loop.worktreeDir, branch: loop.branch, repoDir: loop.repoDir });
      const unsafe = (await deps.worktrees.verifyWorktree?.(loop.worktreeDir, loop.repoDir)) ?? [];
      if (unsafe.length > 0) return fail(`Forge will not merge in the loop's worktree: ${unsafe.map((p) => p.detail).join('; ')}. Remove the worktree (Forge recreates it from the loop's branch) and reopen.`);
      const started = await deps.worktrees.integration.startMergeInLoop({ worktreeDir: loop.worktreeDir, groupId: g.id });
      if (started.kind === 'failed') return fail(`Its merge did not hold (${merge.message ?? merge.state}), and Forge could not start it in the loop's worktree: ${started.message}`);
      if (started.kind === 'conflict') finding = conflictFinding({ integration, loopBranch: loop.branch, merged, files: started.files });
      else if (merge.state === 'conflict') {
        // The same merge went through in the loop's worktree: its branch holds the integration branch now, so queue it again.
        return update(g, featureId, { merge: { ...merge, state: 'queued', awaitingReopen: false, at: Date.now() } });
      } else finding = checkFailedFinding({ integration, merged, failure: merge.message ?? 'a check failed on the merged tree', mergedIntoLoop: started.kind === 'merged' });
    } catch (error) {
      return fail(`Its merge did not hold (${merge.message ?? merge.state}), and Forge could not prepare its worktree: ${(error as Error).message}`);
    }
    // Marked running first, so the loop's end (however soon) is taken as this feature's.
    g = update(g, featureId, { status: 'running', error: null, merge: reopened(merge, Date.now()) });
    try {
      await runtime.restart({ projectId: g.projectId, name: loop.name }, { reopen: { ...finding, fingerprint: mergeFindingFingerprint(g.id) }, budget: { money: null, tokens: null } });
    } catch (error) {
      g = update(g, featureId, { status: 'failed', error: `Its merge did not hold, and its loop could not go back to coding: ${(error as Error).message}` });
    }
    return g;
  }

  return {
    async step(g) {
      if (g.status !== 'running' && g.status !== 'paused') return g;
      for (let id = nextMerge(g.features); id !== null; id = nextMerge(g.features)) g = await mergeOne(g, id);
      if (g.status !== 'running') return g;
      for (const id of reopenNow(g.features, g.maxConcurrent)) {
        g = await reopen(g, id);
        if (g.status !== 'running') break;
      }
      return g;
    },
  };
}

/**
 * `forge group merge ID --into BRANCH`: brings a completed group's integration branch into a
 * branch of the user's, only when asked, and only by fast-forward, so the branch gets exactly
 * the tree whose checks the merge queue ran. A branch that moved since the group started (it has
 * commits the integration branch lacks), a dirty checkout of it, or a branch that does not exist
 * is refused with nothing changed (merge-into-base.ts's refusals); the integration branch stays.
 */
export async function mergeGroupInto(
  worktrees: { mergeIntoBase(loop: { repoDir: string; branch: string; baseBranch: string | null }, mode: 'fast-forward'): Promise<MergeResult> },
  g: Pick<FeatureGroupRow, 'id' | 'status' | 'repoDir' | 'features'>,
  target: string,
): Promise<MergeResult> {
  const integration = integrationBranchOf(g.id);
  if (g.status !== 'completed') {
    const merged = g.features.filter((f) => f.merge?.state === 'merged').length;
    return {
      kind: 'refused',
      message: `Group "${g.id}" is ${g.status}: ${integration} holds ${merged} of its ${g.features.length} features. Merge it into ${target} once the group completed (or merge ${integration} yourself); nothing was changed.`,
    };
  }
  const result = await worktrees.mergeIntoBase({ repoDir: g.repoDir, branch: integration, baseBranch: target }, 'fast-forward');
  if (result.kind !== 'refused') return result;
  // The refusal says what and why once: its own words when they already name the merge and say nothing changed.
  const named = /^Forge did not merge /.test(result.message) ? '' : `Forge did not merge ${integration} into ${target}. `;
  const unchanged = /nothing was changed/i.test(result.message) ? '' : ' Nothing was changed.';
  return { ...result, message: `${named}${result.message}${unchanged}` };
}
