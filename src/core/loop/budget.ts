/**
 * The cost governor's decisions (issue 16, part 1). Pure: budgets and spend in, a decision out;
 * the supervisor reads the spend from the usage it records at each hand-over and does what the
 * decision says (warn once at 80 %, pause at 100 %).
 *
 * A budget is money (in the provider's currency as opencode prices it, USD for the catalog),
 * tokens (every token the model processed: input, output, reasoning, cache reads and writes),
 * or both. With an auditor share, the auditor may spend that share of each limit and the coder
 * the rest; the loop pauses before a session of a role whose part is spent, and always once the
 * whole budget is.
 */
import type { Role } from './state';

export interface LoopBudget {
  /** Money limit; null: none. */
  money: number | null;
  /** Token limit; null: none. */
  tokens: number | null;
  /** The auditor's share of each limit (0..1); null: one pool for both roles. */
  auditorShare: number | null;
}

export interface RoleSpend {
  cost: number;
  tokens: number;
}

export interface BudgetSpend {
  code: RoleSpend;
  auditor: RoleSpend;
}

/** At this fraction of a limit Forge warns (once per loop run). */
export const BUDGET_WARN_FRACTION = 0.8;
/** Money is summed in floating point: $2.40 of $3.00 is 80 %, not 79.999…. */
const EPSILON = 1e-9;

export const NO_BUDGET: LoopBudget = Object.freeze({ money: null, tokens: null, auditorShare: null });

export function hasBudget(budget: LoopBudget | null | undefined): budget is LoopBudget {
  return !!budget && (budget.money !== null || budget.tokens !== null);
}

/** One limit and how much of it is used. */
export interface BudgetUse {
  /** `money`, `tokens`, `coder money`, `auditor tokens` … */
  what: string;
  used: number;
  limit: number;
  fraction: number;
  /** The role this limit belongs to (null: the whole loop). */
  role: Role | null;
}

function total(spend: BudgetSpend): RoleSpend {
  return { cost: spend.code.cost + spend.auditor.cost, tokens: spend.code.tokens + spend.auditor.tokens };
}

/** Every limit the budget sets, with its use, the fullest first. */
export function budgetUses(budget: LoopBudget, spend: BudgetSpend): BudgetUse[] {
  const uses: BudgetUse[] = [];
  const add = (what: string, used: number, limit: number, role: Role | null) => {
    // A zero limit (a role's share of 0) is full from the start.
    uses.push({ what, used, limit, fraction: limit > 0 ? used / limit : Number.POSITIVE_INFINITY, role });
  };
  const all = total(spend);
  if (budget.money !== null) add('money', all.cost, budget.money, null);
  if (budget.tokens !== null) add('tokens', all.tokens, budget.tokens, null);
  if (budget.auditorShare !== null) {
    const share = { code: 1 - budget.auditorShare, auditor: budget.auditorShare };
    for (const role of ['code', 'auditor'] as const) {
      const label = role === 'code' ? 'coder' : 'auditor';
      if (budget.money !== null) add(`${label} money`, spend[role].cost, budget.money * share[role], role);
      if (budget.tokens !== null) add(`${label} tokens`, spend[role].tokens, budget.tokens * share[role], role);
    }
  }
  return uses.sort((a, b) => b.fraction - a.fraction);
}

export type BudgetDecision =
  | { kind: 'within' }
  /** 80 % of a limit is used: say so once (`use` is the fullest limit). */
  | { kind: 'warn'; use: BudgetUse; message: string }
  /** A limit that binds the next session is used up: pause at this hand-over. */
  | { kind: 'pause'; use: BudgetUse; message: string };

/**
 * What the loop does at a hand-over, before a session of `nextRole` starts. `warned`: the
 * 80 % warning was already given in this run of the loop.
 */
