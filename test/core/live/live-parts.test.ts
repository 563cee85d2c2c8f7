import assert from 'node:assert/strict';
import {
  coalesceUpdates,
  LivePartBuffer,
  livePartOfRaw,
  oneLine,
  shortArgs,
  shortResult,
  SHORT_ARGS_CHARS,
  SHORT_RESULT_CHARS,
  type LivePartUpdate,
} from '../../../src/core/live/live-parts';
import { createLiveFeed, DEFAULT_LIVE_FEED_LIMITS, type LiveFeedEvent } from '../../../src/core/live/live-feed';

const delta = (partId: string, text: string, sessionId = 's'): LivePartUpdate => ({ partId, sessionId, messageId: 'm', kind: 'text', delta: text });
const whole = (partId: string, text: string, ended = false): LivePartUpdate => ({ partId, sessionId: 's', messageId: 'm', kind: 'text', text, ...(ended ? { ended } : {}) });
const tool = (partId: string, status: 'pending' | 'running' | 'completed' | 'error', result?: string): LivePartUpdate => ({
  partId,
  sessionId: 's',
  messageId: 'm',
  kind: 'tool',
  tool: { name: 'bash', callId: `c-${partId}`, status, args: 'command="ls"', ...(result ? { result } : {}) },
});

describe('live parts: accumulation and bounds', () => {
  it('appends deltas, takes a whole text, marks the end, and counts every update', () => {
    const b = new LivePartBuffer({ maxParts: 10, maxTextChars: 100 });
    b.apply(delta('p', 'Hel'));
    b.apply(delta('p', 'lo'));
    assert.equal(b.get('p')!.text, 'Hello');
    b.apply(whole('p', 'Hello world', true));
    const p = b.get('p')!;
    assert.deepEqual([p.text, p.textLength, p.ended, p.updates, b.updates], ['Hello world', 11, true, 3, 3]);
  });

  it('a whole text shorter than what the deltas delivered is a late snapshot and is ignored', () => {
    const b = new LivePartBuffer({ maxParts: 10, maxTextChars: 100 });
    b.apply(delta('p', 'abcdef'));
    b.apply(whole('p', 'abc'));
    assert.equal(b.get('p')!.text, 'abcdef');
    assert.equal(b.get('p')!.textLength, 6);
  });

  it('keeps only the tail of a long text, and counts every character', () => {
    const b = new LivePartBuffer({ maxParts: 10, maxTextChars: 5 });
    for (const c of 'abcdefghij') b.apply(delta('p', c));
    assert.equal(b.get('p')!.text, 'fghij');
    assert.equal(b.get('p')!.textLength, 10);
    b.apply(whole('q', '0123456789'));
    assert.equal(b.get('q')!.text, '56789');
    assert.equal(b.get('q')!.textLength, 10);
  });

  it('keeps the last N parts in the order they first appeared, counting the dropped ones', () => {
    const b = new LivePartBuffer({ maxParts: 3, maxTextChars: 100 });
    for (let i = 0; i < 7; i++) b.apply(delta(`p${i}`, String(i)));
    b.apply(delta('p5', '!')); // an update of a kept part does not move it
    assert.deepEqual(b.parts().map((p) => `${p.partId}:${p.text}`), ['p4:4', 'p5:5!', 'p6:6']);
    assert.equal(b.dropped, 4);
    assert.equal(b.size, 3);
  });

  it('a tool part takes its latest state; completed and error end it', () => {
    const b = new LivePartBuffer();
    b.apply(tool('t', 'pending'));
    assert.equal(b.get('t')!.ended, false);
    b.apply(tool('t', 'running'));
    assert.equal(b.get('t')!.tool!.status, 'running');
    b.apply(tool('t', 'completed', 'a.txt'));
    assert.deepEqual([b.get('t')!.ended, b.get('t')!.tool!.result], [true, 'a.txt']);
    b.apply(tool('u', 'error', 'error: boom'));
    assert.equal(b.get('u')!.ended, true);
  });

  it('load() replaces the content with a snapshot, bounded', () => {
    const b = new LivePartBuffer({ maxParts: 2, maxTextChars: 3 });
    const source = new LivePartBuffer();
    for (let i = 0; i < 4; i++) source.apply(whole(`p${i}`, `text${i}`));
    b.apply(delta('old', 'x'));
    b.load(source.parts(), 5);
    assert.deepEqual(b.parts().map((p) => `${p.partId}:${p.text}:${p.textLength}`), ['p2:xt2:5', 'p3:xt3:5']);
    assert.equal(b.dropped, 7);
  });

  it('refuses limits below one', () => {
    assert.throws(() => new LivePartBuffer({ maxParts: 0, maxTextChars: 10 }), /at least 1/);
    assert.throws(() => new LivePartBuffer({ maxParts: 1, maxTextChars: 0 }), /at least 1/);
  });
});

