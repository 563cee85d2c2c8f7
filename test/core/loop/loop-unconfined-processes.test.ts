/**
 * An unconfined loop ends everything its agent started (issue 26): real opencode, real git, the
 * real engine on the host (`forge.sandbox.enabled` off); only the model is scripted. The coder
 * starts detached children through opencode's own `bash` tool (run from the opencode server
 * process through Forge's agent shell) and through `forge_shell`: `setsid nohup sleep` with the
 * environment cleared (`env -i`), so no marker variable can find them — only the loop's
 * process cgroup. None may be alive once the loop ended, nor after a cancel.
 *
 * Where this host gives Forge no cgroup (no delegated cgroup v2), the loop's start notice must
 * say so and the children keep their environment (what Forge then promises); under CI=true a
 * host without a cgroup fails the test instead.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { createLoopHarness, roleOf, type LoopHarness } from '../../support/loop-harness';
import { text, toolCall, toolCalls, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { processesWithArgument } from '../../support/processes';

/** A `sleep` duration no other test uses: its command line identifies this test's processes. */
const token = () => `87${randomInt(100, 999)}.${randomInt(100000, 999999)}`;

const processesWith = processesWithArgument;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}

const lastResult = (request: ScriptedRequest) => request.toolResults[request.toolResults.length - 1]?.content ?? '';
const coderHandoff = toolCall('forge_loop_handoff', { decisions: 'started helpers', verification: 'checked', notesForAuditor: '' });
const auditorDone = toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' });

describe('unconfined loop: everything its agent started ends with it (real opencode, scripted model)', function () {
  this.timeout(5 * 60_000);
  let h: LoopHarness;
  let tracked = true;
  const started: string[] = [];
  let loopCounter = 0;

  before(async () => {
    const probeName = `forge-test-${process.pid}-${randomInt(1e6)}`;
    const cgroups = new SandboxCgroups();
    const probe = await cgroups.track(probeName);
    if ('reason' in probe) {
      if (process.env.CI === 'true') throw new Error(`this CI host gives Forge no process cgroup: ${probe.reason}`);
      tracked = false;
    } else {
      await cgroups.remove(probeName);
    }
    h = await createLoopHarness({ settings: { 'forge.sandbox.enabled': false, 'forge.watchdog.mode': 'off' } });
  });
  after(async () => {
    await h?.close();
    // Never leave this test's processes behind, whatever failed.
    for (const t of started) for (const pid of processesWith(t)) process.kill(pid, 'SIGKILL');
  });

  /** Detached children through `bash` and `forge_shell`; the host checks they run; then `next`. */
  function coderSteps(viaBash: string, viaForgeShell: string, next: () => ScriptStep | Promise<ScriptStep>) {
    started.push(viaBash, viaForgeShell);
    const detach = (t: string) => `${tracked ? 'env -i ' : ''}setsid nohup sleep ${t} >/dev/null 2>&1 & echo started`;
    const steps: Array<(r: ScriptedRequest) => ScriptStep | Promise<ScriptStep>> = [
      () => toolCalls([{ id: 'detach-1', name: 'bash', args: { command: detach(viaBash), description: 'detach' } }]),
      (r) => {
        assert.match(lastResult(r), /started/);
        return toolCall('forge_shell', { command: detach(viaForgeShell), idle_ms: 1000, max_wait_ms: 30_000 });
      },
      async (r) => {
        assert.match(lastResult(r), /started/);
        await eventually('both detached children run', () => processesWith(viaBash).length === 1 && processesWith(viaForgeShell).length === 1);
        return next();
      },
    ];
    return steps;
  }

  function runScript(coder: () => Array<(r: ScriptedRequest) => ScriptStep | Promise<ScriptStep>>) {
    const errors: string[] = [];
    const sessions = new Map<string, { steps: Array<(r: ScriptedRequest) => ScriptStep | Promise<ScriptStep>>; turn: number }>();
    h.model.setHandler(async (request) => {
      if (request.isTitleRequest) return text('title');
      const sid = request.sessionId ?? 'unknown';
      let s = sessions.get(sid);
      if (!s) sessions.set(sid, (s = { steps: roleOf(request) === 'auditor' ? [() => auditorDone] : coder(), turn: 0 }));
      const step = s.steps[s.turn++];
      if (!step) return text('Done.');
      try {
        return await step(request);
      } catch (error) {
        errors.push((error as Error).stack ?? String(error));
        return coderHandoff;
      }
    });
    return errors;
  }

  function assertStartNotice(notices: string[]): void {
    const untracked = notices.find((n) => /no process cgroup of its own/.test(n));
    if (tracked) assert.equal(untracked, undefined, notices.join('\n'));
    else assert.ok(untracked && /marker variable/.test(untracked), `the start notice says the loop has no cgroup and what Forge does instead: ${notices.join('\n')}`);
  }

  it('at the loop end: no child started through bash or forge_shell is left', async () => {
    const viaBash = token();
    const viaForgeShell = token();
    const errors = runScript(() => coderSteps(viaBash, viaForgeShell, () => coderHandoff));
    const ref = await h.engine.runtime.start({ kind: 'goal', goal: 'start helpers', repoPath: h.repo.dir, name: `procs-end-${++loopCounter}` });
    assertStartNotice(ref.notices);
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    await eventually('no detached child outlives the loop', () => processesWith(viaBash).length === 0 && processesWith(viaForgeShell).length === 0);
  });

  it('on cancel: no child started through bash or forge_shell is left', async () => {
    const viaBash = token();
    const viaForgeShell = token();
    let ref: { projectId: string; name: string; notices: string[] } | undefined;
    const errors = runScript(() =>
      coderSteps(viaBash, viaForgeShell, () => {
        void h.engine.runtime.cancel(ref!);
        return text('Waiting.');
      }),
    );
    ref = await h.engine.runtime.start({ kind: 'goal', goal: 'start helpers, then get cancelled', repoPath: h.repo.dir, name: `procs-cancel-${++loopCounter}` });
    assertStartNotice(ref.notices);
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.deepEqual(errors, []);
    assert.equal(end.type === 'loop.ended' && end.status, 'cancelled', JSON.stringify(end));
    await eventually('no detached child outlives the cancelled loop', () => processesWith(viaBash).length === 0 && processesWith(viaForgeShell).length === 0);
  });
});
