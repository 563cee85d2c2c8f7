/**
 * Model variants (opencode's reasoning-effort presets) through Forge's AgentClient, on the real
 * opencode binary: the provider catalog lists a model's variants, and a prompt's variant reaches
 * the model as the variant's provider options.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLoopToolBackend } from '../../../src/core/loop/tool-backend';
import { FORGE_AGENT_NAMES } from '../../../src/core/opencode/forge-tools';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage';
import { startOpencodeHarness, type OpencodeHarness } from '../../support/opencode-harness';
import { MOCK_MODEL_ID, MOCK_PROVIDER_ID } from '../../support/opencode-test-env';
import { text } from '../../support/scripted-model';

describe('model variants through Forge (real opencode)', function () {
  this.timeout(600_000);
  let dataDir: string;
  let db: ForgeDatabase;
  let h: OpencodeHarness;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'forge-oc-variants-'));
    db = await openForgeDatabase({ path: join(dataDir, 'forge.db') });
    h = await startOpencodeHarness({
      backend: createLoopToolBackend({ projectId: 'p1', db, onHandoff: () => {} }),
      // The user's configuration gives the mock model a variant of its own; an
      // openai-compatible model sends reasoningEffort as reasoning_effort.
      modelConfig: { reasoning: true, variants: { thorough: { reasoningEffort: 'forge-thorough' } } },
    });
  });

  after(async () => {
    await h?.cleanup();
    await db?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("lists the model's variants in the provider catalog", async () => {
    const catalog = await h.client.providers();
    const model = catalog.providers.find((p) => p.id === MOCK_PROVIDER_ID)?.models.find((m) => m.modelId === MOCK_MODEL_ID);
    assert.ok(model, 'the mock model is in the catalog');
    assert.ok(model.variants.includes('thorough'), `variants: ${model.variants.join(', ')}`);
  });

  it("sends a prompt's variant to the model, and nothing without one", async () => {
    const sessionId = await h.startSession('code');
    const prompt = async (variant: string | undefined) => {
      const before = h.model.agentRequests.length;
      const from = h.events.length;
      h.model.enqueue(text('Done.'));
      await h.client.promptAsync({
        sessionId,
        text: 'Say done.',
        agent: FORGE_AGENT_NAMES.code,
        model: { providerId: MOCK_PROVIDER_ID, modelId: MOCK_MODEL_ID },
        ...(variant ? { variant } : {}),
      });
      await h.waitForEvent((e) => e.type === 'session.idle' && e.sessionId === sessionId, 120_000, from);
      const requests = h.model.agentRequests.slice(before);
      assert.equal(requests.length, 1, 'one model request per prompt');
      return requests[0]!.body;
    };
    assert.equal((await prompt('thorough')).reasoning_effort, 'forge-thorough');
    assert.equal((await prompt(undefined)).reasoning_effort, undefined);
  });
});
