import assert from 'node:assert/strict';
import { createEventNormalizer, MALFORMED_STREAM_SUMMARY, summarizeModelError, type RawOpencodeEvent } from '../../../src/core/opencode/event-normalizer';
import { serverEventNotice } from '../../../src/core/opencode/server-supervisor';

const status = (sessionID: string, type: string, extra: Record<string, unknown> = {}): RawOpencodeEvent => ({
  type: 'session.status',
  properties: { sessionID, status: { type, ...extra } },
});
const idle = (sessionID: string): RawOpencodeEvent => ({ type: 'session.idle', properties: { sessionID } });
const types = (events: Array<{ type: string }>) => events.map((e) => e.type);

describe('event normalisation', () => {
  it('emits one busy and one idle per turn, however opencode repeats them', () => {
    const n = createEventNormalizer();
    n.markPrompted('s1');
    const out = [status('s1', 'busy'), status('s1', 'busy'), status('s1', 'idle'), idle('s1'), idle('s1')].flatMap((e) => n.normalize(e));
    assert.deepEqual(types(out), ['session.busy', 'session.idle']);
  });

  it("drops the previous turn's late idle that arrives after a new prompt was sent", () => {
    const n = createEventNormalizer();
    n.normalize(status('s1', 'busy'));
    assert.deepEqual(types(n.normalize(status('s1', 'idle'))), ['session.idle']);
    n.markPrompted('s1');
    assert.deepEqual(n.normalize(idle('s1')), []);
    assert.deepEqual(types([...n.normalize(status('s1', 'busy')), ...n.normalize(idle('s1'))]), ['session.busy', 'session.idle']);
  });

  it('turns retry statuses into retry events with attempt, message and time', () => {
    const n = createEventNormalizer();
    const out = n.normalize(status('s1', 'retry', { attempt: 2, message: 'overloaded', next: 1234 }));
    assert.deepEqual(out, [
      { type: 'session.busy', sessionId: 's1', rootSessionId: 's1' },
      { type: 'session.retry', sessionId: 's1', rootSessionId: 's1', attempt: 2, message: 'overloaded', nextAt: 1234 },
    ]);
  });

  it('normalises errors with name, message, status code and retryability', () => {
    const n = createEventNormalizer();
    const [event] = n.normalize({
      type: 'session.error',
      properties: { sessionID: 's1', error: { name: 'APIError', data: { message: 'Bad Request', statusCode: 400, isRetryable: false } } },
    });
    assert.deepEqual(event, {
      type: 'session.error',
      sessionId: 's1',
      rootSessionId: 's1',
      error: { name: 'APIError', message: 'Bad Request', statusCode: 400, retryable: false },
    });
  });

  it('attributes activity of subagent sessions to their top-level session', () => {
    const n = createEventNormalizer();
    n.normalize({ type: 'session.created', properties: { info: { id: 'child', parentID: 'root' } } });
    n.normalize({ type: 'session.created', properties: { info: { id: 'grandchild', parentID: 'child' } } });
    const [tool] = n.normalize({
      type: 'message.part.updated',
      properties: { part: { type: 'tool', tool: 'bash', sessionID: 'grandchild', messageID: 'm1', state: { status: 'running' } } },
    });
    assert.deepEqual(tool, { type: 'activity', sessionId: 'grandchild', rootSessionId: 'root', messageId: 'm1', kind: 'tool', tool: 'bash', toolStatus: 'running' });
    const [delta] = n.normalize({ type: 'message.part.delta', properties: { sessionID: 'child', messageID: 'm2', partID: 'p', field: 'text', delta: 'x' } });
    assert.deepEqual(delta, { type: 'activity', sessionId: 'child', rootSessionId: 'root', kind: 'text', messageId: 'm2', part: { partId: 'p', sessionId: 'child', messageId: 'm2', kind: 'text', delta: 'x' } });
  });

  it('passes permission and question requests with their top-level session', () => {
    const n = createEventNormalizer();
    n.recordParent('child', 'root');
    const [asked] = n.normalize({
      type: 'permission.asked',
      properties: { id: 'per_1', sessionID: 'child', permission: 'external_directory', patterns: ['/etc/*'], metadata: {}, always: [], tool: { messageID: 'm', callID: 'c' } },
    });
    assert.deepEqual(asked, {
      type: 'permission.asked',
      rootSessionId: 'root',
      request: { id: 'per_1', sessionId: 'child', permission: 'external_directory', patterns: ['/etc/*'], metadata: {}, tool: { messageId: 'm', callId: 'c' } },
    });
    assert.deepEqual(n.normalize({ type: 'question.asked', properties: { id: 'que_1', sessionID: 'root', questions: [] } }), [
      { type: 'question.asked', sessionId: 'root', rootSessionId: 'root', requestId: 'que_1' },
    ]);
  });

  it('reconciles after a lost stream: a missed idle once, a pending prompt only when its turn finished', () => {
    const n = createEventNormalizer();
    n.normalize(status('busy1', 'busy'));
    assert.deepEqual(n.reconcile('busy1', 'idle', false), [{ type: 'session.idle', sessionId: 'busy1', rootSessionId: 'busy1', reconciled: true }]);
    assert.deepEqual(n.reconcile('busy1', 'idle', false), []);

    n.markPrompted('p1');
    assert.deepEqual(n.reconcile('p1', 'idle', false), [], 'not started yet');
    assert.deepEqual(types(n.reconcile('p1', 'idle', true)), ['session.busy', 'session.idle']);

    n.markPrompted('p2');
    assert.deepEqual(types(n.reconcile('p2', 'busy', false)), ['session.busy']);
    assert.deepEqual(n.normalize(status('p2', 'busy')), []);
  });

  it('reports a lost server as an error and an idle for each working session only', () => {
    const n = createEventNormalizer();
    n.normalize(status('working', 'busy'));
    n.markPrompted('waiting');
    n.normalize(status('done', 'busy'));
    n.normalize(status('done', 'idle'));
    const out = n.serverLost('gone');
    assert.deepEqual(
      out.map((e) => `${e.type}:${'sessionId' in e ? e.sessionId : ''}`),
      ['session.error:working', 'session.idle:working', 'session.error:waiting', 'session.busy:waiting', 'session.idle:waiting'],
    );
    assert.equal(out[0]?.type === 'session.error' && out[0].error.name, 'ServerLost');
    assert.deepEqual(n.serverLost('again'), []);
  });
});

