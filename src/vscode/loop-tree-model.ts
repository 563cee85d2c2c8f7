import * as vscode from 'vscode';
/**
 * What the Loop Explorer shows, as plain data: a pure function of the loops' rows and their
 * aggregates, so it can be tested and benchmarked without VS Code. `loop-explorer.ts` turns
 * these nodes into TreeItems.
 */
import { confinementOf, describeConfinement } from '../core/sandbox/confinement';
import type { LoopRow, StoredLoopStatus } from '../core/storage/repositories/loops-repository';
import type { CheckRunRow } from '../core/storage/repositories/check-runs-repository';
import type { FindingSeverity } from '../core/storage/repositories/review-findings-repository';
import type { FeatureGroupNode, FeatureNode, OverlapNode } from './group-tree-model';
import { nextStepLabel, nextStepsOfSummary, waitText } from './next-step-labels';

/** Findings about the goal or plan itself (FINDING_PSEUDO_PATHS of src/core/loop/tool-backend.ts). */
export const PSEUDO_FINDING_PATHS: readonly string[] = ['GOAL', 'PLAN'];

export const isPseudoFindingPath = (file: string): boolean => PSEUDO_FINDING_PATHS.includes(file.trim());

/**
 * Findings shown on the loop's item rather than on a file: about the goal or plan, or with no
 * file at all (a failed verification check whose output names no file of the worktree).
 */
export const LOOP_LEVEL_FINDING_PATHS: readonly string[] = [...PSEUDO_FINDING_PATHS, ''];

export const isLoopLevelFindingPath = (file: string): boolean => file.trim() === '' || isPseudoFindingPath(file);

/** What a loop-level finding is about, as a label: GOAL, PLAN, or "Check" for a fileless one. */
export const loopLevelFindingLabel = (file: string): string => (file.trim() === '' ? vscode.l10n.t('Check') : file.trim());

const firstLine = (text: string): string => text.split('\n', 1)[0]!.trim();

export type LoopTreeLoop = Pick<
  LoopRow,
  | 'projectId'
  | 'name'
  | 'status'
  | 'phase'
  | 'kind'
  | 'iteration'
  | 'maxIterations'
  | 'sectionIndex'
  | 'worktreeDir'
  | 'branch'
  | 'terminationReason'
  | 'model'
  | 'auditorModel'
  | 'sandbox'
  | 'supervisorId'
  | 'leaseExpiresAt'
  | 'updatedAt'
  | 'endedAt'
  | 'state'
>;

export interface LoopSummary {
  readonly loop: LoopTreeLoop;
  readonly openFindings: { readonly bug: number; readonly warning: number };
  readonly usage: { readonly sessions: number; readonly cost: number; readonly inputTokens: number; readonly outputTokens: number } | undefined;
  /** Open findings about GOAL / PLAN or with no file (`isLoopLevelFindingPath`): shown on the loop's item, not as diagnostics. */
  readonly pseudoFindings: readonly { readonly id: number; readonly file: string; readonly severity: FindingSeverity; readonly description: string }[];
  /** Whether this window's engine drives the loop. */
  readonly supervisedHere: boolean;
  /** The loop's verification checks and where each stands (absent: the loop has none). */
  readonly checks?: LoopChecksSummary;
  /** When the loop's work was last accepted (absent: never). */
  readonly acceptedAt?: number;
}

/** Where a loop's verification checks stand, from the latest run of each. */
export interface LoopChecksSummary {
  /** Checks the loop has (run or not). */
  readonly total: number;
  readonly passed: number;
  /** Labels of the checks whose latest run did not pass, in the order they first ran. */
  readonly failing: readonly string[];
  /** Checks that never ran yet. */
  readonly notRun: number;
}

/** Checks stored with a loop at start (`state.checks`), or 0 (loops started before checks existed). */
export function checkCountOf(loop: Pick<LoopRow, 'state'>): number {
  const checks = loop.state.checks;
  return Array.isArray(checks) ? checks.length : 0;
}

