import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { hang, text, toolCall } from '../../support/scripted-model';

const handoffCoder = (what = 'did the work') => toolCall('forge_loop_handoff', { decisions: what, verification: 'checked', notesForAuditor: '' });
const handoffAuditor = (done = true) => toolCall('forge_loop_handoff', { summary: 'reviewed', done, deviations: '', followUps: '' });

describe('loop lifecycle (real opencode, scripted model)', function () {
  this.timeout(300_000);
  let h: LoopHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('a goal loop completes after an audit with no open finding, without a final audit', async () => {
    h = await createLoopHarness();
    const wt = () => h!.engine.runtime.get({ projectId: h!.projectId, name: 'add-a-license-file' })!.worktreeDir!;
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) return [toolCall('write', { filePath: join(wt(), 'LICENSE'), content: 'MIT\n' }), handoffCoder('wrote LICENSE')];
      if (role === 'auditor' && nth === 1) {
        return [toolCall('forge_review_write', { file: 'GOAL', line: 0, severity: 'warning', description: 'The licence names no holder.' }), handoffAuditor(false)];
      }
      if (role === 'code') return [toolCall('write', { filePath: join(wt(), 'LICENSE'), content: 'MIT (c) Forge\n' }), handoffCoder('named the holder')];
      return [toolCall('forge_review_delete', { file: 'GOAL', line: 0 }), handoffAuditor()];
    });
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Add a license file' });
    assert.equal(ref.name, 'add-a-license-file');
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed');
    const repos = createForgeRepositories(h.engine.db);
    const edges = repos.transitions.listByLoop(h.projectId, ref.name).map((t) => `${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`);
    assert.deepEqual(edges, ['->coding', 'coding>auditing', 'auditing>coding', 'coding>auditing', 'auditing>-']);
    assert.ok(!edges.some((e) => e.includes('final')), 'a goal has no final audit');
    // A warning blocks a goal (no open finding at all), so the first audit was dirty.
    assert.equal(script.counts.auditor, 2);
    assert.equal(await h.repo.git('show', `forge/${ref.name}:LICENSE`), 'MIT (c) Forge\n');
  });

  it('a loop started with a model variant sends it with every prompt on that model', async () => {
    // The user's configuration gives the mock model a variant; an openai-compatible model
    // sends its reasoningEffort as reasoning_effort.
    h = await createLoopHarness({ modelConfig: { reasoning: true, variants: { thorough: { reasoningEffort: 'forge-thorough' } } } });
    const script = sessionScript((role) => (role === 'code' ? [handoffCoder('nothing to change')] : [handoffAuditor()]));
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Check the readme', variant: 'thorough' });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed');
    const agentRequests = h.model.requests.filter((r) => !r.isTitleRequest);
    assert.ok(agentRequests.length >= 2, `${agentRequests.length} model requests`);
    assert.deepEqual(new Set(agentRequests.map((r) => r.body.reasoning_effort)), new Set(['forge-thorough']));
  });

  it('unsectioned plan: a missed handoff is reminded, the post action runs, and the branch fast-forwards the base', async () => {
    h = await createLoopHarness({ settings: { 'forge.loop.postAction': 'Add a CHANGELOG line.', 'forge.loop.merge': 'fast-forward' } });
    const wt = () => h!.engine.runtime.get({ projectId: h!.projectId, name: 'notes' })!.worktreeDir!;
    const script = sessionScript((role, nth, request) => {
      if (role === 'code' && nth === 1) {
        // Ends its first turn without a handoff; Forge reminds it in the same session.
        return [toolCall('write', { filePath: join(wt(), 'NOTES.md'), content: '# Notes\n' }), text('All done, I think.'), handoffCoder('wrote NOTES.md')];
      }
      if (role === 'code' && request.lastUserText.includes('post action')) {
        return [toolCall('write', { filePath: join(wt(), 'CHANGELOG.md'), content: '- notes\n' }), handoffCoder('changelog')];
      }
      return [handoffAuditor()];
    });
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: 'Loop Name: notes\nWrite NOTES.md with a title.' });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end.type === 'loop.ended' && end.status === 'completed', JSON.stringify(end));
    const reminder = h.model.agentRequests.find((r) => r.lastUserText.includes('You stopped without calling'));
    assert.ok(reminder, 'the coder was reminded to hand off');
    const rows = createForgeRepositories(h.engine.db).transitions.listByLoop(h.projectId, ref.name);
    assert.deepEqual(
      rows.map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`),
      ['start:->coding', 'coder_handoff:coding>auditing', 'audit_clean:auditing>final_auditing', 'final_audit_clean:final_auditing>post_action', 'post_action_done:post_action>-'],
    );
    // Completed with merge = fast-forward: the user's main branch now holds the loop's work.
    assert.equal((await h.repo.git('rev-parse', 'main')).trim(), (await h.repo.git('rev-parse', 'forge/notes')).trim());
    assert.equal(await h.repo.git('show', 'main:CHANGELOG.md'), '- notes\n');
    assert.ok(end.type === 'loop.ended' && /fast-forward/i.test(end.merge ?? ''), String(end.type === 'loop.ended' && end.merge));
  });

  it('ends with max_iterations when the auditor never clears', async () => {
    h = await createLoopHarness();
    const script = sessionScript((role, nth) =>
      role === 'code'
        ? [handoffCoder()]
        : [toolCall('forge_review_write', { file: 'README.md', line: 1, severity: 'bug', description: `Still wrong (${nth}).` }), handoffAuditor(false)],
    );
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# Never done\n## One\ndo it', maxIterations: 2 });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end.type === 'loop.ended');
    if (end.type !== 'loop.ended') return;
    assert.equal(end.reason.kind, 'max_iterations');
    assert.equal(end.status, 'errored');
    assert.equal(script.counts.code, 2, 'two coding passes, no third');
    const loop = h.engine.runtime.get(ref)!;
    assert.equal(loop.terminationReason, 'max_iterations');
    const last = createForgeRepositories(h.engine.db).transitions.last(h.projectId, ref.name)!;
    assert.equal(last.reason, 'max_iterations');
    assert.equal(last.toPhase, null);
  });

  // The stall time-out stays well above opencode's cold model loading (seconds on a loaded
  // machine): aborting a session while opencode still loads the provider poisons that load.
  it('a model that never answers is re-triggered by the watchdog, then ends with stall_timeout', async () => {
    h = await createLoopHarness({ settings: { 'forge.loop.stallTimeoutMs': 20_000, 'forge.loop.maxConsecutiveStalls': 2 } });
    h.model.setHandler(() => hang);
    const ref = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# Stuck\n## One\ndo it' });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end.type === 'loop.ended' && end.reason.kind === 'stall_timeout', JSON.stringify(end));
    assert.equal(h.engine.runtime.get(ref)!.status, 'stalled');
    const rows = createForgeRepositories(h.engine.db).transitions.listByLoop(h.projectId, ref.name);
    assert.deepEqual(
      rows.map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`),
      ['start:->coding', 'stall:coding>coding', 'stall:coding>-'],
    );
    // The re-trigger ran in a fresh session.
    const attempts = createForgeRepositories(h.engine.db).attempts.listByLoop(h.projectId, ref.name);
    assert.equal(new Set(attempts.map((a) => a.sessionId)).size, 2);
  });

  it("the section checkpoint is committed at the auditor's handoff, and taken back when the section does not complete after all", async () => {
    h = await createLoopHarness();
    const wt = () => h!.engine.runtime.get({ projectId: h!.projectId, name: 'early' })!.worktreeDir!;
    // A clean handoff, then the auditor's turn never ends: the section is not complete until its idle.
    const script = sessionScript((role) => (role === 'code' ? [toolCall('write', { filePath: join(wt(), 'feature.txt'), content: 'done\n' }), handoffCoder()] : [handoffAuditor(), hang]));
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# Early\nLoop Name: early\n## One\nWrite feature.txt.\n## Two\nNothing.' });
    const subjects = async () => (await h!.repo.git('log', '--format=%s', `forge/${ref.name}`)).split('\n');
    const deadline = Date.now() + 120_000;
    while (!(await subjects()).includes('One')) {
      assert.ok(Date.now() < deadline, 'no checkpoint commit after the handoff');
      await new Promise((r) => setTimeout(r, 200));
    }
    // Still auditing: the commit came before the idle.
    assert.equal(h.engine.runtime.get(ref)!.phase, 'auditing');
    await h.engine.runtime.cancel(ref);
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end.type === 'loop.ended' && end.status === 'cancelled');
    // The cancel did not complete the section: its checkpoint is gone, the work is in the teardown commit.
    const log = await subjects();
    assert.ok(!log.includes('One'), log.join(' | '));
    assert.equal(log[0], 'Work in progress: one');
    assert.match(await h.repo.git('log', '-1', '--format=%b', `forge/${ref.name}`), /^Changes feature\.txt\.\n\nForge loop early stopped \(cancelled\) after 1 iteration; this commit keeps its unfinished work\./);
    assert.equal((await h.repo.git('show', `forge/${ref.name}:feature.txt`)).trim(), 'done');
    const repos = createForgeRepositories(h.engine.db);
    assert.equal(repos.sectionPlans.get(h.projectId, ref.name, 0)!.status, 'in_progress');
  });

  it('cancel mid-phase, then restart: the persisted phase resumes in a fresh session and the old one gets no further prompt', async () => {
    h = await createLoopHarness();
    let blockFirstAudit = true;
    const script = sessionScript((role, nth) => {
      if (role === 'code') return [handoffCoder()];
      if (nth === 1 && blockFirstAudit) return [hang];
      return [handoffAuditor()];
    });
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# Cancel me\n## One\ndo it' });
    const firstAudit = await h.model.waitForRequest((r) => !r.toolNames.includes('write') && !r.isTitleRequest, 120_000);
    await h.engine.runtime.cancel(ref);
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end.type === 'loop.ended' && end.status === 'cancelled');
    const cancelled = h.engine.runtime.get(ref)!;
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.phase, 'auditing');

    blockFirstAudit = false;
    const before = h.model.agentRequests.length;
    await h.engine.runtime.restart(ref);
    const end2 = await h.engine.runtime.waitForEnd(ref);
    assert.ok(end2.type === 'loop.ended' && end2.status === 'completed', JSON.stringify(end2));
    const after = h.model.agentRequests.slice(before);
    assert.ok(after.length > 0);
    assert.ok(after.every((r) => r.sessionId !== firstAudit.sessionId), 'the cancelled session got no further prompt');
    const rows = createForgeRepositories(h.engine.db).transitions.listByLoop(h.projectId, ref.name);
    assert.deepEqual(
      rows.map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`),
      ['start:->coding', 'coder_handoff:coding>auditing', 'cancel:auditing>-', 'restart:auditing>auditing', 'audit_clean:auditing>final_auditing', 'final_audit_clean:final_auditing>-'],
    );
    assert.equal(text('x').kind, 'text');
  });
});
