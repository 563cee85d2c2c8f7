import assert from 'node:assert/strict';
import { FollowLines, FOLLOW_TEXT_CHARS } from '../../../src/core/live/follow-lines';
import type { LiveFeedEvent } from '../../../src/core/live/live-feed';
import type { LivePartUpdate } from '../../../src/core/live/live-parts';

const loop = { projectId: 'p', name: 'demo' };
const session = (sessionId: string, phase = 'coding', parentSessionId: string | null = null): LiveFeedEvent => ({
  type: 'session',
  loop,
  session: { sessionId, parentSessionId, phase, iteration: 1, startedAt: 0 },
});
const part = (update: Partial<LivePartUpdate> & { partId: string }, root = 's1'): LiveFeedEvent => ({
  type: 'part',
  loop,
  rootSessionId: root,
  update: { sessionId: root, messageId: 'm', kind: 'text', ...update },
});
const toolPart = (partId: string, status: 'pending' | 'running' | 'completed' | 'error', extra: { result?: string; sessionId?: string } = {}, root = 's1') =>
  part({ partId, kind: 'tool', sessionId: extra.sessionId ?? root, tool: { name: 'write', callId: 'c', status, args: 'filePath="a.js"', ...(extra.result ? { result: extra.result } : {}) } }, root);

function run(events: LiveFeedEvent[]): { lines: string[]; json: Record<string, unknown>[] } {
  const f = new FollowLines('demo');
  const out = [...events.flatMap((e) => f.onEvent(e)), ...f.flush()];
  return { lines: out.map((l) => l.text), json: out.map((l) => l.json) };
}

describe('forge run --follow lines', () => {
  it('one line per tool call, when it finished, with its short arguments and result', () => {
    const { lines, json } = run([session('s1'), toolPart('t', 'pending'), toolPart('t', 'running'), toolPart('t', 'completed', { result: 'Wrote file successfully.' }), toolPart('t', 'completed', { result: 'again' })]);
    assert.deepEqual(lines, ['[demo] coding › tool write filePath="a.js" → Wrote file successfully.']);
    assert.deepEqual(json, [{ loop: 'demo', type: 'live.tool', phase: 'coding', sessionId: 's1', tool: 'write', status: 'completed', args: 'filePath="a.js"', result: 'Wrote file successfully.' }]);
  });

  it('a failed tool call says so', () => {
    assert.deepEqual(run([session('s1'), toolPart('t', 'error', { result: 'error: denied' })]).lines, ['[demo] coding › tool FAILED write filePath="a.js" → error: denied']);
  });

  it('text deltas become one line per text part, at its end', () => {
    const events = [session('s1'), ...'Hello world'.split('').map((c) => part({ partId: 'p', delta: c })), part({ partId: 'p', text: 'Hello world', ended: true })];
    const { lines, json } = run(events);
    assert.deepEqual(lines, ['[demo] coding › says: Hello world']);
    assert.deepEqual(json, [{ loop: 'demo', type: 'live.text', kind: 'text', phase: 'coding', sessionId: 's1', text: 'Hello world', chars: 11 }]);
  });

  it('a text part ends when the session goes on with another part, or a new session begins, or at flush', () => {
    const f = new FollowLines('demo');
    f.onEvent(session('s1'));
    assert.deepEqual(f.onEvent(part({ partId: 'p', delta: 'first' })), []);
    assert.deepEqual(f.onEvent(toolPart('t', 'running')).map((l) => l.text), ['[demo] coding › says: first']);
    f.onEvent(part({ partId: 'q', delta: 'second' }));
    assert.deepEqual(f.onEvent(session('s2', 'auditing')).map((l) => l.text), ['[demo] coding › says: second']);
    f.onEvent(part({ partId: 'r', delta: 'third', sessionId: 's2' }, 's2'));
    assert.deepEqual(f.flush().map((l) => l.text), ['[demo] auditing › says: third']);
    assert.deepEqual(f.flush(), []);
  });

  it('reasoning is "thinking"; whitespace collapses; a long text is cut; empty text prints nothing', () => {
    const long = 'word '.repeat(200);
    const { lines } = run([session('s1'), part({ partId: 'r', kind: 'reasoning', text: 'hmm,\n\n  let me see', ended: true }), part({ partId: 'e', text: '   ', ended: true }), part({ partId: 'l', text: long, ended: true })]);
    assert.equal(lines[0], '[demo] coding › thinking: hmm, let me see');
    assert.equal(lines.length, 2);
    assert.ok(lines[1]!.length <= '[demo] coding › says: '.length + FOLLOW_TEXT_CHARS);
    assert.ok(lines[1]!.endsWith('…'));
  });

  it('a subagent\'s parts are marked with its session, and a subagent session does not end its parent\'s text', () => {
    const f = new FollowLines('demo');
    f.onEvent(session('s1'));
    f.onEvent(part({ partId: 'p', delta: 'parent text' }));
    assert.deepEqual(f.onEvent(session('child', 'coding', 's1')), []);
    const lines = f.onEvent(toolPart('t', 'completed', { sessionId: 'child', result: 'ok' })).map((l) => l.text);
    assert.deepEqual(lines, ['[demo] coding › subagent child › tool write filePath="a.js" → ok']);
    const json = f.flush().map((l) => l.json);
    assert.equal(json[0]!.text, 'parent text');
    assert.equal(json[0]!.subagentOf, undefined);
  });

  it('a part of an unknown session still prints, without a phase', () => {
    assert.deepEqual(run([toolPart('t', 'completed', { result: 'ok' }, 'unknown')]).lines, ['[demo] tool write filePath="a.js" → ok']);
  });

  it('a very long text keeps its tail and says it was cut', () => {
    const f = new FollowLines('demo');
    f.onEvent(session('s1'));
    for (let i = 0; i < 1000; i++) f.onEvent(part({ partId: 'p', delta: `${i % 10}`.repeat(10) }));
    const [line] = f.flush();
    assert.equal(line!.json.chars, 10_000);
    assert.equal((line!.json.text as string).length, 4000);
    assert.match(line!.text, /says: …0{10}1{10}/);
  });

  it('a text part closed early prints once, whatever updates of it come later; Forge\'s prompt never prints', () => {
    const f = new FollowLines('demo');
    f.onEvent(session('s1'));
    f.onEvent(part({ partId: 'p', delta: 'early' }));
    assert.equal(f.onEvent(toolPart('t', 'running')).length, 1);
    assert.deepEqual(f.onEvent(part({ partId: 'p', text: 'early', ended: true })), []);
    assert.deepEqual(f.onEvent(part({ partId: 'u', text: 'the prompt', ended: true, fromUser: true })), []);
    assert.deepEqual(f.flush(), []);
  });
});