/** `latest`: the latest run of each check (`checkRuns.latestByCheck`); undefined when the loop has no check. */
export function summariseLoopChecks(checkCount: number, latest: readonly Pick<CheckRunRow, 'label' | 'status'>[]): LoopChecksSummary | undefined {
  const total = Math.max(checkCount, latest.length);
  if (total === 0) return undefined;
  const passed = latest.filter((r) => r.status === 'passed').length;
  // A cancelled run says nothing about the work: it counts as not run, not as failing.
  const failing = latest.filter((r) => r.status !== 'passed' && r.status !== 'cancelled').map((r) => r.label);
  return { total, passed, failing, notRun: total - passed - failing.length };
}

/** "2/3 passing", with what is failing or not run yet. */
export function checksText(checks: LoopChecksSummary): string {
  const parts = [vscode.l10n.t('{0}/{1} passing', checks.passed, checks.total)];
  if (checks.failing.length > 0) parts.push(vscode.l10n.t('{0} failing', checks.failing.length));
  if (checks.notRun > 0) parts.push(vscode.l10n.t('{0} not run yet', checks.notRun));
  return parts.join(', ');
}

/** `pass` when every check passed, `error` when one fails, else an empty circle (not run yet). */
export function checksIcon(checks: LoopChecksSummary): TreeIconSpec {
  if (checks.failing.length > 0) return { id: 'error', color: 'testing.iconFailed' };
  if (checks.passed === checks.total) return { id: 'pass', color: 'testing.iconPassed' };
  return { id: 'circle-large-outline' };
}

export interface TreeIconSpec {
  /** ThemeIcon id, e.g. `sync~spin`. */
  readonly id: string;
  /** ThemeColor id, e.g. `testing.iconPassed`. */
  readonly color?: string;
}

export interface NodeBase {
  readonly id: string;
  readonly label: string;
  readonly description?: string;
  readonly tooltip?: string;
  readonly icon?: TreeIconSpec;
  readonly contextValue?: string;
}

export type LoopGroup = 'running' | 'recent';

export interface LoopGroupNode extends NodeBase {
  readonly kind: 'group';
  readonly group: LoopGroup;
  readonly loops: readonly LoopNode[];
}

export interface LoopNode extends NodeBase {
  readonly kind: 'loop';
  readonly projectId: string;
  readonly name: string;
  readonly summary: LoopSummary;
  /** Lines its hover adds after the loop's own (a group's feature loop: where it stands in the merge queue). */
  readonly tooltipNotes?: readonly string[];
}

export interface LoopDetailNode extends NodeBase {
  readonly kind: 'detail';
  /** A detail with children read on expand: the loop's sections. */
  readonly sectionsOf?: { readonly projectId: string; readonly name: string };
}

/** A section as the Loop Explorer lists it. */
export interface SectionListEntry {
  readonly index: number;
  readonly title: string;
  readonly status: 'pending' | 'in_progress' | 'done';
}

const sectionStatusText = (status: SectionListEntry['status']): string =>
  status === 'pending' ? vscode.l10n.t('pending') : status === 'in_progress' ? vscode.l10n.t('in progress') : vscode.l10n.t('done');
const SECTION_STATUS_ICON: Record<SectionListEntry['status'], TreeIconSpec> = {
  pending: { id: 'circle-large-outline' },
  in_progress: { id: 'debug-start', color: 'charts.blue' },
  done: { id: 'pass', color: 'testing.iconPassed' },
};

/**
 * The children of a loop's Sections detail: one per section with its status, and an
 * "amended" badge (with the auditor's rationales in the tooltip) where plan_adjust changed it.
 */
