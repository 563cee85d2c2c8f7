import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { realPathThroughLinks } from '../../../src/core/fs/real-path';
import { startFileGuardServer, FileToolGuard } from '../../../src/core/opencode/file-guard-server';
import { decideFileToolCall, fileToolTargets, isFileTool, patchTargets, runsInSandbox } from '../../../src/core/opencode/file-tool-guard';
import { buildForgeOpencodeConfig } from '../../../src/core/opencode/forge-config';

describe('file tool guard (pure)', () => {
  it('knows which tool calls are file tools: every path-taking tool, never the shell or Forge tools', () => {
    for (const tool of ['read', 'write', 'edit', 'multiedit', 'apply_patch', 'patch', 'glob', 'grep', 'list', 'lsp']) assert.ok(isFileTool(tool, {}), tool);
    for (const tool of ['bash', 'task', 'webfetch', 'todowrite', 'forge_shell', 'forge_loop_handoff']) assert.ok(!isFileTool(tool, { path: 'x' }), tool);
    assert.ok(isFileTool('newtool', { filePath: 'a' }), 'an unknown tool naming a path is checked');
    assert.ok(isFileTool('newtool', { patchText: '*** Begin Patch' }));
    assert.ok(!isFileTool('newtool', { query: 'a' }));
    assert.ok(runsInSandbox('grep') && runsInSandbox('glob') && !runsInSandbox('read') && !runsInSandbox('edit'));
  });

  it('reads the paths of a tool call, patch texts included', () => {
    const patch = ['*** Begin Patch', '*** Add File: a/new.ts', '+x', '*** Update File: b.ts', '*** Move to: ../../escape.ts', '@@', '*** Delete File: /etc/passwd', '*** End Patch'].join('\n');
    assert.deepEqual(patchTargets(patch), ['a/new.ts', 'b.ts', '../../escape.ts', '/etc/passwd']);
    assert.deepEqual(fileToolTargets('apply_patch', { patchText: patch }, '/wt'), ['/wt/a/new.ts', '/wt/b.ts', '/escape.ts', '/etc/passwd']);
    assert.deepEqual(fileToolTargets('read', { filePath: 'src/x.ts' }, '/wt'), ['/wt/src/x.ts']);
    assert.deepEqual(fileToolTargets('grep', { pattern: 'x' }, '/wt'), ['/wt'], 'a search without a path searches the instance folder');
    assert.deepEqual(fileToolTargets('glob', { pattern: '*', path: '/abs' }, '/wt'), ['/abs']);
  });

  it('allows the worktree and refuses what leaves it, by text or through a link', () => {
    const base = mkdtempSync(path.join(os.tmpdir(), 'forge-guard-'));
    try {
      const wt = path.join(base, 'wt');
      const host = path.join(base, 'host');
      const tool = path.join(base, 'tool-output');
      mkdirSync(path.join(wt, 'src'), { recursive: true });
      mkdirSync(host);
      mkdirSync(tool);
      writeFileSync(path.join(host, 'auth.json'), '{}');
      symlinkSync(host, path.join(wt, 'flip'));
      symlinkSync('src', path.join(wt, 'inner'));
      const policy = { worktreeDir: wt, allowedDirs: [tool], realPath: realPathThroughLinks };
      const decide = (t: string, args: Record<string, unknown>) => decideFileToolCall(t, args, wt, policy);
      assert.deepEqual(decide('read', { filePath: 'src/a.ts' }), { allow: true });
      assert.deepEqual(decide('write', { filePath: 'inner/new/b.ts' }), { allow: true }, 'a link inside the worktree is fine');
      assert.deepEqual(decide('read', { filePath: path.join(tool, 'out.txt') }), { allow: true }, "opencode's own tool-output folder");
      // opencode may name the worktree by another spelling of it (a linked data folder).
      const linkedBase = path.join(base, 'linked');
      symlinkSync(base, linkedBase);
      assert.deepEqual(decideFileToolCall('read', { filePath: 'src/a.ts' }, path.join(linkedBase, 'wt'), policy), { allow: true });
      assert.deepEqual(decideFileToolCall('read', { filePath: 'src/a.ts' }, wt, { ...policy, worktreeDir: path.join(linkedBase, 'wt') }), { allow: true });
      for (const [t, args] of [
        ['read', { filePath: 'flip/auth.json' }],
        ['write', { filePath: 'flip/new/deep.txt' }],
        ['edit', { filePath: 'flip/auth.json', oldString: 'a', newString: 'b' }],
        ['grep', { pattern: 'x', path: 'flip' }],
        ['read', { filePath: '../host/auth.json' }],
        ['read', { filePath: '/etc/passwd' }],
        ['apply_patch', { patchText: '*** Begin Patch\n*** Update File: src/a.ts\n*** Move to: flip/x.ts\n*** End Patch' }],
      ] as const) {
        const d = decide(t, args as Record<string, unknown>);
        assert.equal(d.allow, false, `${t} ${JSON.stringify(args)}`);
        assert.match((d as { reason: string }).reason, /^Forge refused \w+: loop sessions work only inside the worktree/);
      }
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('file tool guard (registry and endpoint)', () => {
  const wt = mkdtempSync(path.join(os.tmpdir(), 'forge-guard-wt-'));
  after(() => rmSync(wt, { recursive: true, force: true }));

  function counter() {
    const c = { freezes: 0, thaws: 0, frozen: false };
    const freeze = async () => {
      c.freezes++;
      c.frozen = true;
      return async () => {
        c.thaws++;
        c.frozen = false;
      };
    };
    return { c, freeze };
  }

  it('freezes once for concurrent calls, thaws after the last one ends, and never for the sandboxed search tools', async () => {
    const guard = new FileToolGuard();
    const { c, freeze } = counter();
    const unregister = guard.register({ worktreeDir: wt, allowedDirs: [], freeze });
    const call = (callID: string, tool = 'read') => guard.begin({ directory: wt, callID, tool, args: { filePath: 'a.txt' } });
    assert.deepEqual(await Promise.all([call('1'), call('2')]), [{ ok: true }, { ok: true }]);
    assert.deepEqual(c, { freezes: 1, thaws: 0, frozen: true });
    await guard.end({ directory: wt, callID: '1' });
    assert.equal(c.frozen, true, 'still frozen while call 2 runs');
    await guard.end({ directory: wt, callID: '2' });
    await guard.end({ directory: wt, callID: '2' });
    assert.deepEqual(c, { freezes: 1, thaws: 1, frozen: false });
    assert.deepEqual(await call('3', 'grep'), { ok: true });
    assert.deepEqual(await call('4', 'bash'), { ok: true });
    assert.equal(c.freezes, 1, 'grep runs in the sandbox, bash is not a file tool: no freeze');
    const refused = await guard.begin({ directory: wt, callID: '5', tool: 'read', args: { filePath: '/etc/passwd' } });
    assert.equal(refused.ok, false);
    assert.deepEqual(c, { freezes: 2, thaws: 2, frozen: false }, 'checked frozen, thawed at once on a refusal');
    unregister();
    assert.deepEqual(await guard.begin({ directory: wt, callID: '6', tool: 'read', args: { filePath: '/etc/passwd' } }), { ok: true }, 'not a loop instance');
  });

  it('a freezer that fails refuses the call and leaves nothing frozen', async () => {
    const guard = new FileToolGuard();
    guard.register({ worktreeDir: wt, allowedDirs: [], freeze: async () => { throw new Error('no cgroup'); } });
    await assert.rejects(guard.begin({ directory: wt, callID: '1', tool: 'read', args: { filePath: 'a' } }), /no cgroup/);
  });

  it('serves the plugin over HTTP with a token, and the plugin is in Forge\'s opencode configuration', async () => {
    const pluginDir = mkdtempSync(path.join(os.tmpdir(), 'forge-guard-plugin-'));
    const server = await startFileGuardServer({ pluginDir });
    let hooks: Record<string, (...a: unknown[]) => Promise<void>> | undefined;
    try {
      const plugin = readFileSync(fileURLToPath(server.pluginUrl), 'utf8');
      const url = JSON.parse(/URL_BASE = (".*?");/.exec(plugin)![1]!) as string;
      const auth = JSON.parse(/AUTH = (".*?");/.exec(plugin)![1]!) as string;
      const { c, freeze } = counter();
      server.guard.register({ worktreeDir: wt, allowedDirs: [], freeze });
      const post = (p: string, body: unknown, authorization = auth) =>
        fetch(url + p, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      assert.equal((await post('/begin', {}, 'Bearer wrong')).status, 401);
      assert.equal(server.guard.active(wt), false, 'no plugin has announced itself yet');
      assert.deepEqual(await (await post('/begin', { directory: wt, callID: 'a', tool: 'write', args: { filePath: 'x.txt' } })).json(), { ok: true });
      assert.equal(c.frozen, true);
      await post('/end', { directory: wt, callID: 'a' });
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(c.frozen, false);
      const refused = (await (await post('/begin', { directory: wt, callID: 'b', tool: 'read', args: { filePath: '../../etc/passwd' } })).json()) as { ok: boolean; reason: string };
      assert.equal(refused.ok, false);
      assert.match(refused.reason, /Forge refused read/);
      // The plugin module loads (plain JavaScript, no imports) and exports the hooks opencode calls.
      const mod = (await import(server.pluginUrl)) as { ForgeFileGuard: (ctx: { directory: string }) => Promise<Record<string, (...a: unknown[]) => Promise<void>>> };
      hooks = await mod.ForgeFileGuard({ directory: wt });
      assert.equal(server.guard.active(wt), true, 'the plugin announces itself when opencode loads it');
      await assert.rejects(hooks['tool.execute.before']!({ tool: 'read', sessionID: 's', callID: 'c' }, { args: { filePath: '/etc/shadow' } }), /Forge refused read/);
      await hooks['tool.execute.before']!({ tool: 'read', sessionID: 's', callID: 'd' }, { args: { filePath: 'ok.txt' } });
      assert.equal(c.frozen, true);
      await hooks.event!({ event: { type: 'message.part.updated', properties: { part: { type: 'tool', sessionID: 's', callID: 'd', state: { status: 'error' } } } } });
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(c.frozen, false, 'a failed call thaws through its error event');
      assert.deepEqual(buildForgeOpencodeConfig({ prompts: { code: 'c', auditor: 'a', architect: 'r', splitter: 's' }, fileGuardPlugin: server.pluginUrl }).plugin, [server.pluginUrl]);
    } finally {
      await server.close();
      rmSync(pluginDir, { recursive: true, force: true });
    }
    // Without Forge the plugin fails closed.
    await assert.rejects(hooks!['tool.execute.before']!({ tool: 'read', sessionID: 's', callID: 'e' }, { args: { filePath: 'ok.txt' } }), /guard is not reachable/);
  });
});
