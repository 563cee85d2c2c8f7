import assert from 'node:assert/strict';
import { agentPermission, buildForgeOpencodeConfig, loadAgentPrompts } from '../../../src/core/opencode/forge-config';
import { totalmem } from 'node:os';
import { buildOpencodeEnvironment, describeOpencodeError, OPENCODE_HEAP_RAM_BYTES, resolveOpencodeBinary } from '../../../src/core/opencode/server-process';
import { AGENT_PROMPTS_DIR } from '../../support/opencode-harness';

describe('opencode environment and configuration', () => {
  it('is offline-safe, authenticated, and keeps the user environment and inline configuration', () => {
    const env = buildOpencodeEnvironment({
      baseEnv: { PATH: '/bin', ANTHROPIC_API_KEY: 'sk-user', OPENCODE_CONFIG: '/home/u/extra.json', OPENCODE_CONFIG_CONTENT: '{"theme":"x","agent":{"mine":{"prompt":"p"}}}' },
      forgeConfig: { agent: { 'forge-code': { prompt: 'f' } } },
      username: 'forge',
      password: 'secret',
    });
    assert.equal(env.OPENCODE_DISABLE_AUTOUPDATE, '1');
    assert.equal(env.OPENCODE_DISABLE_SHARE, '1');
    assert.equal(env.OPENCODE_DISABLE_MODELS_FETCH, '1');
    assert.equal(env.OPENCODE_DISABLE_LSP_DOWNLOAD, '1');
    assert.equal(env.OPENCODE_SERVER_USERNAME, 'forge');
    assert.equal(env.OPENCODE_SERVER_PASSWORD, 'secret');
    assert.equal(env.ANTHROPIC_API_KEY, 'sk-user');
    assert.equal(env.OPENCODE_CONFIG, '/home/u/extra.json');
    assert.deepEqual(JSON.parse(env.OPENCODE_CONFIG_CONTENT ?? ''), { theme: 'x', agent: { mine: { prompt: 'p' }, 'forge-code': { prompt: 'f' } } });
  });

  it("sizes opencode's garbage collection for at most 4 GiB of RAM, unless the user set it", () => {
    const forge = buildOpencodeEnvironment({ baseEnv: { PATH: '/bin' }, username: 'forge', password: 'secret' });
    assert.equal(forge.BUN_JSC_forceRAMSize, String(Math.min(totalmem(), OPENCODE_HEAP_RAM_BYTES)));
    assert.equal(OPENCODE_HEAP_RAM_BYTES, 4 * 2 ** 30);
    const user = buildOpencodeEnvironment({ baseEnv: { PATH: '/bin', BUN_JSC_forceRAMSize: '123456789' }, username: 'forge', password: 'secret' });
    assert.equal(user.BUN_JSC_forceRAMSize, '123456789', "the user's own value is kept");
  });

  it("turns opencode's error JSON into one readable line", () => {
    const body = JSON.stringify({ name: 'ConfigInvalidError', data: { path: '/p/opencode.json', issues: [{ path: ['agent', 'x'], message: 'bad' }] } });
    assert.equal(describeOpencodeError(body), 'ConfigInvalidError in /p/opencode.json: agent.x: bad');
    assert.equal(describeOpencodeError('plain text'), 'plain text');
  });

  it('finds the bundled opencode binary', () => {
    assert.match(resolveOpencodeBinary(), /opencode(\.exe)?$/);
  });

  it("defines Forge's agents with the shipped prompts, its MCP server, and denies per role", async () => {
    const prompts = await loadAgentPrompts(AGENT_PROMPTS_DIR);
    const entry = { type: 'remote' as const, url: 'http://127.0.0.1:1/mcp/x', headers: { Authorization: 'Bearer s' }, oauth: false as const, enabled: true as const, timeout: 1 };
    const config = buildForgeOpencodeConfig({ prompts, toolServer: entry, models: { auditor: 'a/b' } }) as {
      mcp: Record<string, unknown>;
      agent: Record<string, { prompt: string; model?: string; mode: string }>;
      permission: Record<string, unknown>;
    };
    assert.deepEqual(config.mcp, { forge: entry });
    assert.deepEqual(Object.keys(config.agent).sort(), ['forge-architect', 'forge-auditor', 'forge-code', 'forge-splitter']);
    assert.match(config.agent['forge-code']?.prompt ?? '', /forge_loop_handoff/);
    assert.equal(config.agent['forge-auditor']?.model, 'a/b');
    assert.equal(config.agent['forge-code']?.model, undefined);
    assert.deepEqual(config.permission, { question: 'deny' });
    assert.equal((config as { snapshot?: unknown }).snapshot, false, "opencode's shadow snapshot repository is off");
    assert.equal(agentPermission('auditor').edit, 'deny');
    assert.equal(agentPermission('auditor').forge_plan_write, 'deny');
    assert.equal(agentPermission('auditor').forge_review_write, undefined);
    assert.equal(agentPermission('code').edit, undefined);
    assert.equal(agentPermission('code').forge_review_delete, 'deny');
    assert.equal(agentPermission('architect').bash, 'deny');
    assert.equal(agentPermission('architect').forge_plan_write, undefined);
  });

  it('says which prompt file is missing', async () => {
    await assert.rejects(loadAgentPrompts('/nonexistent/agents'), /could not read the code agent prompt \/nonexistent\/agents\/forge-code\.md/);
  });
});
