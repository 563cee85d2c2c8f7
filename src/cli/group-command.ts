/**
 * `forge group …`: feature groups at the command line (split a PRD, launch, resume, status,
 * cancel), and the group lines of `forge status`. Kept out of main.ts, which dispatches here.
 */
import { resolve } from 'node:path';
import type { ForgeEngine } from '../core/engine';
import { describeBudget, formatMoney, formatTokens } from '../core/loop/budget';
import type { FeatureGroupView, GroupBudget, GroupEvent, GroupRef, LaunchGroupOptions } from '../core/groups/group-types';
import type { FileOverlap } from '../core/groups/overlap';
import { EXIT, UsageError, type CliCommand, type GroupArgs } from './args';
import { readInputFile } from './read-input';
import { integrationBranchOf } from '../core/workspace/merge-integration';
import { mergeGroupInto } from '../core/groups/merge-queue';

type GroupCommand = Extract<CliCommand, { command: 'group' }>;

export interface GroupIo {
  out(line: string): void;
  err(line: string): void;
}

/** `$5.00 and 2,000 tokens`, or `none`. */
function describeGroupBudget(budget: GroupBudget): string {
  return describeBudget({ ...budget, auditorShare: null });
}

function describeSpend(v: FeatureGroupView): string {
  return `${formatMoney(v.spend.cost)}, ${formatTokens(v.spend.tokens)}`;
}

/** One JSON object per group: what `forge status --json` and `forge group status --json` print. */
export function groupJson(v: FeatureGroupView): Record<string, unknown> {
  return {
    group: v.ref.id,
    title: v.title,
    source: v.source,
    status: v.status,
    pauseReason: v.pauseReason,
    maxConcurrent: v.maxConcurrent,
    budget: v.budget,
    spend: v.spend,
    budgetWarned: v.budgetWarned,
    reviewDir: v.reviewDir,
    features: v.features.map((f) => ({ id: f.id, title: f.title, dependsOn: f.dependsOn, status: f.status, loop: f.loopName, planPath: f.planPath, error: f.error, merge: f.merge ?? null })),
    integrationBranch: integrationBranchOf(v.ref.id),
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    overlaps: v.overlaps,
  };
}

/** `overlap: shared.txt — notes, search`: a file two or more live loops changed (the conflict radar). */
export function overlapLine(o: FileOverlap): string {
  return `overlap: ${o.file} — ${o.features.join(', ')}`;
}

function featureLine(f: FeatureGroupView['features'][number]): string {
  const after = f.dependsOn.length > 0 ? `after ${f.dependsOn.join(', ')}` : 'no dependencies';
  return `  ${f.id.padEnd(16)} ${f.status.padEnd(9)} ${f.title} (${after})${f.loopName ? `  loop ${f.loopName}` : ''}${f.merge ? `  merge ${describeMerge(f.merge)}` : ''}${f.error ? ` — ${f.error}` : ''}`;
}

/** `merged (3f2a…)`, `queued`, `conflict, back to coding (1)`, `check_failed, waiting for a slot`. */
function describeMerge(m: NonNullable<FeatureGroupView['features'][number]['merge']>): string {
  if (m.state === 'merged') return `merged${m.commit ? ` (${m.commit.slice(0, 12)})` : ''}`;
  if (m.state === 'queued') return m.reopened > 0 ? `queued (after ${m.reopened} return${m.reopened === 1 ? '' : 's'} to coding)` : 'queued';
  return `${m.state}, ${m.awaitingReopen ? 'waiting for a slot to go back to coding' : `back to coding (${m.reopened})`}`;
}

export function formatGroupDetail(v: FeatureGroupView): string {
  const paused = v.pauseReason ? ` (${v.pauseReason === 'budget_reached' ? 'budget reached' : 'interrupted'})` : '';
  return [
    `group ${v.ref.id}: ${v.status}${paused} — "${v.title}" from ${v.source}`,
    `  at most ${v.maxConcurrent} loop${v.maxConcurrent === 1 ? '' : 's'} at once; budget ${describeGroupBudget(v.budget)}; spent ${describeSpend(v)}`,
    `  plans: ${v.reviewDir}`,
    `  integration branch: ${integrationBranchOf(v.ref.id)}`,
    ...v.features.map(featureLine),
    ...v.overlaps.map((o) => `  ${overlapLine(o)}`),
  ].join('\n');
}

/** The repository's groups with the conflict radar read now (their loops may run in another process). */
export async function groupsWithRadar(engine: ForgeEngine, projectId: string): Promise<FeatureGroupView[]> {
  const views: FeatureGroupView[] = [];
  for (const v of engine.groups.list(projectId)) views.push({ ...v, overlaps: await engine.groups.radar(v.ref) });
  return views;
}

