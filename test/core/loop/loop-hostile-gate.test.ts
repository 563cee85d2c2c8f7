/**
 * Hostile scripted coders against Forge's verification gate (issue 27, items 6–8), with real
 * opencode, real git, real bwrap (the default sandbox) and, for the cancel, the real CLI
 * process; only the model is scripted.
 * - a check never hangs the loop: a file a `contains:` assertion reads replaced by a named pipe
 *   fails with a clear message, a never-ending check command ends at the timeout, and
 *   `forge cancel` ends a loop waiting on such a check within 10 s;
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { createCliRunner, ensureCliBuilt } from '../../support/cli-runner';
import { createTestRepository } from '../../support/git-repo';
import { createLoopHarness, REPO_ROOT, roleOf, type AgentRole, type LoopHarness } from '../../support/loop-harness';
import { MOCK_MODEL, writeOpencodeTestEnvironment } from '../../support/opencode-test-env';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';
import { startScriptedModel, text, toolCall, toolCalls, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';

let callCounter = 0;
function bash(id: string, command: string): ScriptStep {
  return toolCalls([{ id: `${id}-${++callCounter}`, name: 'bash', args: { command, description: id } }]);
}
const coderHandoff = () => toolCall('forge_loop_handoff', { decisions: 'done', verification: 'all green', notesForAuditor: '' });
const auditorApproves = () => toolCall('forge_loop_handoff', { summary: 'approved', done: true, deviations: '', followUps: '' });

/** A model whose first coder session runs `firstCoder`, every later coder session only hands off, and every auditor approves. */
function hostileScript(firstCoder: ScriptStep[]): (request: ScriptedRequest) => ScriptStep {
  const sessions = new Map<string, { role: AgentRole; turn: number; nth: number }>();
  let coders = 0;
  return (request) => {
    const sid = request.sessionId ?? 'unknown';
    let s = sessions.get(sid);
    if (!s) {
      const role = roleOf(request);
      s = { role, turn: 0, nth: role === 'code' ? ++coders : 0 };
      sessions.set(sid, s);
    }
    const turn = s.turn++;
    if (s.role === 'code') {
      const steps = s.nth === 1 ? [...firstCoder, coderHandoff()] : [coderHandoff()];
      return steps[turn] ?? text('Done.');
    }
    return turn === 0 ? auditorApproves() : text('Done.');
  };
}

/** Every process running `sleep <seconds>` (a check's unique never-ending command). */
function processesRunning(needle: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
      if (argv.length === 2 && path.basename(argv[0]!) === 'sleep' && `sleep ${argv[1]}` === needle) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

describe('hostile coders against the verification gate (real opencode, real git, real bwrap)', function () {
  this.timeout(10 * 60_000);
  let h: LoopHarness;
  let dataDir: string;

  before(async function () {
    bwrapPrereqs();
    dataDir = await mkdtemp(path.join(sandboxTestTempRoot(), 'hostile-gate-data-'));
    h = await createLoopHarness({ dataDir, files: { 'README.md': '# demo\n', 'notes.txt': 'todo\n' }, settings: { 'forge.checks.timeoutMs': 3_000 } });
  });
  after(async function () {
    await h?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  it('a named pipe where a contains: assertion reads fails with a clear message, a never-ending check ends at the timeout; the loop does not complete', async () => {
    h.model.setHandler(hostileScript([bash('fifo', 'rm notes.txt && mkfifo notes.txt && ls -l notes.txt; echo "confined=${FORGE_SANDBOX:-no} rc=$?"')]));
    const started = await h.engine.runtime.start({
      kind: 'goal',
      repoPath: h.repo.dir,
      goal: 'Write done into notes.txt',
      name: 'hostile-fifo',
      maxIterations: 2,
      merge: 'never',
      checks: { contains: ['notes.txt:done'], check: ['sleep 86400'] },
    });
    const end = await h.engine.runtime.waitForEnd(started);
    assert.equal(end.type, 'loop.ended');
    assert.notEqual((end as { status: string }).status, 'completed', JSON.stringify(end));
    const runs = h.engine.repos.checkRuns.listByLoop(started.projectId, started.name);
    const fifo = runs.filter((r) => r.kind === 'contains');
    const sleeper = runs.filter((r) => r.kind === 'command');
    assert.ok(fifo.length >= 1 && sleeper.length >= 1, JSON.stringify(runs));
    for (const r of fifo) {
      assert.equal(r.status, 'failed', JSON.stringify(r));
      assert.equal(r.message, 'notes.txt is a named pipe (FIFO), not a regular file; Forge reads only regular files for "contains": the check needs notes.txt to be a file of the repository');
    }
    for (const r of sleeper) {
      assert.equal(r.status, 'timed-out', JSON.stringify(r));
      assert.match(r.message, /^timed out after 3000 ms; /);
    }
    const findings = h.engine.repos.reviewFindings.listByLoop(started.projectId, started.name).map((f) => f.description);
    assert.ok(findings.some((f) => f.includes('notes.txt is a named pipe (FIFO)')), findings.join('\n---\n'));
    assert.deepEqual(processesRunning('sleep 86400'), [], 'the never-ending check outlived its timeout');
  });
});

describe('forge cancel on a loop waiting on a never-ending check (real CLI process)', function () {
  this.timeout(10 * 60_000);

  it('ends the loop within 10 s: the CLI exits cancelled and no process of the check is left', async () => {
    bwrapPrereqs();
    const cliPath = ensureCliBuilt(REPO_ROOT);
    const model = await startScriptedModel();
    const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    const repo = await createTestRepository({ 'README.md': '# demo\n' });
    const work = await mkdtemp(path.join(sandboxTestTempRoot(), 'hostile-gate-cli-'));
    const runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', path.join(work, 'data'), '--repo', repo.dir], settings: { 'forge.loop.stallTimeoutMs': 300_000 } });
    const needle = `sleep ${86_400 + Math.floor(Math.random() * 1000)}`;
    try {
      model.setHandler(hostileScript([]));
      const a = runner.start(['goal', 'Do nothing', '--name', 'hang', '--model', MOCK_MODEL, '--check', needle]);
      const deadline = Date.now() + 5 * 60_000;
      while (processesRunning(needle).length === 0) {
        if (Date.now() > deadline) assert.fail(`the check never started\n${a.describe()}`);
        const gone = await Promise.race([a.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 100))]);
        if (gone) assert.fail(`the CLI ended before its check ran\n${a.describe()}`);
      }
      const cancelledAt = Date.now();
      const cancel = await runner.run(['cancel', 'hang']);
      assert.equal(cancel.code, 0, `${cancel.stderr}\n${(await runner.run(['status', '--json'])).stdout}\n${a.describe()}`);
      const exit = await Promise.race([a.exited, new Promise<null>((r) => setTimeout(() => r(null), 10_000 - (Date.now() - cancelledAt)))]);
      assert.notEqual(exit, null, `forge cancel did not end the loop within 10 s\n${a.describe()}`);
      assert.equal(exit!.code, 3, a.describe());
      assert.match(a.stdout(), /ended: cancelled/);
      assert.deepEqual(processesRunning(needle), [], 'the check outlived the cancelled loop');
    } finally {
      await runner.killAll();
      await model.close().catch(() => {});
      await env.cleanup().catch(() => {});
      await repo.cleanup().catch(() => {});
      await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    }
  });
});
