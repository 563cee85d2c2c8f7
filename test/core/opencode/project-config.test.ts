import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildForgeOpencodeConfig, loadAgentPrompts } from '../../../src/core/opencode/forge-config';
import {
  disableWorktreePluginCode,
  isRegistryPackageName,
  parseJsonc,
  projectConfigNotice,
  projectLayerFor,
  readProjectConfig,
  type ProjectConfigSnapshot,
} from '../../../src/core/opencode/project-config';
import { AGENT_PROMPTS_DIR } from '../../support/opencode-harness';

const snapshot = (files: Record<string, string>, extra: Partial<ProjectConfigSnapshot> = {}): ProjectConfigSnapshot => ({
  dir: '/repo',
  files: Object.entries(files).map(([name, text]) => ({ name, text })),
  codeFolders: [],
  instructionFile: null,
  ...extra,
});

describe("the user's project opencode configuration, as loops use it", () => {
  it('parses JSONC: comments, trailing commas, comment-like text in strings', () => {
    assert.deepEqual(parseJsonc('{\n // c\n "a": "x // not a comment", /* b */ "b": [1, 2,],\n}'), { a: 'x // not a comment', b: [1, 2] });
    assert.deepEqual(parseJsonc('{"a": "say \\"hi\\", /* no */"}'), { a: 'say "hi", /* no */' });
    assert.throws(() => parseJsonc('{"a": /* open'), /unterminated comment/);
    assert.throws(() => parseJsonc('{"a": }'));
  });

  it('passes model and provider settings, merged in opencode order; names what runs programs as not used', () => {
    const layer = projectLayerFor(
      snapshot(
        {
          'opencode.json': JSON.stringify({ model: 'a/one', provider: { a: { options: { baseURL: 'http://x', apiKey: '{env:A_KEY}' } } }, plugin: ['p'], mcp: { m: {} }, theme: 'dark', instructions: ['x.md'] }),
          'opencode.jsonc': '{ // later wins\n "model": "a/two", "provider": { "a": { "options": { "timeout": 5 } } }, "formatter": {}, }',
          '.opencode/opencode.json': JSON.stringify({ small_model: 'a/small', lsp: {}, command: {}, shell: '/bin/evil', experimental: {} }),
        },
        { codeFolders: ['.opencode/plugin/'], instructionFile: '/repo/AGENTS.md' },
      ),
    );
    assert.deepEqual(layer.config, {
      model: 'a/two',
      small_model: 'a/small',
      provider: { a: { options: { baseURL: 'http://x', apiKey: '{env:A_KEY}', timeout: 5 } } },
      instructions: ['/repo/AGENTS.md'],
    });
    assert.deepEqual(layer.notUsed, [
      'plugin in opencode.json',
      'mcp in opencode.json',
      'formatter in opencode.jsonc',
      'lsp in .opencode/opencode.json',
      'command in .opencode/opencode.json',
      'shell in .opencode/opencode.json',
      'experimental in .opencode/opencode.json',
      '.opencode/plugin/',
    ]);
    const notice = projectConfigNotice(layer)!;
    assert.match(notice, /only the model and provider settings .* not used: plugin in opencode\.json, mcp in opencode\.json/);
    assert.match(notice, /global opencode configuration \(~\/\.config\/opencode\/opencode\.json\)/);
    assert.equal(projectConfigNotice(projectLayerFor(snapshot({ 'opencode.json': '{"model":"a/b"}' }))), null, 'nothing left out, nothing said');
  });

  it("anchors relative {file:} references in the user's checkout, drops a provider package that is a path, reports unreadable files", () => {
    const layer = projectLayerFor(
      snapshot({
        'opencode.json': JSON.stringify({ provider: { a: { npm: 'file:../../evil', options: { apiKey: '{file:./key.txt}', other: '{file:/abs/k}', home: '{file:~/k}' } }, b: { npm: '@ai-sdk/openai-compatible' } } }),
        'opencode.jsonc': '{ not json',
      }),
    );
    assert.deepEqual(layer.config.provider, { a: { options: { apiKey: '{file:/repo/key.txt}', other: '{file:/abs/k}', home: '{file:~/k}' } }, b: { npm: '@ai-sdk/openai-compatible' } });
    assert.deepEqual(layer.notUsed, ['provider.a.npm in opencode.json']);
    assert.equal(layer.problems.length, 1);
    assert.match(projectConfigNotice(layer)!, /could not be read \(opencode\.jsonc: /);
    for (const ok of ['@ai-sdk/openai-compatible', 'ollama-ai-provider', '@scope/pkg@1.2.3']) assert.ok(isRegistryPackageName(ok), ok);
    for (const bad of ['./x', '/abs', 'file:x', 'git+https://h/r.git', 'https://h/p.tgz', '../x', 'a b']) assert.ok(!isRegistryPackageName(bad), bad);
  });

  it("Forge's layer: formatters and language servers off, over the project's settings", async () => {
    const prompts = await loadAgentPrompts(AGENT_PROMPTS_DIR);
    const plain = buildForgeOpencodeConfig({ prompts }) as Record<string, unknown>;
    assert.equal(plain.formatter, false);
    assert.equal(plain.lsp, false);
    const withProject = buildForgeOpencodeConfig({ prompts, projectLayer: { model: 'a/b', formatter: { x: {} }, permission: { bash: 'allow', question: 'allow' } } }) as Record<string, unknown>;
    assert.equal(withProject.model, 'a/b');
    assert.equal(withProject.formatter, false, "Forge's value wins");
    assert.deepEqual(withProject.permission, { bash: 'allow', question: 'deny' });
  });

  it("reads the checkout's files as data (no link followed) and disables a worktree's opencode files the checkout does not hold", async () => {
    const root = mkdtempSync(join(tmpdir(), 'forge-project-config-'));
    try {
      const checkout = join(root, 'checkout');
      const worktree = join(root, 'worktree');
      const elsewhere = join(root, 'elsewhere');
      for (const d of [checkout, join(checkout, '.opencode', 'plugin'), join(worktree, '.opencode', 'plugin'), join(elsewhere, 'plugin')]) mkdirSync(d, { recursive: true });
      writeFileSync(join(elsewhere, 'secret.json'), '{"model":"x/secret"}');
      symlinkSync(join(elsewhere, 'secret.json'), join(checkout, 'opencode.json'));
      writeFileSync(join(checkout, 'opencode.jsonc'), '{"model":"a/b"}');
      writeFileSync(join(checkout, 'CLAUDE.md'), '# rules');
      writeFileSync(join(checkout, '.opencode', 'plugin', 'mine.js'), 'export const Mine = async () => ({});');
      const read = await readProjectConfig(checkout);
      assert.deepEqual(read.files.map((f) => f.name), ['opencode.jsonc'], 'a linked opencode.json is not followed');
      assert.deepEqual(read.codeFolders, ['.opencode/plugin/']);
      assert.equal(read.instructionFile, join(checkout, 'CLAUDE.md'));

      // The worktree: the user's own plugin and config unchanged, plus what an agent wrote.
      writeFileSync(join(worktree, 'opencode.jsonc'), '{"model":"a/b"}');
      writeFileSync(join(worktree, '.opencode', 'plugin', 'mine.js'), 'export const Mine = async () => ({});');
      writeFileSync(join(worktree, '.opencode', 'plugin', 'evil.ts'), 'evil');
      writeFileSync(join(worktree, '.opencode', 'plugin', 'notes.md'), 'text');
      writeFileSync(join(worktree, '.opencode', 'opencode.json'), '{"plugins":["x"]}');
      symlinkSync(join(elsewhere, 'plugin'), join(worktree, '.opencode', 'plugins'));
      writeFileSync(join(elsewhere, 'plugin', 'host.js'), 'host');
      const disabled = await disableWorktreePluginCode(worktree, checkout);
      assert.deepEqual(disabled.sort(), ['.opencode/opencode.json', '.opencode/plugin/evil.ts', '.opencode/plugins'].sort());
      assert.ok(existsSync(join(worktree, '.opencode', 'plugin', 'evil.ts.forge-disabled')));
      assert.ok(existsSync(join(worktree, '.opencode', 'plugin', 'mine.js')), "the checkout's own plugin stays");
      assert.ok(existsSync(join(worktree, 'opencode.jsonc')), "the checkout's own config stays");
      assert.ok(existsSync(join(worktree, '.opencode', 'plugin', 'notes.md')));
      assert.equal(readFileSync(join(elsewhere, 'plugin', 'host.js'), 'utf8'), 'host', "a link's target is never touched");
      assert.ok(existsSync(join(elsewhere, 'plugin', 'host.js')));
      assert.deepEqual(await disableWorktreePluginCode(worktree, checkout), [], 'nothing left to disable');

      // A linked .opencode folder is disabled itself; without a checkout to compare, everything is.
      rmSync(join(worktree, '.opencode'), { recursive: true });
      symlinkSync(elsewhere, join(worktree, '.opencode'));
      assert.deepEqual((await disableWorktreePluginCode(worktree, undefined)).sort(), ['.opencode', 'opencode.jsonc']);
      assert.ok(existsSync(join(elsewhere, 'plugin', 'host.js')));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
