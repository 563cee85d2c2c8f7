/**
 * Plan authoring's pure parts (issue 15): the request check, the architect's prompts, what a
 * finished turn means, the architect's permission policy; and the plan_drafts repository over a
 * real sql.js database file.
 */
import { strict as assert } from 'node:assert';
import {
  architectSessionTitle,
  buildArchitectFollowUp,
  buildArchitectPrompt,
  checkDraftRequest,
  draftFileName,
  draftOutcome,
  PlanDraftError,
} from '../../../src/core/plan-draft/architect-prompt';
import { buildLoopPermissionRuleset, decidePermissionReply, evaluateRuleset, structuralDenyRules } from '../../../src/core/opencode/permissions';
import { openForgeDatabase } from '../../../src/core/storage';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { makeTempDataDir } from '../../support/storage-fixtures';

const PLAN = '# Greeting\n\n## Objective\nA greeting.\n\n## Verification\n- exists: hello.txt\n\n## Write it\nCreate hello.txt.\n';

describe('plan authoring: the architect prompt and the outcome of a turn', () => {
  it('an empty or blank request (or answer) is refused with an example of what to give', () => {
    for (const blank of ['', '   ', '\n\t']) {
      assert.throws(() => checkDraftRequest(blank), (e: unknown) => e instanceof PlanDraftError && e.code === 'bad_request' && /The request is empty\. Say what you want planned, e\.g\. forge plan "/.test(e.message));
      assert.throws(() => checkDraftRequest(blank, 'answer'), (e: unknown) => e instanceof PlanDraftError && /The answer is empty/.test(e.message));
    }
    assert.equal(checkDraftRequest('  add a flag \n'), 'add a flag');
  });

  it('titles the session after the request, on one line, shortened', () => {
    assert.equal(architectSessionTitle('add\na   flag'), 'Forge plan · add a flag');
    const long = architectSessionTitle('x'.repeat(200));
    assert.equal(long.length, 'Forge plan · '.length + 60);
    assert.ok(long.endsWith('…'));
  });

  it('the first prompt names the checkout, the commit, the request, and that the plan goes through the plan tools', () => {
    const prompt = buildArchitectPrompt({ request: 'add a --verbose flag', checkoutDir: '/data/plan-drafts/ab12cd34', headCommit: '0123456789abcdef0123' });
    assert.match(prompt, /checked out \(read-only for you\) at \/data\/plan-drafts\/ab12cd34, at commit 0123456789ab:/);
    assert.match(prompt, /## What the user wants\n\nadd a --verbose flag\n/);
    assert.match(prompt, /forge_plan_write/);
    assert.match(prompt, /your chat text is not the plan/);
  });

  it('the follow-up carries the answer, and says so when the user edited the plan', () => {
    const plain = buildArchitectFollowUp({ answer: 'use the logger', userEditedPlan: false });
    assert.match(plain, /# The user answers\n\nuse the logger\n/);
    assert.doesNotMatch(plain, /edited the plan file/);
    assert.match(buildArchitectFollowUp({ answer: 'x', userEditedPlan: true }), /The user edited the plan file since you last wrote it/);
  });

  it('a turn without a stored plan is "no_plan", with the --continue command; never decided from prose', () => {
    const outcome = draftOutcome({ plan: null, planChangedThisTurn: false, draftId: 'ab12cd34', continued: false });
    assert.equal(outcome.kind, 'no_plan');
    assert.match(outcome.kind === 'no_plan' ? outcome.message : '', /never called plan_write\)\. The session is kept: answer it or ask again with forge plan --continue ab12cd34 "…"\./);
  });

  it('a stored plan is summarised; a missing verification part, dropped sections and an unchanged plan are warned about', () => {
    const ok = draftOutcome({ plan: PLAN, planChangedThisTurn: true, draftId: 'a', continued: false });
    assert.deepEqual(ok, { kind: 'drafted', summary: '"Greeting", 1 section', warnings: [] });
    const noVerification = draftOutcome({ plan: '# T\n\n## One\nDo it.\n\n## Two\nDo more.\n', planChangedThisTurn: true, draftId: 'a', continued: false });
    assert.equal(noVerification.kind === 'drafted' && noVerification.summary, '"T", 2 sections');
    assert.match(noVerification.kind === 'drafted' ? noVerification.warnings[0]! : '', /no verification part/);
    const many = `# Many\n\n## Verification\n- exists: a\n\n${Array.from({ length: 26 }, (_, i) => `## S${i}\nDo ${i}.\n`).join('\n')}`;
    const capped = draftOutcome({ plan: many, planChangedThisTurn: true, draftId: 'a', continued: false });
    assert.equal(capped.kind === 'drafted' && capped.summary, '"Many", 24 sections');
    assert.ok(capped.kind === 'drafted' && capped.warnings.some((w) => /24/.test(w)), JSON.stringify(capped));
    const unchanged = draftOutcome({ plan: PLAN, planChangedThisTurn: false, draftId: 'a', continued: true });
    assert.deepEqual(unchanged.kind === 'drafted' && unchanged.warnings, ['The architect did not change the plan in this turn.']);
    assert.equal(draftFileName('ab12cd34'), 'forge-plan-ab12cd34.md');
  });
});

describe('plan authoring: the architect only reads (permission policy)', () => {
  const options = { role: 'architect' as const, worktreeDir: '/data/plan-drafts/ab12cd34', realPath: (p: string) => p };

  it('the ruleset denies every shell command, every file edit and every subagent, last, whatever came before', () => {
    const ruleset = buildLoopPermissionRuleset({ ...options, userDenyRules: [] });
    for (const command of ['ls', 'git log', 'rm -rf /', 'echo x > f']) assert.equal(evaluateRuleset(ruleset, 'bash', command), 'deny', command);
    for (const permission of ['edit', 'write', 'patch', 'multiedit', 'apply_patch']) assert.equal(evaluateRuleset(ruleset, permission, '/data/plan-drafts/ab12cd34/a.ts'), 'deny', permission);
    for (const agent of ['general', 'explore']) assert.equal(evaluateRuleset(ruleset, 'task', agent), 'deny', agent);
    assert.equal(evaluateRuleset(ruleset, 'forge_plan_write', '*'), 'allow');
    assert.equal(evaluateRuleset(ruleset, 'forge_loop_handoff', '*'), 'deny');
    assert.equal(evaluateRuleset(ruleset, 'forge_review_write', '*'), 'deny');
    // Loop roles keep their own rules.
    assert.equal(evaluateRuleset(structuralDenyRules('code'), 'bash', 'ls'), 'ask');
  });

  it('a request that reaches Forge anyway is rejected, saying the architect only reads; reading inside the checkout is allowed, outside refused', () => {
    const ask = (permission: string, patterns: string[]) => decidePermissionReply({ id: 'p', sessionId: 's', permission, patterns, metadata: {} }, options);
    const bash = ask('bash', ['touch x']);
    assert.equal(bash.reply, 'reject');
    assert.match(bash.reason, /Forge does not allow "bash" \(touch x\) in the architect session \(it only reads\)\./);
    assert.equal(ask('edit', ['/data/plan-drafts/ab12cd34/a.ts']).reply, 'reject');
    assert.equal(ask('read', ['/data/plan-drafts/ab12cd34/a.ts']).reply, 'once');
    assert.equal(ask('read', ['/home/user/.ssh/id_rsa']).reply, 'reject');
  });
});

describe('plan authoring: the plan_drafts repository (migration 7)', function () {
  this.timeout(60_000);
  it('creates, updates with usage, finds by id across projects, lists newest first', async () => {
    const data = makeTempDataDir();
    let clock = 1000;
    const db = await openForgeDatabase({ path: data.dbPath, now: () => clock });
    try {
      const repos = createForgeRepositories(db, { now: () => clock++ });
      const created = repos.planDrafts.create('p1', { id: 'ab12cd34', repoDir: '/r', request: 'add a flag', model: null, outPath: '/r/forge-plan-ab12cd34.md' });
      assert.equal(created.status, 'drafting');
      assert.equal(created.turns, 0);
      assert.equal(created.sessionId, null);
      const usage = { inputTokens: 10, outputTokens: 5, reasoningTokens: 1, cacheReadTokens: 2, cacheWriteTokens: 0, cost: 0.25, messages: 3 };
      const updated = repos.planDrafts.update('p1', 'ab12cd34', { sessionId: 'ses_1', status: 'drafted', turns: 1, lastReply: 'Questions?', usage });
      assert.deepEqual(
        { s: updated.sessionId, st: updated.status, t: updated.turns, r: updated.lastReply, i: updated.inputTokens, c: updated.cost, m: updated.messages },
        { s: 'ses_1', st: 'drafted', t: 1, r: 'Questions?', i: 10, c: 0.25, m: 3 },
      );
      repos.planDrafts.create('p1', { id: 'ff00ff00', repoDir: '/r', request: 'b', model: 'a/b', outPath: '/o.md' });
      assert.deepEqual(repos.planDrafts.list('p1').map((d) => d.id), ['ff00ff00', 'ab12cd34']);
      assert.equal(repos.planDrafts.get('p2', 'ab12cd34'), undefined);
      assert.equal(repos.planDrafts.findById('ab12cd34')?.projectId, 'p1');
      assert.throws(() => repos.planDrafts.update('p1', 'nope', { status: 'failed' }), /No plan draft "nope"/);
      assert.throws(() => db.run(`UPDATE plan_drafts SET status = 'bogus'`), /CHECK constraint/);
    } finally {
      await db.close();
      data.cleanup();
    }
  });
});
