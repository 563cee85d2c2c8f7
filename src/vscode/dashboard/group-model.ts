/**
 * The dashboard's Group part from a feature group's view (issue 14 part 3, issue 16's group
 * budget): which group the dashboard shows, and that group as plain JSON for the webview. The
 * wording of spend and progress is the Loop Explorer's (group-budget-text.ts), so is that of the
 * merge queue (group-merge-text.ts).
 */
import * as vscode from 'vscode';
import type { FeatureGroupView } from '../../core/groups/group-types';
import { groupBudgetState, groupBudgetUses, groupProgressText, groupSpendText, groupStatusText } from '../group-budget-text';
import { featureMergeText, groupIntegrationText, groupMergeSummary } from '../group-merge-text';
import { featureLoopName, featureStatusText } from '../group-tree-model';
import type { GroupAction, GroupKey, GroupPanelView, LoopKey } from './protocol';

const sameGroup = (a: GroupKey, b: GroupKey) => a.projectId === b.projectId && a.id === b.id;

/** The group a loop belongs to (its feature's loop), if any. */
export function groupOfLoop(groups: readonly FeatureGroupView[], loop: LoopKey): FeatureGroupView | undefined {
  return groups.find((g) => g.ref.projectId === loop.projectId && g.features.some((f) => featureLoopName(g, f) === loop.name && f.loopName !== null));
}

export function findGroup(groups: readonly FeatureGroupView[], key: GroupKey): FeatureGroupView | undefined {
  return groups.find((g) => sameGroup(g.ref, key));
}

/** The loop to show with a group selected: a running feature's, else the latest started one's (null: none started yet). */
export function loopOfGroup(group: FeatureGroupView): LoopKey | null {
  const started = group.features.filter((f) => f.loopName !== null);
  const pick = started.find((f) => f.status === 'running' || f.status === 'paused') ?? started[started.length - 1];
  return pick?.loopName ? { projectId: group.ref.projectId, name: pick.loopName } : null;
}

function actionsOf(group: FeatureGroupView): GroupAction[] {
  switch (group.status) {
    case 'review':
      return ['launch', 'cancel'];
    case 'running':
      return ['cancel'];
    case 'paused':
      return ['resume', 'cancel'];
    default:
      return [];
  }
}

export function buildGroupPanel(group: FeatureGroupView): GroupPanelView {
  const budgetState = groupBudgetState(group.budget, group.spend);
  const spendText = groupSpendText(group.budget, group.spend);
  const fullest = groupBudgetUses(group.budget, group.spend)[0];
  const budgetNote =
    group.status === 'paused' && group.pauseReason === 'budget_reached'
      ? vscode.l10n.t('Paused: the group budget is spent ({0}). Nothing new starts; resume the group with a higher budget to continue.', spendText)
      : budgetState === 'reached'
        ? vscode.l10n.t('The group budget is spent ({0}): the group pauses at its loops\' next hand-over.', spendText)
        : budgetState === 'warning' && fullest
          ? vscode.l10n.t('{0} % of the group budget used ({1}): at 100 % the group pauses.', fullest.percent, spendText)
          : null;
  return {
    key: { projectId: group.ref.projectId, id: group.ref.id },
    title: group.title,
    status: group.status,
    statusText: groupStatusText(group),
    progressText: groupProgressText(group),
    done: group.features.filter((f) => f.status === 'completed').length,
    total: group.features.length,
    mergeText: groupMergeSummary(group),
    integrationText: group.status === 'review' ? null : groupIntegrationText(group),
    spendText,
    budgetState,
    budgetNote,
    maxConcurrent: group.maxConcurrent,
    source: group.source,
    reviewDir: group.reviewDir,
    features: group.features.map((f) => ({
      id: f.id,
      title: f.title,
      status: f.status,
      statusText: featureStatusText(f.status),
      dependsOn: f.dependsOn,
      loop: f.loopName ? { projectId: group.ref.projectId, name: f.loopName } : null,
      error: f.error,
      mergeText: f.merge ? featureMergeText(f.merge) : null,
      mergeState: f.merge?.state ?? null,
    })),
    actions: actionsOf(group),
    overlaps: group.overlaps.map((o) => ({ file: o.file, features: o.features, text: vscode.l10n.t('{0} — changed by {1}', o.file, o.features.join(', ')) })),
    overlapNote:
      group.overlaps.length === 0
        ? null
        : vscode.l10n.t('Overlapping files: {0} file(s) changed by more than one running loop. Their changes may conflict when they are merged.', group.overlaps.length),
  };
}
