import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';
import { processesRunning } from '../../support/processes';

/** A plan whose Verification runs the project's test, and whose section asserts a file exists. */
const PLAN = `# Adder
Loop Name: adder

## Add function
Create add.js exporting add(a, b) that returns their sum.
Verify: exists: add.js

## Verification
\`\`\`sh
node test.js
\`\`\`
`;

const TEST_JS = 'const assert = require("assert");\nassert.equal(require("./add").add(2, 3), 5, "add(2, 3) must be 5");\nconsole.log("add works");\n';
const WRONG = 'exports.add = (a, b) => a - b;\n';
const RIGHT = 'exports.add = (a, b) => a + b;\n';


async function waitFor(what: string, test: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const handoffCoder = (what: string) => toolCall('forge_loop_handoff', { decisions: what, verification: 'read the file back', notesForAuditor: 'none' });
const handoffAuditor = (summary: string) => toolCall('forge_loop_handoff', { summary, done: true, deviations: '', followUps: '' });

describe('verification gate end to end (real opencode, real git, scripted model)', function () {
  this.timeout(300_000);
  let h: LoopHarness;
  afterEach(async () => {
    await h?.close();
  });

  for (const sandboxed of [true, false]) {
    it(`${sandboxed ? 'in the sandbox' : 'on the host'}: a wrong implementation the auditor approves does not complete; the failing check's output reaches the coder; after the fix the loop completes`, async () => {
      h = await createLoopHarness({ files: { 'README.md': '# adder\n', 'test.js': TEST_JS }, settings: { 'forge.sandbox.enabled': sandboxed } });
      const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'adder' })!.worktreeDir!;
      const script = sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) return [toolCall('write', { filePath: join(wt(), 'add.js'), content: WRONG }), handoffCoder('wrote add.js')];
        if (role === 'code' && nth === 2) return [toolCall('write', { filePath: join(wt(), 'add.js'), content: RIGHT }), handoffCoder('fixed add.js')];
        // The auditor approves every time, the wrong implementation included.
        return [handoffAuditor(`audit ${nth}: looks fine`)];
      });
      h.model.setHandler(script.handler);

      const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: PLAN, planSource: 'plan.md' });
      assert.equal(started.confinement.sandboxed, sandboxed);
      const ended = await h.engine.runtime.waitForEnd(started);
      assert.equal(ended.type, 'loop.ended');
      if (ended.type !== 'loop.ended') return;
      assert.equal(ended.status, 'completed', JSON.stringify(ended));

      const repos = createForgeRepositories(h.engine.db);
      const rows = repos.transitions.listByLoop(h.projectId, 'adder').map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`);
      assert.deepEqual(rows, [
        'start:->coding',
        'coder_handoff:coding>auditing',
        // The section's Verify: line (add.js exists) passed: its checkpoint.
        'checks_passed:auditing>final_auditing',
        // The final audit was clean, but node test.js failed on the final tree: back to work.
        'checks_failed:final_auditing>final_audit_fix',
        'coder_handoff:final_audit_fix>final_auditing',
        'checks_passed:final_auditing>-',
      ]);

      const runs = repos.checkRuns.listByLoop(h.projectId, 'adder');
      assert.deepEqual(
        runs.map((r) => `${r.gate}:${r.checkId}:${r.status}:${r.exitCode ?? '-'}:i${r.iteration}`),
        [
          'section:section-1-1:passed:-:i1',
          'final:plan-1:failed:1:i1',
          'final:section-1-1:passed:-:i1',
          'final:plan-1:passed:0:i2',
          'final:section-1-1:passed:-:i2',
        ],
      );
      const failedRun = runs[1]!;
      assert.equal(failedRun.command, 'node test.js');
      assert.match(failedRun.outputTail, /AssertionError/);
      assert.match(failedRun.outputTail, /add\(2, 3\) must be 5/);
      assert.match(runs[3]!.outputTail, /^add works\n$/);

      // The failing check became a bug finding (source check) and the next coder prompt carried it in full, output included.
      const findings = repos.reviewFindings.listByLoop(h.projectId, 'adder');
      assert.equal(findings.length, 1);
      const finding = findings[0]!;
      assert.deepEqual([finding.source, finding.severity, finding.status, finding.sectionIndex], ['check', 'bug', 'resolved', null]);
      assert.match(finding.description, /^Check failed: check 1: node test\.js/);
      assert.equal(finding.file, 'test.js', 'the file the output names');
      const fixer = script.firstRequests.find((r) => r.role === 'code' && r.nth === 2)!.request;
      assert.ok(fixer.lastUserText.includes('Check failed: check 1: node test.js'), 'the check finding is inlined');
      assert.match(fixer.lastUserText, /### Finding #\d+ — BUG \(failed verification check\) — test\.js/);
      assert.ok(fixer.lastUserText.includes('add(2, 3) must be 5'), "the check's output is inlined");
      assert.ok(fixer.lastUserText.includes('exited with code 1'));
      assert.deepEqual(script.firstRequests.map((r) => `${r.role}${r.nth}`), ['code1', 'auditor1', 'auditor2', 'code2', 'auditor3']);

      // The run lines reached the event stream as they happened.
      const checkEvents = h.events.filter((e) => e.type === 'loop.check');
      assert.equal(checkEvents.length, 5);
      assert.equal(await h.repo.git('show', 'forge/adder:add.js'), RIGHT);
    });
  }

  it("a section whose Verify: line fails gets no checkpoint: the coder goes back to that section with the finding, and the checkpoint follows the pass", async () => {
    const plan = '# Two files\nLoop Name: twofiles\n\n## First\nCreate a.txt and b.txt.\nVerify: exists: b.txt\n\n## Second\nNothing more.\n';
    h = await createLoopHarness({ settings: { 'forge.sandbox.enabled': false } });
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'twofiles' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) return [toolCall('write', { filePath: join(wt(), 'a.txt'), content: 'a\n' }), handoffCoder('wrote a.txt')];
      if (role === 'code' && nth === 2) return [toolCall('write', { filePath: join(wt(), 'b.txt'), content: 'b\n' }), handoffCoder('wrote b.txt')];
      if (role === 'code') return [handoffCoder('nothing to do')];
      return [handoffAuditor(`audit ${nth}: fine`)];
    });
    h.model.setHandler(script.handler);
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan });
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type === 'loop.ended' && ended.status, 'completed', JSON.stringify(ended));
    const repos = createForgeRepositories(h.engine.db);
    assert.deepEqual(
      repos.transitions.listByLoop(h.projectId, 'twofiles').map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}:s${t.sectionIndex ?? '-'}`),
      [
        'start:->coding:s0',
        'coder_handoff:coding>auditing:s0',
        'checks_failed:auditing>coding:s0',
        'coder_handoff:coding>auditing:s0',
        'checks_passed:auditing>coding:s1',
        'coder_handoff:coding>auditing:s1',
        'audit_clean:auditing>final_auditing:s1',
        'checks_passed:final_auditing>-:s1',
      ],
    );
    assert.deepEqual(repos.checkRuns.listByLoop(h.projectId, 'twofiles').map((r) => `${r.gate}:${r.checkId}:${r.status}`), ['section:section-1-1:failed', 'section:section-1-1:passed', 'final:section-1-1:passed']);
    const fixer = script.firstRequests.find((r) => r.role === 'code' && r.nth === 2)!.request;
    assert.match(fixer.lastUserText, /Check failed: section 1 check 1: exists: b\.txt/);
    const [finding] = repos.reviewFindings.listByLoop(h.projectId, 'twofiles');
    assert.deepEqual([finding?.source, finding?.sectionIndex, finding?.status], ['check', 0, 'resolved']);
    assert.deepEqual(repos.sectionPlans.list(h.projectId, 'twofiles').map((s) => [s.status, s.attempts]), [['done', 2], ['done', 1]]);
    const log = (await h.repo.git('log', '--format=%s', 'forge/twofiles')).trim().split('\n');
    assert.equal(log.filter((l) => l === 'First').length, 1, 'one checkpoint for section 1, after its check passed');
    assert.equal((await h.repo.git('show', 'forge/twofiles:b.txt')), 'b\n');
  });

  it('max_iterations ends a loop whose check never passes, and the reason names the check', async () => {
    h = await createLoopHarness({ files: { 'README.md': '# adder\n', 'test.js': TEST_JS }, settings: { 'forge.sandbox.enabled': false } });
    const wt = () => h.engine.runtime.get({ projectId: h.projectId, name: 'adder' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code') return [toolCall('write', { filePath: join(wt(), 'add.js'), content: WRONG }), handoffCoder(`attempt ${nth}`)];
      return [handoffAuditor(`audit ${nth}: fine`)];
    });
    h.model.setHandler(script.handler);
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: PLAN, planSource: 'plan.md', maxIterations: 2 });
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type, 'loop.ended');
    if (ended.type !== 'loop.ended') return;
    assert.equal(ended.status, 'errored');
    assert.deepEqual(ended.reason, { kind: 'max_iterations', message: 'check failed: check 1: node test.js (exited with code 1)' });
    const loop = h.engine.runtime.get(started)!;
    assert.equal(loop.terminationReason, 'max_iterations: check failed: check 1: node test.js (exited with code 1)');
    const repos = createForgeRepositories(h.engine.db);
    const open = repos.reviewFindings.listOpen(h.projectId, 'adder');
    assert.deepEqual(open.map((f) => [f.source, f.recurrenceCount]), [['check', 2]], 'the check finding stays open');
  });

  for (const sandboxed of [true, false]) {
    it(`${sandboxed ? 'in the sandbox' : 'on the host'}: a check that hangs is killed at forge.checks.timeoutMs with what it started, and fails the gate`, async () => {
      const sleeper = `sleep ${sandboxed ? 311 : 312}`;
      const plan = `# Hang\nLoop Name: hang\n\n## Only\nNothing to write.\n\n## Verification\n\`\`\`sh\n${sleeper} & ${sleeper}\n\`\`\`\n`;
      h = await createLoopHarness({ settings: { 'forge.sandbox.enabled': sandboxed, 'forge.checks.timeoutMs': 1500 } });
      h.model.setHandler(sessionScript((role) => [role === 'code' ? handoffCoder('nothing') : handoffAuditor('fine')]).handler);
      const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan, maxIterations: 1 });
      const ended = await h.engine.runtime.waitForEnd(started);
      assert.equal(ended.type, 'loop.ended');
      if (ended.type !== 'loop.ended') return;
      assert.deepEqual(ended.reason, { kind: 'max_iterations', message: `check failed: check 1: ${sleeper} & ${sleeper} (timed out after 1500 ms; Forge killed it and everything it started)` });
      const runs = createForgeRepositories(h.engine.db).checkRuns.listByLoop(h.projectId, 'hang');
      assert.deepEqual(runs.map((r) => r.status), ['timed-out']);
      assert.ok(runs[0]!.durationMs >= 1500 && runs[0]!.durationMs < 15_000, `took ${runs[0]!.durationMs} ms`);
      assert.deepEqual(await processesRunning(sleeper), [], 'nothing the check started survives it');
    });
  }

  for (const sandboxed of [true, false]) {
  it(`${sandboxed ? 'in the sandbox' : 'on the host'}: cancelling a loop while its check runs stops the check at once: the run is logged as cancelled, no finding, nothing left running`, async () => {
    const sleeper = `sleep ${sandboxed ? 314 : 313}`;
    const plan = `# Slow\nLoop Name: slow\n\n## Only\nNothing to write.\n\n## Verification\n\`\`\`sh\n${sleeper}\n\`\`\`\n`;
    h = await createLoopHarness({ settings: { 'forge.sandbox.enabled': sandboxed } });
    h.model.setHandler(sessionScript((role) => [role === 'code' ? handoffCoder('nothing') : handoffAuditor('fine')]).handler);
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan });
    assert.equal(started.confinement.sandboxed, sandboxed);
    await waitFor('the check to run', async () => (await processesRunning(sleeper)).length > 0);
    const cancelledAt = Date.now();
    await h.engine.runtime.cancel(started);
    const ended = await h.engine.runtime.waitForEnd(started);
    assert.equal(ended.type, 'loop.ended');
    if (ended.type !== 'loop.ended') return;
    assert.equal(ended.status, 'cancelled');
    assert.ok(Date.now() - cancelledAt < 20_000, 'the cancel did not wait for the check');
    const repos = createForgeRepositories(h.engine.db);
    assert.deepEqual(repos.checkRuns.listByLoop(h.projectId, 'slow').map((r) => r.status), ['cancelled']);
    assert.deepEqual(repos.reviewFindings.listByLoop(h.projectId, 'slow'), [], 'a cancelled run says nothing about the work');
    assert.deepEqual(await processesRunning(sleeper), []);
  });
  }
});