/** The group lines of `forge status` (nothing when the repository has no groups). */
export function formatGroupList(views: readonly FeatureGroupView[], json: boolean): string[] {
  if (json) return views.map((v) => JSON.stringify(groupJson(v)));
  if (views.length === 0) return [];
  const merged = (v: FeatureGroupView) => v.features.filter((f) => f.merge?.state === 'merged').length;
  const counts = (v: FeatureGroupView) => `${v.features.filter((f) => f.status === 'completed').length}/${v.features.length} completed${v.status === 'review' ? '' : `, ${merged(v)} merged`}`;
  return ['', 'Feature groups:', ...views.map((v) => `${v.ref.id.padEnd(24)} ${v.status.padEnd(9)} ${counts(v)}  spent ${describeSpend(v)}${v.pauseReason ? `  (${v.pauseReason})` : ''}${v.overlaps.length > 0 ? `  overlap: ${v.overlaps.map((o) => o.file).join(', ')}` : ''}`)];
}

function formatGroupEvent(e: GroupEvent, json: boolean): string | null {
  if (json) return JSON.stringify({ ...e, group: e.group.id, at: Date.now() });
  switch (e.type) {
    case 'group.changed':
      return null;
    case 'group.feature':
      return `[group ${e.group.id}] feature ${e.featureId}: ${e.status}${e.loopName ? ` (loop ${e.loopName})` : ''}`;
    case 'group.budget':
      return `[group ${e.group.id}] budget ${e.level === 'paused' ? 'reached' : 'warning'}: ${e.message}`;
    case 'group.ended':
      return `[group ${e.group.id}] ended: ${e.status}${e.pauseReason ? ` (${e.pauseReason})` : ''}`;
    case 'group.overlap':
      return e.overlaps.length === 0 ? `[group ${e.group.id}] no overlapping files between its live loops` : e.overlaps.map((o) => `[group ${e.group.id}] ${overlapLine(o)}`).join('\n');
    case 'group.merge':
      return `[group ${e.group.id}] merge ${e.featureId}: ${e.state}${e.awaitingReopen ? ' (back to coding when a slot is free)' : ''}${e.message ? ` — ${e.message.split('\n')[0]}` : ''}`;
  }
}

function launchOptions(cmd: GroupArgs): LaunchGroupOptions {
  return {
    ...(cmd.maxConcurrent !== null ? { maxConcurrent: cmd.maxConcurrent } : {}),
    ...(cmd.budget ? { budget: { ...(cmd.budget.money !== undefined ? { money: cmd.budget.money } : {}), ...(cmd.budget.tokens !== undefined ? { tokens: cmd.budget.tokens } : {}) } } : {}),
  };
}

/** How a group that stopped running ends the process. */
function exitCodeOf(v: FeatureGroupView): number {
  switch (v.status) {
    case 'completed':
      return EXIT.completed;
    case 'paused':
      return v.pauseReason === 'budget_reached' ? EXIT.budgetPaused : EXIT.cancelled;
    case 'cancelled':
      return EXIT.cancelled;
    case 'failed':
      return EXIT.agentFailure;
    default:
      return EXIT.internal;
  }
}

