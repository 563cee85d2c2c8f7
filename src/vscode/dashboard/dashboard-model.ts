/**
 * Builds the dashboard's state from the store. No VS Code API: the rows in, plain JSON out.
 */
import { describeSetup, readSetupState } from '../../core/loop/loop-setup';
import { describeAmendment, summariseChange } from '../../core/loop/plan-amendments';
import { confinementOf, describeConfinement } from '../../core/sandbox/confinement';
import { BUDGET_WARN_FRACTION, budgetUses, describeBudget, hasBudget, spendFromTotals, type LoopBudget } from '../../core/loop/budget';
import type { ForgeRepositories } from '../../core/storage/repositories';
import type { CheckRunRow } from '../../core/storage/repositories/check-runs-repository';
import type { LoopRow } from '../../core/storage/repositories/loops-repository';
import { isLoopLevelFindingPath } from '../loop-tree-model';
import { nextStepsOf } from '../../core/loop/next-steps';
import type { FeatureGroupView } from '../../core/groups/group-types';
import { buildGroupPanel, findGroup, groupOfLoop, loopOfGroup } from './group-model';
import type { CheckRunView, CheckView, DashboardState, GroupKey, LoopDetail, LoopKey, LoopListItem, LoopStatusView, NextStepsView } from './protocol';
import { readExtras } from '../../core/loop/loop-extras';

export interface DashboardModelInput {
  readonly repos: ForgeRepositories;
  readonly projectIds: readonly string[];
  readonly selected: LoopKey | null;
  readonly focusFindingId: number | null;
  readonly isSupervising: (ref: LoopKey) => boolean;
  readonly emptyMessage: string | null;
  /** The workspace's feature groups (the Group part shows the selected loop's, or `selectedGroup`). */
  readonly groups?: readonly FeatureGroupView[];
  /** A group selected in the Loop Explorer: the dashboard shows it with one of its loops. */
  readonly selectedGroup?: GroupKey | null;
}

const RECENT_TRANSITIONS = 30;
/** Runs of each check sent to the webview, newest first: the history a reader looks at. */
export const CHECK_RUNS_SHOWN = 20;

type StoredCheckSpec = { id: string; label: string; kind: string; command?: string };

/** The specs stored with the loop at start (`state.checks`), as far as they can be read. */
function storedCheckSpecs(loop: Pick<LoopRow, 'state'>): StoredCheckSpec[] {
  const checks = loop.state.checks;
  if (!Array.isArray(checks)) return [];
  return checks.filter((c): c is StoredCheckSpec => !!c && typeof c === 'object' && typeof (c as StoredCheckSpec).id === 'string' && typeof (c as StoredCheckSpec).label === 'string');
}

function checkRunView(run: CheckRunRow): CheckRunView {
  return {
    id: run.id,
    iteration: run.iteration,
    sectionIndex: run.sectionIndex,
    gate: run.gate,
    status: run.status,
    message: run.message,
    exitCode: run.exitCode,
    durationMs: run.durationMs,
    outputTail: run.status === 'passed' ? '' : run.outputTail,
    outputBytes: run.outputBytes,
    startedAt: run.startedAt,
  };
}

/**
 * The Checks part: every check of the loop (the stored specs, in their order, then any check
 * only the log knows) with its runs, newest first. `runs`: the loop's check log, oldest first.
 */
export function buildCheckViews(specs: readonly StoredCheckSpec[], runs: readonly CheckRunRow[]): CheckView[] {
  const byCheck = new Map<string, CheckRunRow[]>();
  for (const run of runs) {
    const list = byCheck.get(run.checkId) ?? [];
    list.push(run);
    byCheck.set(run.checkId, list);
  }
  const known = new Map(specs.map((s) => [s.id, { label: s.label, kind: s.kind, command: s.kind === 'command' ? (s.command ?? null) : null }]));
  for (const [checkId, list] of byCheck) {
    if (!known.has(checkId)) known.set(checkId, { label: list[0]!.label, kind: list[0]!.kind, command: list[0]!.command });
  }
  return [...known].map(([checkId, spec]) => {
    const list = byCheck.get(checkId) ?? [];
    const newest = list.slice(-CHECK_RUNS_SHOWN).reverse();
    return {
      checkId,
      ...spec,
      latestStatus: list.length > 0 ? list[list.length - 1]!.status : null,
      runs: newest.map(checkRunView),
      olderRuns: list.length - newest.length,
    };
  });
}

