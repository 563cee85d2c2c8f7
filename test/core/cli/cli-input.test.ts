/**
 * Bad input given to the built `forge` CLI (`dist/cli.mjs`) as real processes: FORGE_SETTINGS that
 * is not an object, unknown setting keys, option values that look like options. Nothing here
 * starts a loop, so no opencode server and no model are involved.
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';

describe('forge CLI processes: bad input says what is wrong (exit 2) or warns', function () {
  this.timeout(120_000);
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;

  before(async () => {
    const cliPath = ensureCliBuilt(REPO_ROOT);
    repo = await createTestRepository({ 'README.md': '# input\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-input-'));
    runner = createCliRunner({ cliPath, env: {}, commonArgs: ['--data-dir', join(work, 'data'), '--repo', repo.dir] });
  });

  after(async () => {
    await runner?.killAll();
    await repo?.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  for (const [raw, got] of [['null', 'null'], ['[1,2]', 'an array'], ['"str"', 'a string'], ['42', 'a number'], ['true', 'a boolean']] as const) {
    it(`FORGE_SETTINGS=${raw}: exit 2, "must be a JSON object" with an example`, async () => {
      const r = await runner.run(['status'], { env: { FORGE_SETTINGS: raw } });
      assert.equal(r.code, 2, `exit ${r.code}\n${r.stderr}`);
      assert.equal(
        r.stderr.trim(),
        `forge: FORGE_SETTINGS must be a JSON object of forge.* settings, not ${got} (${raw}). For example FORGE_SETTINGS='{"forge.loop.maxIterations": 5, "forge.sandbox.enabled": true}'`,
      );
      assert.equal(r.stdout, '');
    });
  }

  it('FORGE_SETTINGS that is not JSON: exit 2 with the parser\'s reason and an example', async () => {
    const r = await runner.run(['status'], { env: { FORGE_SETTINGS: '{forge.loop.maxIterations: 5}' } });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^forge: FORGE_SETTINGS is not valid JSON \(.+\)\. It must be a JSON object of forge\.\* settings, for example FORGE_SETTINGS='\{"forge\.loop\.maxIterations": 5/);
  });

  it('unknown keys in FORGE_SETTINGS: a warning naming the key and the nearest setting; the command still runs', async () => {
    const r = await runner.run(['status'], {
      settings: { 'forge.loop.maxIteration': 5, 'forge.sandbox.enable': true, 'loop.stallTimeoutMs': 5000, 'forge.loop.maxIterations': 3 },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /No loops in this repository yet/);
    const warnings = r.stderr.trim().split('\n');
    assert.deepEqual(warnings, [
      'forge: warning: Setting "forge.loop.maxIteration" is not a Forge setting and is ignored. Did you mean "forge.loop.maxIterations"?',
      'forge: warning: Setting "forge.sandbox.enable" is not a Forge setting and is ignored. Did you mean "forge.sandbox.enabled"?',
      'forge: warning: Setting "loop.stallTimeoutMs" is ignored: Forge settings are keys starting with "forge.". Did you mean "forge.loop.stallTimeoutMs"?',
    ]);
  });

  it('--name -rf and --max-iterations -1: exit 2 in Forge\'s words, not parseArgs\' "ambiguous"', async () => {
    const name = await runner.run(['run', 'plan.md', '--name', '-rf']);
    assert.equal(name.code, 2, name.stderr);
    assert.match(name.stderr, /^forge: --name needs a value \(a loop name\), but "-rf" looks like an option\. Write --name=-rf if you mean it as the value\./);
    const iterations = await runner.run(['run', 'plan.md', '--max-iterations', '-1']);
    assert.equal(iterations.code, 2, iterations.stderr);
    assert.match(iterations.stderr, /^forge: --max-iterations must be a whole number ≥ 0 \(0 = unlimited\), not "-1"\./);
    for (const r of [name, iterations]) assert.doesNotMatch(r.stderr, /ambiguous|forge: internal error/);
  });
});