export function buildSectionNodes(
  parentId: string,
  sections: readonly SectionListEntry[],
  amendments: ReadonlyMap<number, readonly string[]>,
): LoopDetailNode[] {
  return sections.map((section) => {
    const rationales = amendments.get(section.index) ?? [];
    const badge = rationales.length === 0 ? '' : rationales.length === 1 ? vscode.l10n.t(' · amended') : vscode.l10n.t(' · amended ×{0}', rationales.length);
    const tooltip = [vscode.l10n.t('Section {0}: {1} ({2})', section.index + 1, section.title, sectionStatusText(section.status))];
    if (rationales.length > 0) tooltip.push(vscode.l10n.t('Amended by the auditor:'), ...rationales.map((r) => `- ${r}`));
    return {
      kind: 'detail',
      id: `${parentId}/${section.index}`,
      label: `${section.index + 1}. ${section.title}`,
      description: `${sectionStatusText(section.status)}${badge}`,
      tooltip: tooltip.join('\n'),
      icon: SECTION_STATUS_ICON[section.status],
      ...(rationales.length > 0 ? { contextValue: 'forge.section.amended' } : {}),
    };
  });
}

export type LoopTreeNode = LoopGroupNode | LoopNode | LoopDetailNode | FeatureGroupNode | FeatureNode | OverlapNode;

/** What the Loop Explorer's root shows: feature groups first, then the Running / Recent sections. */
export type LoopRootNode = FeatureGroupNode | LoopGroupNode;

/** `contextValue`s the manifest's menus match. */
export const LOOP_CONTEXT = {
  running: 'forge.loop.running',
  restartable: 'forge.loop.restartable',
  completed: 'forge.loop.completed',
} as const;

const isLive = (status: StoredLoopStatus) => status === 'running' || status === 'starting';

export function loopContextValue(status: StoredLoopStatus): string {
  if (isLive(status)) return LOOP_CONTEXT.running;
  return status === 'completed' ? LOOP_CONTEXT.completed : LOOP_CONTEXT.restartable;
}

export function loopStatusIcon(status: StoredLoopStatus): TreeIconSpec {
  switch (status) {
    case 'running':
      return { id: 'sync~spin', color: 'charts.blue' };
    case 'starting':
      return { id: 'loading~spin' };
    case 'completed':
      return { id: 'pass-filled', color: 'testing.iconPassed' };
    case 'cancelled':
      return { id: 'circle-slash', color: 'disabledForeground' };
    case 'stalled':
      return { id: 'watch', color: 'list.warningForeground' };
    case 'errored':
      return { id: 'error', color: 'list.errorForeground' };
    case 'paused':
      return { id: 'debug-pause', color: 'list.warningForeground' };
    case 'setup_failed':
      return { id: 'tools', color: 'list.errorForeground' };
    case 'awaiting_review':
      return { id: 'comment-unresolved', color: 'list.warningForeground' };
  }
}

function pseudoFindingTooltip(severity: FindingSeverity, file: string, description: string): string {
  const about = file === 'GOAL' ? vscode.l10n.t('the goal') : file === 'PLAN' ? vscode.l10n.t('the plan') : vscode.l10n.t('the loop');
  return severity === 'bug' ? vscode.l10n.t('Bug about {0}: {1}', about, description) : vscode.l10n.t('Warning about {0}: {1}', about, description);
}

/** A loop phase as the user reads it; an unknown phase as it is stored. */
export function phaseLabel(phase: string): string {
  switch (phase) {
    case 'coding':
      return vscode.l10n.t('coding');
    case 'auditing':
      return vscode.l10n.t('auditing');
    case 'final_auditing':
      return vscode.l10n.t('final audit');
    case 'final_audit_fix':
      return vscode.l10n.t('final-audit fix');
    case 'post_action':
      return vscode.l10n.t('post action');
    default:
      return phase;
  }
}

export function formatCost(cost: number): string {
  if (cost <= 0) return '$0';
  return cost >= 1 ? `$${cost.toFixed(2)}` : `$${cost.toFixed(4)}`;
}