export function loopTitle(loop: Pick<LoopRow, 'name' | 'state'>): string {
  const title = loop.state.title;
  return typeof title === 'string' && title.trim() !== '' ? title : loop.name;
}

function listItem(loop: LoopRow, counts: Map<string, { bug: number; warning: number }>, costs: Map<string, number>): LoopListItem {
  const c = counts.get(loop.name);
  return {
    key: { projectId: loop.projectId, name: loop.name },
    title: loopTitle(loop),
    status: loop.status as LoopStatusView,
    phase: loop.phase,
    iteration: loop.iteration,
    openBugs: c?.bug ?? 0,
    openWarnings: c?.warning ?? 0,
    cost: costs.get(loop.name) ?? 0,
    updatedAt: loop.updatedAt,
  };
}

function budgetView(repos: ForgeRepositories, loop: LoopRow): Pick<LoopDetail, 'budget'> {
  const budget = (loop.state as { budget?: LoopBudget }).budget;
  if (!hasBudget(budget)) return {};
  const uses = budgetUses(budget, spendFromTotals(repos.sessionUsage.totalsByRole(loop.projectId, loop.name)));
  const fullest = uses[0]?.fraction ?? 0;
  return {
    budget: {
      text: describeBudget(budget),
      used: uses.map((u) => ({ limit: u.what, percent: Math.round(u.fraction * 100) })),
      state: fullest >= 1 - 1e-9 ? 'reached' : fullest >= BUDGET_WARN_FRACTION - 1e-9 ? 'warning' : 'ok',
    },
  };
}

export function buildLoopDetail(repos: ForgeRepositories, loop: LoopRow, supervising: boolean): LoopDetail {
  const { projectId, name } = loop;
  const large = repos.loops.getLargeFields(projectId, name);
  const transitions = repos.transitions.listByLoop(projectId, name);
  const total = repos.sessionUsage.totalsForLoop(projectId, name);
  return {
    key: { projectId, name },
    title: loopTitle(loop),
    kind: loop.kind,
    status: loop.status as LoopStatusView,
    phase: loop.phase,
    iteration: loop.iteration,
    maxIterations: loop.maxIterations,
    sectionIndex: loop.sectionIndex,
    terminationReason: loop.terminationReason,
    branch: loop.branch,
    baseBranch: loop.baseBranch,
    worktreeDir: loop.worktreeDir,
    model: loop.model,
    auditorModel: loop.auditorModel,
    ...budgetView(repos, loop),
    sandbox: loop.sandbox,
    confinement: describeConfinement(confinementOf(loop)),
    ...setupView(loop),
    supervision: supervising ? 'this-window' : loop.status === 'running' && loop.supervisorId ? 'elsewhere' : 'none',
    createdAt: loop.createdAt,
    endedAt: loop.endedAt,
    sections: repos.sectionPlans.list(projectId, name).map((s) => ({
      index: s.index,
      title: s.title,
      status: s.status,
      attempts: s.attempts,
      current: loop.sectionIndex === s.index && (loop.status === 'running' || loop.status === 'starting'),
    })),
    amendments: repos.planAmendments
      .listByLoop(projectId, name)
      .map((a) => describeAmendment(a, transitions))
      .map((a) => ({ ...a, changes: a.changes.map((c) => ({ ...c, summary: summariseChange(c) })) })),
    goal: loop.kind === 'goal' ? large.goalText : null,
    edges: repos.transitions.countsByEdge(projectId, name).map((e) => ({ from: e.fromPhase, to: e.toPhase, count: e.count })),
    recentTransitions: transitions.slice(-RECENT_TRANSITIONS).map((t) => ({
      event: t.event,
      from: t.fromPhase,
      to: t.toPhase,
      iteration: t.iteration,
      sectionIndex: t.sectionIndex,
      status: t.status,
      reason: t.reason,
      at: t.at,
    })),
    findings: repos.reviewFindings.listByLoop(projectId, name).map((f) => ({
      id: f.id,
      file: f.file,
      line: f.line,
      severity: f.severity,
      status: f.status,
      description: f.description,
      scenario: f.scenario,
      sectionIndex: f.sectionIndex,
      recurrenceCount: f.recurrenceCount,
      pseudo: isLoopLevelFindingPath(f.file),
    })),
    checks: buildCheckViews(storedCheckSpecs(loop), repos.checkRuns.listByLoop(projectId, name)),
    shellInterventions: repos.shellInterventions.listByLoop(projectId, name).map((i) => ({
      id: i.id,
      action: i.action,
      command: i.command,
      elapsedMs: i.elapsedMs,
      thresholdMs: i.thresholdMs,
      processes: i.processes,
      at: i.at,
    })),
    sessions: repos.sessionUsage.listByLoop(projectId, name).map((s) => ({
      sessionId: s.sessionId,
      role: s.role,
      model: s.model,
      updatedAt: s.updatedAt,
      inputTokens: s.inputTokens,
      outputTokens: s.outputTokens,
      reasoningTokens: s.reasoningTokens,
      cacheReadTokens: s.cacheReadTokens,
      cacheWriteTokens: s.cacheWriteTokens,
      cost: s.cost,
      messages: s.messages,
    })),
    usageTotal: total,
    usageByModel: repos.sessionUsage.totalsByModel(projectId, name),
    usageByRole: repos.sessionUsage.totalsByRole(projectId, name),
    completionSummary: large.completionSummary,
    lastAuditSummary: large.lastAuditSummary,
    next: nextStepsView(repos, loop),
  };
}

