import { strict as assert } from 'node:assert';
import { LOOP_STATUSES } from '../../../src/core/vocabulary/loop-vocabulary';
import { TERMINATION_KINDS, terminationStatusFor, type TerminationReason } from '../../../src/core/loop/state';
import { loopWaitOf, nextStepLines, nextStepsOf, raisedBudgetArgs, STEP_TEXT, WAIT_TABLE, type LoopWait, type NextStepId } from '../../../src/core/loop/next-steps';

const ids = (input: Parameters<typeof nextStepsOf>[0]) => nextStepsOf(input).steps.map((s) => s.id);
const base = { name: 'fix-parser', branch: 'forge/fix-parser' };

/** Every termination reason, with a message where the kind carries one. */
function reasonOf(kind: (typeof TERMINATION_KINDS)[number], message = 'boom'): TerminationReason {
  if (kind === 'worktree_failed' || kind === 'error_max_retries' || kind === 'model_stream_malformed') return { kind, message };
  return { kind } as TerminationReason;
}

describe('next steps of a loop (issue 29 item 7)', () => {
  it('a running or starting loop waits for nobody and offers nothing', () => {
    for (const status of ['running', 'starting']) {
      const n = nextStepsOf({ ...base, status, reason: null });
      assert.deepEqual(n, { wait: 'running', waiting: false, notify: false, steps: [] });
    }
  });

  it('every termination reason maps to a wait whose row exists; every ended status but cancel by the user waits and notifies', () => {
    const expected: Record<string, LoopWait> = {
      completed: 'completed',
      cancelled: 'cancelled',
      user_aborted: 'cancelled',
      shutdown: 'interrupted',
      max_iterations: 'max_iterations',
      stall_timeout: 'stalled',
      budget_reached: 'budget_paused',
      awaiting_review: 'awaiting_review',
      setup_failed: 'setup_failed',
    };
    for (const kind of TERMINATION_KINDS) {
      const reason = reasonOf(kind);
      const status = terminationStatusFor(reason);
      const n = nextStepsOf({ ...base, status, reason });
      assert.equal(n.wait, expected[kind] ?? 'errored', kind);
      assert.ok(WAIT_TABLE[n.wait], kind);
      assert.equal(n.waiting, n.wait !== 'cancelled', kind);
      assert.equal(n.notify, n.wait !== 'cancelled' && n.wait !== 'interrupted', kind);
      assert.ok(n.steps.length > 0, `${kind} offers something to do`);
    }
  });

  it('reads the stored reason text as well as the parsed reason; an unknown reason or status is treated as an error', () => {
    assert.equal(loopWaitOf('errored', 'max_iterations: check 1 (npm test) never passed'), 'checks_failing');
    assert.equal(loopWaitOf('errored', { kind: 'max_iterations', message: 'check 1 never passed' }), 'checks_failing');
    assert.equal(loopWaitOf('errored', 'max_iterations'), 'max_iterations');
    assert.equal(loopWaitOf('errored', 'error_max_retries: 500 from the model'), 'errored');
    assert.equal(loopWaitOf('errored', 'no such reason'), 'errored');
    assert.equal(loopWaitOf('cancelled', 'shutdown'), 'interrupted');
    assert.equal(loopWaitOf('cancelled', 'user_aborted'), 'cancelled');
    assert.equal(loopWaitOf('a-status-from-a-later-version', null), 'errored');
    for (const status of LOOP_STATUSES) assert.ok(WAIT_TABLE[loopWaitOf(status, null)], status);
  });

  it('offers the steps that fit each wait, best first', () => {
    const cases: [string, string, NextStepId[]][] = [
      ['completed', 'completed', ['review', 'accept']],
      ['paused', 'budget_reached', ['raise_budget', 'review', 'cancel']],
      ['errored', 'max_iterations', ['restart', 'review', 'accept']],
      ['errored', 'max_iterations: check 2 (exists: out.txt) never passed', ['show_checks', 'restart', 'review']],
      ['stalled', 'stall_timeout', ['restart', 'review']],
      ['errored', 'session_creation_failed', ['restart', 'review']],
      ['cancelled', 'cancelled', ['restart', 'review', 'accept']],
      ['cancelled', 'shutdown', ['restart', 'review']],
    ];
    for (const [status, reason, steps] of cases) assert.deepEqual(ids({ ...base, status, reason }), steps, `${status} ${reason}`);
  });

  it('a loop without a branch (failed before its worktree) is offered neither review nor accept', () => {
    assert.deepEqual(ids({ name: 'x', branch: null, status: 'errored', reason: 'worktree_failed: no repo' }), ['restart']);
    assert.deepEqual(ids({ name: 'x', branch: null, status: 'completed', reason: 'completed' }), []);
  });

  it('a completed loop accepted after it ended no longer waits (but still offers its steps)', () => {
    const n = nextStepsOf({ ...base, status: 'completed', reason: 'completed', acceptedAfterEnd: true });
    assert.equal(n.waiting, false);
    assert.deepEqual(n.steps.map((s) => s.id), ['review', 'accept']);
    assert.equal(nextStepsOf({ ...base, status: 'errored', reason: 'max_iterations', acceptedAfterEnd: true }).waiting, true);
  });

  it('names the CLI lines the CLI accepts and the VS Code commands the extension declares', () => {
    const all = [
      ...nextStepsOf({ ...base, status: 'completed', reason: 'completed' }).steps,
      ...nextStepsOf({ ...base, status: 'paused', reason: 'budget_reached' }).steps,
      ...nextStepsOf({ ...base, status: 'errored', reason: 'max_iterations: check 1 never passed' }).steps,
      ...nextStepsOf({ ...base, status: 'awaiting_review', reason: 'awaiting_review' }).steps,
    ];
    const byId = new Map(all.map((s) => [s.id, s]));
    assert.equal(byId.get('review')!.cli, 'git diff ...forge/fix-parser');
    assert.equal(byId.get('accept')!.cli, 'forge accept fix-parser');
    assert.equal(byId.get('restart')!.cli, 'forge restart fix-parser');
    assert.equal(byId.get('raise_budget')!.cli, 'forge restart fix-parser --budget AMOUNT');
    assert.equal(byId.get('show_checks')!.cli, 'forge status fix-parser');
    assert.equal(byId.get('cancel')!.cli, 'forge cancel fix-parser');
    assert.equal(byId.get('read_answers')!.cli, 'forge review fix-parser');
    assert.equal(byId.get('send_review')!.cli, 'forge review fix-parser --send');
    assert.equal(byId.get('review')!.vscodeCommand, 'forge.reviewLoop', "VS Code's review is the multi-file diff that takes comments");
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const manifest = require('../../../package.json') as { contributes: { commands: { command: string }[] } };
    const declared = new Set(manifest.contributes.commands.map((c) => c.command));
    for (const s of all) assert.ok(declared.has(s.vscodeCommand), `${s.vscodeCommand} is declared`);
    for (const id of Object.keys(STEP_TEXT)) assert.ok(byId.has(id as NextStepId), `${id} tested`);
  });

  it('suggests twice the budget when it is known, to the cent and to the token', () => {
    assert.equal(raisedBudgetArgs(undefined), '--budget AMOUNT');
    assert.equal(raisedBudgetArgs({ money: null, tokens: null }), '--budget AMOUNT');
    assert.equal(raisedBudgetArgs({ money: 0.015, tokens: null }), '--budget 0.03');
    assert.equal(raisedBudgetArgs({ money: 5, tokens: 2_000_000 }), '--budget 10.00 --budget-tokens 4000000');
    assert.equal(raisedBudgetArgs({ money: null, tokens: 1500 }), '--budget-tokens 3000');
    assert.equal(nextStepsOf({ ...base, status: 'paused', reason: 'budget_reached', budget: { money: 1.25, tokens: null } }).steps[0]!.cli, 'forge restart fix-parser --budget 2.50');
  });

  it('quotes a name or branch that is not one shell word', () => {
    const n = nextStepsOf({ name: "it's", branch: 'forge/a b', status: 'completed', reason: 'completed' });
    assert.deepEqual(n.steps.map((s) => s.cli), [`git diff ...'forge/a b'`, `forge accept 'it'\\''s'`]);
  });

  it('prints one "next:" line per step, the command first', () => {
    assert.deepEqual(nextStepLines(nextStepsOf({ ...base, status: 'completed', reason: 'completed' })), [
      "next: git diff ...forge/fix-parser   (review the loop's changes)",
      'next: forge accept fix-parser   (merge its branch into the base branch)',
    ]);
    assert.deepEqual(nextStepLines(nextStepsOf({ ...base, status: 'running', reason: null })), []);
  });
});
