/**
 * Forge's own `forge` on PATH (issue 28): the README says `npm link` from the checkout (not
 * `npx forge`, which fetches an unrelated npm package named forge), and `npm run demo` prints
 * the command to see the loop again as `forge …` once it is, or how to get there. npm links into
 * a temporary prefix here (NPM_CONFIG_PREFIX), never the machine's global folder.
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { ensureCliBuilt } from '../../support/cli-runner';
import { REPO_ROOT } from '../../support/loop-harness';

interface ForgeCommand {
  command: string;
  hint: string | null;
}
const demoHelpers = () => import(join(REPO_ROOT, 'scripts/demo/forge-command.mjs')) as Promise<{ forgeCommand(root: string, pathEnv: string | undefined): ForgeCommand }>;

describe('forge on PATH: npm link, and what npm run demo prints', function () {
  this.timeout(600_000);
  let prefix: string;
  let demoWork: string | undefined;
  before(async () => {
    ensureCliBuilt(REPO_ROOT);
    prefix = await mkdtemp(join(tmpdir(), 'forge-npm-prefix-'));
  });
  after(async () => {
    spawnSync('npm', ['rm', '-g', 'forge', '--no-audit', '--no-fund'], { env: { ...process.env, NPM_CONFIG_PREFIX: prefix }, encoding: 'utf8' });
    await rm(prefix, { recursive: true, force: true });
    if (demoWork) await rm(demoWork, { recursive: true, force: true });
  });

  it("without this checkout's forge first on PATH, the demo's hint says npm link from the checkout, never npx", async () => {
    const { forgeCommand } = await demoHelpers();
    const none = forgeCommand(REPO_ROOT, '');
    assert.equal(none.command, `node ${join(REPO_ROOT, 'dist', 'cli.mjs')}`);
    assert.match(none.hint ?? '', new RegExp(`put this checkout's forge on your PATH: \\(cd ${REPO_ROOT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} && npm link\\)`));
    assert.match(none.hint ?? '', /Not "npx forge": that fetches an unrelated npm package named forge\./);
    // Another program named forge first on PATH (the unrelated npm package, say).
    const other = await mkdtemp(join(tmpdir(), 'forge-other-'));
    try {
      writeFileSync(join(other, 'forge'), '#!/bin/sh\necho other\n');
      chmodSync(join(other, 'forge'), 0o755);
      const shadowed = forgeCommand(REPO_ROOT, [other, '/usr/bin'].join(delimiter));
      assert.equal(shadowed.command, none.command);
      assert.match(shadowed.hint ?? '', new RegExp(`the "forge" first on your PATH \\(${realpathSync(join(other, 'forge')).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\) is not this checkout's`));
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  it('npm link puts forge on PATH; the demo then prints "forge status …", and that command works as printed', async () => {
    const env = { ...process.env, NPM_CONFIG_PREFIX: prefix };
    execFileSync('npm', ['link', '--no-audit', '--no-fund'], { cwd: REPO_ROOT, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const bin = join(prefix, 'bin');
    assert.equal(realpathSync(join(bin, 'forge')), realpathSync(join(REPO_ROOT, 'bin', 'forge.js')), "npm's bin folder links this checkout's bin/forge.js");
    const pathEnv = `${bin}${delimiter}${process.env.PATH}`;
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.equal(execFileSync('forge', ['--version'], { env: { ...process.env, PATH: pathEnv }, encoding: 'utf8' }), `forge ${version}\n`);

    // The demo (a real loop on Forge's embedded model) with that PATH.
    const demo = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'demo.mjs')], {
      env: { ...process.env, PATH: pathEnv, FORGE_DEMO_REBUILD: '0', FORGE_MODEL: '', FORGE_DATA_DIR: '' },
      encoding: 'utf8',
      timeout: 500_000,
    });
    const repo = /Forge demo: sample repository (\S+)/.exec(demo.stdout)?.[1];
    if (repo) demoWork = dirname(repo);
    assert.equal(demo.status, 0, `${demo.stdout}\n${demo.stderr}`);
    const again = /^Forge demo: see it again with: (forge status greeting-demo .+)$/m.exec(demo.stdout)?.[1];
    assert.ok(again, demo.stdout);
    assert.doesNotMatch(demo.stdout, /npm link|npx/, 'no hint once forge is on PATH');
    mkdirSync(join(demoWork!, 'elsewhere'));
    const status = spawnSync('bash', ['-c', again], { cwd: join(demoWork!, 'elsewhere'), env: { ...process.env, PATH: pathEnv }, encoding: 'utf8' });
    assert.equal(status.status, 0, `${again}\n${status.stdout}\n${status.stderr}`);
    assert.match(status.stdout, /greeting-demo/);
    assert.match(status.stdout, /completed/);
  });
});
