/**
 * Issue 16, parts 1 and 4 on real parts: the cost governor pauses a loop at the hand-over after
 * its budget is crossed (status paused, reason budget_reached, nothing lost), a restart without
 * more budget is refused, a restart with more completes it; and a loop that ended with
 * error_max_retries on a failing model completes after a restart on another model.
 *
 * Real opencode, git, database file; the scripted model reports the usage each step costs, and
 * opencode prices it from the mock model's catalog price ($1 / $2 per million tokens).
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { LoopRuntimeError, type LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { httpError, toolCall, toolCalls, type ScriptedUsage } from '../../support/scripted-model';
import { MOCK_PROVIDER_ID } from '../../support/opencode-test-env';

const PLAN = `# Greeting
Loop Name: greeting

## Greeting function
Create greet.js exporting greet(name) that returns "hello NAME".
`;

/**
 * 20,000 input and 100 output tokens: $0.0202 at the mock model's price (well inside the mock
 * model's context, which opencode would otherwise compact).
 */
const EXPENSIVE: ScriptedUsage = { input: 20_000, output: 100 };
const BUG = 'greet() ignores its name argument.';
const handoffCoder = (what: string, usage?: ScriptedUsage) => toolCall('forge_loop_handoff', { decisions: what, verification: 'read the file back', notesForAuditor: 'none' }, usage);
const handoffAuditor = (summary: string, done = true, usage?: ScriptedUsage) => toolCall('forge_loop_handoff', { summary, done, deviations: '', followUps: '' }, usage);

