import assert from 'node:assert/strict';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import {
  LoopNameTakenError,
  RowNotFoundError,
  SectionPlanError,
  createForgeRepositories,
  findingFingerprint,
  type ForgeRepositories,
} from '../../../src/core/storage/repositories';
import { makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

/**
 * Every repository method against a real database file, each also checked
 * for project scoping: the same names in project B never leak into project A.
 */

const A = 'project-a';
const B = 'project-b';

const CHECK_RUN = {
  loopName: 'l',
  iteration: 1,
  sectionIndex: null,
  gate: 'final' as const,
  checkId: 'plan-1',
  label: 'check 1: node test.js',
  kind: 'command',
  command: 'node test.js',
  status: 'passed',
  message: 'exited with code 0',
  exitCode: 0 as number | null,
  signal: null,
  durationMs: 42,
  outputTail: 'ok\n',
  outputBytes: 3,
  startedAt: 5_000,
};

describe('storage: repositories', function () {
  this.timeout(60_000);
  let data: TempDataDir;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;
  let time: number;
  const tick = (ms = 1) => (time += ms);

  beforeEach(async () => {
    data = makeTempDataDir();
    db = await openForgeDatabase({ path: data.dbPath });
    time = 1_000;
    repos = createForgeRepositories(db, { now: () => time });
  });

  afterEach(async () => {
    await db.close();
    data.cleanup();
  });

  /** Everything written must also survive a reopen (i.e. went through the journal correctly). */
  async function reopened(): Promise<ForgeRepositories> {
    await db.close();
    db = await openForgeDatabase({ path: data.dbPath });
    return createForgeRepositories(db, { now: () => time });
  }

  describe('loops', () => {
    it('create/get with defaults, and refuses a taken name', async () => {
      const loop = repos.loops.create(A, { name: 'add-login', kind: 'plan', model: 'm1', sandbox: true, state: { missedHandoffs: 0 } });
      assert.deepEqual(loop, {
        projectId: A,
        name: 'add-login',
        status: 'starting',
        phase: 'coding',
        kind: 'plan',
        iteration: 0,
        maxIterations: 15,
        sectionIndex: null,
        worktreeDir: null,
        branch: null,
        baseBranch: null,
        baseCommit: null,
        repoDir: null,
        model: 'm1',
        auditorModel: null,
        currentSessionId: null,
        sandbox: true,
        terminationReason: null,
        errorCount: 0,
        consecutiveStalls: 0,
        supervisorId: null,
        leaseExpiresAt: null,
        createdAt: 1_000,
        updatedAt: 1_000,
        endedAt: null,
        state: { missedHandoffs: 0 },
      });
      assert.throws(() => repos.loops.create(A, { name: 'add-login', kind: 'goal' }), LoopNameTakenError);
      repos.loops.create(B, { name: 'add-login', kind: 'goal' }); // same name, other project: fine
      const fresh = await reopened();
      assert.deepEqual(fresh.loops.get(A, 'add-login'), loop);
      assert.equal(fresh.loops.get(B, 'add-login')?.kind, 'goal');
      assert.equal(fresh.loops.get(A, 'missing'), undefined);
    });

    it('reserve slugs the desired name and appends -2, -3… per project, within 48 characters', () => {
      assert.equal(repos.loops.reserve(A, 'Add Login Page!', { kind: 'plan' }).name, 'add-login-page');
      assert.equal(repos.loops.reserve(A, 'add login page', { kind: 'plan' }).name, 'add-login-page-2');
      assert.equal(repos.loops.reserve(A, 'ADD-LOGIN-PAGE', { kind: 'goal' }).name, 'add-login-page-3');
      assert.equal(repos.loops.reserve(B, 'Add Login Page', { kind: 'plan' }).name, 'add-login-page');
      const long = 'a very long plan title that goes on and on well past the limit';
      const first = repos.loops.reserve(A, long, { kind: 'plan' }).name;
      const second = repos.loops.reserve(A, long, { kind: 'plan' }).name;
      assert.ok(first.length <= 48 && second.length <= 48);
      assert.match(second, /^[a-z0-9-]+-2$/);
      assert.equal(repos.loops.reserve(A, '!!!', { kind: 'plan' }).name, 'loop');
      assert.equal(repos.loops.get(A, 'add-login-page-3')?.kind, 'goal');
    });

    it('list puts running loops first, then the most recent; filters by status and limit', () => {
      repos.loops.create(A, { name: 'old-done', kind: 'plan', status: 'completed' });
      tick();
      repos.loops.create(A, { name: 'running-one', kind: 'plan', status: 'running' });
      tick();
      repos.loops.create(A, { name: 'new-cancelled', kind: 'plan', status: 'cancelled' });
      repos.loops.create(B, { name: 'other-project', kind: 'plan', status: 'running' });
      assert.deepEqual(
        repos.loops.list(A).map((l) => l.name),
        ['running-one', 'new-cancelled', 'old-done'],
      );
      assert.deepEqual(
        repos.loops.list(A, { status: ['completed', 'cancelled'] }).map((l) => l.name),
        ['new-cancelled', 'old-done'],
      );
      assert.deepEqual(
        repos.loops.list(A, { limit: 1 }).map((l) => l.name),
        ['running-one'],
      );
    });

    it('update, mergeState and terminate change only the named loop of the named project', async () => {
      repos.loops.create(A, { name: 'l', kind: 'plan', state: { keep: 1, drop: 2 } });
      repos.loops.create(B, { name: 'l', kind: 'plan' });
      tick(5);
      const updated = repos.loops.update(A, 'l', { status: 'running', phase: 'auditing', iteration: 2, sectionIndex: 1, worktreeDir: '/w' });
      assert.equal(updated.phase, 'auditing');
      assert.equal(updated.updatedAt, 1_005);
      assert.equal(updated.createdAt, 1_000);
      const merged = repos.loops.mergeState(A, 'l', { drop: undefined, added: { deep: true } });
      assert.deepEqual(merged.state, { keep: 1, added: { deep: true } });
      repos.loops.acquireLease(A, 'l', 'window-1', 1_000);
      tick();
      const ended = repos.loops.terminate(A, 'l', { status: 'errored', terminationReason: 'error_max_retries: 429' });
      assert.equal(ended.status, 'errored');
      assert.equal(ended.endedAt, time);
      assert.equal(ended.supervisorId, null);
      assert.equal(ended.phase, 'auditing', 'the phase it ended in is kept');
      const other = repos.loops.get(B, 'l')!;
      assert.equal(other.status, 'starting');
      assert.deepEqual(other.state, {});
      assert.throws(() => repos.loops.update(A, 'nope', { iteration: 1 }), RowNotFoundError);
      assert.throws(() => repos.loops.update(B, 'nope', {}), /Loop "nope" does not exist/);
      const fresh = await reopened();
      assert.deepEqual(fresh.loops.get(A, 'l'), ended);
    });

    it('large fields are merged per loop and project', () => {
      repos.loops.create(A, { name: 'l', kind: 'plan' });
      repos.loops.create(B, { name: 'l', kind: 'plan' });
      assert.deepEqual(repos.loops.getLargeFields(A, 'l'), {
        planText: null,
        goalText: null,
        lastAuditSummary: null,
        lastCoderHandoff: null,
        completionSummary: null,
      });
      repos.loops.setLargeFields(A, 'l', { planText: '# Plan\n'.repeat(1000) });
      const after = repos.loops.setLargeFields(A, 'l', { lastAuditSummary: 'clean' });
      assert.equal(after.planText, '# Plan\n'.repeat(1000));
      assert.equal(after.lastAuditSummary, 'clean');
      assert.deepEqual(repos.loops.getLargeFields(A, 'l'), after);
      assert.equal(repos.loops.getLargeFields(B, 'l').planText, null);
      assert.throws(() => repos.loops.setLargeFields(A, 'ghost', { planText: 'x' }), RowNotFoundError);
    });

    it('leases: one supervisor at a time until expiry; release only by the holder; unsupervised running loops', () => {
      repos.loops.create(A, { name: 'l', kind: 'plan', status: 'running' });
      repos.loops.create(B, { name: 'l', kind: 'plan', status: 'running' });
      assert.deepEqual(repos.loops.listUnsupervised(A).map((l) => l.name), ['l']);
      assert.equal(repos.loops.acquireLease(A, 'l', 'window-1', 100), true);
      assert.equal(repos.loops.acquireLease(A, 'l', 'window-2', 100), false);
      assert.equal(repos.loops.acquireLease(A, 'l', 'window-1', 100), true, 'renewal');
      assert.equal(repos.loops.acquireLease(B, 'l', 'window-2', 100), true, 'other project, other lease');
      assert.deepEqual(repos.loops.listUnsupervised(A), []);
      tick(101);
      assert.deepEqual(repos.loops.listUnsupervised(A).map((l) => l.name), ['l']);
      assert.equal(repos.loops.acquireLease(A, 'l', 'window-2', 100), true, 'expired lease taken over');
      assert.equal(repos.loops.releaseLease(A, 'l', 'window-1'), false);
      assert.equal(repos.loops.releaseLease(A, 'l', 'window-2'), true);
      assert.equal(repos.loops.get(A, 'l')?.supervisorId, null);
      assert.equal(repos.loops.get(B, 'l')?.supervisorId, 'window-2');
    });

    it('delete removes the loop and every row it owns, in its project only', () => {
      for (const project of [A, B]) {
        repos.loops.create(project, { name: 'l', kind: 'plan' });
        repos.loops.setLargeFields(project, 'l', { planText: 'p' });
        repos.reviewFindings.record(project, { loopName: 'l', file: 'f', line: 1, severity: 'bug', description: 'd' });
        repos.sectionPlans.replaceAll(project, 'l', [{ title: 't', body: 'b' }]);
        repos.transitions.append(project, { loopName: 'l', event: 'e', fromPhase: 'coding', toPhase: 'auditing', iteration: 1 });
        repos.planAmendments.append(project, { loopName: 'l', sectionIndex: 0, before: 1, after: 2, rationale: 'r' });
        repos.sessionUsage.add(project, { loopName: 'l', sessionId: 's', role: 'code', model: 'm' }, { messages: 1 });
        repos.handoffs.append(project, { loopName: 'l', role: 'code', sessionId: 's', iteration: 1, sectionIndex: 0, payload: {} });
        repos.attempts.start(project, { loopName: 'l', kind: 'audit', iteration: 1, sectionIndex: 0 });
        repos.checkRuns.append(project, { ...CHECK_RUN, loopName: 'l' });
      }
      assert.equal(repos.loops.delete(A, 'l'), true);
      assert.equal(repos.loops.delete(A, 'l'), false);
      const countRows = (project: string) =>
        [
          'loops',
          'loop_large_fields',
          'review_findings',
          'section_plans',
          'loop_transitions',
          'plan_amendments',
          'loop_session_usage',
          'loop_handoffs',
          'loop_attempts',
          'check_runs',
        ].map((table) => db.get<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE project_id = ?`, [project])!.n);
      assert.deepEqual(countRows(A), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
      assert.deepEqual(countRows(B), [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    });
  });

  describe('check runs and check findings', () => {
    it('append every run, list them oldest first, and give the latest run of each check in first-run order', async () => {
      const a1 = repos.checkRuns.append(A, { ...CHECK_RUN, checkId: 'plan-1', label: 'check 1: node test.js', status: 'failed', exitCode: 1, outputTail: 'AssertionError\n' });
      const b1 = repos.checkRuns.append(A, { ...CHECK_RUN, checkId: 'plan-2', label: 'check 2: exists: README.md', kind: 'exists', command: null, exitCode: null });
      const a2 = repos.checkRuns.append(A, { ...CHECK_RUN, checkId: 'plan-1', label: 'check 1: node test.js', iteration: 2 });
      repos.checkRuns.append(B, { ...CHECK_RUN, checkId: 'plan-1' });
      assert.deepEqual(repos.checkRuns.listByLoop(A, 'l').map((r) => r.id), [a1.id, b1.id, a2.id]);
      assert.deepEqual(a1, { ...CHECK_RUN, checkId: 'plan-1', label: 'check 1: node test.js', status: 'failed', exitCode: 1, outputTail: 'AssertionError\n', id: a1.id, projectId: A });
      assert.deepEqual(repos.checkRuns.latestByCheck(A, 'l').map((r) => [r.checkId, r.iteration, r.status]), [['plan-1', 2, 'passed'], ['plan-2', 1, 'passed']]);
      assert.deepEqual((await reopened()).checkRuns.listByLoop(A, 'l', { afterId: a1.id }).map((r) => r.id), [b1.id, a2.id]);
    });

    it("a check's finding has source check, and only resolveCheckFinding (by fingerprint, open, source check) resolves it", () => {
      const audit = repos.reviewFindings.record(A, { loopName: 'l', file: '', line: 0, severity: 'bug', description: 'x', fingerprint: 'check:plan:k' });
      assert.equal(audit.source, 'auditor');
      assert.equal(repos.reviewFindings.resolveCheckFinding(A, 'l', 'check:plan:k'), undefined, "an auditor's finding is not a check's");
      const check = repos.reviewFindings.record(A, { loopName: 'l', file: '', line: 0, severity: 'bug', description: 'Check failed', fingerprint: 'check:plan:k', source: 'check' });
      assert.deepEqual([check.id, check.source, check.recurrenceCount], [audit.id, 'check', 2]);
      assert.equal(repos.reviewFindings.resolveCheckFinding(A, 'l', 'check:plan:k')?.status, 'resolved');
      assert.equal(repos.reviewFindings.resolveCheckFinding(A, 'l', 'check:plan:k'), undefined, 'already resolved');
    });
  });

  describe('review findings', () => {
    const finding = { loopName: 'l', file: 'src/a.ts', line: 10, severity: 'bug' as const, description: 'Null  check missing' };

    it("a user's finding keeps its line range and the coder's reply, and no other report takes it over", () => {
      const user = repos.reviewFindings.record(A, { ...finding, lineEnd: 14, fingerprint: 'user:1', source: 'user' });
      assert.deepEqual([user.source, user.line, user.lineEnd, user.reply], ['user', 10, 14, null]);
      const audit = repos.reviewFindings.record(A, { ...finding, fingerprint: 'user:1' });
      assert.notEqual(audit.id, user.id, "an auditor's report with its fingerprint is a finding of its own");
      assert.equal(repos.reviewFindings.get(A, user.id)?.source, 'user');
      tick();
      const replied = repos.reviewFindings.setReply(A, user.id, 'Handled the empty list.');
      assert.deepEqual([replied.reply, replied.status, replied.repliedAt !== null], ['Handled the empty list.', 'open', true]);
      assert.throws(() => repos.reviewFindings.setReply(A, 9999, 'x'), /Finding #9999/);
    });

    it('record inserts, then counts recurrences of the same finding and reopens it', async () => {
      const first = repos.reviewFindings.record(A, { ...finding, scenario: 'empty input', sectionIndex: 0 });
      assert.deepEqual(first, {
        id: first.id,
        projectId: A,
        loopName: 'l',
        file: 'src/a.ts',
        line: 10,
        severity: 'bug',
        description: 'Null  check missing',
        scenario: 'empty input',
        status: 'open',
        sectionIndex: 0,
        recurrenceCount: 1,
        fingerprint: findingFingerprint('src/a.ts', 'Null  check missing'),
        source: 'auditor',
        lineEnd: null,
        reply: null,
        repliedAt: null,
        createdAt: 1_000,
        updatedAt: 1_000,
      });
      repos.reviewFindings.setStatus(A, first.id, 'resolved');
      tick();
      const again = repos.reviewFindings.record(A, { ...finding, line: 12, description: 'null check  MISSING' });
      assert.equal(again.id, first.id, 'same fingerprint: same row');
      assert.equal(again.status, 'open');
      assert.equal(again.line, 12);
      assert.equal(again.recurrenceCount, 2);
      repos.reviewFindings.record(A, finding);
      assert.deepEqual(repos.reviewFindings.listRecurring(A, 'l').map((f) => f.recurrenceCount), [3]);
      assert.deepEqual(repos.reviewFindings.listRecurring(A, 'l', 4), []);
      // The same finding in project B is a different finding.
      assert.equal(repos.reviewFindings.record(B, finding).recurrenceCount, 1);
      const fresh = await reopened();
      assert.equal(fresh.reviewFindings.get(A, first.id)?.recurrenceCount, 3);
      assert.equal(fresh.reviewFindings.get(B, first.id), undefined, 'ids are not reachable across projects');
    });

    it('list, open, by file, counts, status changes and delete', () => {
      const bug = repos.reviewFindings.record(A, { ...finding, sectionIndex: 0 });
      const warning = repos.reviewFindings.record(A, { ...finding, severity: 'warning', description: 'naming', line: 2, sectionIndex: 1 });
      const final = repos.reviewFindings.record(A, { ...finding, file: 'src/b.ts', description: 'leak', sectionIndex: null });
      const otherLoop = repos.reviewFindings.record(A, { ...finding, loopName: 'other', description: 'x' });
      repos.reviewFindings.record(B, { ...finding, description: 'b only' });

      assert.deepEqual(repos.reviewFindings.listByLoop(A, 'l').map((f) => f.id), [bug.id, final.id, warning.id], 'bugs first, then file/line');
      assert.deepEqual(repos.reviewFindings.listByLoop(A, 'l', { sectionIndex: 1 }).map((f) => f.id), [warning.id]);
      assert.deepEqual(repos.reviewFindings.listByLoop(A, 'l', { sectionIndex: null }).map((f) => f.id), [final.id]);
      assert.deepEqual(repos.reviewFindings.listByLoop(A, 'l', { severity: 'warning' }).map((f) => f.id), [warning.id]);
      assert.deepEqual(repos.reviewFindings.listByFile(A, 'src/a.ts').map((f) => f.id), [warning.id, bug.id, otherLoop.id]);
      assert.deepEqual(repos.reviewFindings.listByFile(A, 'src/a.ts', { loopName: 'l', status: 'open' }).map((f) => f.id), [warning.id, bug.id]);
      assert.deepEqual(repos.reviewFindings.countOpen(A, 'l'), { bug: 2, warning: 1 });
      assert.deepEqual(repos.reviewFindings.countOpen(A, 'l', { sectionIndex: 0 }), { bug: 1, warning: 0 });

      repos.reviewFindings.setStatus(A, final.id, 'dismissed');
      assert.deepEqual(repos.reviewFindings.listOpen(A, 'l').map((f) => f.id), [bug.id, warning.id]);
      assert.deepEqual(repos.reviewFindings.listByLoop(A, 'l', { status: ['dismissed', 'resolved'] }).map((f) => f.id), [final.id]);
      assert.deepEqual(repos.reviewFindings.countOpenByLoop(A), [
        { loopName: 'l', bug: 1, warning: 1 },
        { loopName: 'other', bug: 1, warning: 0 },
      ]);
      assert.throws(() => repos.reviewFindings.setStatus(B, bug.id, 'resolved'), RowNotFoundError);
      assert.equal(repos.reviewFindings.delete(B, bug.id), false, 'cannot delete another project’s finding');
      assert.equal(repos.reviewFindings.delete(A, bug.id), true);
      assert.equal(repos.reviewFindings.get(A, bug.id), undefined);
      assert.deepEqual(repos.reviewFindings.countOpen(B, 'l'), { bug: 1, warning: 0 });
    });
  });

  describe('section plans', () => {
    const sections = [
      { title: 'Schema', body: 'tables' },
      { title: 'API', body: 'routes' },
      { title: 'UI', body: 'pages' },
    ];

    it('replaceAll, list, get, setStatus, incrementAttempts, progress', async () => {
      const rows = repos.sectionPlans.replaceAll(A, 'l', sections);
      repos.sectionPlans.replaceAll(B, 'l', [{ title: 'only', body: 'b' }]);
      assert.deepEqual(rows.map((s) => [s.index, s.title, s.status, s.attempts]), [
        [0, 'Schema', 'pending', 0],
        [1, 'API', 'pending', 0],
        [2, 'UI', 'pending', 0],
      ]);
      assert.equal(repos.sectionPlans.incrementAttempts(A, 'l', 0), 1);
      assert.equal(repos.sectionPlans.incrementAttempts(A, 'l', 0), 2);
      repos.sectionPlans.setStatus(A, 'l', 0, 'done');
      assert.equal(repos.sectionPlans.setStatus(A, 'l', 1, 'in_progress').status, 'in_progress');
      assert.deepEqual(repos.sectionPlans.progress(A, 'l'), { total: 3, done: 1 });
      assert.deepEqual(repos.sectionPlans.progress(B, 'l'), { total: 1, done: 0 });
      assert.equal(repos.sectionPlans.get(A, 'l', 5), undefined);
      assert.throws(() => repos.sectionPlans.setStatus(A, 'l', 5, 'done'), RowNotFoundError);
      const fresh = await reopened();
      assert.equal(fresh.sectionPlans.get(A, 'l', 0)?.attempts, 2);
      assert.equal(fresh.sectionPlans.list(B, 'l').length, 1);
    });

    it('revise and replaceFrom never touch done sections and keep the 24-section cap', () => {
      repos.sectionPlans.replaceAll(A, 'l', sections);
      repos.sectionPlans.setStatus(A, 'l', 0, 'done');
      assert.throws(() => repos.sectionPlans.revise(A, 'l', 0, { body: 'x' }), SectionPlanError);
      assert.equal(repos.sectionPlans.revise(A, 'l', 1, { body: 'routes v2' }).body, 'routes v2');
      assert.equal(repos.sectionPlans.get(A, 'l', 1)?.title, 'API');
      assert.throws(() => repos.sectionPlans.replaceFrom(A, 'l', 0, []), /completed sections cannot be replaced/);
      const replaced = repos.sectionPlans.replaceFrom(A, 'l', 2, [
        { title: 'UI part 1', body: 'a' },
        { title: 'UI part 2', body: 'b' },
      ]);
      assert.deepEqual(replaced.map((s) => s.title), ['Schema', 'API', 'UI part 1', 'UI part 2']);
      const tooMany = Array.from({ length: 23 }, (_, i) => ({ title: `s${i}`, body: '' }));
      assert.throws(() => repos.sectionPlans.replaceFrom(A, 'l', 2, tooMany), /at most 24 sections; this change would make 25/);
      assert.throws(() => repos.sectionPlans.replaceAll(A, 'm', [...tooMany, ...sections]), SectionPlanError);
      assert.equal(repos.sectionPlans.list(A, 'l').length, 4, 'a refused change changes nothing');
    });
  });

  describe('transitions and plan amendments (append-only)', () => {
    it('append, list (paged), last, edge counts', async () => {
      const t1 = repos.transitions.append(A, { loopName: 'l', event: 'handoff', fromPhase: 'coding', toPhase: 'auditing', iteration: 1, sectionIndex: 0 });
      tick();
      repos.transitions.append(A, { loopName: 'l', event: 'audit_findings', fromPhase: 'auditing', toPhase: 'coding', iteration: 1 });
      repos.transitions.append(A, { loopName: 'l', event: 'handoff', fromPhase: 'coding', toPhase: 'auditing', iteration: 2 });
      const end = repos.transitions.append(A, {
        loopName: 'l',
        event: 'terminate',
        fromPhase: 'auditing',
        toPhase: null,
        iteration: 2,
        status: 'completed',
        reason: 'completed',
        at: 5_000,
      });
      repos.transitions.append(B, { loopName: 'l', event: 'handoff', fromPhase: 'coding', toPhase: 'auditing', iteration: 1 });
      assert.equal(t1.at, 1_000);
      assert.equal(t1.sectionIndex, 0);
      assert.equal(end.at, 5_000);
      assert.equal(end.status, 'completed');
      assert.equal(repos.transitions.listByLoop(A, 'l').length, 4);
      assert.deepEqual(repos.transitions.listByLoop(A, 'l', { afterId: t1.id, limit: 2 }).map((t) => t.event), ['audit_findings', 'handoff']);
      assert.deepEqual(repos.transitions.last(A, 'l'), end);
      assert.deepEqual(repos.transitions.countsByEdge(A, 'l'), [
        { fromPhase: 'coding', toPhase: 'auditing', count: 2 },
        { fromPhase: 'auditing', toPhase: null, count: 1 },
        { fromPhase: 'auditing', toPhase: 'coding', count: 1 },
      ]);
      assert.equal(repos.transitions.listByLoop(B, 'l').length, 1);
      assert.equal(repos.transitions.last(B, 'nothing'), undefined);
      const fresh = await reopened();
      assert.deepEqual(fresh.transitions.last(A, 'l'), end);
    });

    it('amendments keep before/after as JSON', () => {
      const amendment = repos.planAmendments.append(A, {
        loopName: 'l',
        sectionIndex: 1,
        before: { sections: ['a', 'b'] },
        after: { sections: ['a', 'b2', 'c'] },
        rationale: 'split b',
      });
      repos.planAmendments.append(B, { loopName: 'l', sectionIndex: null, before: null, after: 'x', rationale: 'other' });
      assert.deepEqual(repos.planAmendments.listByLoop(A, 'l'), [amendment]);
      assert.deepEqual(amendment.after, { sections: ['a', 'b2', 'c'] });
      assert.equal(amendment.at, 1_000);
    });
  });

  describe('session usage', () => {
    it('record (absolute) and add (delta) upsert per loop, session and model; totals per loop, model, role', async () => {
      const coder = { loopName: 'l', sessionId: 's1', role: 'code' as const, model: 'big' };
      repos.sessionUsage.record(A, coder, { inputTokens: 100, outputTokens: 10, cost: 0.5, messages: 1 });
      repos.sessionUsage.record(A, coder, { inputTokens: 300, outputTokens: 30, cost: 1.5, messages: 3 }); // cumulative: replaces
      repos.sessionUsage.add(A, { ...coder, model: 'small' }, { inputTokens: 5, messages: 1, cacheReadTokens: 7 });
      repos.sessionUsage.add(A, { ...coder, model: 'small' }, { inputTokens: 5, messages: 1, reasoningTokens: 2, cacheWriteTokens: 3, cost: 0.25 });
      repos.sessionUsage.add(A, { loopName: 'l', sessionId: 's2', role: 'auditor', model: 'big' }, { inputTokens: 50, cost: 0.25, messages: 2 });
      repos.sessionUsage.add(A, { loopName: 'other', sessionId: 's9', role: 'code', model: 'big' }, { inputTokens: 1, messages: 1 });
      repos.sessionUsage.add(B, coder, { inputTokens: 1_000_000, messages: 100 });

      assert.equal(repos.sessionUsage.listByLoop(A, 'l').length, 3);
      assert.deepEqual(repos.sessionUsage.totalsForLoop(A, 'l'), {
        inputTokens: 360,
        outputTokens: 30,
        reasoningTokens: 2,
        cacheReadTokens: 7,
        cacheWriteTokens: 3,
        cost: 2,
        messages: 7,
        sessions: 2,
      });
      assert.deepEqual(
        repos.sessionUsage.totalsByModel(A, 'l').map((t) => [t.model, t.inputTokens, t.messages]),
        [
          ['big', 350, 5],
          ['small', 10, 2],
        ],
      );
      assert.deepEqual(
        repos.sessionUsage.totalsByRole(A, 'l').map((t) => [t.role, t.inputTokens, t.cost]),
        [
          ['auditor', 50, 0.25],
          ['code', 310, 1.75],
        ],
      );
      assert.deepEqual(
        repos.sessionUsage.totalsByLoop(A).map((t) => [t.loopName, t.messages, t.sessions]),
        [
          ['l', 7, 2],
          ['other', 1, 1],
        ],
      );
      assert.equal(repos.sessionUsage.totalsForLoop(A, 'nothing').sessions, 0);
      const fresh = await reopened();
      assert.equal(fresh.sessionUsage.totalsForLoop(B, 'l').inputTokens, 1_000_000);
    });
  });

  describe('handoffs', () => {
    it('append, list by role, latest, for a session', () => {
      const code1 = repos.handoffs.append(A, { loopName: 'l', role: 'code', sessionId: 's1', iteration: 1, sectionIndex: 0, payload: { decisions: ['a'] } });
      tick();
      const audit1 = repos.handoffs.append(A, { loopName: 'l', role: 'auditor', sessionId: 's2', iteration: 1, sectionIndex: 0, payload: { summary: 'ok' } });
      tick();
      const code2 = repos.handoffs.append(A, { loopName: 'l', role: 'code', sessionId: 's3', iteration: 2, sectionIndex: 0, payload: { notes: 'n' } });
      repos.handoffs.append(B, { loopName: 'l', role: 'code', sessionId: 's1', iteration: 1, sectionIndex: null, payload: 'b' });
      assert.deepEqual(repos.handoffs.listByLoop(A, 'l'), [code1, audit1, code2]);
      assert.deepEqual(repos.handoffs.listByLoop(A, 'l', 'code'), [code1, code2]);
      assert.deepEqual(repos.handoffs.latest(A, 'l', 'code'), code2);
      assert.deepEqual(repos.handoffs.latest(A, 'l', 'auditor')?.payload, { summary: 'ok' });
      assert.deepEqual(repos.handoffs.forSession(A, 'l', 's1'), code1);
      assert.equal(repos.handoffs.forSession(A, 'l', 's9'), undefined);
      assert.equal(repos.handoffs.forSession(B, 'l', 's1')?.payload, 'b');
      assert.equal(code2.at, 1_002);
    });
  });

  describe('feature groups', () => {
    it('create, get, list, update, updateFeature, delete', async () => {
      const feature = (id: string) => ({ id, title: id, dependsOn: [] as string[], plan: `# ${id}`, planPath: `/r/${id}.md`, loopName: null, status: 'pending' as const, error: null });
      const features = [feature('auth'), { ...feature('billing'), dependsOn: ['auth'] }];
      const group = repos.featureGroups.create(A, { id: 'g1', title: 'Release 2', features, source: 'PRD.md', repoDir: '/r', maxConcurrent: 2, budgetTokens: 1000 });
      assert.equal(group.status, 'review');
      assert.equal(group.maxConcurrent, 2);
      assert.equal(group.budgetTokens, 1000);
      assert.equal(group.budgetMoney, null);
      assert.equal(group.budgetWarned, false);
      assert.equal(group.pauseReason, null);
      tick();
      repos.featureGroups.create(A, { id: 'g0', title: 'Done already', features: [], status: 'completed' });
      repos.featureGroups.create(B, { id: 'g1', title: 'B group', features: [] });
      const running = repos.featureGroups.updateFeature(A, 'g1', 'auth', { status: 'running', loopName: 'g1-auth' });
      assert.deepEqual(running.features[0], { ...feature('auth'), loopName: 'g1-auth', status: 'running' });
      assert.deepEqual(running.features[1], features[1]);
      const paused = repos.featureGroups.update(A, 'g1', { status: 'paused', pauseReason: 'budget_reached', budgetWarned: true });
      assert.equal(paused.pauseReason, 'budget_reached');
      const advanced = repos.featureGroups.update(A, 'g1', { status: 'running', pauseReason: null });
      assert.equal(advanced.pauseReason, null);
      assert.equal(advanced.budgetWarned, true);
      assert.equal(advanced.title, 'Release 2');
      assert.deepEqual(repos.featureGroups.list(A).map((g) => g.id), ['g1', 'g0']);
      assert.deepEqual(repos.featureGroups.list(A, { status: 'completed' }).map((g) => g.id), ['g0']);
      assert.throws(() => repos.featureGroups.updateFeature(A, 'g1', 7, { status: 'failed' }), RowNotFoundError);
      assert.throws(() => repos.featureGroups.updateFeature(A, 'g1', 'ghost', { status: 'failed' }), RowNotFoundError);
      assert.throws(() => repos.featureGroups.update(A, 'ghost', {}), RowNotFoundError);
      const fresh = await reopened();
      assert.deepEqual(fresh.featureGroups.get(A, 'g1'), advanced);
      assert.equal(fresh.featureGroups.get(B, 'g1')?.title, 'B group');
      assert.equal(fresh.featureGroups.delete(A, 'g1'), true);
      assert.equal(fresh.featureGroups.get(A, 'g1'), undefined);
      assert.ok(fresh.featureGroups.get(B, 'g1'));
    });
  });

  describe('loop accepts', () => {
    it('lastAcceptedByLoop: when each loop of the project was last accepted, one row per loop', async () => {
      const accept = (project: string, loopName: string) => repos.accepts.append(project, { loopName, acceptedBy: 'me', how: 'fast-forward', intoBranch: 'main', remote: null, commit: 'abc' });
      assert.deepEqual(repos.accepts.lastAcceptedByLoop(A), []);
      accept(A, 'l');
      tick(5);
      accept(A, 'l');
      accept(A, 'm');
      tick(5);
      accept(B, 'l');
      const byName = (rows: { loopName: string; at: number }[]) => Object.fromEntries(rows.map((r) => [r.loopName, r.at]));
      assert.deepEqual(byName(repos.accepts.lastAcceptedByLoop(A)), { l: 1_005, m: 1_005 });
      assert.deepEqual(byName((await reopened()).accepts.lastAcceptedByLoop(B)), { l: 1_010 });
    });
  });

  describe('loop attempts', () => {
    it('start numbers attempts per kind, iteration and section; finish; failures; abandon running', () => {
      const a1 = repos.attempts.start(A, { loopName: 'l', kind: 'audit', iteration: 1, sectionIndex: 0, sessionId: 's', model: 'm' });
      assert.equal(a1.attempt, 1);
      assert.equal(a1.outcome, 'running');
      tick();
      const failed = repos.attempts.finish(A, a1.id, { outcome: 'failed', error: 'rate limited' });
      assert.deepEqual([failed.outcome, failed.error, failed.endedAt], ['failed', 'rate limited', 1_001]);
      const a2 = repos.attempts.start(A, { loopName: 'l', kind: 'audit', iteration: 1, sectionIndex: 0 });
      assert.equal(a2.attempt, 2);
      assert.equal(repos.attempts.start(A, { loopName: 'l', kind: 'audit', iteration: 1, sectionIndex: null }).attempt, 1, 'other section');
      assert.equal(repos.attempts.start(A, { loopName: 'l', kind: 'final_audit', iteration: 1, sectionIndex: null }).attempt, 1);
      repos.attempts.start(B, { loopName: 'l', kind: 'audit', iteration: 1, sectionIndex: 0 });
      assert.equal(repos.attempts.countFailures(A, 'l', 'audit'), 1);
      assert.equal(repos.attempts.countFailures(A, 'l', 'audit', 2), 0);
      assert.equal(repos.attempts.countFailures(B, 'l', 'audit'), 0);
      assert.equal(repos.attempts.abandonRunning(A, 'l'), 3);
      assert.deepEqual(
        repos.attempts.listByLoop(A, 'l').map((a) => a.outcome),
        ['failed', 'abandoned', 'abandoned', 'abandoned'],
      );
      assert.equal(repos.attempts.listByLoop(B, 'l')[0]?.outcome, 'running');
      assert.throws(() => repos.attempts.finish(B, a1.id, { outcome: 'succeeded' }), RowNotFoundError);
    });
  });

  describe('preferences and plans', () => {
    it('preferences: get/set/delete/list with JSON values, per project', async () => {
      assert.equal(repos.preferences.get(A, 'sandbox.default'), undefined);
      repos.preferences.set(A, 'sandbox.default', true);
      repos.preferences.set(A, 'models.recent', ['a', 'b']);
      repos.preferences.set(A, 'models.recent', ['c']);
      repos.preferences.set(B, 'sandbox.default', false);
      assert.equal(repos.preferences.get<boolean>(A, 'sandbox.default'), true);
      assert.deepEqual(repos.preferences.get<string[]>(A, 'models.recent'), ['c']);
      assert.deepEqual(repos.preferences.list(A).map((p) => p.key), ['models.recent', 'sandbox.default']);
      assert.deepEqual(repos.preferences.list(A, 'models.'), [{ key: 'models.recent', value: ['c'], updatedAt: 1_000 }]);
      assert.throws(() => repos.preferences.set(A, 'x', undefined), /cannot be set to undefined/);
      assert.equal(repos.preferences.delete(A, 'sandbox.default'), true);
      assert.equal(repos.preferences.delete(A, 'sandbox.default'), false);
      const fresh = await reopened();
      assert.equal(fresh.preferences.get(B, 'sandbox.default'), false);
      assert.equal(fresh.preferences.get(A, 'sandbox.default'), undefined);
    });

    it('plans: put (upsert keeps createdAt), get, list newest first, delete, per project', () => {
      const first = repos.plans.put(A, 'session-1', '# v1');
      tick();
      const second = repos.plans.put(A, 'session-1', '# v2');
      assert.deepEqual([second.content, second.createdAt, second.updatedAt], ['# v2', first.createdAt, 1_001]);
      tick();
      repos.plans.put(A, 'session-2', '# other');
      repos.plans.put(B, 'session-1', '# B');
      assert.deepEqual(repos.plans.list(A).map((p) => p.key), ['session-2', 'session-1']);
      assert.equal(repos.plans.get(B, 'session-1')?.content, '# B');
      assert.equal(repos.plans.delete(A, 'session-1'), true);
      assert.equal(repos.plans.get(A, 'session-1'), undefined);
      assert.ok(repos.plans.get(B, 'session-1'));
    });
  });

  it('several repositories commit atomically inside one transaction', () => {
    assert.throws(() =>
      db.transaction((tx) => {
        const inTx = createForgeRepositories(tx, { now: () => time });
        inTx.loops.create(A, { name: 'atomic', kind: 'plan' });
        inTx.transitions.append(A, { loopName: 'atomic', event: 'start', fromPhase: null, toPhase: 'coding', iteration: 1 });
        throw new Error('worktree creation failed');
      }),
    );
    assert.equal(repos.loops.get(A, 'atomic'), undefined);
    assert.equal(repos.transitions.listByLoop(A, 'atomic').length, 0);
  });
});
