/**
 * Supervision and resilience of Forge's opencode server, with the real binary: failed starts,
 * a dropped event stream, a SIGKILLed server, and shutdown without orphans.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { usageByModel, type AgentEvent } from '../../../src/core/opencode/agent-client';
import { loadAgentPrompts } from '../../../src/core/opencode/forge-config';
import { startForgeToolServer } from '../../../src/core/opencode/forge-tool-server';
import { FORGE_AGENT_NAMES } from '../../../src/core/opencode/forge-tools';
import { startLoopOpencode } from '../../../src/core/opencode/loop-opencode';
import { createSdkAgentClient } from '../../../src/core/opencode/sdk-agent-client';
import { OpencodeStartError, resolveOpencodeBinary, startOpencodeProcess, type OpencodeEndpoint } from '../../../src/core/opencode/server-process';
import type { OpencodeServerHandle } from '../../../src/core/opencode/server-supervisor';
import { createTestRepository } from '../../support/git-repo';
import { AGENT_PROMPTS_DIR, startOpencodeHarness, waitFor, type OpencodeHarness } from '../../support/opencode-harness';
import { writeOpencodeTestEnvironment } from '../../support/opencode-test-env';
import { createRecordingToolBackend } from '../../support/recording-tool-backend';
import { startScriptedModel, text, toolCall } from '../../support/scripted-model';

const run = promisify(execFile);

/** A TCP forwarder to opencode that a test can cut, to drop the client's event stream. */
async function startCuttableProxy(target: URL): Promise<{ url: string; cut(): void; restore(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let refusing = false;
  const server: Server = createServer((socket) => {
    if (refusing) {
      socket.destroy();
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(socket).add(upstream);
    socket.pipe(upstream).pipe(socket);
    const drop = () => {
      socket.destroy();
      upstream.destroy();
      sockets.delete(socket);
      sockets.delete(upstream);
    };
    socket.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      refusing = true;
      for (const s of sockets) s.destroy();
    },
    restore() {
      refusing = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function processGroupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('opencode server supervision (real opencode)', function () {
  // Generous bound for a loaded 2-core machine; it only stops a hung test, it measures nothing.
  this.timeout(600_000);
  describe('failed starts', () => {
    it("reports a broken configuration with opencode's own error text", async () => {
      const env = await writeOpencodeTestEnvironment({ modelBaseURL: 'http://127.0.0.1:9/v1', extraUserConfig: { agent: 'not-an-object' } });
      const repo = await createTestRepository();
      const toolServer = await startForgeToolServer({ backend: createRecordingToolBackend() });
      try {
        await assert.rejects(
          startLoopOpencode({
            loopName: 'broken',
            worktreeDir: repo.dir,
            toolServer,
            prompts: await loadAgentPrompts(AGENT_PROMPTS_DIR),
            extraEnv: env.env,
            restart: { maxAttempts: 0 },
          }),
          (error: unknown) =>
            error instanceof OpencodeStartError &&
            error.message.includes(`Configuration is invalid at ${env.userConfigPath}`) &&
            /Expected object \| undefined, got "not-an-object" agent/.test(error.message) &&
            !error.message.includes('\u001b['),
        );
      } finally {
        await toolServer.close();
        await repo.cleanup();
        await env.cleanup();
      }
    });

    it("reports a configuration opencode only rejects on first use, with opencode's own error text", async () => {
      const env = await writeOpencodeTestEnvironment({ modelBaseURL: 'http://127.0.0.1:9/v1' });
      const repo = await createTestRepository();
      try {
        await assert.rejects(
          startOpencodeProcess({ binaryPath: resolveOpencodeBinary(), cwd: repo.dir, extraEnv: env.env, forgeConfig: { agent: 'nope' } }),
          (error: unknown) =>
            error instanceof OpencodeStartError &&
            error.message.includes(`opencode rejected its configuration for ${repo.dir}: ConfigInvalidError in OPENCODE_CONFIG_CONTENT: agent: Expected object`),
        );
      } finally {
        await repo.cleanup();
        await env.cleanup();
      }
    });

    it('refuses a configured binary path that does not exist, saying which setting to fix', async () => {
      const toolServer = await startForgeToolServer({ backend: createRecordingToolBackend() });
      try {
        await assert.rejects(
          startLoopOpencode({
            loopName: 'nobinary',
            worktreeDir: tmpdir(),
            toolServer,
            prompts: await loadAgentPrompts(AGENT_PROMPTS_DIR),
            binaryPath: '/nonexistent/opencode',
          }),
          /\/nonexistent\/opencode" \(setting forge\.opencode\.binaryPath\) does not exist/,
        );
      } finally {
        await toolServer.close();
      }
    });
  });

  it("attaches to a user's own server: Forge's tools are added at run time and its agents reported missing", async () => {
    const model = await startScriptedModel();
    const modelEnv = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    const repo = await createTestRepository();
    const backend = createRecordingToolBackend();
    const toolServer = await startForgeToolServer({ backend });
    // "The user's server": started without any Forge configuration.
    const userServer = await startOpencodeProcess({ binaryPath: resolveOpencodeBinary(), cwd: repo.dir, extraEnv: modelEnv.env });
    try {
      const attached = await startLoopOpencode({
        loopName: 'attached',
        worktreeDir: repo.dir,
        toolServer,
        prompts: await loadAgentPrompts(AGENT_PROMPTS_DIR),
        attach: userServer.endpoint,
      });
      try {
        assert.equal(attached.agentsConfigured, false);
        const events: AgentEvent[] = [];
        attached.client.subscribe((e) => events.push(e));
        await waitFor(events, (e) => e.type === 'stream.connected', 60_000, 0);
        const { id } = await attached.client.createSession({ title: 'attached', agent: 'build', permission: attached.permissionRuleset('code') });
        attached.scope.setActiveSession({ sessionId: id, role: 'code' });
        model.enqueue(toolCall('forge_section_read', {}), text('ok'));
        await attached.client.promptAsync({ sessionId: id, text: 'read the section', agent: 'build' });
        await waitFor(events, (e) => e.type === 'session.idle' && e.sessionId === id, 120_000, 0);
        assert.deepEqual(backend.calls.map((c) => [c.method, c.caller.loopName, c.caller.role]), [['sectionRead', 'attached', 'code']]);
      } finally {
        await attached.stop();
      }
      assert.ok(userServer.isRunning(), "Forge does not stop a server it did not start");
    } finally {
      await userServer.stop();
      await toolServer.close();
      await model.close();
      await repo.cleanup();
      await modelEnv.cleanup();
    }
  });

  describe('a running server', () => {
    let h: OpencodeHarness;
    let userConfigDir: string;

    before(async () => {
      userConfigDir = await mkdtemp(join(tmpdir(), 'forge-user-config-'));
      // The user's OPENCODE_CONFIG (a config file path in their environment) must be honoured.
      await writeFile(join(userConfigDir, 'extra.json'), JSON.stringify({ agent: { 'user-extra': { description: 'from OPENCODE_CONFIG', mode: 'subagent', prompt: 'x' } } }));
      h = await startOpencodeHarness({
        backend: createRecordingToolBackend(),
        restart: { initialDelayMs: 200, maxAttempts: 3 },
        userEnv: { OPENCODE_CONFIG: join(userConfigDir, 'extra.json') },
      });
    });

    after(async () => {
      await h?.cleanup();
      await rm(userConfigDir, { recursive: true, force: true });
    });

    it("answers only with Forge's credentials, and honours the user's OPENCODE_CONFIG", async () => {
      const endpoint = h.opencode.server.endpoint();
      assert.ok(endpoint);
      assert.match(endpoint.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const anonymous = await fetch(`${endpoint.url}/config`);
      assert.equal(anonymous.status, 401);
      const wrong = await fetch(`${endpoint.url}/config`, { headers: { authorization: `Basic ${Buffer.from('forge:guess').toString('base64')}` } });
      assert.equal(wrong.status, 401);
      assert.ok((await h.client.agents()).includes('user-extra'));
    });

    it('reconnects a dropped event stream and delivers the idle it missed, once', async () => {
      const endpoint = h.opencode.server.endpoint() as OpencodeEndpoint;
      const proxy = await startCuttableProxy(new URL(endpoint.url));
      const viaProxy: OpencodeServerHandle = {
        generation: () => h.opencode.server.generation(),
        endpoint: () => ({ ...endpoint, url: proxy.url }),
        waitForEndpoint: async () => ({ ...endpoint, url: proxy.url }),
        pid: () => h.opencode.server.pid(),
        marker: () => h.opencode.server.marker(),
        onEvent: () => () => {},
        stop: async () => {},
      };
      const client = createSdkAgentClient({ server: viaProxy, directory: h.worktreeDir, reconnectInitialDelayMs: 100, reconnectMaxDelayMs: 500 });
      const events: AgentEvent[] = [];
      client.subscribe((e) => events.push(e));
      try {
        await waitFor(events, (e) => e.type === 'stream.connected', 60_000, 0);
        const { id } = await client.createSession({
          title: 'reconnect',
          agent: FORGE_AGENT_NAMES.code,
          permission: h.opencode.permissionRuleset('code'),
        });
        client.watchSession(id);
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        h.model.setHandler(async () => {
          await gate;
          return text('finished while you were away');
        });
        await client.promptAsync({ sessionId: id, text: 'go', agent: FORGE_AGENT_NAMES.code });
        await waitFor(events, (e) => e.type === 'session.busy' && e.sessionId === id, 120_000, 0);

        proxy.cut();
        await waitFor(events, (e) => e.type === 'stream.lost', 60_000, 0);
        release();
        // The direct client sees the session finish while the proxied one is cut off.
        await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === id);
        assert.ok(!events.some((e) => e.type === 'session.idle' && e.sessionId === id));
        proxy.restore();

        const idle = await waitFor(events, (e) => e.type === 'session.idle' && e.sessionId === id, 120_000, 0);
        assert.equal(idle.type === 'session.idle' && idle.reconciled, true);
        await waitFor(events, (e) => e.type === 'stream.connected' && e.reconnect, 60_000, 0);
        // One more prompt round, so a duplicate idle would have had time to arrive before it.
        h.model.setHandler(undefined);
        h.model.enqueue(text('second'));
        const before = events.length;
        await client.promptAsync({ sessionId: id, text: 'again', agent: FORGE_AGENT_NAMES.code });
        await waitFor(events, (e) => e.type === 'session.idle' && e.sessionId === id, 120_000, before);
        const idles = events.filter((e) => e.type === 'session.idle' && e.sessionId === id);
        assert.equal(idles.length, 2);
        // The stream missed the end of the first reply: usage is read from the session's messages.
        const usage = await client.usage(id);
        assert.deepEqual(usage, usageByModel(await client.messages(id)));
        assert.equal(usage[0]?.messages, 2);
      } finally {
        h.model.setHandler(undefined);
        await client.close();
        await proxy.close();
      }
    });

    it('restarts opencode after SIGKILL mid-session and reports the loss to the client', async () => {
      const sessionId = await h.startSession('code');
      h.model.setHandler(() => ({ kind: 'hang' }));
      const from = h.events.length;
      await h.prompt(sessionId, 'code', 'Work for a long time.');
      await h.waitForEvent((e) => e.type === 'session.busy' && e.sessionId === sessionId, 120_000, from);
      const oldPid = h.opencode.server.pid();
      assert.ok(oldPid);
      const generation = h.opencode.server.generation();
      process.kill(oldPid, 'SIGKILL');

      const exited = await h.waitForServerEvent((e) => e.type === 'exited');
      assert.equal(exited.type === 'exited' && exited.exit.signal, 'SIGKILL');
      const lost = await h.waitForEvent((e) => e.type === 'session.error' && e.sessionId === sessionId, 60_000, from);
      assert.equal(lost.type === 'session.error' && lost.error.name, 'ServerLost');
      const idle = await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 60_000, from);
      assert.equal(idle.type === 'session.idle' && idle.reconciled, true);
      await h.waitForServerEvent((e) => e.type === 'restarting');
      await h.waitForServerEvent((e) => e.type === 'started' && e.generation === generation + 1);
      assert.notEqual(h.opencode.server.pid(), oldPid);
      assert.equal(processGroupAlive(oldPid), false, 'nothing of the killed server survives');
      await h.waitForEvent((e) => e.type === 'stream.connected' && e.reconnect, 120_000, from);

      // The restarted server works: its sessions run, and the old session is still readable.
      h.model.setHandler(undefined);
      const next = await h.startSession('code');
      h.model.enqueue(text('alive again'));
      const after = h.events.length;
      await h.prompt(next, 'code', 'Are you there?');
      await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === next, 120_000, after);
      assert.equal((await h.client.messages(next)).at(-1)?.text, 'alive again');
      assert.ok((await h.client.messages(sessionId)).length >= 1);
    });

    it('stops without leaving processes behind, tool processes included', async () => {
      const marker = `${600 + (process.pid % 100)}.${Date.now() % 1000}`;
      const sessionId = await h.startSession('code');
      h.model.enqueue(toolCall('bash', { command: `(sleep ${marker} >/dev/null 2>&1 &) ; echo started`, description: 'start a background sleeper' }), text('ok'));
      const from = h.events.length;
      await h.prompt(sessionId, 'code', 'Start a background process.');
      await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
      const sleeping = async () => (await run('pgrep', ['-f', `sleep ${marker}`]).catch(() => ({ stdout: '' }))).stdout.trim();
      assert.notEqual(await sleeping(), '', 'the agent started a background process');
      const pid = h.opencode.server.pid();
      assert.ok(pid);
      await h.opencode.stop();
      assert.equal(processGroupAlive(pid), false);
      assert.equal(await sleeping(), '', 'no process of the agent outlives the server');
    });
  });
});
