import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { text, toolCall, toolCalls } from '../../support/scripted-model';

const TWO_SECTION_PLAN = `# Greeting library
Loop Name: greeting

## Greeting function
Create greet.js exporting greet(name) that returns "hello NAME".

## Test
Create greet.test.js that checks greet("bob").

## Verification
node greet.test.js passes.
`;

const BUG = 'greet() ignores its name argument and always returns "hello world".';
const handoffCoder = (what: string) =>
  toolCall('forge_loop_handoff', { decisions: what, verification: 'read the file back', notesForAuditor: 'none' });
const handoffAuditor = (summary: string, done = true) => toolCall('forge_loop_handoff', { summary, done, deviations: '', followUps: '' });

describe('loop runtime end to end (real opencode, scripted model)', function () {
  this.timeout(300_000);
  let h: LoopHarness;
  afterEach(async () => {
    await h?.close();
  });

  it('two sections: dirty audit → fix with the finding inlined → clean → second section → clean final audit', async () => {
    h = await createLoopHarness();
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'greeting' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) {
        return [toolCall('write', { filePath: join(wt(), 'greet.js'), content: 'exports.greet = () => "hello world";\n' }), handoffCoder('wrote greet.js')];
      }
      if (role === 'auditor' && nth === 1) {
        return [
          toolCall('forge_review_write', { file: 'greet.js', line: 1, severity: 'bug', description: BUG, scenario: 'greet("bob") returns "hello world"' }),
          handoffAuditor('greet ignores the name', false),
        ];
      }
      if (role === 'code' && nth === 2) {
        return [toolCall('write', { filePath: join(wt(), 'greet.js'), content: 'exports.greet = (name) => `hello ${name}`;\n' }), handoffCoder('fixed greet')];
      }
      if (role === 'auditor' && nth === 2) {
        return [toolCall('forge_review_delete', { file: 'greet.js', line: 1 }), handoffAuditor('fixed')];
      }
      if (role === 'code' && nth === 3) {
        return [
          toolCalls([{ name: 'write', args: { filePath: join(wt(), 'greet.test.js'), content: 'require("assert").equal(require("./greet").greet("bob"), "hello bob");\n' } }]),
          handoffCoder('wrote the test'),
        ];
      }
      return [handoffAuditor(`audit ${nth} clean`)];
    });
    h.model.setHandler(script.handler);

    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: TWO_SECTION_PLAN, planSource: 'plan.md' });
    assert.equal(started.name, 'greeting');
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type, 'loop.ended');
    if (ended.type !== 'loop.ended') return;
    assert.equal(ended.status, 'completed', JSON.stringify(ended));

    // The coder's second prompt carries the finding in full; auditor prose never reaches it.
    const secondCoder = script.firstRequests.find((r) => r.role === 'code' && r.nth === 2)!.request;
    assert.ok(secondCoder.lastUserText.includes(BUG), 'finding description inlined');
    assert.ok(secondCoder.lastUserText.includes('greet("bob") returns "hello world"'), 'scenario inlined');
    assert.ok(secondCoder.lastUserText.includes('greet.js:1'));
    assert.ok(!secondCoder.lastUserText.includes('greet ignores the name'), 'auditor summary stays out of the coder prompt');
    assert.deepEqual(
      script.firstRequests.map((r) => `${r.role}${r.nth}`),
      ['code1', 'auditor1', 'code2', 'auditor2', 'code3', 'auditor3', 'auditor4'],
    );

    const repos = createForgeRepositories(h.engine.db);
    const rows = repos.transitions.listByLoop(h.projectId, 'greeting').map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`);
    assert.deepEqual(rows, [
      'start:->coding',
      'coder_handoff:coding>auditing',
      'audit_dirty:auditing>coding',
      'coder_handoff:coding>auditing',
      'audit_clean:auditing>coding',
      'coder_handoff:coding>auditing',
      'audit_clean:auditing>final_auditing',
      'final_audit_clean:final_auditing>-',
    ]);

    // Checkpoint commits on the loop branch; the user's checkout is untouched.
    const log = (await h.repo.git('log', '--format=%s', 'forge/greeting')).trim().split('\n');
    assert.deepEqual(log.slice(0, 2), ['Test', 'Greeting function']);
    // As a person writes them (issue 28): the section's title, what changed, which loop.
    assert.equal(
      (await h.repo.git('log', '-1', '--format=%B', 'forge/greeting~1')).trim(),
      'Greeting function\n\nChanges greet.js.\n\nSection 1 of Forge loop greeting, approved by its auditor.',
    );
    assert.equal(await h.repo.git('show', 'forge/greeting:greet.js'), 'exports.greet = (name) => `hello ${name}`;\n');
    await assert.rejects(readFile(join(h.repo.dir, 'greet.js')));
    // The checkpoint commits are the record: opencode keeps no shadow snapshot repository of
    // the worktree beside them (it would copy the tree at every step).
    assert.equal(existsSync(join(h.env.env.XDG_DATA_HOME!, 'opencode', 'snapshot')), false, 'no opencode snapshot repository');

    const finding = repos.reviewFindings.listByLoop(h.projectId, 'greeting');
    assert.equal(finding.length, 1);
    assert.equal(finding[0]!.status, 'resolved');
    assert.equal(finding[0]!.sectionIndex, 0);

    const sections = repos.sectionPlans.list(h.projectId, 'greeting');
    assert.deepEqual(sections.map((s) => [s.status, s.attempts]), [['done', 2], ['done', 1]]);

    // Usage equals what the scripted model reported: 10 input / 5 output tokens per request.
    const requests = h.model.agentRequests.length;
    const totals = repos.sessionUsage.totalsForLoop(h.projectId, 'greeting');
    assert.equal(totals.inputTokens, 10 * requests);
    assert.equal(totals.outputTokens, 5 * requests);
    assert.equal(totals.sessions, 7);
    const byRole = Object.fromEntries(repos.sessionUsage.totalsByRole(h.projectId, 'greeting').map((r) => [r.role, r.messages]));
    assert.equal(byRole.code! + byRole.auditor!, requests);
  });
});