export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1_000_000).toFixed(2)}M`;
}


/** Total sections of a loop as the runtime stores it (`state.loopState.sectionCount`), or 0. */
export function sectionCountOf(loop: Pick<LoopRow, 'state'>): number {
  const loopState = loop.state.loopState as { sectionCount?: unknown } | undefined;
  const count = loopState?.sectionCount;
  return typeof count === 'number' && Number.isFinite(count) ? count : 0;
}

/** "3/15" (or "3/∞" without a cap). */
function iterationFraction(loop: LoopTreeLoop): string {
  return `${loop.iteration}/${loop.maxIterations > 0 ? loop.maxIterations : '∞'}`;
}

/** "2/4" for the second of four plan sections, undefined for a loop without sections. */
function sectionFraction(loop: LoopTreeLoop): string | undefined {
  const count = sectionCountOf(loop);
  if (count === 0 || loop.sectionIndex === null) return undefined;
  return `${Math.min(loop.sectionIndex + 1, count)}/${count}`;
}

function findingsText(open: LoopSummary['openFindings']): string | undefined {
  if (open.bug === 0 && open.warning === 0) return undefined;
  const parts: string[] = [];
  if (open.bug > 0) parts.push(open.bug === 1 ? vscode.l10n.t('1 bug') : vscode.l10n.t('{0} bugs', open.bug));
  if (open.warning > 0) parts.push(open.warning === 1 ? vscode.l10n.t('1 warning') : vscode.l10n.t('{0} warnings', open.warning));
  return parts.join(', ');
}

function statusText(summary: LoopSummary): string {
  const { loop } = summary;
  if (loop.status === 'starting') return vscode.l10n.t('starting');
  if (loop.status === 'running') {
    return summary.supervisedHere ? vscode.l10n.t('running in this window') : loop.supervisorId ? vscode.l10n.t('running in another window or process') : vscode.l10n.t('running (no live supervisor: restart with force)');
  }
  const reason = loop.terminationReason && loop.terminationReason !== loop.status ? ` (${loop.terminationReason})` : '';
  return `${loop.status}${reason}`;
}

/**
 * `inGroup`: a feature loop shown under its group, which tells and resumes it (group-notifications.ts):
 * no "waits for you" mark of its own.
 */
export function buildLoopNode(summary: LoopSummary, options: { inGroup?: boolean } = {}): LoopNode {
  const { loop } = summary;
  const live = isLive(loop.status);
  const parts: string[] = [];
  parts.push(live ? (phaseLabel(loop.phase)) : loop.status === 'completed' ? vscode.l10n.t('completed') : (loop.terminationReason ?? loop.status));
  // A loop that waits for the user is marked, with the steps that fit (issue 29 item 7).
  const next = nextStepsOfSummary(summary);
  if (next.waiting && !options.inGroup) parts.push(vscode.l10n.t('● waits for you: {0}', next.steps.map((s) => nextStepLabel(s.id)).join(', ')));
  parts.push(vscode.l10n.t('iter {0}', loop.iteration));
  const section = sectionFraction(loop);
  if (section) parts.push(`§${section}`);
  const findings = findingsText(summary.openFindings);
  if (findings) parts.push(findings);
  if (summary.checks) parts.push(vscode.l10n.t('{0} checks {1}/{2}', summary.checks.failing.length > 0 ? '✗' : summary.checks.passed === summary.checks.total ? '✓' : '○', summary.checks.passed, summary.checks.total));
  if (summary.pseudoFindings.length > 0) parts.push(`⚑ ${[...new Set(summary.pseudoFindings.map((f) => loopLevelFindingLabel(f.file)))].join('/')}`);
  if (summary.usage && summary.usage.cost > 0) parts.push(formatCost(summary.usage.cost));

  return {
    kind: 'loop',
    id: `loop:${loop.projectId}/${loop.name}`,
    projectId: loop.projectId,
    name: loop.name,
    label: loop.name,
    description: parts.join(' · '),
    icon: loopStatusIcon(loop.status),
    contextValue: loopContextValue(loop.status),
    summary,
  };
}

/** A loop node's hover text: the loop's own, then the node's notes (built on demand like buildLoopTooltip). */
export function loopNodeTooltip(node: Pick<LoopNode, 'summary' | 'tooltipNotes'>): string {
  const notes = node.tooltipNotes ?? [];
  return notes.length > 0 ? `${buildLoopTooltip(node.summary)}\n${notes.join('\n')}` : buildLoopTooltip(node.summary);
}

/** The loop item's hover text; built when VS Code asks for it (resolveTreeItem), not for every loop. */
export function buildLoopTooltip(summary: LoopSummary): string {
  const { loop } = summary;
  const live = isLive(loop.status);
  const section = sectionFraction(loop);
  const findings = findingsText(summary.openFindings);
  const tooltip: string[] = [vscode.l10n.t('{0} — {1} loop', loop.name, loop.kind), vscode.l10n.t('Status: {0}', statusText(summary))];
  if (live) tooltip.push(vscode.l10n.t('Phase: {0}', phaseLabel(loop.phase)));
  const next = nextStepsOfSummary(summary);
  if (next.waiting) tooltip.push(vscode.l10n.t('Waits for you: {0}. Next: {1}', waitText(next.wait), next.steps.map((s) => nextStepLabel(s.id)).join(', ')));
  tooltip.push(vscode.l10n.t('Iteration {0}', iterationFraction(loop)));
  if (section) tooltip.push(vscode.l10n.t('Section {0}', section));
  tooltip.push(vscode.l10n.t('Open findings: {0}', findings ?? vscode.l10n.t('none')));
  if (summary.checks) {
    tooltip.push(vscode.l10n.t('Checks: {0}', checksText(summary.checks)));
    for (const label of summary.checks.failing) tooltip.push(vscode.l10n.t('  failing: {0}', label));
  }
  for (const f of summary.pseudoFindings) tooltip.push(vscode.l10n.t('  {0} on {1}: {2}', f.severity, loopLevelFindingLabel(f.file), f.description));
  if (summary.usage) {
    tooltip.push(
      vscode.l10n.t('Sessions: {0} · tokens {1} in / {2} out · {3}', summary.usage.sessions, formatTokens(summary.usage.inputTokens), formatTokens(summary.usage.outputTokens), formatCost(summary.usage.cost)),
    );
  }
  if (loop.branch) tooltip.push(vscode.l10n.t('Branch: {0}', loop.branch));
  tooltip.push(vscode.l10n.t('Confinement: {0}', describeConfinement(confinementOf(loop))));
  return tooltip.join('\n');
}

/** The loop's children: one line per fact. */
export function buildLoopDetails(node: LoopNode): LoopDetailNode[] {
  const { summary } = node;
  const { loop } = summary;
  const id = (suffix: string) => `${node.id}#${suffix}`;
  const details: LoopDetailNode[] = [
    { kind: 'detail', id: id('status'), label: vscode.l10n.t('Status'), description: statusText(summary), icon: loopStatusIcon(loop.status) },
  ];
  if (isLive(loop.status)) {
    details.push({ kind: 'detail', id: id('phase'), label: vscode.l10n.t('Phase'), description: phaseLabel(loop.phase), icon: { id: 'symbol-event' } });
  }
  details.push({ kind: 'detail', id: id('iteration'), label: vscode.l10n.t('Iteration'), description: iterationFraction(loop), icon: { id: 'history' } });
  const section = sectionFraction(loop);
  if (section) details.push({ kind: 'detail', id: id('section'), label: vscode.l10n.t('Section'), description: section, icon: { id: 'list-ordered' } });
  const sectionCount = sectionCountOf(loop);
  if (sectionCount > 0) {
    details.push({
      kind: 'detail',
      id: id('sections'),
      label: vscode.l10n.t('Sections'),
      description: String(sectionCount),
      tooltip: vscode.l10n.t('The plan\'s sections, with those the auditor amended'),
      icon: { id: 'list-tree' },
      sectionsOf: { projectId: loop.projectId, name: loop.name },
    });
  }
  const findings = findingsText(summary.openFindings);
  details.push({
    kind: 'detail',
    id: id('findings'),
    label: vscode.l10n.t('Open findings'),
    description: findings ?? vscode.l10n.t('none'),
    icon: summary.openFindings.bug > 0 ? { id: 'bug', color: 'list.errorForeground' } : summary.openFindings.warning > 0 ? { id: 'warning', color: 'list.warningForeground' } : { id: 'check' },
  });
  if (summary.checks) {
    const failing = summary.checks.failing;
    details.push({
      kind: 'detail',
      id: id('checks'),
      label: vscode.l10n.t('Checks'),
      description: checksText(summary.checks),
      tooltip: vscode.l10n.t('Verification checks Forge runs itself before the loop may complete: {0}{1}', checksText(summary.checks), failing.length > 0 ? `\n${vscode.l10n.t('Failing:')}\n${failing.map((l) => `- ${l}`).join('\n')}` : ''),
      icon: checksIcon(summary.checks),
    });
  }
  for (const f of summary.pseudoFindings) {
    details.push({
      kind: 'detail',
      id: id(`pseudo-${f.id}`),
      label: loopLevelFindingLabel(f.file),
      description: firstLine(f.description),
      tooltip: pseudoFindingTooltip(f.severity, f.file, f.description),
      icon: f.severity === 'bug' ? { id: 'bug', color: 'list.errorForeground' } : { id: 'warning', color: 'list.warningForeground' },
    });
  }
  const usage = summary.usage;
  details.push({ kind: 'detail', id: id('sessions'), label: vscode.l10n.t('Sessions'), description: String(usage?.sessions ?? 0), icon: { id: 'comment-discussion' } });
  details.push({
    kind: 'detail',
    id: id('usage'),
    label: vscode.l10n.t('Usage'),
    description: usage ? vscode.l10n.t('{0} in · {1} out · {2}', formatTokens(usage.inputTokens), formatTokens(usage.outputTokens), formatCost(usage.cost)) : vscode.l10n.t('none yet'),
    icon: { id: 'credit-card' },
  });
  if (loop.model) details.push({ kind: 'detail', id: id('model'), label: vscode.l10n.t('Model'), description: loop.auditorModel && loop.auditorModel !== loop.model ? vscode.l10n.t('{0} (auditor {1})', loop.model, loop.auditorModel) : loop.model, icon: { id: 'hubot' } });
  if (loop.branch) details.push({ kind: 'detail', id: id('branch'), label: vscode.l10n.t('Branch'), description: loop.branch, icon: { id: 'git-branch' } });
  const confinement = confinementOf(loop);
  details.push({
    kind: 'detail',
    id: id('confinement'),
    label: vscode.l10n.t('Confinement'),
    description: confinement.sandboxed ? vscode.l10n.t('sandboxed ({0})', confinement.driver) : vscode.l10n.t('UNCONFINED'),
    tooltip: describeConfinement(confinement) + (confinement.sandboxed ? '' : ` — ${confinement.detail}`),
    icon: { id: confinement.sandboxed ? 'vm' : 'warning' },
  });
  if (loop.worktreeDir) details.push({ kind: 'detail', id: id('worktree'), label: vscode.l10n.t('Worktree'), description: loop.worktreeDir, tooltip: loop.worktreeDir, icon: { id: 'folder' } });
  return details;
}

