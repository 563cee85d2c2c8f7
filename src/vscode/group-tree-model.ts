import * as vscode from 'vscode';
/**
 * Feature groups in the Loop Explorer (issue 14 part 3), as plain data like loop-tree-model.ts:
 * a group is a parent node ("<id> — <title>", its status, "2/3 done", spend vs budget), its
 * feature loops its children; a feature not started yet is a pending child with its
 * dependencies. The group's loops are shown only there, never again under Running / Recent.
 */
import type { FeatureGroupView, GroupFeatureView } from '../core/groups/group-types';
import type { FileOverlap } from '../core/groups/overlap';
import type { FeatureGroupStatus, FeatureStatus } from '../core/vocabulary/group-vocabulary';
import { groupBudgetState, groupProgressText, groupSpendText, groupStatusText } from './group-budget-text';
import { featureMergeDetail, featureMergeText, groupIntegrationText, groupMergeProgressText, groupMergeSummary } from './group-merge-text';
import { buildLoopNode, buildLoopTree, type LoopNode, type LoopRootNode, type LoopSummary, type NodeBase, type TreeIconSpec } from './loop-tree-model';

export interface FeatureGroupNode extends NodeBase {
  readonly kind: 'featureGroup';
  readonly projectId: string;
  readonly groupId: string;
  readonly group: FeatureGroupView;
  readonly children: readonly (LoopNode | FeatureNode | OverlapNode)[];
}

/** The conflict radar: a file two or more of the group's live loops changed (after its features). */
export interface OverlapNode extends NodeBase {
  readonly kind: 'overlap';
  readonly projectId: string;
  readonly groupId: string;
  readonly file: string;
}

/** A feature without a loop (yet): pending, blocked, or one whose loop this window cannot read. */
export interface FeatureNode extends NodeBase {
  readonly kind: 'feature';
  readonly projectId: string;
  readonly groupId: string;
  readonly featureId: string;
}

/** `contextValue`s of group nodes, which the manifest's menus match (Launch / Resume / Cancel). */
export const GROUP_CONTEXT: Record<FeatureGroupStatus, string> = {
  review: 'forge.group.review',
  running: 'forge.group.running',
  paused: 'forge.group.paused',
  completed: 'forge.group.ended',
  failed: 'forge.group.ended',
  cancelled: 'forge.group.ended',
};

export function groupStatusIcon(status: FeatureGroupStatus): TreeIconSpec {
  switch (status) {
    case 'review':
      return { id: 'checklist', color: 'charts.yellow' };
    case 'running':
      return { id: 'sync~spin', color: 'charts.blue' };
    case 'paused':
      return { id: 'debug-pause', color: 'list.warningForeground' };
    case 'completed':
      return { id: 'pass-filled', color: 'testing.iconPassed' };
    case 'failed':
      return { id: 'error', color: 'list.errorForeground' };
    case 'cancelled':
      return { id: 'circle-slash', color: 'disabledForeground' };
  }
}

export function featureStatusText(status: FeatureStatus): string {
  switch (status) {
    case 'pending':
      return vscode.l10n.t('pending');
    case 'running':
      return vscode.l10n.t('running');
    case 'paused':
      return vscode.l10n.t('paused');
    case 'completed':
      return vscode.l10n.t('completed');
    case 'failed':
      return vscode.l10n.t('failed');
    case 'blocked':
      return vscode.l10n.t('blocked');
    case 'cancelled':
      return vscode.l10n.t('cancelled');
  }
}

function featureIcon(status: FeatureStatus): TreeIconSpec {
  switch (status) {
    case 'pending':
      return { id: 'circle-large-outline' };
    case 'running':
      return { id: 'sync~spin', color: 'charts.blue' };
    case 'paused':
      return { id: 'debug-pause', color: 'list.warningForeground' };
    case 'completed':
      return { id: 'pass-filled', color: 'testing.iconPassed' };
    case 'failed':
      return { id: 'error', color: 'list.errorForeground' };
    case 'blocked':
      return { id: 'lock', color: 'list.errorForeground' };
    case 'cancelled':
      return { id: 'circle-slash', color: 'disabledForeground' };
  }
}

/** The loop name a feature runs under (`<group>-<feature>`), also before the store names it. */
export const featureLoopName = (group: Pick<FeatureGroupView, 'ref'>, feature: Pick<GroupFeatureView, 'id' | 'loopName'>): string => feature.loopName ?? `${group.ref.id}-${feature.id}`;

/** `projectId/name` of every loop that belongs to one of `groups` (left out of Running / Recent). */
export function groupLoopKeys(groups: readonly FeatureGroupView[]): Set<string> {
  const keys = new Set<string>();
  for (const group of groups) for (const feature of group.features) keys.add(`${group.ref.projectId}/${featureLoopName(group, feature)}`);
  return keys;
}

export function buildFeatureNode(group: FeatureGroupView, feature: GroupFeatureView): FeatureNode {
  const parts = [featureStatusText(feature.status)];
  if (feature.merge) parts.push(featureMergeText(feature.merge));
  if (feature.dependsOn.length > 0) parts.push(vscode.l10n.t('after {0}', feature.dependsOn.join(', ')));
  if (feature.error) parts.push(feature.error);
  const tooltip = [vscode.l10n.t('Feature {0} of group {1}: {2}', feature.id, group.ref.id, feature.title), vscode.l10n.t('Status: {0}', featureStatusText(feature.status))];
  tooltip.push(feature.dependsOn.length > 0 ? vscode.l10n.t('Depends on: {0}', feature.dependsOn.join(', ')) : vscode.l10n.t('Depends on nothing'));
  if (feature.error) tooltip.push(feature.error);
  if (feature.merge) tooltip.push(...featureMergeDetail(group, feature.merge));
  tooltip.push(vscode.l10n.t('Plan: {0}', feature.planPath));
  return {
    kind: 'feature',
    id: `feature:${group.ref.projectId}/${group.ref.id}/${feature.id}`,
    projectId: group.ref.projectId,
    groupId: group.ref.id,
    featureId: feature.id,
    label: `${feature.id} — ${feature.title}`,
    description: parts.join(' · '),
    tooltip: tooltip.join('\n'),
    icon: featureIcon(feature.status),
    contextValue: 'forge.feature',
  };
}

