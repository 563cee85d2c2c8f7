/**
 * forge_shell / forge_jobs and the shell-hang watchdog end to end (issue 16): real opencode,
 * real git, real database, the real engine (host and bwrap); only the model is scripted. The
 * scripted coder issues the tool calls; host-side checks run inside the model between turns
 * (they see the processes while the session is live) and after the loop ended.
 *
 * Processes are counted by a token in their command line (a unique `sleep` duration), so
 * tests running at the same time never count each other's.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createLoopHarness, roleOf, type AgentRole, type LoopHarness } from '../../support/loop-harness';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';
import { text, toolCall, toolCalls, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';
import { processesWithArgument } from '../../support/processes';

/** A `sleep` duration no other test uses: its command line identifies this test's processes. */
function token(): string {
  return `86${randomInt(100, 999)}.${randomInt(100000, 999999)}`;
}

const processesWith = processesWithArgument;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}

type Step = ScriptStep | ((request: ScriptedRequest) => ScriptStep | Promise<ScriptStep>);

/** Per-session step lists per role; host-side failures inside the model are collected and asserted. */
function script(plan: (role: AgentRole) => Step[]) {
  const sessions = new Map<string, { steps: Step[]; turn: number }>();
  const errors: string[] = [];
  const results: string[] = [];
  const handler = async (request: ScriptedRequest): Promise<ScriptStep> => {
    if (request.isTitleRequest) return text('title');
    for (const r of request.toolResults) results.push(`${r.name}: ${r.content}`);
    const sid = request.sessionId ?? 'unknown';
    let s = sessions.get(sid);
    if (!s) {
      s = { steps: plan(roleOf(request)), turn: 0 };
      sessions.set(sid, s);
    }
    const step = s.steps[s.turn++];
    if (!step) return text('Done.');
    try {
      return typeof step === 'function' ? await step(request) : step;
    } catch (error) {
      errors.push((error as Error).stack ?? String(error));
      return text('A host-side check failed.');
    }
  };
  return { handler, errors, results };
}

const lastResult = (request: ScriptedRequest) => request.toolResults[request.toolResults.length - 1]?.content ?? '';
const coderHandoff = toolCall('forge_loop_handoff', { decisions: 'ran the commands', verification: 'checked', notesForAuditor: '' });
const auditorDone = toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' });

let loopCounter = 0;

