/**
 * What the CLI prints of events and the status table (issue 28 item 8): pure formatting, no
 * process. The findings array and the status texts of a real completed loop are asserted in
 * cli-plan-amendments.test.ts.
 */
import { strict as assert } from 'node:assert';
import { formatEvent, formatLoopRows, type LoopListRow } from '../../../src/cli/format';
import { budgetWarning } from '../../../src/core/loop/budget';
import type { TerminationReason } from '../../../src/core/loop/state';

const loop = { projectId: 'p', name: 'calc' };
const figures = (cost: number) => ({ inputTokens: 10, outputTokens: 5, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cost });

describe('CLI event lines and status table (issue 28)', () => {
  it('loop.usage in --json carries the session\'s figures and the loop\'s totals', () => {
    const line = formatEvent({ type: 'loop.usage', loop, sessionId: 'ses_1', role: 'code', session: figures(0.5), total: figures(1.5) }, true)!;
    assert.deepEqual(JSON.parse(line), { loop: 'calc', type: 'loop.usage', sessionId: 'ses_1', role: 'code', session: figures(0.5), total: figures(1.5) });
  });

  it('an end says its reason only when it differs from the status; a budget pause says "budget reached" once', () => {
    const ended = (status: 'completed' | 'errored', reason: TerminationReason) =>
      formatEvent({ type: 'loop.ended', loop, status, reason, iterations: 2, branch: null, worktreeDir: null, merge: null }, false);
    assert.equal(ended('completed', { kind: 'completed' }), '[calc] ended: completed after 2 iterations');
    assert.equal(ended('errored', { kind: 'stall_timeout' })!.split('\n')[0], '[calc] ended: errored (stall_timeout) after 2 iterations');
    const paused = formatEvent({ type: 'loop.budget', loop, level: 'paused', message: 'budget reached: the loop spent $4.80 of $4.00 (money).' }, false)!;
    assert.equal(paused, '[calc] budget reached: the loop spent $4.80 of $4.00 (money).');
    assert.equal(formatEvent({ type: 'loop.budget', loop, level: 'warning', message: '85 % of the budget used' }, false), '[calc] budget warning: 85 % of the budget used');
  });

  it('an end is followed by the exact next commands for that state, in --json too (issue 29 item 7)', () => {
    const ended = (status: 'completed' | 'errored' | 'paused', reason: TerminationReason, json = false) =>
      formatEvent({ type: 'loop.ended', loop, status, reason, iterations: 3, branch: 'forge/calc', worktreeDir: '/w/calc', merge: null }, json)!;
    const next = (text: string) => text.split('\n').filter((l) => l.startsWith('[calc] next: '));
    assert.deepEqual(next(ended('completed', { kind: 'completed' })), [
      "[calc] next: git diff ...forge/calc   (review the loop's changes)",
      '[calc] next: forge accept calc   (merge its branch into the base branch)',
    ]);
    assert.deepEqual(next(ended('paused', { kind: 'budget_reached' })), [
      '[calc] next: forge restart calc --budget AMOUNT   (continue it with a higher budget)',
      "[calc] next: git diff ...forge/calc   (review the loop's changes)",
      '[calc] next: forge cancel calc   (end it, keeping its work)',
    ]);
    assert.deepEqual(next(ended('errored', { kind: 'max_iterations', message: 'check 1 (npm test) never passed' })), [
      '[calc] next: forge status calc   (see which checks fail)',
      '[calc] next: forge restart calc   (continue it with a fresh iteration budget)',
      "[calc] next: git diff ...forge/calc   (review the loop's changes)",
    ]);
    assert.deepEqual(JSON.parse(ended('completed', { kind: 'completed' }, true)).next, ['git diff ...forge/calc', 'forge accept calc']);
  });

  it('a budget warning gives the share actually used, past 100 % too', () => {
    const spend = (cost: number) => ({ code: { cost, tokens: 0 }, auditor: { cost: 0, tokens: 0 } });
    const budget = { money: 4, tokens: null, auditorShare: null };
    assert.match(budgetWarning(budget, spend(3.4))!.message, /^85 % of the budget used: .* At 100 % the loop pauses/);
    assert.match(budgetWarning(budget, spend(4.8))!.message, /^120 % of the budget used: \$4\.80 of \$4\.00 \(money\)\. The loop pauses at its next hand-over\.$/);
  });

  it('the status table keeps its columns with long names; a completed loop shows "done", not its last phase', () => {
    const row = (name: string, status: string, phase: string, reason: string | null): LoopListRow =>
      ({ name, status, phase, iteration: 2, sections: { total: 2, done: 2 }, openFindings: { bug: 0, warning: 0 }, cost: 0, reason, supervised: false, supervisor: null, confinement: { sandboxed: true } }) as unknown as LoopListRow;
    const long = 'a-very-long-loop-name-that-runs-to-forty-eight-c';
    const lines = formatLoopRows([row('calc', 'completed', 'final_auditing', 'completed'), row(long, 'errored', 'coding', 'stall_timeout')]).split('\n');
    assert.equal(lines[0]!.indexOf('completed'), lines[1]!.indexOf('errored'), lines.join('\n'));
    assert.equal(lines[0]!.indexOf('done'), lines[1]!.indexOf('coding'));
    assert.doesNotMatch(lines[0]!, /final_auditing|— completed/);
    assert.match(lines[1]!, /— stall_timeout$/);
  });
});