/** What the loop waits for and the steps that fit (a completed loop accepted since it ended waits no more). */
function nextStepsView(repos: ForgeRepositories, loop: LoopRow): NextStepsView {
  const lastAccept = repos.accepts.listByLoop(loop.projectId, loop.name).at(-1);
  const budget = readExtras(loop).budget;
  const next = nextStepsOf({
    name: loop.name,
    status: loop.status,
    reason: loop.terminationReason,
    branch: loop.branch,
    budget: budget ? { money: budget.money, tokens: budget.tokens } : undefined,
    acceptedAfterEnd: lastAccept !== undefined && loop.endedAt !== null && lastAccept.at >= loop.endedAt,
  });
  return { wait: next.wait, waiting: next.waiting, steps: next.steps.map((s) => ({ id: s.id, cli: s.cli })) };
}

export function buildDashboardState(input: DashboardModelInput): DashboardState {
  const loops: LoopListItem[] = [];
  const rows = new Map<string, LoopRow>();
  for (const projectId of input.projectIds) {
    const counts = new Map(input.repos.reviewFindings.countOpenByLoop(projectId).map((c) => [c.loopName, c]));
    const costs = new Map(input.repos.sessionUsage.totalsByLoop(projectId).map((u) => [u.loopName, u.cost]));
    for (const loop of input.repos.loops.list(projectId)) {
      rows.set(`${projectId}/${loop.name}`, loop);
      loops.push(listItem(loop, counts, costs));
    }
  }
  const groups = input.groups ?? [];
  const chosenGroup = input.selectedGroup ? findGroup(groups, input.selectedGroup) : undefined;
  // A selected group shows one of its loops (a running one first); none started yet: the group alone.
  const wanted = chosenGroup ? (input.selected && groupOfLoop([chosenGroup], input.selected) ? input.selected : loopOfGroup(chosenGroup)) : input.selected;
  const wantedRow = wanted ? rows.get(`${wanted.projectId}/${wanted.name}`) : undefined;
  const selectedRow = chosenGroup
    ? wantedRow
    : // Nothing (or a loop that no longer exists) selected: the first loop, running ones come first.
      (wantedRow ?? (loops[0] ? rows.get(`${loops[0].key.projectId}/${loops[0].key.name}`) : undefined));
  const selected = selectedRow ? { projectId: selectedRow.projectId, name: selectedRow.name } : null;
  const group = chosenGroup ?? (selected ? groupOfLoop(groups, selected) : undefined);
  return {
    loops,
    selected,
    detail: selectedRow && selected ? buildLoopDetail(input.repos, selectedRow, input.isSupervising(selected)) : null,
    group: group ? buildGroupPanel(group) : null,
    focusFindingId: input.focusFindingId,
    emptyMessage: loops.length === 0 && !group ? input.emptyMessage : null,
  };
}

/** The loop's worktree setup in one line, when it has one. */
function setupView(loop: LoopRow): { setup?: string } {
  const s = readSetupState(loop);
  return s ? { setup: describeSetup(s) } : {};
}