/** Runs a launched (or resumed) group to its end, printing its events; Ctrl-C pauses it (interrupted). */
async function followGroup(engine: ForgeEngine, ref: GroupRef, start: () => Promise<FeatureGroupView>, cmd: GroupCommand, io: GroupIo): Promise<number> {
  const unsubscribe = engine.groups.subscribe((e) => {
    if (e.group.id !== ref.id || e.group.projectId !== ref.projectId) return;
    const line = formatGroupEvent(e, cmd.json);
    if (line) io.out(line);
  });
  let interrupt: (() => void) | undefined;
  const interrupted = new Promise<'interrupted'>((r) => (interrupt = () => r('interrupted')));
  const onSignal = () => {
    io.err(`forge: pausing group "${ref.id}": its running loops stop, nothing is lost; continue with forge group resume ${ref.id}.`);
    interrupt?.();
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  try {
    await start();
    const ended = await Promise.race([engine.groups.waitForEnd(ref), interrupted]);
    // Interrupted: closing the engine pauses the group (interrupted) and stops its loops.
    if (ended === 'interrupted') return EXIT.cancelled;
    // A last radar reading, after the readings the loops' ends queued: the event stream (and the
    // summary) end with the true overlaps — none once no loop is live — before the process exits.
    const overlaps = await engine.groups.radar(ref).catch((error: unknown) => {
      io.err(`forge: the conflict radar could not read group "${ref.id}" at its end: ${String(error)}`);
      return ended.overlaps;
    });
    const end: FeatureGroupView = { ...ended, overlaps };
    if (!cmd.json) {
      io.out(formatGroupDetail(end));
      if (end.status === 'paused' && end.pauseReason === 'budget_reached') io.out(`Paused, nothing lost. Continue with a higher budget: forge group resume ${ref.id} --budget AMOUNT (and/or --budget-tokens N).`);
    }
    return exitCodeOf(end);
  } finally {
    for (const signal of signals) process.off(signal, onSignal);
    unsubscribe();
  }
}

export async function runGroupCommand(engine: ForgeEngine, cmd: GroupCommand, io: GroupIo): Promise<number> {
  const { projectId } = await engine.runtime.projectOf(cmd.repo);
  const ref = (id: string): GroupRef => ({ projectId, id });
  switch (cmd.action) {
    case 'status': {
      // The conflict radar is read now: the loops may run in another process.
      const withRadar = async (v: FeatureGroupView): Promise<FeatureGroupView> => ({ ...v, overlaps: await engine.groups.radar(v.ref) });
      if (cmd.target) {
        const found = engine.groups.get(ref(cmd.target));
        if (!found) throw new UsageError(`No feature group "${cmd.target}" in this repository. "forge group status" lists them.`);
        const v = await withRadar(found);
        io.out(cmd.json ? JSON.stringify(groupJson(v)) : formatGroupDetail(v));
        return EXIT.completed;
      }
      const views = await groupsWithRadar(engine, projectId);
      if (cmd.json) views.forEach((v) => io.out(JSON.stringify(groupJson(v))));
      else io.out(views.length === 0 ? 'No feature groups in this repository yet. Split a PRD with: forge group PRD.md' : views.map(formatGroupDetail).join('\n\n'));
      return EXIT.completed;
    }
    case 'cancel': {
      const v = await engine.groups.cancel(ref(cmd.target!));
      io.out(cmd.json ? JSON.stringify(groupJson(v)) : `Group "${v.ref.id}": cancelled (worktrees and branches of its loops are kept).`);
      return EXIT.completed;
    }
    case 'merge': {
      const g = engine.repos.featureGroups.get(projectId, cmd.target!);
      if (!g) throw new UsageError(`No feature group "${cmd.target}" in this repository. "forge group status" lists them.`);
      const result = await mergeGroupInto(engine.worktrees, g, cmd.into!);
      if (result.kind === 'refused') throw new UsageError(result.message);
      io.out(cmd.json ? JSON.stringify({ group: g.id, into: cmd.into, result: result.kind, commit: result.commit ?? null, message: result.message }) : result.message);
      return EXIT.completed;
    }
    case 'launch':
      return followGroup(engine, ref(cmd.target!), () => engine.groups.launch(ref(cmd.target!), launchOptions(cmd)), cmd, io);
    case 'resume':
      return followGroup(engine, ref(cmd.target!), () => engine.groups.resume(ref(cmd.target!), launchOptions(cmd)), cmd, io);
    case 'split': {
      const prdPath = cmd.target!;
      const prdText = await readInputFile(prdPath, 'PRD');
      const abort = new AbortController();
      const onSignal = () => {
        io.err('forge: interrupting the feature splitter (nothing is stored)…');
        abort.abort();
      };
      const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
      for (const signal of signals) process.on(signal, onSignal);
      let v: FeatureGroupView;
      try {
        v = await engine.groups.split({
          repoPath: cmd.repo,
          prdText,
          prdSource: prdPath,
          ...(cmd.name !== null ? { id: cmd.name } : {}),
          ...(cmd.splitterModel ? { model: cmd.splitterModel } : {}),
          ...(cmd.maxConcurrent !== null ? { maxConcurrent: cmd.maxConcurrent } : {}),
          ...launchOptions(cmd),
          ...(cmd.model ? { loopModel: cmd.model } : {}),
          ...(cmd.auditorModel ? { auditorModel: cmd.auditorModel } : {}),
          ...(cmd.sandbox !== null ? { sandbox: cmd.sandbox } : {}),
          signal: abort.signal,
          onProgress: (m) => (cmd.json ? undefined : io.err(`forge: ${m}`)),
        });
      } finally {
        for (const signal of signals) process.off(signal, onSignal);
      }
      const repoArg = ` --repo ${resolve(cmd.repo)}`;
      if (cmd.json) io.out(JSON.stringify(groupJson(v)));
      else {
        io.out(`group ${v.ref.id}: ${v.features.length} feature${v.features.length === 1 ? '' : 's'} from ${v.source}, at most ${v.maxConcurrent} at once, budget ${describeGroupBudget(v.budget)}`);
        for (const f of v.features) io.out(`  ${f.id}: ${f.title} — depends on ${f.dependsOn.length > 0 ? f.dependsOn.join(', ') : 'nothing'} — ${f.planPath}`);
      }
      if (!cmd.launch) {
        if (!cmd.json) io.out(`Review (and edit) the plans above, then run: forge group launch ${v.ref.id}${repoArg}`);
        return EXIT.completed;
      }
      return followGroup(engine, v.ref, () => engine.groups.launch(v.ref), cmd, io);
    }
  }
}
