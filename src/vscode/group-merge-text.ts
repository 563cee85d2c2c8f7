import * as vscode from 'vscode';
/**
 * The merge queue in words (issue 14 part 4): where a completed feature stands on its way into
 * the group's integration branch `forge/group/<id>`, and how many features are in. The one place
 * the Loop Explorer (group-tree-model.ts) and the dashboard's Group part (dashboard/group-model.ts)
 * take these texts from, like group-budget-text.ts for budgets, so the two never say it differently.
 */
import type { FeatureGroupView, GroupFeatureMergeView } from '../core/groups/group-types';
import { integrationBranchOf } from '../core/workspace/merge-integration';

/**
 * Short, for a tree item's description: "queued to merge", "merged",
 * "conflict — back to coding (1)", "checks failed on the merged tree — waiting for a slot".
 */
export function featureMergeText(merge: GroupFeatureMergeView): string {
  switch (merge.state) {
    case 'queued':
      return merge.reopened > 0 ? vscode.l10n.t('queued to merge (after {0} return(s) to coding)', merge.reopened) : vscode.l10n.t('queued to merge');
    case 'merged':
      return vscode.l10n.t('merged');
    case 'conflict':
      return merge.awaitingReopen ? vscode.l10n.t('conflict — waiting for a slot to go back to coding') : vscode.l10n.t('conflict — back to coding ({0})', merge.reopened);
    case 'check_failed':
      return merge.awaitingReopen
        ? vscode.l10n.t('checks failed on the merged tree — waiting for a slot to go back to coding')
        : vscode.l10n.t('checks failed on the merged tree — back to coding ({0})', merge.reopened);
  }
}

/** The lines a feature's hover adds: its merge state, the commit that merged it, what went wrong, how often it went back. */
export function featureMergeDetail(group: Pick<FeatureGroupView, 'ref'>, merge: GroupFeatureMergeView): string[] {
  const lines = [vscode.l10n.t('Merge: {0}', featureMergeText(merge))];
  const branch = integrationBranchOf(group.ref.id);
  if (merge.state === 'merged') {
    lines.push(merge.commit ? vscode.l10n.t('Merged into {0} at {1}', branch, merge.commit.slice(0, 12)) : vscode.l10n.t('Merged into {0}', branch));
    if (merge.reopened > 0) lines.push(vscode.l10n.t('After {0} return(s) to coding', merge.reopened));
  }
  if (merge.message && merge.state !== 'merged') lines.push(merge.message);
  return lines;
}

/** How many features are in the integration branch. */
export function mergedCount(group: Pick<FeatureGroupView, 'features'>): number {
  return group.features.filter((f) => f.merge?.state === 'merged').length;
}

/** "1 of 3 merged". */
export function groupMergeProgressText(group: Pick<FeatureGroupView, 'features'>): string {
  return vscode.l10n.t('{0} of {1} merged', mergedCount(group), group.features.length);
}

/**
 * "1 of 3 merged" once the merge queue has had a feature (one completed); null before, so a group
 * none of whose loops completed yet does not say "0 of 3 merged" next to "0/3 done".
 */
export function groupMergeSummary(group: Pick<FeatureGroupView, 'features'>): string | null {
  return group.features.some((f) => f.merge) ? groupMergeProgressText(group) : null;
}

/** "Integration branch: forge/group/<id>". */
export function groupIntegrationText(group: Pick<FeatureGroupView, 'ref'>): string {
  return vscode.l10n.t('Integration branch: {0}', integrationBranchOf(group.ref.id));
}