describe('live parts: coalescing a batch', () => {
  it('merges deltas per part in first-appearance order and counts what it merged', () => {
    const out = coalesceUpdates([delta('a', 'x'), delta('b', '1'), delta('a', 'y'), delta('b', '2'), delta('a', 'z')]);
    assert.deepEqual(out.map((u) => [u.partId, u.delta, u.merged]), [['a', 'xyz', 3], ['b', '12', 2]]);
  });

  it('a whole text resets the deltas before it; deltas after it follow; a stale whole text is ignored', () => {
    assert.deepEqual(coalesceUpdates([delta('a', 'x'), whole('a', 'xy'), delta('a', 'z')]).map((u) => [u.text, u.delta]), [['xy', 'z']]);
    assert.deepEqual(coalesceUpdates([whole('a', 'abcd'), whole('a', 'ab')]).map((u) => u.text), ['abcd']);
  });

  it('keeps the latest tool state and the end mark', () => {
    const out = coalesceUpdates([tool('t', 'pending'), tool('t', 'running'), tool('t', 'completed', 'ok'), delta('p', 'a'), whole('p', 'ab', true)]);
    assert.equal(out[0]!.tool!.status, 'completed');
    assert.equal(out[1]!.ended, true);
  });

  it('applying a coalesced batch gives the same parts as applying every update (any batch split)', () => {
    const updates: LivePartUpdate[] = [];
    for (let i = 0; i < 60; i++) {
      const part = `p${i % 4}`;
      if (i % 13 === 0) updates.push(whole(part, 'W'.repeat(i)));
      else if (i % 7 === 0) updates.push(tool(`t${i % 3}`, i % 2 ? 'running' : 'completed', `r${i}`));
      else updates.push(delta(part, String(i % 10)));
    }
    const reference = new LivePartBuffer({ maxParts: 100, maxTextChars: 1000 });
    for (const u of updates) reference.apply(u);
    for (const size of [1, 2, 3, 7, 16, 60]) {
      const b = new LivePartBuffer({ maxParts: 100, maxTextChars: 1000 });
      for (let i = 0; i < updates.length; i += size) for (const u of coalesceUpdates(updates.slice(i, i + size))) b.apply(u);
      assert.deepEqual(
        b.parts().map((p) => [p.partId, p.text, p.textLength, p.ended, p.tool?.status, p.tool?.result, p.updates]),
        reference.parts().map((p) => [p.partId, p.text, p.textLength, p.ended, p.tool?.status, p.tool?.result, p.updates]),
        `batches of ${size}`,
      );
      assert.equal(b.updates, updates.length);
    }
  });
});