/**
 * Running loops first (most recently active first), then recent ones; empty groups are left out.
 * Loops in `exclude` (`projectId/name`: the feature groups' loops, shown under their group) are left out.
 */
export function buildLoopTree(summaries: readonly LoopSummary[], exclude: ReadonlySet<string> = new Set()): LoopGroupNode[] {
  const running: LoopNode[] = [];
  const recent: LoopNode[] = [];
  const sorted = [...summaries].filter((s) => !exclude.has(`${s.loop.projectId}/${s.loop.name}`)).sort(
    (a, b) => (b.loop.endedAt ?? b.loop.updatedAt) - (a.loop.endedAt ?? a.loop.updatedAt) || a.loop.name.localeCompare(b.loop.name),
  );
  for (const summary of sorted) (isLive(summary.loop.status) ? running : recent).push(buildLoopNode(summary));
  const groups: LoopGroupNode[] = [];
  if (running.length > 0) {
    groups.push({ kind: 'group', group: 'running', id: 'group:running', label: vscode.l10n.t('Running'), description: String(running.length), icon: { id: 'play-circle' }, loops: running });
  }
  if (recent.length > 0) {
    groups.push({ kind: 'group', group: 'recent', id: 'group:recent', label: vscode.l10n.t('Recent'), description: String(recent.length), icon: { id: 'history' }, loops: recent });
  }
  return groups;
}
