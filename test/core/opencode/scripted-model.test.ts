/** The scripted model's own contract (the loop tests rely on it), over plain HTTP. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  forgeAgentOf,
  hang,
  httpError,
  malformed,
  startScriptedModel,
  text,
  toolCall,
  type ScriptedModel,
} from '../../support/scripted-model';

interface Chunk {
  choices: Array<{ delta: { content?: string; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number }; completion_tokens_details?: { reasoning_tokens: number } };
}

async function complete(model: ScriptedModel, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ status: number; chunks: Chunk[]; raw: string }> {
  const response = await fetch(`${model.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'fake-1', stream: true, ...body }),
  });
  const raw = await response.text();
  const chunks = raw
    .split('\n\n')
    .map((block) => block.replace(/^data: /, '').trim())
    .filter((data) => data && data !== '[DONE]')
    .flatMap((data) => {
      try {
        return [JSON.parse(data) as Chunk];
      } catch {
        return [];
      }
    });
  return { status: response.status, chunks, raw };
}

const agentBody = (system: string, extra: Record<string, unknown> = {}) => ({
  messages: [
    { role: 'system', content: system },
    { role: 'user', content: 'do it' },
  ],
  tools: [{ type: 'function', function: { name: 'write', parameters: {} } }],
  ...extra,
});

describe('scripted model', () => {
  let model: ScriptedModel;
  beforeEach(async () => {
    model = await startScriptedModel();
  });
  afterEach(() => model.close());

  it('streams queued text and tool calls with usage, and records what the agent was told', async () => {
    model.enqueue(toolCall('write', { filePath: '/x', content: 'y' }, { input: 7, output: 3, cacheRead: 2, reasoning: 1 }), text('hello world'));
    const first = await complete(model, agentBody("You are Forge's auditing agent (forge-auditor)."), { 'x-session-id': 'ses_1' });
    const call = first.chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])[0];
    assert.equal(call?.function.name, 'write');
    assert.deepEqual(JSON.parse(call?.function.arguments ?? ''), { filePath: '/x', content: 'y' });
    assert.ok(first.chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls'));
    const usage = first.chunks.find((c) => c.usage)?.usage;
    assert.deepEqual(usage && [usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details?.cached_tokens, usage.completion_tokens_details?.reasoning_tokens], [7, 3, 2, 1]);
    assert.match(first.raw, /data: \[DONE\]/);

    const second = await complete(
      model,
      agentBody('sys', {
        messages: [
          { role: 'system', content: 'sys' },
          { role: 'user', content: 'do it' },
          { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'write', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: 'Wrote file successfully.' },
        ],
      }),
      { 'x-session-id': 'ses_1' },
    );
    assert.equal(second.chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'hello world');
    assert.equal(model.requests.length, 2);
    assert.equal(model.requests[0]?.sessionId, 'ses_1');
    assert.equal(forgeAgentOf(model.requests[0]!), 'forge-auditor');
    assert.deepEqual(model.requests[0]?.toolNames, ['write']);
    assert.deepEqual(model.requests[1]?.toolResults, [{ toolCallId: 'c1', name: 'write', content: 'Wrote file successfully.' }]);
  });

  it('paces a text: the given pieces, in order, at a steady rate, then the tool calls', async () => {
    const pieces = Array.from({ length: 40 }, (_, i) => `p${i} `);
    model.enqueue({ kind: 'tool-calls', text: pieces.join(''), pacing: { pieces, intervalMs: 10 }, calls: [{ name: 'read', args: { filePath: 'a' } }] });
    const started = Date.now();
    const { chunks } = await complete(model, agentBody('You are (forge-code)', { tools: [{ type: 'function', function: { name: 'read' } }] }));
    const elapsed = Date.now() - started;
    const contents = chunks.map((c) => c.choices[0]?.delta.content).filter((x): x is string => !!x);
    assert.deepEqual(contents, pieces);
    assert.equal(chunks.find((c) => c.choices[0]?.delta.tool_calls)?.choices[0]?.delta.tool_calls?.[0]?.function.name, 'read');
    assert.ok(elapsed >= 39 * 10, `40 pieces 10 ms apart take at least 390 ms (${elapsed} ms)`);
  });

  it('answers title requests by itself without consuming a step', async () => {
    model.enqueue(text('scripted'));
    const title = await complete(model, { messages: [{ role: 'system', content: 'You are a title generator. You output ONLY a thread title.' }, { role: 'user', content: 'x' }] });
    assert.equal(title.chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'Scripted session');
    const agent = await complete(model, agentBody('agent'));
    assert.equal(agent.chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'scripted');
    assert.deepEqual(model.agentRequests.map((r) => r.index), [1]);
  });

  it('lets a handler decide per request, with the turn number in the session', async () => {
    model.setHandler((request, ctx) => text(`${request.sessionId}#${ctx.turnInSession}`));
    const say = async (session: string) =>
      (await complete(model, agentBody('a'), { 'x-session-id': session })).chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.deepEqual([await say('a'), await say('b'), await say('a')], ['a#0', 'b#0', 'a#1']);
  });

  it('scripts faults: HTTP errors, a malformed chunk, a stream that hangs', async () => {
    model.enqueue(httpError(500), httpError(429), malformed, hang);
    assert.equal((await complete(model, agentBody('a'))).status, 500);
    assert.equal((await complete(model, agentBody('a'))).status, 429);
    const broken = await complete(model, agentBody('a'));
    assert.equal(broken.status, 200);
    assert.match(broken.raw, /data: \{"id": "broken"/);
    const controller = new AbortController();
    const response = await fetch(`${model.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ stream: true, ...agentBody('a') }),
      signal: controller.signal,
    });
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    const firstRead = await reader.read();
    assert.match(new TextDecoder().decode(firstRead.value), /"role":"assistant"/);
    const pending = reader.read();
    const raced = await Promise.race([pending.then(() => 'data'), model.waitForRequest((r) => r.index === 3).then(() => 'still open')]);
    assert.equal(raced, 'still open');
    controller.abort();
    await pending.catch(() => undefined);
  });

  it('runs standalone with a script module and prints where it listens', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'forge-script-'));
    const script = join(dir, 'script.ts');
    const support = fileURLToPath(new URL('../../support/scripted-model.ts', import.meta.url));
    await writeFile(script, `import { text } from ${JSON.stringify(support)};\nexport default { steps: [text('from the script')] };\n`);
    const cli = fileURLToPath(new URL('../../support/scripted-model-cli.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', cli, '--script', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`CLI exited with ${code}`)));
      });
      const { baseURL } = JSON.parse(line) as { baseURL: string };
      const response = await fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ stream: false, ...agentBody('a') }),
      });
      const body = (await response.json()) as { choices: Array<{ message: { content: string } }> };
      assert.equal(body.choices[0]?.message.content, 'from the script');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await rm(dir, { recursive: true, force: true });
    }
  });
});