describe('cost governor and restart on another model (real opencode, scripted model)', function () {
  this.timeout(300_000);
  let h: LoopHarness;
  afterEach(async () => {
    await h?.close();
  });

  it('pauses at the hand-over after the budget is crossed, keeps everything, refuses a restart without more budget, completes with more', async () => {
    h = await createLoopHarness();
    const ref = { projectId: '', name: 'greeting' };
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'greeting' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) {
        return [toolCall('write', { filePath: join(wt(), 'greet.js'), content: 'exports.greet = () => "hello world";\n' }, EXPENSIVE), handoffCoder('wrote greet.js', EXPENSIVE)];
      }
      if (role === 'auditor' && nth === 1) {
        // One model step with both calls: the audit crosses the budget only with its hand-over, so it
        // pauses there (a step after it would be stopped inside the session, see the next test).
        return [
          toolCalls(
            [
              { name: 'forge_review_write', args: { file: 'greet.js', line: 1, severity: 'bug', description: BUG, scenario: 'greet("bob")' } },
              { name: 'forge_loop_handoff', args: { summary: 'ignores the name', done: false, deviations: '', followUps: '' } },
            ],
            { input: 2 * EXPENSIVE.input, output: 2 * EXPENSIVE.output },
          ),
        ];
      }
      if (role === 'code' && nth === 2) {
        return [toolCall('write', { filePath: join(wt(), 'greet.js'), content: 'exports.greet = (name) => `hello ${name}`;\n' }), handoffCoder('fixed greet')];
      }
      if (role === 'auditor' && nth === 2) return [toolCall('forge_review_delete', { file: 'greet.js', line: 1 }), handoffAuditor('fixed')];
      return [handoffAuditor(`audit ${nth} clean`)];
    });
    h.model.setHandler(script.handler);

    // $0.05: the coder's session (2 × $0.0202 + a little) crosses 80 %; the audit crosses 100 %.
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: PLAN, planSource: 'plan.md', budget: { money: 0.05 } });
    ref.projectId = started.projectId;
    assert.ok(started.notices.some((n) => /Budget: \$0\.05/.test(n)), started.notices.join('\n'));
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type, 'loop.ended');
    if (ended.type !== 'loop.ended') return;
    assert.equal(ended.status, 'paused', `${JSON.stringify(ended)}\nusage: ${JSON.stringify(createForgeRepositories(h.engine.db).sessionUsage.listByLoop(h.projectId, 'greeting'))}\nevents: ${h.events.map((e) => e.type === 'loop.notice' || e.type === 'loop.budget' ? `${e.type} ${e.message}` : e.type === 'loop.phase' ? `${e.event} ${e.to}` : e.type).join('\n')}\nfindings: ${JSON.stringify(createForgeRepositories(h.engine.db).reviewFindings.listByLoop(h.projectId, 'greeting'))}`);
    assert.deepEqual(ended.reason, { kind: 'budget_reached' });

    const budgetEvents = h.events.filter((e): e is Extract<LoopRuntimeEvent, { type: 'loop.budget' }> => e.type === 'loop.budget');
    assert.deepEqual(budgetEvents.map((e) => e.level), ['warning', 'paused'], 'one warning at 80 %, then the pause');
    assert.match(budgetEvents[0]!.message, /8\d % of the budget used: \$0\.04 of \$0\.05 \(money\)/);
    assert.match(budgetEvents[1]!.message, /budget reached: the loop spent \$0\.08 of \$0\.05 \(money\)\. The loop is paused before the next coding session/);

    // Paused at the hand-over after the crossing: the audit finished, the next coding pass never started.
    assert.deepEqual(script.firstRequests.map((r) => `${r.role}${r.nth}`), ['code1', 'auditor1']);
    const repos = createForgeRepositories(h.engine.db);
    const loop = h.engine.runtime.get(started)!;
    assert.equal(loop.status, 'paused');
    assert.equal(loop.terminationReason, 'budget_reached');
    assert.equal(loop.phase, 'coding', 'the phase change is recorded: a restart starts the coding pass it held back');
    assert.equal(loop.iteration, 2);
    const events = repos.transitions.listByLoop(h.projectId, 'greeting').map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}${t.status ? `:${t.status}` : ''}`);
    assert.deepEqual(events, ['start:->coding', 'coder_handoff:coding>auditing', 'audit_dirty:auditing>coding', 'budget_reached:coding>-:paused']);

    // Nothing lost: the worktree with the coder's uncommitted file, the branch, the open finding,
    // the sessions and their usage.
    assert.ok(existsSync(wt()), 'the worktree is kept');
    assert.equal(await readFile(join(wt(), 'greet.js'), 'utf8'), 'exports.greet = () => "hello world";\n');
    assert.match(await h.repo.git('-C', wt(), 'status', '--porcelain'), /greet\.js/, 'not committed behind the user\'s back');
    assert.equal((await h.repo.git('log', '--format=%s', 'forge/greeting')).trim().split('\n').length, 1, 'no teardown commit on the branch');
    assert.equal(repos.reviewFindings.listOpen(h.projectId, 'greeting').length, 1);
    const attempts = repos.attempts.listByLoop(h.projectId, 'greeting');
    assert.deepEqual(attempts.map((a) => `${a.kind}:${a.outcome}`), ['coding:succeeded', 'audit:succeeded']);
    const spentAtPause = repos.sessionUsage.totalsForLoop(h.projectId, 'greeting');
    assert.equal(spentAtPause.sessions, 2);
    assert.ok(spentAtPause.cost > 0.05 && spentAtPause.cost < 0.1, `spent ${spentAtPause.cost}`);
    // opencode still has both sessions (the paused loop's history).
    const sessionsDir = join(h.env.env.XDG_DATA_HOME!, 'opencode');
    assert.ok(existsSync(sessionsDir));

    // A paused loop never resumes by itself, and a restart without room to continue is refused.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(h.engine.runtime.get(started)!.status, 'paused');
    await assert.rejects(h.engine.runtime.restart(started), (e: unknown) => e instanceof LoopRuntimeError && e.code === 'bad_request' && /paused because its budget \(\$0\.05\) is spent.*Restart it with a higher budget/.test(e.message));
    await assert.rejects(h.engine.runtime.restart(started, { budget: { money: 0.06 } }), (e: unknown) => e instanceof LoopRuntimeError && /leaves no room for the next session either/.test(e.message));
    await assert.rejects(h.engine.runtime.restart(started, { budget: { money: -1 } }), (e: unknown) => e instanceof LoopRuntimeError && /must be an amount above 0/.test(e.message));
    assert.equal(h.engine.runtime.get(started)!.status, 'paused', 'a refused restart changes nothing');
    assert.deepEqual(script.firstRequests.map((r) => `${r.role}${r.nth}`), ['code1', 'auditor1']);

    // More budget: the held-back coding pass runs, and the loop completes.
    await h.engine.runtime.restart(started, { budget: { money: 10 } });
    const done = await h.engine.runtime.waitForEnd(started);
    assert.equal(done.type === 'loop.ended' && done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(script.firstRequests.map((r) => `${r.role}${r.nth}`), ['code1', 'auditor1', 'code2', 'auditor2', 'auditor3']);
    assert.equal(await h.repo.git('show', 'forge/greeting:greet.js'), 'exports.greet = (name) => `hello ${name}`;\n');
    const finalLoop = h.engine.runtime.get(started)!;
    assert.equal(finalLoop.terminationReason, 'completed');
    assert.equal((finalLoop.state as { budget?: { money: number } }).budget?.money, 10);
    assert.ok(repos.sessionUsage.totalsForLoop(h.projectId, 'greeting').cost >= spentAtPause.cost, 'the spend before the pause still counts');
  });

  it('the budget is a cap inside a session: a coder whose every step costs 20,000 tokens is stopped after the step that crossed it (issue 28)', async () => {
    h = await createLoopHarness();
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'greeting' })!.worktreeDir!;
    // Seven steps of 20,100 tokens each, then the hand-over: 140,700 tokens if nothing stops it.
    const steps = () => Array.from({ length: 7 }, (_, i) => toolCall('write', { filePath: join(wt(), `step-${i + 1}.txt`), content: `${i + 1}\n` }, EXPENSIVE));
    const script = sessionScript((role) => (role === 'code' ? [...steps(), handoffCoder('wrote them all')] : [handoffAuditor('fine')]));
    h.model.setHandler(script.handler);
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: PLAN, planSource: 'plan.md', budget: { tokens: 50_000 } });
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type === 'loop.ended' && ended.status, 'paused', JSON.stringify(ended));
    const repos = createForgeRepositories(h.engine.db);
    const spent = repos.sessionUsage.totalsForLoop(h.projectId, 'greeting');
    const tokens = spent.inputTokens + spent.outputTokens + spent.reasoningTokens + spent.cacheReadTokens + spent.cacheWriteTokens;
    // Crossed at the third step (60,300); at most the step under way when it was seen goes on top.
    assert.ok(tokens >= 50_000 && tokens <= 50_000 + 2 * 20_100, `spent ${tokens} tokens of a 50,000 cap`);
    const coderRequests = h.model.agentRequests.filter((r) => r.sessionId === script.firstRequests[0]!.request.sessionId).length;
    assert.ok(coderRequests <= 4, `the coder made ${coderRequests} model requests; the session went on after the cap`);
    assert.ok(!existsSync(join(wt(), 'step-5.txt')), 'the fifth step never ran');
    const pause = h.events.find((e): e is Extract<LoopRuntimeEvent, { type: 'loop.budget' }> => e.type === 'loop.budget' && e.level === 'paused');
    assert.match(pause?.message ?? '', /budget reached: the loop spent [\d,]+ tokens of 50,000 tokens \(tokens\)\. The coding session was stopped after its last model step and the loop is paused/);
    const loop = h.engine.runtime.get(started)!;
    assert.equal(loop.phase, 'coding', 'paused in the phase it was stopped in: a restart runs that session again');
    assert.deepEqual(repos.attempts.listByLoop(h.projectId, 'greeting').map((a) => `${a.kind}:${a.outcome}`), ['coding:abandoned']);
  });

  it('restart --model after error_max_retries on a failing model completes on the new one, recorded on the attempts', async () => {
    const variants = { reasoning: true, variants: { thorough: { reasoningEffort: 'forge-thorough' } } };
    h = await createLoopHarness({ settings: { 'forge.loop.maxModelRetries': 1 }, extraModels: ['fake-2'], modelConfig: variants });
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'greeting' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) return [toolCall('write', { filePath: join(wt(), 'greet.js'), content: 'exports.greet = (name) => `hello ${name}`;\n' }), handoffCoder('wrote greet.js')];
      return [handoffAuditor(`audit ${nth} clean`)];
    });
    // fake-1 fails every request for good (a 400 opencode does not retry); fake-2 works.
    h.model.setHandler((request) => (request.model === 'fake-1' ? httpError(400, JSON.stringify({ error: { message: 'fake-1 is out of service', type: 'invalid_request' } })) : script.handler(request)));

    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: PLAN, planSource: 'plan.md' });
    const failed = await h.engine.runtime.waitForEnd(started);
    assert.equal(failed.type === 'loop.ended' && failed.status, 'errored', JSON.stringify(failed));
    assert.equal(failed.type === 'loop.ended' && failed.reason.kind, 'error_max_retries');

    await assert.rejects(h.engine.runtime.restart(started, { model: 'fake-2' }), (e: unknown) => e instanceof LoopRuntimeError && /must be "provider\/model"/.test(e.message));
    await h.engine.runtime.restart(started, { model: `${MOCK_PROVIDER_ID}/fake-2`, variant: 'thorough' });
    const done = await h.engine.runtime.waitForEnd(started);
    assert.equal(done.type === 'loop.ended' && done.status, 'completed', JSON.stringify(done));

    const loop = h.engine.runtime.get(started)!;
    assert.equal(loop.model, 'mock/fake-2');
    const repos = createForgeRepositories(h.engine.db);
    const attempts = repos.attempts.listByLoop(h.projectId, 'greeting');
    const before = attempts.filter((a) => a.model === 'mock/fake-1');
    const after = attempts.filter((a) => a.model === 'mock/fake-2');
    assert.ok(before.length >= 2 && before.every((a) => a.outcome !== 'succeeded' && a.variant === null), JSON.stringify(before));
    assert.ok(after.length >= 3 && after.every((a) => a.outcome === 'succeeded' && a.variant === 'thorough'), JSON.stringify(after));
    assert.ok(attempts.indexOf(before.at(-1)!) < attempts.indexOf(after[0]!), 'the new model only after the restart');
    // The requests after the restart went to fake-2 with the variant's setting.
    const fake2 = h.model.agentRequests.filter((r) => r.model === 'fake-2');
    assert.ok(fake2.length > 0 && fake2.every((r) => JSON.stringify(r.body).includes('forge-thorough')), 'variant reached the model');
    assert.ok(h.events.some((e) => e.type === 'loop.notice' && /restarted with coding model mock\/fake-1 → mock\/fake-2, variant default → thorough/.test(e.message)));
    assert.equal(await h.repo.git('show', 'forge/greeting:greet.js'), 'exports.greet = (name) => `hello ${name}`;\n');
  });
});
