/**
 * Forge's opencode layer end to end: the real opencode binary in a real git worktree, Forge's
 * MCP tool server with the storage backend on a real sql.js database, and the scripted model.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLoopToolBackend } from '../../../src/core/loop/tool-backend';
import { usageByModel, type AgentEvent } from '../../../src/core/opencode/agent-client';
import { openForgeDatabase, createForgeRepositories, type ForgeDatabase, type ForgeRepositories, type LoopHandoffRow } from '../../../src/core/storage';
import { git } from '../../support/git-repo';
import { startOpencodeHarness, type OpencodeHarness } from '../../support/opencode-harness';
import { MOCK_MODEL_ID, MOCK_PROVIDER_ID } from '../../support/opencode-test-env';
import { httpError, malformed, text, toolCall, type ScriptedRequest } from '../../support/scripted-model';

const PROJECT = 'p1';
const LOOP = 'oc-loop';

const eventsOf = (h: OpencodeHarness, sessionId: string, from = 0) =>
  h.events.slice(from).filter((e): e is AgentEvent & { sessionId: string } => 'sessionId' in e && e.sessionId === sessionId);

describe('opencode sessions through Forge (real opencode, real git, real sql.js)', function () {
  // Generous bound for a loaded 2-core machine; it only stops a hung test, it measures nothing.
  this.timeout(600_000);
  let dataDir: string;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;
  let handoffs: LoopHandoffRow[];
  let h: OpencodeHarness;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'forge-oc-data-'));
    db = await openForgeDatabase({ path: join(dataDir, 'forge.db') });
    repos = createForgeRepositories(db);
    handoffs = [];
    h = await startOpencodeHarness({
      loopName: LOOP,
      backend: createLoopToolBackend({ projectId: PROJECT, db, onHandoff: (row) => handoffs.push(row) }),
      // The user's own project configuration, without "$schema", and an .opencode folder:
      // opencode rewrites/creates files there, and none of it may dirty the worktree.
      repoFiles: {
        'README.md': '# test\n',
        'opencode.json': '{"instructions": []}\n',
        '.opencode/agent/helper.md': '---\ndescription: a project agent\n---\nHelp.\n',
      },
      beforeStart: (worktreeDir) => {
        repos.loops.create(PROJECT, { name: LOOP, kind: 'plan', status: 'running', phase: 'coding', iteration: 1, sectionIndex: 0, worktreeDir });
      },
    });
  });

  after(async () => {
    await h?.cleanup();
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  afterEach(() => h.model.setHandler(undefined));

  it('runs a coder session whose model calls write: the file lands in the worktree, and each idle arrives once', async () => {
    const sessionId = await h.startSession('code');
    const from = h.events.length;
    h.model.enqueue(toolCall('write', { filePath: join(h.worktreeDir, 'hello.txt'), content: 'hello from the agent\n' }), text('Wrote the file.'));
    await h.prompt(sessionId, 'code', 'Create hello.txt.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    assert.equal(await readFile(join(h.worktreeDir, 'hello.txt'), 'utf8'), 'hello from the agent\n');

    // A second prompt: its busy comes after the first idle, so a duplicate idle of the first
    // prompt would show up between them.
    h.model.enqueue(text('Nothing else to do.'));
    await h.prompt(sessionId, 'code', 'Anything else?');
    const secondIdle = h.events.length;
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, secondIdle);
    const busyIdle = eventsOf(h, sessionId, from)
      .filter((e) => e.type === 'session.busy' || e.type === 'session.idle')
      .map((e) => e.type);
    assert.deepEqual(busyIdle, ['session.busy', 'session.idle', 'session.busy', 'session.idle']);
    assert.ok(eventsOf(h, sessionId, from).some((e) => e.type === 'activity' && e.kind === 'tool' && e.tool === 'write'));

    // What the agent was told: Forge's coder prompt, and Forge's tools for its role only.
    const request = h.model.agentRequests.find((r) => r.sessionId === sessionId);
    assert.ok(request);
    assert.match(request.system, /Forge's coding agent \(forge-code\)/);
    assert.ok(request.toolNames.includes('forge_loop_handoff'));
    assert.ok(request.toolNames.includes('forge_section_read'));
    assert.ok(!request.toolNames.includes('forge_review_write'), 'the coder is not offered review_write');
    assert.ok(!request.toolNames.includes('forge_plan_write'));
    assert.ok(!request.toolNames.includes('question'));
  });

  it('persists a finding an auditor records with review_write, with the loop and a worktree-relative path', async () => {
    repos.loops.update(PROJECT, LOOP, { phase: 'auditing' });
    const sessionId = await h.startSession('auditor');
    h.model.enqueue(
      toolCall('forge_review_write', { file: 'hello.txt', line: 1, severity: 'bug', description: 'Greeting lacks a name', scenario: 'cat hello.txt' }),
      text('Recorded.'),
    );
    const from = h.events.length;
    await h.prompt(sessionId, 'auditor', 'Audit the work.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const findings = repos.reviewFindings.listOpen(PROJECT, LOOP);
    assert.equal(findings.length, 1);
    assert.equal(findings[0]?.file, 'hello.txt');
    assert.equal(findings[0]?.description, 'Greeting lacks a name');
    assert.equal(findings[0]?.sectionIndex, 0);
    const toolResult = h.model.agentRequests.filter((r) => r.sessionId === sessionId).at(-1)?.toolResults[0];
    assert.match(toolResult?.content ?? '', /Recorded finding #\d+ \(bug\) at hello\.txt:1/);

    const auditorRequest = h.model.agentRequests.find((r) => r.sessionId === sessionId);
    assert.match(auditorRequest?.system ?? '', /forge-auditor/);
    assert.ok(!auditorRequest?.toolNames.includes('write'), 'the auditor is not offered write');
    assert.ok(!auditorRequest?.toolNames.includes('edit'), 'the auditor is not offered edit');
    assert.ok(auditorRequest?.toolNames.includes('forge_review_write'));
  });

  it('refuses bad tool calls through opencode with clear errors and changes nothing', async () => {
    repos.loops.update(PROJECT, LOOP, { phase: 'auditing' });
    const sessionId = await h.startSession('auditor');
    h.model.enqueue(
      toolCall('forge_review_write', { file: '../../outside.txt', line: 1, severity: 'bug', description: 'escape' }),
      toolCall('forge_review_write', { file: 'hello.txt', severity: 'bug' }),
      toolCall('forge_review_write', { file: 'hello.txt', line: 'one', severity: 'fatal', description: 'x' }),
      toolCall('forge_plan_write', { content: '# not allowed' }),
      text('Done trying.'),
    );
    const from = h.events.length;
    const before = repos.reviewFindings.listByLoop(PROJECT, LOOP).length;
    await h.prompt(sessionId, 'auditor', 'Try bad calls.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const results = h.model.agentRequests
      .filter((r) => r.sessionId === sessionId)
      .flatMap((r) => r.toolResults)
      .map((t) => t.content);
    assert.equal(results.length, 4);
    assert.match(results[0] ?? '', /not a file inside the loop's worktree/);
    assert.match(results[1] ?? '', /line|description/i);
    assert.match(results[2] ?? '', /line|severity/i);
    // The auditor's agent denies plan_write, so opencode refuses it before it reaches Forge.
    assert.match(results[3] ?? '', /unavailable tool 'forge_plan_write'/);
    assert.equal(repos.reviewFindings.listByLoop(PROJECT, LOOP).length, before);
    assert.ok(!h.toolCalls.some((c) => c.tool === 'plan_write' && c.outcome === 'ok'));
  });

  it('records loop_handoff with its loop, role and session and notifies the runtime', async () => {
    repos.loops.update(PROJECT, LOOP, { phase: 'coding' });
    const sessionId = await h.startSession('code');
    h.model.enqueue(
      toolCall('forge_loop_handoff', { decisions: 'Wrote hello.txt', verification: 'cat hello.txt shows the greeting', notesForAuditor: 'trivial' }),
      text('Handed off.'),
    );
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Hand off.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const mine = handoffs.filter((row) => row.sessionId === sessionId);
    assert.equal(mine.length, 1);
    assert.equal(mine[0]?.loopName, LOOP);
    assert.equal(mine[0]?.role, 'code');
    assert.deepEqual(mine[0]?.payload, { decisions: 'Wrote hello.txt', verification: 'cat hello.txt shows the greeting', notesForAuditor: 'trivial' });
    assert.equal(repos.handoffs.forSession(PROJECT, LOOP, sessionId)?.role, 'code');
    assert.ok(h.toolCalls.some((c) => c.tool === 'loop_handoff' && c.role === 'code' && c.loopName === LOOP && c.sessionId === sessionId && c.outcome === 'ok'));
  });

  it('reads usage back per session and model from the scripted figures', async () => {
    const sessionId = await h.startSession('code');
    h.model.enqueue(
      toolCall('forge_review_read', {}, { input: 1200, output: 80, reasoning: 30, cacheRead: 200 }),
      text('All read.', { input: 1500, output: 40 }),
    );
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Read findings.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const usage = await h.client.usage(sessionId);
    assert.equal(usage.length, 1);
    const [entry] = usage;
    assert.equal(entry?.providerId, MOCK_PROVIDER_ID);
    assert.equal(entry?.modelId, MOCK_MODEL_ID);
    assert.equal(entry?.messages, 2);
    // opencode counts input without the cached part and output without reasoning (OpenAI-style figures).
    assert.equal(entry?.usage.input, 1200 - 200 + 1500);
    assert.equal(entry?.usage.cacheRead, 200);
    assert.equal(entry?.usage.output + (entry?.usage.reasoning ?? 0), 80 + 40);
    assert.equal(entry?.usage.reasoning, 30);
    assert.ok((entry?.cost ?? 0) > 0, 'cost is priced from the configured model cost');
    // Counted from the event stream; the session's messages say the same.
    assert.deepEqual(usage, usageByModel(await h.client.messages(sessionId)));
  });

  it('surfaces an HTTP 500 from the model as a normalised retry event, then completes', async () => {
    const sessionId = await h.startSession('code');
    h.model.enqueue(httpError(500), text('Recovered.'));
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Go.');
    const retry = await h.waitForEvent((e) => e.type === 'session.retry' && e.sessionId === sessionId, 120_000, from);
    assert.equal(retry.type === 'session.retry' && retry.attempt, 1);
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const messages = await h.client.messages(sessionId);
    assert.equal(messages.at(-1)?.text, 'Recovered.');
  });

  it('surfaces a non-retryable model error as a normalised session error', async () => {
    const sessionId = await h.startSession('code');
    h.model.enqueue(httpError(400, JSON.stringify({ error: { message: 'context too long for this scripted model', type: 'invalid_request' } })));
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Go.');
    const error = await h.waitForEvent((e) => e.type === 'session.error' && e.sessionId === sessionId, 120_000, from);
    assert.equal(error.type === 'session.error' && error.error.name, 'APIError');
    assert.equal(error.type === 'session.error' && error.error.statusCode, 400);
    assert.equal(error.type === 'session.error' && error.error.retryable, false);
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
  });

  it('surfaces a malformed model chunk as a normalised session error, then idle', async () => {
    const sessionId = await h.startSession('code');
    h.model.enqueue(malformed);
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Go.');
    const error = await h.waitForEvent((e) => e.type === 'session.error' && e.sessionId === sessionId, 120_000, from);
    assert.match(error.type === 'session.error' ? error.error.message : '', /JSON/);
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
  });

  it('attributes subagent sessions and their activity to the loop session; subagents inherit its ruleset', async () => {
    const parent = await h.startSession('code');
    const outside = join(tmpdir(), `forge-subagent-outside-${process.pid}.txt`);
    let child: string | undefined;
    h.model.setHandler((request, ctx) => {
      if (request.sessionId === parent) {
        return ctx.turnInSession === 0
          ? toolCall('task', { description: 'look around', prompt: 'Read the outside file.', subagent_type: 'general' })
          : text('The subagent is done.');
      }
      child = request.sessionId;
      return ctx.turnInSession === 0 ? toolCall('read', { filePath: outside }) : text('Could not read it.');
    });
    const from = h.events.length;
    await h.prompt(parent, 'code', 'Delegate.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === parent, 180_000, from);
    assert.ok(child && child !== parent, 'the subagent ran in its own session');
    const created = h.events.slice(from).find((e) => e.type === 'session.created' && e.sessionId === child);
    assert.deepEqual(created, { type: 'session.created', sessionId: child, parentSessionId: parent, rootSessionId: parent });
    assert.ok(h.events.slice(from).some((e) => e.type === 'activity' && e.sessionId === child && e.rootSessionId === parent));
    assert.ok(h.events.slice(from).some((e) => e.type === 'session.idle' && e.sessionId === child && e.rootSessionId === parent));
    const childResult = h.model.agentRequests.filter((r) => r.sessionId === child).at(-1)?.toolResults[0]?.content ?? '';
    assert.match(childResult, /rule which prevents you from using this specific tool call/);
    assert.ok(!h.events.slice(from).some((e) => e.type === 'permission.asked'), 'nothing waited on a question');
  });

  it('answers a permission request that still arrives by policy, at once, and logs it', async () => {
    // A loop session whose ruleset did not cover a request (here: none at all) still never waits.
    const sessionId = await h.startSession('code', 'no ruleset', { withoutRuleset: true });
    const outside = join(tmpdir(), `forge-asked-outside-${process.pid}.txt`);
    h.model.enqueue(toolCall('read', { filePath: outside }), text('Refused, fine.'));
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Read outside.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const asked = h.events.slice(from).find((e) => e.type === 'permission.asked' && e.request.sessionId === sessionId);
    assert.ok(asked && asked.type === 'permission.asked');
    assert.equal(asked.request.permission, 'external_directory');
    const reply = h.permissionReplies.find((r) => r.sessionId === sessionId);
    assert.equal(reply?.reply, 'reject');
    assert.match(reply?.reason ?? '', /only inside the worktree/);
    const result = h.model.agentRequests.filter((r) => r.sessionId === sessionId).at(-1)?.toolResults[0]?.content ?? '';
    assert.match(result, /only inside the worktree/, 'the agent is told why');
  });

  it('never waits on a permission: reading outside the worktree is refused, not asked', async () => {
    const sessionId = await h.startSession('code');
    const outside = join(tmpdir(), `forge-outside-${process.pid}.txt`);
    h.model.enqueue(toolCall('read', { filePath: outside }), text('Could not read it.'));
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Read a file outside.');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    const result = h.model.agentRequests.filter((r) => r.sessionId === sessionId).at(-1)?.toolResults[0]?.content ?? '';
    assert.match(result, /rule which prevents you from using this specific tool call/);
    // Whatever opencode asked was answered at once by policy.
    for (const asked of h.events.slice(from).filter((e) => e.type === 'permission.asked')) {
      assert.ok(asked.type === 'permission.asked' && h.permissionReplies.some((r) => r.sessionId === asked.request.sessionId));
    }
  });

  it("keeps opencode's own writes out of the worktree's changes", async () => {
    const status = await git(h.worktreeDir, 'status', '--porcelain');
    const changed = status.split('\n').filter(Boolean).map((line) => line.slice(3));
    assert.deepEqual(changed, ['hello.txt']);
    assert.ok(existsSync(join(h.worktreeDir, '.opencode')), 'opencode did touch the .opencode folder (the guard is what keeps it out)');
    assert.equal(await git(h.repo.dir, 'status', '--porcelain'), '', "the user's own checkout is untouched");
  });

  it('lists providers and models for the model picker, and knows the Forge agents', async () => {
    const catalog = await h.client.providers();
    const mock = catalog.providers.find((p) => p.id === MOCK_PROVIDER_ID);
    assert.ok(mock);
    assert.deepEqual(mock.models.map((m) => m.modelId), [MOCK_MODEL_ID]);
    assert.equal(mock.models[0]?.toolCall, true);
    const agents = await h.client.agents();
    for (const name of ['forge-code', 'forge-auditor', 'forge-architect']) assert.ok(agents.includes(name), name);
    assert.ok(agents.includes('build'), "the user's and opencode's own agents stay available");
  });

  it('aborts and deletes sessions', async () => {
    const sessionId = await h.startSession('code');
    h.model.setHandler(() => ({ kind: 'hang' }));
    const from = h.events.length;
    await h.prompt(sessionId, 'code', 'Hang.');
    await h.model.waitForRequest((r: ScriptedRequest) => r.sessionId === sessionId && !r.isTitleRequest);
    await h.client.abort(sessionId);
    const error = await h.waitForEvent((e) => e.type === 'session.error' && e.sessionId === sessionId, 120_000, from);
    assert.equal(error.type === 'session.error' && error.error.name, 'MessageAbortedError');
    await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
    await h.client.deleteSession(sessionId);
    await assert.rejects(h.client.messages(sessionId));
  });
});
