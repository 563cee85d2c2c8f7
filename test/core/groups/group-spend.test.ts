/**
 * The group budget's decisions (group-spend.ts, pure part): a warning once at 80 %, a pause at
 * 100 % of either limit, and a resume refused while the budget leaves no room, with a figure.
 */
import { strict as assert } from 'node:assert';
import { groupBudgetDecision, hasGroupBudget, noBudgetRoom } from '../../../src/core/groups/group-spend';

describe('group budget decisions', () => {
  it('no budget: always within', () => {
    assert.equal(hasGroupBudget({ money: null, tokens: null }), false);
    assert.deepEqual(groupBudgetDecision('g', { money: null, tokens: null }, { cost: 1e9, tokens: 1e12 }, false), { kind: 'within' });
  });

  it('warns once from 80 % of the fullest limit, pauses at 100 %', () => {
    const budget = { money: 10, tokens: 1000 };
    assert.equal(groupBudgetDecision('g', budget, { cost: 7.9, tokens: 100 }, false).kind, 'within');
    const warn = groupBudgetDecision('g', budget, { cost: 8, tokens: 100 }, false);
    assert.equal(warn.kind, 'warn');
    assert.match((warn as { message: string }).message, /^80 % of group "g"'s budget used: \$8\.00 of \$10\.00 \(money\)\. At 100 % the group pauses\.$/);
    assert.equal(groupBudgetDecision('g', budget, { cost: 8, tokens: 100 }, true).kind, 'within', 'only once');
    const pause = groupBudgetDecision('g', budget, { cost: 1, tokens: 1000 }, true);
    assert.equal(pause.kind, 'pause');
    assert.match((pause as { message: string }).message, /spent 1,000 tokens of 1,000 tokens \(tokens\)\. Nothing new starts and running loops pause at their next hand-over/);
  });

  it('a resume needs room above the spend in every limit, and suggests a figure', () => {
    assert.equal(noBudgetRoom('g', { money: null, tokens: 100 }, { cost: 0, tokens: 99 }), null);
    const tokens = noBudgetRoom('g', { money: null, tokens: 1 }, { cost: 0, tokens: 500 });
    assert.match(tokens!, /^Group "g" has spent 500 tokens of 1 tokens, so its budget leaves no room\. Resume it with a higher budget, for example forge group resume g --budget-tokens 750\.$/);
    const both = noBudgetRoom('g', { money: 0.5, tokens: 1 }, { cost: 0.5, tokens: 2 });
    assert.match(both!, /--budget 0\.75 --budget-tokens 3\.$|--budget-tokens 3 --budget 0\.75\.$/);
  });
});
