import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLoopToolBackend } from '../../../src/core/loop/tool-backend';
import { ForgeToolError, type ForgeToolBackend, type ForgeToolCaller } from '../../../src/core/opencode/forge-tool-backend';
import { openForgeDatabase, createForgeRepositories, type ForgeDatabase, type ForgeRepositories, type LoopHandoffRow } from '../../../src/core/storage';

const PROJECT = 'project-1';

describe('loop tool backend (real sql.js database)', () => {
  let dir: string;
  let worktree: string;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;
  let backend: ForgeToolBackend;
  let handoffs: LoopHandoffRow[];
  const auditor: ForgeToolCaller = { loopName: 'demo', role: 'auditor', sessionId: 'ses_aud' };
  const coder: ForgeToolCaller = { loopName: 'demo', role: 'code', sessionId: 'ses_code' };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'forge-tool-backend-'));
    worktree = join(dir, 'worktrees', 'demo');
    db = await openForgeDatabase({ path: join(dir, 'forge.db') });
    repos = createForgeRepositories(db);
    repos.loops.create(PROJECT, { name: 'demo', kind: 'plan', status: 'running', phase: 'auditing', iteration: 2, sectionIndex: 0, worktreeDir: worktree });
    repos.loops.setLargeFields(PROJECT, 'demo', { planText: '# Demo\n\n## Objective\nShip it.\n\n## One\nfirst\n\n## Two\nsecond\n' });
    repos.sectionPlans.replaceAll(PROJECT, 'demo', [
      { title: 'One', body: 'first' },
      { title: 'Two', body: 'second' },
    ]);
    handoffs = [];
    backend = createLoopToolBackend({ projectId: PROJECT, db, onHandoff: (h) => handoffs.push(h) });
  });

  afterEach(async () => {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('stores a finding with a worktree-relative path and the current section, and counts recurrences', async () => {
    const first = await backend.reviewWrite(auditor, { file: join(worktree, 'src', 'a.ts'), line: 4, severity: 'bug', description: 'Off by one' });
    assert.match(first, /Recorded finding #\d+ \(bug\) at src\/a\.ts:4\./);
    const [row] = repos.reviewFindings.listOpen(PROJECT, 'demo');
    assert.equal(row?.file, 'src/a.ts');
    assert.equal(row?.sectionIndex, 0);
    assert.equal(row?.status, 'open');
    await backend.reviewDelete(auditor, { id: row!.id });
    const again = await backend.reviewWrite(auditor, { file: 'src/a.ts', line: 5, severity: 'bug', description: 'off  by one' });
    assert.match(again, /reported 2 times/);
    assert.equal(repos.reviewFindings.listOpen(PROJECT, 'demo').length, 1);
    assert.equal(repos.reviewFindings.get(PROJECT, row!.id)?.recurrenceCount, 2);
  });

  it("refuses to resolve a check's finding, by id or by place: only Forge resolves it, when the check passes", async () => {
    const check = repos.reviewFindings.record(PROJECT, { loopName: 'demo', file: 'test.js', line: 3, severity: 'bug', description: 'Check failed: check 1: node test.js', fingerprint: 'check:plan:k', source: 'check' });
    for (const args of [{ id: check.id }, { file: 'test.js', line: 3 }]) {
      await assert.rejects(backend.reviewDelete(auditor, args), (e: unknown) => e instanceof ForgeToolError && /comes from a verification check Forge ran, not from an audit: no agent can resolve or delete it\. Forge resolves it itself when the check passes/.test(e.message));
    }
    assert.equal(repos.reviewFindings.get(PROJECT, check.id)?.status, 'open');
  });

  it("a user's review comment: no agent resolves it, the auditor's report does not take it over, only the coder answers it (issue 29)", async () => {
    const user = repos.reviewFindings.record(PROJECT, { loopName: 'demo', file: 'src/a.ts', line: 3, lineEnd: 5, severity: 'bug', description: 'Handle the empty list.', fingerprint: 'user:1', source: 'user' });
    for (const args of [{ id: user.id }, { file: 'src/a.ts', line: 3 }]) {
      await assert.rejects(backend.reviewDelete(auditor, args), (e: unknown) => e instanceof ForgeToolError && /is the user's review comment: no agent can resolve or delete it, only the user/.test(e.message));
    }
    await backend.reviewWrite(auditor, { file: 'src/a.ts', line: 3, severity: 'warning', description: 'Handle the empty list.' });
    assert.equal(repos.reviewFindings.get(PROJECT, user.id)?.source, 'user');
    await assert.rejects(backend.reviewReply(auditor, { id: user.id, reply: 'x' }), /Only the coder answers/);
    const audit = repos.reviewFindings.listOpen(PROJECT, 'demo').find((f) => f.source === 'auditor')!;
    await assert.rejects(backend.reviewReply(coder, { id: audit.id, reply: 'x' }), /no review comment of the user numbered/);
    assert.match(await backend.reviewReply(coder, { id: user.id, reply: 'Returns [] for an empty list now.' }), /recorded\. The comment stays open until the user resolves it/);
    const after = repos.reviewFindings.get(PROJECT, user.id)!;
    assert.deepEqual([after.status, after.reply, after.lineEnd], ['open', 'Returns [] for an empty list now.', 5]);
    assert.match(await backend.reviewRead(coder, {}), /the user's review comment; only the user closes it[\s\S]*Coder's answer: Returns \[\] for an empty list now\./);
  });

  it('accepts GOAL and PLAN pseudo-paths and refuses paths outside the worktree', async () => {
    await backend.reviewWrite(auditor, { file: 'PLAN', line: 0, severity: 'warning', description: 'section two is vague' });
    for (const file of ['../escape.ts', '/etc/passwd', join(dir, 'forge.db')]) {
      await assert.rejects(
        backend.reviewWrite(auditor, { file, line: 1, severity: 'bug', description: 'x' }),
        (e: unknown) => e instanceof ForgeToolError && /not a file inside the loop's worktree/.test(e.message),
      );
    }
    assert.deepEqual(
      repos.reviewFindings.listByLoop(PROJECT, 'demo').map((f) => f.file),
      ['PLAN'],
    );
  });

  it('refuses a file name with NUL, escape, control or bidi characters, saying why; a description keeps them as written', async () => {
    for (const file of ['a\u0000.ts', 'a.ts\u001b[2J', 'x\u001b]0;title\u0007.ts', 'src/\u202etxt.exe', 'a\nb.ts', '\u009b31m.ts']) {
      await assert.rejects(
        backend.reviewWrite(auditor, { file, line: 1, severity: 'bug', description: 'x' }),
        (e: unknown) => e instanceof ForgeToolError && /contains control, escape or bidi characters \(shown here as \\uXXXX\)/.test(e.message) && !/[\u0000-\u001f\u009b\u202e]/.test(e.message),
      );
    }
    const description = 'clears the screen: \u001b[2J, sets the title: \u001b]0;t\u0007, NUL: \u0000 end';
    await backend.reviewWrite(auditor, { file: 'a.ts', line: 1, severity: 'warning', description });
    assert.deepEqual(repos.reviewFindings.listByLoop(PROJECT, 'demo').map((f) => [f.file, f.description]), [['a.ts', description]]);
  });

  it('lists open findings (optionally per file) and resolves them without deleting', async () => {
    await backend.reviewWrite(auditor, { file: 'a.ts', line: 1, severity: 'warning', description: 'w', scenario: 'call it twice' });
    await backend.reviewWrite(auditor, { file: 'b.ts', line: 2, severity: 'bug', description: 'b' });
    const all = await backend.reviewRead(coder, {});
    assert.match(all, /2 open findings/);
    assert.match(all, /\[bug\] b\.ts:2/);
    assert.match(all, /Scenario: call it twice/);
    const onlyA = await backend.reviewRead(coder, { file: 'a.ts' });
    assert.doesNotMatch(onlyA, /b\.ts/);
    assert.match(await backend.reviewDelete(auditor, { file: 'b.ts', line: 2 }), /Resolved finding/);
    await assert.rejects(backend.reviewDelete(auditor, { file: 'b.ts', line: 2 }), /No open finding at b\.ts:2/);
    await assert.rejects(backend.reviewDelete(auditor, { id: 999 }), /no finding #999/);
    const rows = repos.reviewFindings.listByLoop(PROJECT, 'demo');
    assert.equal(rows.length, 2);
    assert.deepEqual(rows.map((r) => r.status).sort(), ['open', 'resolved']);
  });

  it('reads the current section, another section, the pending suffix, and the plan', async () => {
    assert.match(await backend.sectionRead(coder, {}), /^## Section 1 of 2: One \[pending\] \(current\)\n\nfirst$/);
    assert.match(await backend.sectionRead(coder, { index: 1 }), /Section 2 of 2: Two/);
    const pending = await backend.sectionRead(coder, { pendingSuffix: true });
    assert.match(pending, /One[\s\S]*Two/);
    await assert.rejects(backend.sectionRead(coder, { index: 7 }), /no section 7/);
    assert.match(await backend.planRead(coder, { pattern: '^## ' }), /3: ## Objective/);
    assert.match(await backend.planRead(coder, { offset: 0, limit: 1 }), /^# Demo\n\n\(\d+ more lines; read on with offset 1\)$/);
  });

  it('records a plan amendment; completed sections, the objective and the cap stay', async () => {
    const result = await backend.planAdjust(auditor, {
      rationale: 'section one needs an explicit test',
      currentSection: { title: 'One', body: 'first, with a test' },
      sections: [
        { title: 'Two a', body: 'half' },
        { title: 'Two b', body: 'other half' },
      ],
    });
    assert.match(result, /section 1 revised; pending sections replaced \(2\)/);
    assert.deepEqual(
      repos.sectionPlans.list(PROJECT, 'demo').map((s) => `${s.title}:${s.body}`),
      ['One:first, with a test', 'Two a:half', 'Two b:other half'],
    );
    const [amendment] = repos.planAmendments.listByLoop(PROJECT, 'demo');
    assert.equal(amendment?.rationale, 'section one needs an explicit test');
    assert.equal((amendment?.before as unknown[]).length, 2);
    assert.equal((amendment?.after as unknown[]).length, 3);

    await assert.rejects(backend.planAdjust(auditor, { rationale: 'r', sections: [{ title: 'Verification', body: 'new' }] }), /immutable/);
    const tooMany = Array.from({ length: 24 }, (_, i) => ({ title: `S${i}`, body: 'b' }));
    await assert.rejects(backend.planAdjust(auditor, { rationale: 'r', sections: tooMany }), /at most 24 sections/);
    repos.sectionPlans.setStatus(PROJECT, 'demo', 0, 'done');
    await assert.rejects(backend.planAdjust(auditor, { rationale: 'r', currentSection: { title: 'One', body: 'x' } }), /completed sections cannot be amended/);
    repos.loops.update(PROJECT, 'demo', { phase: 'coding' });
    await assert.rejects(backend.planAdjust(auditor, { rationale: 'r', sections: [] }), /only available while a section/);
    assert.equal(repos.planAmendments.listByLoop(PROJECT, 'demo').length, 1);
    assert.equal(repos.sectionPlans.list(PROJECT, 'demo').length, 3);
  });

  it('records a handoff with its loop, role, session and iteration and tells the runtime', async () => {
    await assert.rejects(backend.loopHandoff(coder, { verification: 'npm test' }), /Invalid handoff for the coder: decisions/);
    await assert.rejects(backend.loopHandoff(auditor, { summary: 'ok' }), /Invalid handoff for the auditor: done/);
    assert.equal(handoffs.length, 0);
    const reply = await backend.loopHandoff(coder, { decisions: 'kept the API\nadded a test', verification: 'npm test: 12 passing' });
    assert.match(reply, /Handoff recorded/);
    assert.equal(handoffs.length, 1);
    assert.equal(handoffs[0]?.role, 'code');
    assert.equal(handoffs[0]?.sessionId, 'ses_code');
    assert.equal(handoffs[0]?.iteration, 2);
    assert.deepEqual(handoffs[0]?.payload, { decisions: 'kept the API\nadded a test', verification: 'npm test: 12 passing', notesForAuditor: '' });
    assert.deepEqual(repos.handoffs.forSession(PROJECT, 'demo', 'ses_code')?.payload, handoffs[0]?.payload);
    await assert.rejects(backend.loopHandoff(coder, { decisions: 'x', verification: 'y' }), /already handed off/);
    await backend.loopHandoff(auditor, { summary: 'section one is done', done: true, followUps: 'docs' });
    assert.equal(repos.handoffs.latest(PROJECT, 'demo', 'auditor')?.sessionId, 'ses_aud');
  });

  it('writes and edits the plan of record for a planning scope, not for a loop', async () => {
    const architect: ForgeToolCaller = { loopName: null, role: 'architect', sessionId: undefined, scopeKey: 'plan-session-1' };
    const report = await backend.planWrite(architect, { content: '# Plan\n\n## Objective\nx\n\n## A\na\n\n## B\nb\n' });
    assert.match(report, /2 sections:\n  1\. A\n  2\. B/);
    await backend.planEdit(architect, { oldString: '## B\nb', newString: '## B\nbee' });
    assert.match(repos.plans.get(PROJECT, 'plan-session-1')?.content ?? '', /bee/);
    await assert.rejects(backend.planEdit(architect, { oldString: 'nothing like this', newString: '' }), /does not occur/);
    await assert.rejects(backend.planWrite({ ...architect, loopName: 'demo' }, { content: '# x' }), /cannot be rewritten/);
  });

  it('refuses calls for a loop that does not exist', async () => {
    await assert.rejects(backend.reviewRead({ ...coder, loopName: 'gone' }, {}), /no loop named "gone"/);
  });
});
