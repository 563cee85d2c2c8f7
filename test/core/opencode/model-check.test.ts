import { strict as assert } from 'node:assert';
import type { ProviderCatalog } from '../../../src/core/opencode/agent-client';
import { namedLoopModels, unknownModelsProblem } from '../../../src/core/opencode/model-check';

const model = (providerId: string, modelId: string) => ({ providerId, modelId, name: modelId, toolCall: true, reasoning: false, contextLimit: 1, outputLimit: 1, variants: [] });
const catalog: ProviderCatalog = {
  providers: [
    { id: 'anthropic', name: 'Anthropic', models: [model('anthropic', 'claude-sonnet-4-5'), model('anthropic', 'claude-opus-4-1')] },
    { id: 'openai', name: 'OpenAI', models: [model('openai', 'gpt-5')] },
  ],
  defaults: {},
};

describe('model check against opencode\'s catalog (issue 28 item 4)', () => {
  it('known models pass; each unknown one is named with its role and a did-you-mean', () => {
    assert.equal(unknownModelsProblem([{ role: 'coding model (--model)', model: 'anthropic/claude-sonnet-4-5' }], catalog), null);
    const problem = unknownModelsProblem(
      [
        { role: 'coding model (--model)', model: 'anthropic/claude-sonet-4-5' },
        { role: 'audit model (--auditor-model)', model: 'nosuch/model' },
        { role: 'auditor fallback model (setting forge.auditorFallbackModels)', model: 'openai/gpt-9000-turbo-max' },
        { role: 'architect model', model: 'gpt-5' },
      ],
      catalog,
    )!;
    const lines = problem.split('\n');
    assert.equal(lines[0], 'The coding model (--model) "anthropic/claude-sonet-4-5" is not a model opencode knows; did you mean "anthropic/claude-sonnet-4-5"?');
    assert.equal(lines[1], 'The audit model (--auditor-model) "nosuch/model" is not a model opencode knows; the providers are anthropic, openai.');
    assert.equal(lines[2], 'The auditor fallback model (setting forge.auditorFallbackModels) "openai/gpt-9000-turbo-max" is not a model opencode knows; provider "openai" has gpt-5.');
    assert.equal(lines[3], 'The architect model "gpt-5" is not a model opencode knows (a model is PROVIDER/MODEL: did you mean "openai/gpt-5"?).');
    assert.match(lines[4]!, /nothing was created/);
  });

  it('names the models of a start with where each comes from', () => {
    const settings = { model: 'a/b', auditorModel: '', auditorFallbackModels: ['c/d'] };
    assert.deepEqual(namedLoopModels({ model: 'x/y', auditorModel: null }, settings), [
      { role: 'coding model (--model)', model: 'x/y' },
      { role: 'auditor fallback model (setting forge.auditorFallbackModels)', model: 'c/d' },
    ]);
    assert.deepEqual(namedLoopModels({}, { ...settings, auditorFallbackModels: [] }), [{ role: 'coding model (setting forge.model)', model: 'a/b' }]);
  });
});