export function budgetDecision(budget: LoopBudget | null | undefined, spend: BudgetSpend, nextRole: Role, warned: boolean, during = false): BudgetDecision {
  if (!hasBudget(budget)) return { kind: 'within' };
  const uses = budgetUses(budget, spend);
  const binding = uses.find((u) => u.fraction >= 1 - EPSILON && (u.role === null || u.role === nextRole));
  if (binding) {
    const whose = binding.role === null ? 'the loop' : binding.role === 'code' ? 'the coder' : 'the auditor';
    return {
      kind: 'pause',
      use: binding,
      message: during
        ? `budget reached: ${whose} spent ${formatAmount(binding)} of ${formatLimit(binding)} (${binding.what}). The ${nextRole === 'code' ? 'coding' : 'audit'} session was stopped after its last model step and the loop is paused; restart it with a higher budget to run that session again, or leave it.`
        : `budget reached: ${whose} spent ${formatAmount(binding)} of ${formatLimit(binding)} (${binding.what}). The loop is paused before the next ${nextRole === 'code' ? 'coding' : 'audit'} session; restart it with a higher budget to continue, or leave it.`,
    };
  }
  const warning = warned ? null : budgetWarning(budget, spend);
  return warning ? { kind: 'warn', ...warning } : { kind: 'within' };
}

/** The 80 % warning when the fullest limit has reached it (null: not yet, or no budget). */
export function budgetWarning(budget: LoopBudget | null | undefined, spend: BudgetSpend): { use: BudgetUse; message: string } | null {
  if (!hasBudget(budget)) return null;
  const fullest = budgetUses(budget, spend)[0];
  if (!fullest || fullest.fraction < BUDGET_WARN_FRACTION - EPSILON) return null;
  return {
    use: fullest,
    // The figure as it is (one session can go past 100 % before the hand-over that pauses).
    message: `${Math.floor((fullest.fraction + EPSILON) * 100)} % of the budget used: ${formatAmount(fullest)} of ${formatLimit(fullest)} (${fullest.what}). ${fullest.fraction >= 1 - EPSILON ? 'The loop pauses at its next hand-over.' : 'At 100 % the loop pauses at its next hand-over.'}`,
  };
}

/**
 * Whether a restart may continue a loop paused on its budget with `budget`: it must leave room
 * for the session the loop stopped before (the spend so far stays counted).
 */
export function budgetAllowsContinuing(budget: LoopBudget | null | undefined, spend: BudgetSpend, nextRole: Role): boolean {
  return budgetDecision(budget, spend, nextRole, true).kind !== 'pause';
}

function isMoney(use: BudgetUse): boolean {
  return use.what.endsWith('money');
}

function formatAmount(use: BudgetUse): string {
  return isMoney(use) ? formatMoney(use.used) : formatTokens(use.used);
}

function formatLimit(use: BudgetUse): string {
  return isMoney(use) ? formatMoney(use.limit) : formatTokens(use.limit);
}

export function formatMoney(amount: number): string {
  return `$${amount.toFixed(amount !== 0 && Math.abs(amount) < 0.01 ? 4 : 2)}`;
}

export function formatTokens(tokens: number): string {
  return `${Math.round(tokens).toLocaleString('en-US')} tokens`;
}

/** `$5.00 and 2,000,000 tokens (auditor 30 %)`, or `none`. */
export function describeBudget(budget: LoopBudget | null | undefined): string {
  if (!hasBudget(budget)) return 'none';
  const parts = [budget.money !== null ? formatMoney(budget.money) : null, budget.tokens !== null ? formatTokens(budget.tokens) : null].filter(Boolean);
  const split = budget.auditorShare !== null ? ` (auditor ${Math.round(budget.auditorShare * 100)} %, coder ${Math.round((1 - budget.auditorShare) * 100)} %)` : '';
  return `${parts.join(' and ')}${split}`;
}

/** What is wrong with a budget's numbers (null: nothing), in words that say how to fix it. */
export function budgetProblem(budget: Partial<LoopBudget>): string | null {
  const { money, tokens, auditorShare } = budget;
  if (money !== undefined && money !== null && !(Number.isFinite(money) && money > 0)) return `The money budget must be an amount above 0 such as 5.00, not ${String(money)}.`;
  if (tokens !== undefined && tokens !== null && !(Number.isInteger(tokens) && tokens > 0)) return `The token budget must be a whole number above 0 such as 2000000, not ${String(tokens)}.`;
  if (auditorShare !== undefined && auditorShare !== null && !(Number.isFinite(auditorShare) && auditorShare >= 0 && auditorShare <= 1)) {
    return `The auditor's share of the budget must be a number from 0 to 1 such as 0.3, not ${String(auditorShare)}.`;
  }
  return null;
}

