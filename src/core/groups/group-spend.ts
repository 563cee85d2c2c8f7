/**
 * A group's spend and what its budget says about it (issue 16's group budget). The sum over a
 * group's loops is made here and only here; the decisions are pure, like the loop's governor
 * (budget.ts) whose thresholds and formats they share.
 */
import { BUDGET_WARN_FRACTION, formatMoney, formatTokens, spendFromTotals } from '../loop/budget';
import type { ForgeRepositories } from '../storage/repositories';
import type { GroupBudget, GroupSpend } from './group-types';

const EPSILON = 1e-9;

/** What one loop spent (every role), from the usage recorded at each session's end. */
export function loopSpend(repos: ForgeRepositories, projectId: string, loopName: string): GroupSpend {
  const s = spendFromTotals(repos.sessionUsage.totalsByRole(projectId, loopName));
  return { cost: s.code.cost + s.auditor.cost, tokens: s.code.tokens + s.auditor.tokens };
}

/** What a group's loops spent together (the splitter's own session is not counted). */
export function groupSpend(repos: ForgeRepositories, projectId: string, loopNames: Iterable<string>): GroupSpend {
  const total: GroupSpend = { cost: 0, tokens: 0 };
  for (const name of new Set(loopNames)) {
    const s = loopSpend(repos, projectId, name);
    total.cost += s.cost;
    total.tokens += s.tokens;
  }
  return total;
}

export function hasGroupBudget(budget: GroupBudget): boolean {
  return budget.money !== null || budget.tokens !== null;
}

interface Use {
  what: 'money' | 'tokens';
  used: number;
  limit: number;
  fraction: number;
}

function uses(budget: GroupBudget, spend: GroupSpend): Use[] {
  const all: Use[] = [];
  if (budget.money !== null) all.push({ what: 'money', used: spend.cost, limit: budget.money, fraction: budget.money > 0 ? spend.cost / budget.money : Infinity });
  if (budget.tokens !== null) all.push({ what: 'tokens', used: spend.tokens, limit: budget.tokens, fraction: budget.tokens > 0 ? spend.tokens / budget.tokens : Infinity });
  return all.sort((a, b) => b.fraction - a.fraction);
}

const amount = (u: Use, n: number) => (u.what === 'money' ? formatMoney(n) : formatTokens(n));

export type GroupBudgetDecision = { kind: 'within' } | { kind: 'warn'; message: string } | { kind: 'pause'; message: string };

/** At 100 % of a limit the group pauses; at 80 % it warns once (`warned`: already given). */
export function groupBudgetDecision(groupId: string, budget: GroupBudget, spend: GroupSpend, warned: boolean): GroupBudgetDecision {
  const fullest = uses(budget, spend)[0];
  if (!fullest) return { kind: 'within' };
  if (fullest.fraction >= 1 - EPSILON) {
    return {
      kind: 'pause',
      message: `group budget reached: the loops of group "${groupId}" spent ${amount(fullest, fullest.used)} of ${amount(fullest, fullest.limit)} (${fullest.what}). Nothing new starts and running loops pause at their next hand-over; resume the group with a higher budget to continue.`,
    };
  }
  if (!warned && fullest.fraction >= BUDGET_WARN_FRACTION - EPSILON) {
    return {
      kind: 'warn',
      message: `${Math.floor(fullest.fraction * 100 + EPSILON)} % of group "${groupId}"'s budget used: ${amount(fullest, fullest.used)} of ${amount(fullest, fullest.limit)} (${fullest.what}). At 100 % the group pauses.`,
    };
  }
  return { kind: 'within' };
}

/**
 * Why `budget` leaves no room after `spend` (null: it does): each limit must be above what the
 * loops spent. The message suggests a figure (half as much again as the spend, at least one more unit).
 */
export function noBudgetRoom(groupId: string, budget: GroupBudget, spend: GroupSpend): string | null {
  const full = uses(budget, spend).filter((u) => u.fraction >= 1 - EPSILON);
  if (full.length === 0) return null;
  const suggestions = full.map((u) =>
    u.what === 'money' ? `--budget ${Math.max(u.used * 1.5, u.used + 0.01).toFixed(2)}` : `--budget-tokens ${Math.max(Math.ceil(u.used * 1.5), Math.ceil(u.used) + 1)}`,
  );
  return `Group "${groupId}" has spent ${full.map((u) => `${amount(u, u.used)} of ${amount(u, u.limit)}`).join(' and ')}, so its budget leaves no room. Resume it with a higher budget, for example forge group resume ${groupId} ${suggestions.join(' ')}.`;
}