describe('live parts: short arguments and results', () => {
  it('oneLine collapses whitespace and cuts with an ellipsis', () => {
    assert.equal(oneLine('  a\n\tb  c ', 10), 'a b c');
    assert.equal(oneLine('abcdefghij', 5), 'abcd…');
    assert.equal(oneLine('abcde', 5), 'abcde');
  });

  it('shortArgs: key=value pairs, strings quoted and cut, line counts, other values as JSON', () => {
    assert.equal(shortArgs({ filePath: 'a.js', content: 'one\ntwo\nthree' }), 'filePath="a.js" content="one two three" (3 lines)');
    assert.equal(shortArgs({ n: 3, ok: true, none: null, list: [1, 2] }), 'n=3 ok=true none=null list=[1,2]');
    assert.equal(shortArgs(undefined), '');
    assert.equal(shortArgs(null), '');
    assert.equal(shortArgs('raw'), '"raw"');
    assert.equal(shortArgs({}), '');
    const long = shortArgs({ content: 'x'.repeat(1000), other: 'y'.repeat(1000), third: 'z'.repeat(1000) });
    assert.ok(long.length <= SHORT_ARGS_CHARS, `at most ${SHORT_ARGS_CHARS} characters: ${long.length}`);
    assert.ok(long.endsWith('…'));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.match(shortArgs({ cyclic }), /^cyclic=/);
  });

  it('shortResult: the first non-empty line, how many more, cut', () => {
    assert.equal(shortResult('\n\nfirst\nsecond\nthird\n'), 'first (+2 lines)');
    assert.equal(shortResult('only'), 'only');
    assert.equal(shortResult('a\nb'), 'a (+1 line)');
    assert.equal(shortResult(''), '');
    assert.ok(shortResult('z'.repeat(500)).length <= SHORT_RESULT_CHARS);
  });

  it('livePartOfRaw: pending tool, reasoning, and parts it does not show', () => {
    assert.deepEqual(livePartOfRaw({ id: 'p', type: 'tool', tool: 'read', callID: 'c', sessionID: 's', messageID: 'm', state: { status: 'pending' } }), {
      partId: 'p',
      sessionId: 's',
      messageId: 'm',
      kind: 'tool',
      tool: { name: 'read', callId: 'c', status: 'pending', args: '' },
    });
    assert.deepEqual(livePartOfRaw({ id: 'r', type: 'reasoning', messageID: 'm', text: 'hmm' }, 'fallback'), { partId: 'r', sessionId: 'fallback', messageId: 'm', kind: 'reasoning', text: 'hmm' });
    for (const type of ['step-start', 'step-finish', 'file', 'patch', 'snapshot', 'agent']) assert.equal(livePartOfRaw({ id: 'x', type, sessionID: 's' }), undefined);
    assert.equal(livePartOfRaw({ type: 'text', sessionID: 's', text: 'no id' }), undefined);
    assert.equal(livePartOfRaw({ id: 'x', type: 'text', text: 'no session' }), undefined);
    assert.equal(livePartOfRaw({ id: 'x', type: 'text', sessionID: 's', text: 'ignored', ignored: true }), undefined);
  });
});