/** Prices of one model in the provider's currency per million tokens (opencode's catalog). */
export interface ModelPrice {
  input: number;
  output: number;
}

/** A plan's size as the estimate counts it. */
export interface PlanSize {
  /** Characters of the plan (or goal) text. */
  chars: number;
  /** Sections (0: an unsectioned plan or a goal, one unit of work). */
  sections: number;
  kind: 'plan' | 'goal';
}

export interface CostEstimate {
  /** null: a model's price is unknown, so no money figure. */
  cost: number | null;
  tokens: number;
  /** How the figure was made, for the label beside it. */
  basis: string;
}

/**
 * Tokens Forge's sessions typically take: each session reads its prompt, the plan and the files
 * it works on again at every step (input), and writes far less (output). Rough by design: the
 * estimate is labelled as one, and the budget, not the estimate, governs.
 */
const SESSION_INPUT_TOKENS = { code: 60_000, auditor: 40_000 } as const;
const SESSION_OUTPUT_TOKENS = { code: 6_000, auditor: 2_000 } as const;
/** Passes per unit of work the estimate assumes (a dirty audit sends the coder back once in two). */
const PASSES_PER_UNIT = 1.5;

export function estimateLoopCost(size: PlanSize, prices: { code: ModelPrice | null; auditor: ModelPrice | null }): CostEstimate {
  const units = Math.max(1, size.sections);
  const planTokens = Math.ceil(size.chars / 4);
  const sessions = { code: units * PASSES_PER_UNIT, auditor: units * PASSES_PER_UNIT + (size.kind === 'plan' ? 1 : 0) };
  const tokensOf = (role: Role) => ({ input: sessions[role] * (SESSION_INPUT_TOKENS[role] + planTokens * 4), output: sessions[role] * SESSION_OUTPUT_TOKENS[role] });
  const code = tokensOf('code');
  const auditor = tokensOf('auditor');
  const tokens = Math.round(code.input + code.output + auditor.input + auditor.output);
  const priced = (t: { input: number; output: number }, p: ModelPrice | null) => (p ? (t.input * p.input + t.output * p.output) / 1_000_000 : null);
  const c = priced(code, prices.code);
  const a = priced(auditor, prices.auditor);
  return {
    cost: c === null || a === null ? null : c + a,
    tokens,
    basis: `${units} unit${units === 1 ? '' : 's'} of work × ${PASSES_PER_UNIT} passes, coder and auditor sessions at typical sizes`,
  };
}

/** `estimate: ~$1.20 (~540,000 tokens) …`: always says it is an estimate. */
export function describeEstimate(estimate: CostEstimate): string {
  const money = estimate.cost === null ? 'cost unknown (no price for a chosen model in opencode\'s catalog)' : `~${formatMoney(estimate.cost)}`;
  return `estimate (not a quote): ${money}, ~${formatTokens(estimate.tokens)} — ${estimate.basis}`;
}

/** Token counts as the session-usage table keeps them. */
export interface UsageTotalsLike {
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cost: number;
}

/** Every token the model processed counts against a token budget. */
export function tokensOf(u: UsageTotalsLike): number {
  return u.inputTokens + u.outputTokens + u.reasoningTokens + u.cacheReadTokens + u.cacheWriteTokens;
}

/** The spend by role from the per-role usage totals of a loop. */
export function spendFromTotals(rows: ReadonlyArray<UsageTotalsLike & { role: Role }>): BudgetSpend {
  const spend: BudgetSpend = { code: { cost: 0, tokens: 0 }, auditor: { cost: 0, tokens: 0 } };
  for (const r of rows) {
    spend[r.role].cost += r.cost;
    spend[r.role].tokens += tokensOf(r);
  }
  return spend;
}
