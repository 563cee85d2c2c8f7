import { strict as assert } from 'node:assert';
import {
  BUDGET_WARN_FRACTION,
  budgetAllowsContinuing,
  budgetDecision,
  budgetProblem,
  budgetUses,
  describeBudget,
  describeEstimate,
  estimateLoopCost,
  hasBudget,
  spendFromTotals,
  tokensOf,
  type BudgetSpend,
  type LoopBudget,
} from '../../../src/core/loop/budget';
import type { Role } from '../../../src/core/loop/state';

const spend = (codeCost: number, auditorCost: number, codeTokens = 0, auditorTokens = 0): BudgetSpend => ({
  code: { cost: codeCost, tokens: codeTokens },
  auditor: { cost: auditorCost, tokens: auditorTokens },
});
const money = (m: number, auditorShare: number | null = null): LoopBudget => ({ money: m, tokens: null, auditorShare });
const tokens = (t: number, auditorShare: number | null = null): LoopBudget => ({ money: null, tokens: t, auditorShare });
const ROLES: Role[] = ['code', 'auditor'];

describe('cost governor decisions (budget.ts)', () => {
  it('no budget: always within, whatever was spent', () => {
    for (const b of [null, undefined, { money: null, tokens: null, auditorShare: 0.3 }]) {
      for (const role of ROLES) {
        for (const warned of [false, true]) assert.deepEqual(budgetDecision(b, spend(1e9, 1e9, 1e12, 1e12), role, warned), { kind: 'within' });
      }
      assert.equal(hasBudget(b), false);
    }
  });

  it('one pool: within below 80 %, warn once from 80 %, pause from 100 % (either role next)', () => {
    // Every spend from 0 to 120 % of a $10 budget, split every way between the roles.
    for (let cents = 0; cents <= 1200; cents += 25) {
      for (const codePart of [0, 0.25, 0.5, 1]) {
        const total = cents / 100;
        const s = spend(total * codePart, total * (1 - codePart));
        for (const role of ROLES) {
          const fresh = budgetDecision(money(10), s, role, false);
          const warned = budgetDecision(money(10), s, role, true);
          const fraction = total / 10;
          const kind = fraction >= 1 - 1e-12 ? 'pause' : fraction >= BUDGET_WARN_FRACTION - 1e-12 ? 'warn' : 'within';
          assert.equal(fresh.kind, kind, `$${total} (coder ${codePart}) before ${role}`);
          assert.equal(warned.kind, kind === 'warn' ? 'within' : kind, `warned once already: $${total}`);
        }
      }
    }
  });

  it('tokens: the same thresholds, on every token the model processed', () => {
    assert.equal(budgetDecision(tokens(1000), spend(0, 0, 799, 0), 'code', false).kind, 'within');
    assert.equal(budgetDecision(tokens(1000), spend(0, 0, 400, 400), 'code', false).kind, 'warn');
    assert.equal(budgetDecision(tokens(1000), spend(0, 0, 999, 0), 'auditor', false).kind, 'warn');
    const pause = budgetDecision(tokens(1000), spend(0, 0, 600, 400), 'auditor', false);
    assert.equal(pause.kind, 'pause');
    assert.match(pause.kind === 'pause' ? pause.message : '', /budget reached: the loop spent 1,000 tokens of 1,000 tokens \(tokens\)/);
    assert.equal(tokensOf({ inputTokens: 1, outputTokens: 2, reasoningTokens: 3, cacheReadTokens: 4, cacheWriteTokens: 5, cost: 9 }), 15);
  });

  it('money and tokens together: whichever is spent first pauses', () => {
    const both: LoopBudget = { money: 10, tokens: 1000, auditorShare: null };
    assert.equal(budgetDecision(both, spend(1, 0, 1000, 0), 'code', true).kind, 'pause');
    assert.equal(budgetDecision(both, spend(10, 0, 1, 0), 'code', true).kind, 'pause');
    assert.equal(budgetDecision(both, spend(5, 0, 500, 0), 'code', true).kind, 'within');
    // The warning names the fullest limit.
    const warn = budgetDecision(both, spend(5, 0, 900, 0), 'code', false);
    assert.equal(warn.kind === 'warn' && warn.use.what, 'tokens');
  });

  it('role split: a role whose share is spent pauses before its own sessions only; the whole budget pauses both', () => {
    const b = money(10, 0.3); // auditor $3, coder $7
    // The auditor spent its $3: the next audit may not start, the next coding pass may.
    assert.equal(budgetDecision(b, spend(1, 3), 'auditor', true).kind, 'pause');
    assert.equal(budgetDecision(b, spend(1, 3), 'code', true).kind, 'within');
    // The coder spent its $7.
    assert.equal(budgetDecision(b, spend(7, 0), 'code', true).kind, 'pause');
    assert.equal(budgetDecision(b, spend(7, 0), 'auditor', true).kind, 'within');
    // Under both shares: within; the pause message names the role.
    assert.equal(budgetDecision(b, spend(6.9, 2.9), 'code', true).kind, 'within');
    const p = budgetDecision(b, spend(1, 3.5), 'auditor', true);
    assert.match(p.kind === 'pause' ? p.message : '', /the auditor spent \$3\.50 of \$3\.00 \(auditor money\).*before the next audit session/);
    // A share of 0 leaves the auditor nothing, of 1 the coder nothing.
    assert.equal(budgetDecision(money(10, 0), spend(0, 0), 'auditor', true).kind, 'pause');
    assert.equal(budgetDecision(money(10, 1), spend(0, 0), 'code', true).kind, 'pause');
    assert.equal(budgetDecision(money(10, 1), spend(0, 0), 'auditor', true).kind, 'within');
    // 80 % of one role's share warns.
    assert.equal(budgetDecision(b, spend(0, 2.4), 'code', false).kind, 'warn');
  });

  it('budgetUses lists every limit, fullest first', () => {
    const uses = budgetUses({ money: 10, tokens: 100, auditorShare: 0.5 }, spend(1, 4, 15, 0));
    assert.deepEqual(uses.map((u) => u.what), ['auditor money', 'money', 'coder tokens', 'coder money', 'tokens', 'auditor tokens']);
    assert.equal(uses[0]!.fraction, 0.8);
  });

  it('continuing a paused loop needs room for the session it stopped before', () => {
    const s = spend(4, 1);
    assert.equal(budgetAllowsContinuing(money(5), s, 'code'), false, 'the same budget');
    assert.equal(budgetAllowsContinuing(money(4), s, 'code'), false, 'a lower one');
    assert.equal(budgetAllowsContinuing(money(6), s, 'code'), true, 'a higher one');
    assert.equal(budgetAllowsContinuing(null, s, 'code'), true, 'no budget at all');
    assert.equal(budgetAllowsContinuing(money(100, 0.2), spend(1, 20), 'auditor'), false, 'the auditor share is still spent');
  });

  it('spend by role from the per-role usage rows', () => {
    const row = (role: Role, cost: number, input: number) => ({ role, cost, inputTokens: input, outputTokens: 1, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 });
    assert.deepEqual(spendFromTotals([row('code', 1.5, 10), row('auditor', 0.5, 20), row('code', 1, 0)]), { code: { cost: 2.5, tokens: 12 }, auditor: { cost: 0.5, tokens: 21 } });
    assert.deepEqual(spendFromTotals([]), spend(0, 0));
  });

  it('bad budgets are refused with what a good one looks like', () => {
    for (const m of [-1, 0, Number.NaN, Number.POSITIVE_INFINITY]) assert.match(budgetProblem({ money: m }) ?? '', /money budget must be an amount above 0 such as 5\.00/);
    for (const t of [-5, 0, 1.5, Number.NaN]) assert.match(budgetProblem({ tokens: t }) ?? '', /token budget must be a whole number above 0/);
    for (const a of [-0.1, 1.01, Number.NaN]) assert.match(budgetProblem({ auditorShare: a }) ?? '', /share of the budget must be a number from 0 to 1/);
    assert.equal(budgetProblem({ money: 5, tokens: 2_000_000, auditorShare: 0.3 }), null);
    assert.equal(budgetProblem({ money: null, tokens: null, auditorShare: null }), null);
    assert.equal(budgetProblem({ auditorShare: 0 }), null);
    assert.equal(budgetProblem({ auditorShare: 1 }), null);
  });

  it('describes a budget in words', () => {
    assert.equal(describeBudget(null), 'none');
    assert.equal(describeBudget({ money: 5, tokens: 2_000_000, auditorShare: 0.3 }), '$5.00 and 2,000,000 tokens (auditor 30 %, coder 70 %)');
    assert.equal(describeBudget(tokens(1000)), '1,000 tokens');
  });

  it('the estimate grows with the plan, is priced from the models and is labelled an estimate', () => {
    const price = { input: 3, output: 15 };
    const small = estimateLoopCost({ kind: 'plan', chars: 1000, sections: 1 }, { code: price, auditor: price });
    const large = estimateLoopCost({ kind: 'plan', chars: 20_000, sections: 6 }, { code: price, auditor: price });
    assert.ok(small.cost !== null && large.cost !== null && large.cost > small.cost && large.tokens > small.tokens);
    const free = estimateLoopCost({ kind: 'plan', chars: 1000, sections: 1 }, { code: { input: 0, output: 0 }, auditor: { input: 0, output: 0 } });
    assert.equal(free.cost, 0, 'the embedded model costs nothing');
    assert.equal(free.tokens, small.tokens);
    const unknown = estimateLoopCost({ kind: 'goal', chars: 30, sections: 0 }, { code: price, auditor: null });
    assert.equal(unknown.cost, null);
    assert.match(describeEstimate(small), /^estimate \(not a quote\): ~\$\d+\.\d\d, ~[\d,]+ tokens/);
    assert.match(describeEstimate(unknown), /estimate \(not a quote\): cost unknown/);
  });
});
