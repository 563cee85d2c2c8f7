import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import {
  defaultSettings,
  editDistance,
  flattenSettingKeys,
  manifestSchemaFor,
  nearestSettingKey,
  unknownSettingProblems,
  resolveSettings,
  settingDescriptors,
  type SettingKey,
} from '../../../src/core/config/settings';
import { settingDescriptionNlsKey } from '../../../src/core/config/manifest-nls';
import { settingsReference } from '../../../src/core/config/settings-reference';

const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
const nls: Record<string, string> = JSON.parse(readFileSync(new URL('../../../package.nls.json', import.meta.url), 'utf8'));
const declared: Record<string, any> = manifest.contributes.configuration.properties;

describe('settings schema', () => {
  it('the manifest declares exactly the schema keys, with the same defaults and descriptions', () => {
    assert.deepEqual(Object.keys(declared).sort(), settingDescriptors.map((d) => d.key).sort());
    for (const d of settingDescriptors) {
      const { order: _order, description, ...entry } = declared[d.key];
      const { description: expectedDescription, ...expected } = manifestSchemaFor(d.key);
      assert.deepEqual(entry, expected, `manifest entry of ${d.key} is stale: run npm run sync-manifest`);
      // The manifest names the description; package.nls.json holds its English text.
      assert.equal(description, `%${settingDescriptionNlsKey(d.key)}%`, `manifest description of ${d.key} is stale: run npm run sync-manifest`);
      assert.equal(nls[settingDescriptionNlsKey(d.key)], expectedDescription, `package.nls.json description of ${d.key} is stale: run npm run sync-manifest`);
      assert.ok(d.description.length > 20, `${d.key} needs a real description`);
    }
  });

  it('docs/settings.md is the reference of exactly these settings', () => {
    const doc = readFileSync(new URL('../../../docs/settings.md', import.meta.url), 'utf8');
    assert.equal(doc, settingsReference(), 'docs/settings.md is stale: run npm run sync-manifest');
    for (const d of settingDescriptors) assert.match(doc, new RegExp(`^\\| \`${d.key.replace(/\./g, '\\.')}\` \\|`, 'm'));
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
      const key = p.key as SettingKey;
      assert.ok(p.message.includes(`"${key}"`), p.message);
      assert.ok(p.message.includes(JSON.stringify(bad[key])), p.message);
      assert.match(p.message, /Using the default/);
      assert.deepEqual(settings[key], defaults[key]);
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

  it('edit distance: insertions, deletions, substitutions and adjacent swaps cost one each', () => {
    const cases: Array<[string, string, number]> = [
      ['', '', 0],
      ['', 'abc', 3],
      ['abc', '', 3],
      ['abc', 'abc', 0],
      ['kitten', 'sitting', 3],
      ['maxIteration', 'maxIterations', 1],
      ['maxIteratoins', 'maxIterations', 1],
      ['ab', 'ba', 1],
      ['abc', 'ca', 3],
      ['enable', 'enabled', 1],
      ['flaw', 'lawn', 2],
    ];
    for (const [a, b, d] of cases) {
      assert.equal(editDistance(a, b), d, `${a} → ${b}`);
      assert.equal(editDistance(b, a), d, `${b} → ${a} (symmetric)`);
    }
  });

  it('every one-edit typo of every setting (a letter dropped, doubled or changed in case, neighbours swapped, an "s" added) leads back to that setting', () => {
    let checked = 0;
    for (const { key } of settingDescriptors) {
      const typos = new Set<string>([`${key}s`, key.toLowerCase(), key.toUpperCase()]);
      for (let i = 'forge.'.length; i < key.length; i++) {
        typos.add(key.slice(0, i) + key.slice(i + 1));
        typos.add(key.slice(0, i) + key[i] + key.slice(i));
        if (i + 1 < key.length) typos.add(key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2));
      }
      typos.delete(key);
      for (const typo of typos) {
        assert.equal(nearestSettingKey(typo), key, `${typo} should suggest ${key}`);
        checked++;
      }
      assert.equal(nearestSettingKey(key), key);
    }
    assert.ok(checked > 500, `${checked} typos checked`);
  });

  it('no suggestion when nothing is close', () => {
    for (const key of ['forge.x', 'forge.telemetry', 'forge.loop.colour', 'editor.fontSize', 'x', '']) {
      assert.equal(nearestSettingKey(key), null, key);
    }
  });

  it('unknown keys: a warning naming the key and the nearest setting; keys outside forge. are warned about too; known keys are not', () => {
    const problems = unknownSettingProblems(
      ['forge.loop.maxIteration', 'forge.sandbox.enable', 'forge.loop.maxIterations', 'loop.maxIterations', 'editor.fontSize', 'forge.telemetry'],
      (k) => (k === 'forge.loop.maxIteration' ? 5 : undefined),
    );
    assert.deepEqual(problems.map((p) => [p.key, p.suggestion ?? null]), [
      ['forge.loop.maxIteration', 'forge.loop.maxIterations'],
      ['forge.sandbox.enable', 'forge.sandbox.enabled'],
      ['loop.maxIterations', 'forge.loop.maxIterations'],
      ['editor.fontSize', null],
      ['forge.telemetry', null],
    ]);
    assert.equal(problems[0]!.value, 5);
    assert.equal(problems[0]!.message, 'Setting "forge.loop.maxIteration" is not a Forge setting and is ignored. Did you mean "forge.loop.maxIterations"?');
    assert.match(problems[2]!.message, /"loop\.maxIterations" is ignored: Forge settings are keys starting with "forge\."\. Did you mean "forge\.loop\.maxIterations"\?/);
    assert.match(problems[3]!.message, /"editor\.fontSize" is ignored: Forge settings are keys starting with "forge\."\.$/);
    assert.match(problems[4]!.message, /"forge\.telemetry" is not a Forge setting and is ignored\. No Forge setting is close to it/);
  });

  it('resolveSettings reports the unknown keys among the keys set, and still applies the known ones', () => {
    const enabledByDefault = defaultSettings()['forge.sandbox.enabled'];
    const raw: Record<string, unknown> = { 'forge.loop.maxIterations': 4, 'forge.sandbox.enable': !enabledByDefault };
    const { settings, problems } = resolveSettings((k) => raw[k], Object.keys(raw));
    assert.equal(settings['forge.loop.maxIterations'], 4);
    assert.equal(settings['forge.sandbox.enabled'], enabledByDefault, 'the misspelt key is not applied');
    assert.deepEqual(problems.map((p) => [p.key, p.suggestion]), [['forge.sandbox.enable', 'forge.sandbox.enabled']]);
  });

  it('flattenSettingKeys lists the dotted keys of a nested configuration section (VS Code\'s "forge" section)', () => {
    const section = {
      model: '',
      loop: { maxIterations: 15, maxIteration: 3, permissions: [{ permission: 'bash', pattern: '*', action: 'deny' }], deeper: { x: 1 } },
      sandbox: { enable: true, enabled: false },
      opencode: null,
      get: () => undefined,
      inspect: () => undefined,
    };
    assert.deepEqual(flattenSettingKeys('forge', section), [
      'forge.model',
      'forge.loop.maxIterations',
      'forge.loop.maxIteration',
      'forge.loop.permissions',
      'forge.loop.deeper.x',
      'forge.sandbox.enable',
      'forge.sandbox.enabled',
      'forge.opencode',
    ]);
    assert.deepEqual(flattenSettingKeys('forge', undefined), []);
    assert.deepEqual(
      unknownSettingProblems(flattenSettingKeys('forge', section)).map((p) => p.key),
      ['forge.loop.maxIteration', 'forge.loop.deeper.x', 'forge.sandbox.enable', 'forge.opencode'],
    );
  });
});
