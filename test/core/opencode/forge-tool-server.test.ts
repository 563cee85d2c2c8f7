import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startForgeToolServer, type ForgeToolCallLogEntry, type ForgeToolScope, type ForgeToolServer } from '../../../src/core/opencode/forge-tool-server';
import { FORGE_TOOL_NAMES } from '../../../src/core/opencode/forge-tools';
import { createRecordingToolBackend, type RecordingToolBackend } from '../../support/recording-tool-backend';

interface ToolText {
  isError: boolean;
  text: string;
}

async function connect(scope: ForgeToolScope, headers = scope.mcpEntry.headers): Promise<Client> {
  const client = new Client({ name: 'forge-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(scope.mcpEntry.url), { requestInit: { headers } }));
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<ToolText> {
  const result = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
  return { isError: result.isError === true, text: result.content.map((c) => c.text ?? '').join('') };
}

describe('Forge tool server (MCP over HTTP)', () => {
  let server: ForgeToolServer;
  let backend: RecordingToolBackend;
  let log: ForgeToolCallLogEntry[];
  let scope: ForgeToolScope;
  let client: Client;

  beforeEach(async () => {
    backend = createRecordingToolBackend();
    log = [];
    server = await startForgeToolServer({ backend, onCall: (entry) => log.push(entry) });
    scope = server.openScope({ loopName: 'my-loop' });
    client = await connect(scope);
  });

  afterEach(async () => {
    await client.close();
    await server.close();
  });

  it('lists all nine tools with JSON schemas of their arguments', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...FORGE_TOOL_NAMES].sort());
    const reviewWrite = tools.find((t) => t.name === 'review_write');
    assert.ok(reviewWrite);
    assert.deepEqual(Object.keys(reviewWrite.inputSchema.properties ?? {}).sort(), ['description', 'file', 'line', 'scenario', 'severity']);
    assert.deepEqual([...(reviewWrite.inputSchema.required as string[])].sort(), ['description', 'file', 'line', 'severity']);
  });

  it('passes a valid call to the backend with its loop, role and session', async () => {
    scope.setActiveSession({ sessionId: 'ses_1', role: 'auditor' });
    const result = await call(client, 'review_write', { file: 'src/a.ts', line: 3, severity: 'bug', description: 'off by one' });
    assert.deepEqual(result, { isError: false, text: 'reviewWrite ok' });
    assert.equal(backend.calls.length, 1);
    assert.deepEqual(backend.calls[0]?.caller, { loopName: 'my-loop', role: 'auditor', sessionId: 'ses_1' });
    assert.deepEqual(backend.calls[0]?.args, { file: 'src/a.ts', line: 3, severity: 'bug', description: 'off by one' });
    assert.equal(log.at(-1)?.outcome, 'ok');
  });

  it('refuses calls with missing fields or wrong types, naming the field, and changes nothing', async () => {
    scope.setActiveSession({ sessionId: 'ses_1', role: 'auditor' });
    const missing = await call(client, 'review_write', { file: 'src/a.ts', severity: 'bug' });
    assert.equal(missing.isError, true);
    assert.match(missing.text, /Invalid arguments for review_write/);
    assert.match(missing.text, /line/);
    assert.match(missing.text, /description/);
    const wrongType = await call(client, 'review_write', { file: 'src/a.ts', line: 'three', severity: 'fatal', description: 'x' });
    assert.equal(wrongType.isError, true);
    assert.match(wrongType.text, /line/);
    assert.match(wrongType.text, /severity/);
    const emptyAdjust = await call(client, 'plan_adjust', { rationale: 'because' });
    assert.equal(emptyAdjust.isError, true);
    assert.match(emptyAdjust.text, /currentSection/);
    assert.equal(backend.calls.length, 0);
    assert.deepEqual(
      log.map((e) => e.outcome),
      ['invalid', 'invalid', 'invalid'],
    );
  });

  it('refuses tools the calling role may not use', async () => {
    scope.setActiveSession({ sessionId: 'ses_code', role: 'code' });
    const coderWrites = await call(client, 'review_write', { file: 'a', line: 1, severity: 'bug', description: 'd' });
    assert.equal(coderWrites.isError, true);
    assert.match(coderWrites.text, /the code agent may not call it/);
    assert.match(coderWrites.text, /review_read, review_reply, plan_read, section_read, loop_handoff/);

    scope.setActiveSession({ sessionId: 'ses_aud', role: 'auditor' });
    const auditorPlans = await call(client, 'plan_write', { content: '# plan' });
    assert.equal(auditorPlans.isError, true);
    assert.match(auditorPlans.text, /the auditor agent may not call it/);

    const architect = server.openScope({ loopName: null, role: 'architect', scopeKey: 'planning-1' });
    const architectClient = await connect(architect);
    try {
      const handoff = await call(architectClient, 'loop_handoff', { summary: 's', done: true });
      assert.equal(handoff.isError, true);
      assert.match(handoff.text, /the architect agent may not call it/);
      const plan = await call(architectClient, 'plan_write', { content: '# plan\n' });
      assert.equal(plan.isError, false);
      assert.deepEqual(backend.calls.at(-1)?.caller, { loopName: null, role: 'architect', sessionId: undefined, scopeKey: 'planning-1' });
    } finally {
      await architectClient.close();
    }
    assert.equal(backend.calls.length, 1);
  });

  it('refuses calls while no session of the loop is active', async () => {
    const result = await call(client, 'review_read', {});
    assert.equal(result.isError, true);
    assert.match(result.text, /no agent session of loop "my-loop" is active/);
    assert.equal(backend.calls.length, 0);
  });

  it('returns the backend refusal text to the agent', async () => {
    scope.setActiveSession({ sessionId: 'ses_1', role: 'code' });
    backend.refuseNext('loopHandoff', 'decisions must not be empty');
    const result = await call(client, 'loop_handoff', { decisions: '', verification: 'ran tests' });
    assert.deepEqual(result, { isError: true, text: 'decisions must not be empty' });
  });

  it('refuses an unknown tool name', async () => {
    scope.setActiveSession({ sessionId: 'ses_1', role: 'code' });
    const result = await call(client, 'loop_cancel', {});
    assert.equal(result.isError, true);
    assert.match(result.text, /Forge has no tool "loop_cancel"/);
  });

  it('rejects requests without the right secret, and unknown or closed scopes', async () => {
    const wrong = await fetch(scope.mcpEntry.url, {
      method: 'POST',
      headers: { authorization: 'Bearer not-the-secret', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(wrong.status, 401);
    assert.match(await wrong.text(), /missing or wrong secret/);
    const none = await fetch(scope.mcpEntry.url, { method: 'POST', body: '{}' });
    assert.equal(none.status, 401);
    await assert.rejects(connect(scope, { Authorization: 'Bearer nope' }));

    const unknown = await fetch(`${server.url}/mcp/doesnotexist`, { method: 'POST', headers: scope.mcpEntry.headers, body: '{}' });
    assert.equal(unknown.status, 404);
    const other = server.openScope({ loopName: 'other' });
    other.close();
    const closed = await fetch(other.mcpEntry.url, { method: 'POST', headers: scope.mcpEntry.headers, body: '{}' });
    assert.equal(closed.status, 404);
    assert.equal(backend.calls.length, 0);
  });

  it('binds to 127.0.0.1 and gives opencode a remote MCP entry with a bearer secret', () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(scope.mcpEntry.type, 'remote');
    assert.equal(scope.mcpEntry.oauth, false);
    assert.match(scope.mcpEntry.url, new RegExp(`^${server.url}/mcp/[a-f0-9]{32}$`));
    assert.match(scope.mcpEntry.headers.Authorization ?? '', /^Bearer [A-Za-z0-9_-]{40,}$/);
  });
});
