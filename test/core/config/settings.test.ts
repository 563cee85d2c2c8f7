import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import {
  defaultSettings,
  manifestSchemaFor,
  resolveSettings,
  settingDescriptors,
  type SettingKey,
} from '../../../src/core/config/settings';

const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
const declared: Record<string, any> = manifest.contributes.configuration.properties;

describe('settings schema', () => {
  it('the manifest declares exactly the schema keys, with the same defaults and descriptions', () => {
    assert.deepEqual(Object.keys(declared).sort(), settingDescriptors.map((d) => d.key).sort());
    for (const d of settingDescriptors) {
      const { order: _order, ...entry } = declared[d.key];
      assert.deepEqual(entry, manifestSchemaFor(d.key), `manifest entry of ${d.key} is stale: run npm run sync-manifest`);
      assert.ok(d.description.length > 20, `${d.key} needs a real description`);
    }
  });

  it('uses SPEC defaults when nothing is set', () => {
    const { settings, problems } = resolveSettings(() => undefined);
    assert.deepEqual(problems, []);
    assert.equal(settings['forge.loop.maxIterations'], 15);
    assert.equal(settings['forge.loop.stallTimeoutMs'], 60_000);
    assert.equal(settings['forge.loop.maxConsecutiveStalls'], 5);
    assert.equal(settings['forge.loop.busyStallTimeoutMs'], 900_000);
    assert.equal(settings['forge.loop.merge'], 'never');
    assert.equal(settings['forge.openWorktree'], 'add-folder');
    assert.deepEqual(settings, defaultSettings());
  });

  it('accepts valid values as given', () => {
    const values: Partial<Record<SettingKey, unknown>> = {
      'forge.model': 'anthropic/claude-sonnet-4-5',
      'forge.loop.maxIterations': 0,
      'forge.loop.merge': 'fast-forward',
      'forge.sandbox.driver': 'bwrap',
      'forge.loop.permissions': [{ permission: 'bash', pattern: 'rm -rf *', action: 'deny' }],
      'forge.opencode.serverUrl': 'http://127.0.0.1:4096',
    };
    const { settings, problems } = resolveSettings((k) => values[k]);
    assert.deepEqual(problems, []);
    for (const [k, v] of Object.entries(values)) assert.deepEqual(settings[k as SettingKey], v);
  });

  it('reports each invalid value once with key, value and what is allowed, and falls back to its default', () => {
    const bad: Partial<Record<SettingKey, unknown>> = {
      'forge.model': 'no-slash',
      'forge.loop.maxIterations': -1,
      'forge.loop.merge': 'force',
      'forge.sandbox.cpus': 'two',
      'forge.loop.permissions': [{ permission: 'bash', pattern: '*', action: 'allow' }],
      'forge.opencode.serverUrl': 'ftp://x',
    };
    const { settings, problems } = resolveSettings((k) => bad[k]);
    assert.equal(problems.length, Object.keys(bad).length);
    const defaults = defaultSettings();
    for (const p of problems) {
      assert.ok(p.message.includes(`"${p.key}"`), p.message);
      assert.ok(p.message.includes(JSON.stringify(bad[p.key])), p.message);
      assert.match(p.message, /Using the default/);
      assert.deepEqual(settings[p.key], defaults[p.key]);
    }
    assert.match(problems.find((p) => p.key === 'forge.loop.merge')!.message, /never|fast-forward|merge/);
    assert.match(problems.find((p) => p.key === 'forge.model')!.message, /provider\/model/);
  });

  it('a bad value of one setting leaves the others intact', () => {
    const { settings } = resolveSettings((k) =>
      k === 'forge.loop.maxIterations' ? 'many' : k === 'forge.loop.stallTimeoutMs' ? 5000 : undefined,
    );
    assert.equal(settings['forge.loop.maxIterations'], 15);
    assert.equal(settings['forge.loop.stallTimeoutMs'], 5000);
  });
});
