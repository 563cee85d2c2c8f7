/**
 * The window-side hand-over decision (pure): when a process asks the data folder's engine to
 * supervise its loop, and what each first answer of the engine means for it.
 */
import { strict as assert } from 'node:assert';
import { judgeHandOverAnswer, planHandOver } from '../../../src/core/engine-host/handover-decision';
import type { EngineInfo } from '../../../src/core/engine-host/protocol';

const ENGINE: EngineInfo = { pid: 4242, supervisorId: '4242:cli-abc', kind: 'cli', started: 1, version: 1 };
const REF = { projectId: 'p', name: 'loop-a' };

describe('hand-over decision (pure)', () => {
  it('asks the engine only when sharing is on and this process is not the engine', () => {
    assert.deepEqual(planHandOver({ shareProcess: true, selfIsEngine: false }), { action: 'ask' });
    assert.deepEqual(planHandOver({ shareProcess: false, selfIsEngine: false }), { action: 'supervise', why: 'sharing-off' });
    assert.deepEqual(planHandOver({ shareProcess: false, selfIsEngine: true }), { action: 'supervise', why: 'sharing-off' });
    assert.deepEqual(planHandOver({ shareProcess: true, selfIsEngine: true }), { action: 'supervise', why: 'this-process' });
  });

  it('accepted: the engine supervises the loop it named', () => {
    assert.deepEqual(judgeHandOverAnswer({ type: 'accepted', ref: REF }, ENGINE), { action: 'handed', ref: REF, engine: ENGINE, notices: [] });
    // What the engine's start says (an UNCONFINED loop above all) reaches the process that asked.
    const unconfined = 'This loop runs UNCONFINED because the sandbox is turned off.';
    assert.deepEqual(judgeHandOverAnswer({ type: 'accepted', ref: REF, notices: [unconfined] }, ENGINE), { action: 'handed', ref: REF, engine: ENGINE, notices: [unconfined] });
  });

  it('no engine answered: this process supervises the loop', () => {
    assert.deepEqual(judgeHandOverAnswer(null, null), { action: 'supervise', why: 'no-engine' });
    assert.deepEqual(judgeHandOverAnswer(null, ENGINE), { action: 'supervise', why: 'no-engine' });
  });

  it('every refusal (other settings, another version, closing) leaves the loop to this process, with the engine\'s reason', () => {
    for (const code of ['incompatible', 'version', 'closing', 'unauthorized', 'bad_message'] as const) {
      assert.deepEqual(judgeHandOverAnswer({ type: 'refused', code, message: `why ${code}` }, ENGINE), { action: 'supervise', why: 'declined', detail: `why ${code}` }, code);
    }
  });

  it('a runtime error or an engine gone mid-start fails: this process must not start the loop (a second loop)', () => {
    assert.deepEqual(judgeHandOverAnswer({ type: 'error', code: 'bad_name', message: 'name in use' }, ENGINE), { action: 'fail', code: 'bad_name', message: 'name in use' });
    assert.deepEqual(judgeHandOverAnswer({ type: 'error', code: 'engine_gone', message: 'gone' }, ENGINE), { action: 'fail', code: 'engine_gone', message: 'gone' });
  });
});
