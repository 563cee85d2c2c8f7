import * as vscode from 'vscode';
/**
 * A feature group's spend against its budget in words: the one place the Loop Explorer's group
 * node and the dashboard's Group part take "spent X of Y" from (issue 16's group budget), so
 * the two never say it differently. Amounts use the loop governor's formats (budget.ts).
 */
import { BUDGET_WARN_FRACTION, formatMoney, formatTokens } from '../core/loop/budget';
import type { FeatureGroupView, GroupBudget, GroupSpend } from '../core/groups/group-types';

/** Money is summed in floating point: $0.80 of $1.00 is 80 %, not 79.999…. */
const EPSILON = 1e-9;

export type GroupBudgetState = 'none' | 'ok' | 'warning' | 'reached';

/** One limit of a group budget and how full it is. */
export interface GroupBudgetUse {
  readonly what: 'money' | 'tokens';
  readonly used: number;
  readonly limit: number;
  /** Rounded down, so 79.9 % never reads as 80 %. */
  readonly percent: number;
}

export function groupBudgetUses(budget: GroupBudget, spend: GroupSpend): GroupBudgetUse[] {
  const uses: (GroupBudgetUse & { fraction: number })[] = [];
  if (budget.money !== null) uses.push({ what: 'money', used: spend.cost, limit: budget.money, fraction: budget.money > 0 ? spend.cost / budget.money : Infinity, percent: 0 });
  if (budget.tokens !== null) uses.push({ what: 'tokens', used: spend.tokens, limit: budget.tokens, fraction: budget.tokens > 0 ? spend.tokens / budget.tokens : Infinity, percent: 0 });
  return uses
    .sort((a, b) => b.fraction - a.fraction)
    .map(({ fraction, ...u }) => ({ ...u, percent: Number.isFinite(fraction) ? Math.floor(fraction * 100 + EPSILON) : 100 }));
}

export function groupBudgetState(budget: GroupBudget, spend: GroupSpend): GroupBudgetState {
  const fullest = groupBudgetUses(budget, spend)[0];
  if (!fullest) return 'none';
  const fraction = fullest.limit > 0 ? fullest.used / fullest.limit : Infinity;
  return fraction >= 1 - EPSILON ? 'reached' : fraction >= BUDGET_WARN_FRACTION - EPSILON ? 'warning' : 'ok';
}

const amount = (what: GroupBudgetUse['what'], n: number) => (what === 'money' ? formatMoney(n) : formatTokens(n));

/**
 * "spent $0.42 of $1.00 (42 %)", "spent 1,200 tokens of 5,000 tokens (24 %)", both joined by
 * "and"; without a budget "spent $0.42, 1,200 tokens (no budget)".
 */
export function groupSpendText(budget: GroupBudget, spend: GroupSpend): string {
  const uses = groupBudgetUses(budget, spend);
  if (uses.length === 0) return vscode.l10n.t('spent {0}, {1} (no budget)', formatMoney(spend.cost), formatTokens(spend.tokens));
  const parts = uses
    .sort((a, b) => (a.what === b.what ? 0 : a.what === 'money' ? -1 : 1))
    .map((u) => vscode.l10n.t('{0} of {1} ({2} %)', amount(u.what, u.used), amount(u.what, u.limit), u.percent));
  return vscode.l10n.t('spent {0}', parts.join(vscode.l10n.t(' and ')));
}

/** "2/3 done" (features completed of all). */
export function groupProgressText(group: Pick<FeatureGroupView, 'features'>): string {
  const done = group.features.filter((f) => f.status === 'completed').length;
  return vscode.l10n.t('{0}/{1} done', done, group.features.length);
}

/** A group's status as the user reads it, with why it is paused. */
export function groupStatusText(group: Pick<FeatureGroupView, 'status' | 'pauseReason'>): string {
  switch (group.status) {
    case 'review':
      return vscode.l10n.t('in review');
    case 'running':
      return vscode.l10n.t('running');
    case 'paused':
      return group.pauseReason === 'budget_reached' ? vscode.l10n.t('paused: budget reached') : vscode.l10n.t('paused: interrupted');
    case 'completed':
      return vscode.l10n.t('completed');
    case 'failed':
      return vscode.l10n.t('failed');
    case 'cancelled':
      return vscode.l10n.t('cancelled');
  }
}

/**
 * What Resume Group pre-fills for each limit the group spent: half as much again as the spend,
 * at least one more unit (the figure `forge group resume` suggests); a limit with room keeps its value.
 */
export function suggestedGroupBudget(budget: GroupBudget, spend: GroupSpend): GroupBudget {
  const money = budget.money === null ? null : spend.cost >= budget.money - EPSILON ? Number(Math.max(spend.cost * 1.5, spend.cost + 0.01).toFixed(2)) : budget.money;
  const tokens = budget.tokens === null ? null : spend.tokens >= budget.tokens ? Math.max(Math.ceil(spend.tokens * 1.5), Math.ceil(spend.tokens) + 1) : budget.tokens;
  return { money, tokens };
}