describe('the engine live feed', () => {
  const loop = { projectId: 'p', name: 'l' };
  const info = (sessionId: string, parentSessionId: string | null = null) => ({ sessionId, parentSessionId, phase: 'coding', iteration: 1, startedAt: 0 });

  it('publishes sessions once and parts as they come; keeps the last N parts per session', () => {
    const feed = createLiveFeed({ ...DEFAULT_LIVE_FEED_LIMITS, maxParts: 2 });
    const seen: LiveFeedEvent[] = [];
    const off = feed.subscribe((e) => seen.push(e));
    feed.session(loop, info('s'));
    feed.session(loop, info('s'));
    for (let i = 0; i < 5; i++) feed.part(loop, 's', delta(`p${i}`, 'x'));
    assert.deepEqual(seen.map((e) => e.type), ['session', 'part', 'part', 'part', 'part', 'part']);
    assert.deepEqual(feed.parts(loop, 's').parts.map((p) => p.partId), ['p3', 'p4']);
    assert.equal(feed.parts(loop, 's').dropped, 3);
    off();
    feed.part(loop, 's', delta('p5', 'x'));
    assert.equal(seen.length, 6, 'no event after unsubscribing');
  });

  it('a subagent session first seen through its part is listed under its parent', () => {
    const feed = createLiveFeed();
    feed.session(loop, info('root'));
    feed.session(loop, info('other'));
    feed.part(loop, 'root', delta('p', 'x', 'child'));
    assert.deepEqual(feed.sessions(loop).map((s) => `${s.sessionId}<${s.parentSessionId ?? ''}`), ['root<', 'child<root', 'other<']);
    assert.equal(feed.sessions(loop)[1]!.phase, 'coding');
  });

  it('keeps the last sessions per loop and the last loops', () => {
    const feed = createLiveFeed({ ...DEFAULT_LIVE_FEED_LIMITS, maxSessions: 2, maxLoops: 2 });
    for (const s of ['a', 'b', 'c']) feed.session(loop, info(s));
    assert.deepEqual(feed.sessions(loop).map((s) => s.sessionId), ['b', 'c']);
    feed.session({ projectId: 'p', name: 'two' }, info('x'));
    feed.session({ projectId: 'p', name: 'three' }, info('y'));
    assert.deepEqual(feed.sessions(loop), [], 'the least recently used loop was dropped');
    assert.equal(feed.sessions({ projectId: 'p', name: 'three' }).length, 1);
  });

  it('history reads opencode while the loop runs here, else memory with a note', async () => {
    const feed = createLiveFeed({ ...DEFAULT_LIVE_FEED_LIMITS, maxParts: 1, maxHistoryParts: 3 });
    feed.session(loop, info('s'));
    feed.part(loop, 's', delta('kept', 'k'));
    const memory = await feed.history(loop, 's');
    assert.equal(memory.source, 'memory');
    assert.match(memory.note ?? '', /not running in this process/);
    assert.deepEqual(memory.parts.map((p) => p.partId), ['kept']);
    feed.reader(loop, async () => [whole('a', 'A'), whole('b', 'B'), whole('c', 'C'), whole('d', 'D')]);
    const full = await feed.history(loop, 's');
    assert.equal(full.source, 'opencode');
    assert.deepEqual(full.parts.map((p) => p.partId), ['b', 'c', 'd']);
    assert.match(full.note ?? '', /first 1 parts are not shown/);
    feed.reader(loop, async () => {
      throw new Error('HTTP 500');
    });
    const failed = await feed.history(loop, 's');
    assert.equal(failed.source, 'memory');
    assert.match(failed.note ?? '', /HTTP 500/);
  });

  it('a failing listener does not stop the others', () => {
    const logged: string[] = [];
    const feed = createLiveFeed(undefined, (m) => logged.push(m));
    let reached = 0;
    feed.subscribe(() => {
      throw new Error('boom');
    });
    feed.subscribe(() => reached++);
    feed.session(loop, info('s'));
    assert.equal(reached, 1);
    assert.match(logged[0]!, /boom/);
  });

  it('a batched subscriber gets one coalesced batch per loop per interval, with every update counted', async () => {
    const feed = createLiveFeed();
    const batches: Array<{ loop: string; sessionsChanged: boolean; updates: LivePartUpdate[] }> = [];
    const off = feed.subscribeBatched((b) => batches.push({ loop: b.loop.name, sessionsChanged: b.sessionsChanged, updates: b.updates }), 20);
    feed.session(loop, info('s'));
    for (let i = 0; i < 500; i++) feed.part(loop, 's', delta(`p${i % 2}`, 'x'));
    feed.part({ projectId: 'p', name: 'other' }, 'o', delta('q', 'y', 'o'));
    await new Promise((r) => setTimeout(r, 60));
    assert.deepEqual(batches.map((b) => [b.loop, b.sessionsChanged, b.updates.length]), [['l', true, 2], ['other', true, 1]]);
    assert.equal(batches[0]!.updates.reduce((n, u) => n + (u.merged ?? 1), 0), 500);
    assert.equal(batches[0]!.updates[0]!.delta, 'x'.repeat(250));
    feed.part(loop, 's', delta('p0', 'z'));
    await new Promise((r) => setTimeout(r, 60));
    assert.deepEqual(batches.slice(2).map((b) => [b.loop, b.sessionsChanged, b.updates.length]), [['l', false, 1]]);
    off();
    feed.part(loop, 's', delta('p0', 'z'));
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(batches.length, 3, 'nothing after unsubscribing');
  });
});