/** A feature's loop under its group: the loop node, with where the feature stands in the merge queue. */
export function buildFeatureLoopNode(group: FeatureGroupView, feature: GroupFeatureView, summary: LoopSummary): LoopNode {
  const node = buildLoopNode(summary, { inGroup: true });
  if (!feature.merge) return node;
  return { ...node, description: [node.description, featureMergeText(feature.merge)].filter(Boolean).join(' · '), tooltipNotes: featureMergeDetail(group, feature.merge) };
}

export function buildOverlapNode(group: FeatureGroupView, overlap: FileOverlap): OverlapNode {
  const features = overlap.features.join(', ');
  return {
    kind: 'overlap',
    id: `overlap:${group.ref.projectId}/${group.ref.id}/${overlap.file}`,
    projectId: group.ref.projectId,
    groupId: group.ref.id,
    file: overlap.file,
    label: vscode.l10n.t('Overlap: {0}', overlap.file),
    description: vscode.l10n.t('changed by {0}', features),
    tooltip: [
      vscode.l10n.t('{0} is changed by more than one running loop of group {1}: {2}.', overlap.file, group.ref.id, features),
      vscode.l10n.t('Loops: {0}', overlap.loops.join(', ')),
      vscode.l10n.t('Their changes may conflict when they are merged.'),
    ].join('\n'),
    icon: { id: 'warning', color: 'list.warningForeground' },
    contextValue: 'forge.overlap',
  };
}

export function buildFeatureGroupNode(group: FeatureGroupView, loops: ReadonlyMap<string, LoopSummary>): FeatureGroupNode {
  const { ref } = group;
  const children: (LoopNode | FeatureNode | OverlapNode)[] = group.features.map((feature) => {
    const summary = feature.loopName ? loops.get(`${ref.projectId}/${feature.loopName}`) : undefined;
    return summary ? buildFeatureLoopNode(group, feature, summary) : buildFeatureNode(group, feature);
  });
  children.push(...group.overlaps.map((o) => buildOverlapNode(group, o)));
  const spend = groupSpendText(group.budget, group.spend);
  const budgetState = groupBudgetState(group.budget, group.spend);
  const mergeSummary = groupMergeSummary(group);
  const description = [
    groupStatusText(group),
    groupProgressText(group),
    ...(mergeSummary ? [mergeSummary] : []),
    spend + (budgetState === 'warning' ? ' ⚠' : ''),
    ...(group.overlaps.length > 0 ? [vscode.l10n.t('⚠ {0} overlapping file(s)', group.overlaps.length)] : []),
  ].join(' · ');
  const tooltip = [
    vscode.l10n.t('Feature group {0} — {1}', ref.id, group.title),
    vscode.l10n.t('Status: {0}', groupStatusText(group)),
    vscode.l10n.t('Features: {0}', groupProgressText(group)),
    // The integration branch is made at launch: none while the group is in review.
    ...(group.status === 'review' ? [] : [vscode.l10n.t('Merged: {0}', groupMergeProgressText(group)), groupIntegrationText(group)]),
    vscode.l10n.t('Budget: {0}', spend),
    vscode.l10n.t('At most {0} loops at once', group.maxConcurrent),
    vscode.l10n.t('From {0}', group.source),
    ...group.features.map((f) => `  ${f.id}: ${featureStatusText(f.status)}${f.merge ? `, ${featureMergeText(f.merge)}` : ''}${f.dependsOn.length > 0 ? ` (${vscode.l10n.t('after {0}', f.dependsOn.join(', '))})` : ''}`),
    ...group.overlaps.map((o) => vscode.l10n.t('Overlap: {0} — changed by {1}', o.file, o.features.join(', '))),
  ];
  return {
    kind: 'featureGroup',
    id: `featureGroup:${ref.projectId}/${ref.id}`,
    projectId: ref.projectId,
    groupId: ref.id,
    group,
    label: `${ref.id} — ${group.title}`,
    description,
    tooltip: tooltip.join('\n'),
    icon: groupStatusIcon(group.status),
    contextValue: GROUP_CONTEXT[group.status],
    children,
  };
}

const isActive = (status: FeatureGroupStatus) => status === 'running' || status === 'paused' || status === 'review';

/**
 * The Loop Explorer's root: feature groups (active ones first, then the most recently changed),
 * then Running / Recent with every loop that belongs to no group.
 */
export function buildExplorerRoot(summaries: readonly LoopSummary[], groups: readonly FeatureGroupView[]): LoopRootNode[] {
  const byKey = new Map(summaries.map((s) => [`${s.loop.projectId}/${s.loop.name}`, s]));
  const sorted = [...groups].sort((a, b) => Number(isActive(b.status)) - Number(isActive(a.status)) || b.updatedAt - a.updatedAt || a.ref.id.localeCompare(b.ref.id));
  return [...sorted.map((g) => buildFeatureGroupNode(g, byKey)), ...buildLoopTree(summaries, groupLoopKeys(groups))];
}