describe('model errors and server events in a loop\'s words', () => {
  it('a malformed stream is named, in one line; other errors keep their first line only', () => {
    // What opencode reports for a chat-completions chunk that is not JSON (seen with the scripted model).
    const parser = { name: 'UnknownError', message: 'JSON parsing failed: Text: {"id": "broken", "choices": [ {"delta": .\nError message: JSON Parse error: Unexpected EOF' };
    const m = summarizeModelError(parser);
    assert.equal(m.malformed, true);
    assert.ok(!m.summary.includes('\n') && !m.summary.includes('broken'));
    assert.ok(!MALFORMED_STREAM_SUMMARY.includes('\n') && MALFORMED_STREAM_SUMMARY.length <= 300);
    assert.equal(summarizeModelError({ name: 'AI_JSONParseError', message: 'x' }).malformed, true);
    const stack = summarizeModelError({ name: 'UnknownError', message: 'Error: All fibers interrupted\n    at xH (/$bunfs/root/chunk.js:12:1887)' });
    assert.deepEqual(stack, { malformed: false, summary: 'Error: All fibers interrupted' });
    assert.deepEqual(summarizeModelError({ name: 'APIError', message: 'HTTP 500' }), { malformed: false, summary: 'HTTP 500' });
    assert.equal(summarizeModelError({ name: 'APIError', message: 'x'.repeat(1000) }).summary.length, 298);
  });

  it('a dead server\'s notice leaves out the address it listened on; the restarted one\'s names its own', () => {
    const exited = serverEventNotice({ type: 'exited', generation: 1, exit: { code: null, signal: 'SIGKILL' }, output: 'opencode server listening on http://127.0.0.1:4242\nWARN something\n' });
    assert.ok(exited && !exited.message.includes('4242'), exited?.message);
    assert.match(exited!.message, /^opencode exited unexpectedly \(killed by SIGKILL\); restarting it\. It said last: WARN something$/);
    const quiet = serverEventNotice({ type: 'exited', generation: 1, exit: { code: 3, signal: null }, output: 'opencode server listening on http://127.0.0.1:4242\n' });
    assert.equal(quiet?.message, 'opencode exited unexpectedly (exit code 3); restarting it.');
    const started = serverEventNotice({ type: 'started', generation: 2, endpoint: { url: 'http://127.0.0.1:5151', username: 'forge', password: 'p' }, pid: 7, marker: 'm' });
    assert.match(started!.message, /pid 7.*http:\/\/127\.0\.0\.1:5151/);
    assert.equal(serverEventNotice({ type: 'started', generation: 1, endpoint: { url: 'http://127.0.0.1:5151', username: 'forge', password: 'p' }, pid: 7, marker: 'm' }), undefined, 'the first start is no news');
  });

  describe('live parts (what the live view shows)', () => {
    it('carries a text delta, a whole text part and its end, and a tool call shortened', () => {
      const n = createEventNormalizer();
      const [delta] = n.normalize({ type: 'message.part.delta', properties: { sessionID: 's', messageID: 'm', partID: 'p1', field: 'text', delta: 'Hel' } });
      assert.deepEqual(delta?.type === 'activity' && delta.part, { partId: 'p1', sessionId: 's', messageId: 'm', kind: 'text', delta: 'Hel' });
      const [whole] = n.normalize({ type: 'message.part.updated', properties: { part: { id: 'p1', type: 'text', sessionID: 's', messageID: 'm', text: 'Hello', time: { start: 1, end: 2 } } } });
      assert.deepEqual(whole?.type === 'activity' && whole.part, { partId: 'p1', sessionId: 's', messageId: 'm', kind: 'text', text: 'Hello', ended: true });
      const [tool] = n.normalize({
        type: 'message.part.updated',
        properties: { part: { id: 'p2', type: 'tool', tool: 'write', callID: 'c1', sessionID: 's', messageID: 'm', state: { status: 'completed', input: { filePath: 'a.js', content: 'x\ny' }, output: 'Wrote file successfully.\n', title: 'a.js' } } },
      });
      assert.ok(tool?.type === 'activity');
      assert.equal(tool.kind, 'tool');
      assert.equal(tool.toolStatus, 'completed');
      assert.deepEqual(tool.part, { partId: 'p2', sessionId: 's', messageId: 'm', kind: 'tool', tool: { name: 'write', callId: 'c1', status: 'completed', args: 'filePath="a.js" content="x y" (2 lines)', result: 'Wrote file successfully.', title: 'a.js' } });
    });

    it('leaves out what the live view does not show: step marks, synthetic text, deltas of other fields, parts without ids', () => {
      const n = createEventNormalizer();
      const partOf = (e: RawOpencodeEvent) => n.normalize(e).map((a) => (a.type === 'activity' ? a.part : 'not activity'));
      assert.deepEqual(partOf({ type: 'message.part.updated', properties: { part: { id: 'x', type: 'step-start', sessionID: 's', messageID: 'm' } } }), [undefined]);
      assert.deepEqual(partOf({ type: 'message.part.updated', properties: { part: { id: 'x', type: 'text', synthetic: true, text: 'system note', sessionID: 's', messageID: 'm' } } }), [undefined]);
      assert.deepEqual(partOf({ type: 'message.part.delta', properties: { sessionID: 's', messageID: 'm', partID: 'p', field: 'input', delta: '{' } }), [undefined]);
      assert.deepEqual(partOf({ type: 'message.part.delta', properties: { sessionID: 's', messageID: 'm', field: 'text', delta: 'a' } }), [undefined]);
    });

    it('a failed tool call carries its error as the result', () => {
      const n = createEventNormalizer();
      const [tool] = n.normalize({ type: 'message.part.updated', properties: { part: { id: 'p', type: 'tool', tool: 'bash', callID: 'c', sessionID: 's', messageID: 'm', state: { status: 'error', input: { command: 'rm -rf /' }, error: 'denied by the permission rules' } } } });
      assert.ok(tool?.type === 'activity');
      assert.deepEqual(tool.part?.tool, { name: 'bash', callId: 'c', status: 'error', args: 'command="rm -rf /"', result: 'error: denied by the permission rules' });
    });

    it("marks the parts of user messages (Forge's prompts) as such", () => {
      const n = createEventNormalizer();
      n.normalize({ type: 'message.updated', properties: { info: { id: 'mu', role: 'user', sessionID: 's' } } });
      n.normalize({ type: 'message.updated', properties: { info: { id: 'ma', role: 'assistant', sessionID: 's' } } });
      const partOf = (messageID: string) => {
        const [e] = n.normalize({ type: 'message.part.updated', properties: { part: { id: `p-${messageID}`, type: 'text', sessionID: 's', messageID, text: 'x' } } });
        return e?.type === 'activity' ? e.part : undefined;
      };
      assert.equal(partOf('mu')?.fromUser, true);
      assert.equal(partOf('ma')?.fromUser, undefined);
    });
  });
});
