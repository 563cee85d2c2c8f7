/**
 * A loop facing failures under it: its opencode server killed mid-run, its model answering
 * with a broken stream. What the user reads about them must be true and short.
 *
 * Real parts: opencode, git, the database; the model is scripted (a broken stream included).
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import type { LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { readExtras } from '../../../src/core/loop/loop-supervisor';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { hang, malformed, toolCall } from '../../support/scripted-model';
import { terminationReasonToString } from '../../../src/core/loop/state';

const handoffCoder = (what = 'did the work') => toolCall('forge_loop_handoff', { decisions: what, verification: 'checked', notesForAuditor: '' });
const handoffAuditor = () => toolCall('forge_loop_handoff', { summary: 'reviewed', done: true, deviations: '', followUps: '' });

/** The port an opencode server process was started on (its `--port N` argument). */
function portOf(pid: number): number {
  const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  return Number(args[args.indexOf('--port') + 1]);
}

async function until<T>(what: string, read: () => T | undefined, timeoutMs = 180_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const notices = (events: LoopRuntimeEvent[]) => events.filter((e): e is Extract<LoopRuntimeEvent, { type: 'loop.notice' }> => e.type === 'loop.notice').map((e) => e.message);

describe('loop facing a failing opencode or model (real opencode, scripted model)', function () {
  this.timeout(300_000);
  let h: LoopHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('opencode killed mid-run: the notices name the restarted server\'s address, never the dead one\'s, and the loop completes', async () => {
    h = await createLoopHarness();
    const script = sessionScript((role, nth) => {
      if (role === 'code' && nth === 1) return [hang];
      return [role === 'code' ? handoffCoder() : handoffAuditor()];
    });
    h.model.setHandler(script.handler);
    const ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Check the readme' });
    await h.model.waitForRequest((r) => !r.isTitleRequest, 180_000);
    // The loop's server: its own (recorded on the loop) or the one it shares with this process's loops.
    const serverPid = () => readExtras(h!.engine.runtime.get(ref)!).opencodePid ?? h!.engine.opencodeServers().find((s) => s.loops.includes(ref.name))?.pid;
    const oldPid = serverPid()!;
    const oldPort = portOf(oldPid);
    process.kill(oldPid, 'SIGKILL');

    const newPid = await until('the restarted server is recorded', () => {
      const pid = serverPid();
      return pid && pid !== oldPid ? pid : undefined;
    });
    const newPort = portOf(newPid);
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', `${JSON.stringify(end)}\n${notices(h.events).join('\n')}`);

    const said = notices(h.events);
    const exited = said.find((m) => m.startsWith('opencode exited unexpectedly'));
    assert.ok(exited, said.join('\n'));
    for (const message of said) assert.ok(!message.includes(`:${oldPort}`), `a notice names the dead server's port ${oldPort}: ${message}`);
    assert.ok(said.some((m) => m.includes(`127.0.0.1:${newPort}`)), `no notice names the restarted server's port ${newPort}:\n${said.join('\n')}`);
    assert.match(exited, /killed by SIGKILL/);
  });

  it('a model server answering with a broken stream ends the loop with model_stream_malformed and one line saying so; the raw parser text goes to the log only', async () => {
    const logged: string[] = [];
    h = await createLoopHarness({ settings: { 'forge.loop.maxModelRetries': 1 }, onLog: (_level, message) => logged.push(message) });
    h.model.setHandler(() => malformed);
    const ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Check the readme' });
    const end = await h.engine.runtime.waitForEnd(ref);
    assert.equal(end.type, 'loop.ended');
    if (end.type !== 'loop.ended') return;
    const reason = terminationReasonToString(end.reason);
    const stored = h.engine.runtime.get(ref)!.terminationReason ?? '';
    assert.equal(end.reason.kind, 'model_stream_malformed', reason);
    assert.equal(stored, reason);
    assert.ok(!reason.includes('\n'), `the end reason is one line: ${JSON.stringify(reason)}`);
    assert.ok(reason.length <= 300, `the end reason is short (${reason.length} characters): ${reason}`);
    assert.match(reason, /^model_stream_malformed: The model server/);
    for (const message of notices(h.events)) assert.ok(!message.includes('\n'), `a notice carries raw multi-line text: ${JSON.stringify(message)}`);
    // What opencode's parser said is kept for diagnosis, in the log.
    assert.ok(logged.some((m) => /JSON/.test(m) && m.includes(ref.name)), `the raw parser text is not in the log:\n${logged.filter((m) => m.includes('model')).join('\n')}`);
  });
});