function jobCases(label: 'host' | 'bwrap', harness: () => LoopHarness) {
  it(`${label}: forge_shell returns at idle_ms with a job id despite a detached child holding stdout; forge_jobs kill leaves no process; a success_pattern server lives until the loop ends`, async function () {
    const h = harness();
    const detached = token();
    const server = token();
    const s = script((role) =>
      role === 'auditor'
        ? [auditorDone]
        : [
            toolCall('forge_shell', { command: `setsid sleep ${detached} & echo started; wait`, idle_ms: 1500, max_wait_ms: 60_000 }),
            async (req) => {
              const result = lastResult(req);
              assert.match(result, /status: still-running \(no output for 1500 ms\)/);
              assert.match(result, /job: job-1/);
              assert.match(result, /started/);
              assert.equal(processesWith(detached).length, 1, 'the detached child runs while the job does');
              return toolCall('forge_jobs', { action: 'kill', jobId: 'job-1' });
            },
            async (req) => {
              assert.match(lastResult(req), /job-1 killed with its whole process tree/);
              assert.deepEqual(processesWith(detached), [], 'no process of the killed job is left');
              return toolCall('forge_shell', {
                command: `echo booting; sleep 0.2; echo "listening on 4242"; exec sleep ${server}`,
                success_pattern: 'listening on \\d+',
                idle_ms: 30_000,
              });
            },
            async (req) => {
              const result = lastResult(req);
              assert.match(result, /success_pattern matched \("listening on 4242"\); the process is still running/);
              assert.equal(processesWith(server).length, 1, 'the server keeps running after the call returned');
              return toolCall('forge_jobs', { action: 'list' });
            },
            async (req) => {
              assert.match(lastResult(req), /job-1 {2}killed.*\njob-2 {2}running/s);
              return coderHandoff;
            },
          ],
    );
    h.model.setHandler(s.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', goal: 'run a server', repoPath: h.repo.dir, name: `shell-${label}-${++loopCounter}` });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(s.errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    await eventually('the server is gone once the loop ended', () => processesWith(server).length === 0);
  });
}

describe('forge_shell and forge_jobs: host (real opencode, scripted model)', function () {
  this.timeout(5 * 60_000);
  let h: LoopHarness;
  before(async () => {
    h = await createLoopHarness({ settings: { 'forge.sandbox.enabled': false } });
  });
  after(async () => h?.close());
  jobCases('host', () => h);
});

describe('forge_shell and forge_jobs: bwrap (real opencode, scripted model)', function () {
  this.timeout(10 * 60_000);
  let h: LoopHarness;
  let dataDir: string;
  before(async function () {
    this.timeout(20 * 60_000);
    bwrapPrereqs();
    dataDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'loop-shell-'));
    h = await createLoopHarness({ dataDir, settings: { 'forge.sandbox.enabled': true, 'forge.sandbox.driver': 'bwrap', 'forge.sandbox.network': false } });
  });
  after(async () => {
    await h?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  jobCases('bwrap', () => h);
});

/**
 * Issue 28: a foreground hang (`echo; sleep`) with the agent's own long time-out: after the
 * watchdog's kill the bash call returns to the model within seconds, with what it printed.
 */
function foregroundHangCase(label: string, harness: () => LoopHarness, thresholdMs: number): void {
  it(`${label}: a foreground hang with the agent's own 15 min time-out returns to the model within seconds of the watchdog's kill`, async () => {
    const h = harness();
    h.settings['forge.watchdog.mode'] = 'kill';
    const hung = token();
    let calledAt = 0;
    const command = `echo started; sleep ${hung}`;
    const s = script((role) =>
      role === 'auditor'
        ? [auditorDone]
        : [
            () => {
              calledAt = Date.now();
              return toolCalls([{ id: 'hang-fg', name: 'bash', args: { command, description: 'hang in the foreground', timeout: 900_000 } }]);
            },
            async (req) => {
              const waited = Date.now() - calledAt;
              assert.ok(waited >= thresholdMs - 500, `the call returned after ${waited} ms, before the watchdog's threshold: it did not hang`);
              assert.match(lastResult(req), /started/);
              assert.deepEqual(processesWith(hung), [], 'the watchdog killed the sleep');
              return coderHandoff;
            },
          ],
    );
    h.model.setHandler(s.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', goal: 'hang in the foreground', repoPath: h.repo.dir, name: `watchdog-fg-${++loopCounter}` });
    // Killed at the threshold: the call's result must reach the model soon after, not at the agent's time-out.
    await eventually('the intervention', () => h.engine.repos.shellInterventions.listByLoop(ref.projectId, ref.name).length > 0, 120_000);
    const killedAt = Date.now();
    await eventually('the next model request after the kill', () => s.results.some((r) => r.includes('started')), 30_000);
    const returnedAfter = Date.now() - killedAt;
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(s.errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    const [row] = h.engine.repos.shellInterventions.listByLoop(ref.projectId, ref.name);
    assert.equal(row!.action, 'killed', JSON.stringify(row));
    assert.ok(returnedAfter < 30_000, `returned ${returnedAfter} ms after the kill`);
  });
}

describe('shell-hang watchdog (real opencode, scripted model)', function () {
  this.timeout(5 * 60_000);
  let h: LoopHarness;
  const logs: string[] = [];
  before(async () => {
    h = await createLoopHarness({
      settings: { 'forge.sandbox.enabled': false, 'forge.watchdog.stallMs': 3000 },
      // Test-only: no user setting can go below 60 s.
      shellWatchdogFloorMs: 500,
      onLog: (_level, m) => logs.push(m),
    });
  });
  after(async () => h?.close());

  foregroundHangCase('unconfined', () => h, 3000);

  it('kills the processes of a builtin bash call that hangs behind a detached child at the threshold; the session continues', async () => {
    h.settings['forge.watchdog.mode'] = 'kill';
    const hung = token();
    let calledAt = 0;
    const s = script((role) =>
      role === 'auditor'
        ? [auditorDone]
        : [
            () => {
              calledAt = Date.now();
              return toolCalls([{ id: 'hang-1', name: 'bash', args: { command: `setsid sleep ${hung} & echo started`, description: 'hang' } }]);
            },
            async (req) => {
              const waited = Date.now() - calledAt;
              assert.ok(waited >= 2500, `the call returned after ${waited} ms, before the watchdog's threshold: it did not hang, so this test tests nothing`);
              assert.match(lastResult(req), /started/);
              assert.deepEqual(processesWith(hung), [], 'the watchdog killed the detached child');
              return coderHandoff;
            },
          ],
    );
    h.model.setHandler(s.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', goal: 'hang once', repoPath: h.repo.dir, name: `watchdog-kill-${++loopCounter}` });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(s.errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    const rows = h.engine.repos.shellInterventions.listByLoop(ref.projectId, ref.name);
    assert.equal(rows.length, 1, JSON.stringify(rows));
    assert.equal(rows[0]!.action, 'killed');
    assert.equal(rows[0]!.mode, 'kill');
    assert.equal(rows[0]!.thresholdMs, 3000);
    assert.equal(rows[0]!.command, `setsid sleep ${hung} & echo started`);
    assert.ok(rows[0]!.processes.some((p) => p.command.includes(hung)), JSON.stringify(rows[0]!.processes));
    assert.ok(logs.some((m) => /Shell-hang watchdog: .* killed \d+ process/.test(m)));
  });

  it('dry-run kills nothing and logs the candidates', async () => {
    h.settings['forge.watchdog.mode'] = 'dry-run';
    const hung = token();
    let ref: { projectId: string; name: string } | undefined;
    const s = script((role) =>
      role === 'auditor'
        ? [auditorDone]
        : [
            toolCalls([{ id: 'hang-2', name: 'bash', args: { command: `setsid sleep ${hung} & echo started`, description: 'hang' } }]),
            async (req) => {
              assert.match(lastResult(req), /started/);
              return coderHandoff;
            },
          ],
    );
    h.model.setHandler(s.handler);
    ref = await h.engine.runtime.start({ kind: 'goal', goal: 'hang in dry-run', repoPath: h.repo.dir, name: `watchdog-dry-${++loopCounter}` });
    await eventually('a dry-run intervention', () => h.engine.repos.shellInterventions.listByLoop(ref!.projectId, ref!.name).length > 0, 240_000);
    const [row] = h.engine.repos.shellInterventions.listByLoop(ref.projectId, ref.name);
    assert.equal(row!.action, 'dry-run');
    assert.ok(row!.processes.some((p) => p.command.includes(hung)), JSON.stringify(row!.processes));
    await sleep(1500);
    assert.equal(processesWith(hung).length, 1, 'dry-run killed nothing');
    assert.ok(logs.some((m) => m.includes('Shell-hang watchdog (dry-run)') && m.includes(hung)));
    // Unblock the call ourselves; the session goes on.
    for (const pid of processesWith(hung)) process.kill(pid, 'SIGKILL');
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(s.errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    assert.equal(h.engine.repos.shellInterventions.listByLoop(ref.projectId, ref.name).length, 1);
  });
});

describe('shell-hang watchdog: bwrap (real opencode, scripted model)', function () {
  this.timeout(10 * 60_000);
  let h: LoopHarness;
  let dataDir: string;
  before(async function () {
    this.timeout(20 * 60_000);
    bwrapPrereqs();
    dataDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'loop-shell-wd-'));
    h = await createLoopHarness({
      dataDir,
      settings: { 'forge.sandbox.enabled': true, 'forge.sandbox.driver': 'bwrap', 'forge.sandbox.network': false, 'forge.watchdog.stallMs': 3000 },
      shellWatchdogFloorMs: 500,
    });
  });
  after(async () => {
    await h?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  foregroundHangCase('bwrap', () => h, 3000);
});
