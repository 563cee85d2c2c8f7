/**
 * How `forge run` and `forge status` say a loop is confined (issue 12): real CLI processes, real
 * opencode, real bwrap; the scripted model hands off at once. With no flag a loop is sandboxed
 * (bwrap works on this machine); `--no-sandbox` and a driver that cannot run here make it
 * UNCONFINED, said as a WARNING with the reason; `--sandbox` with no working driver refuses to
 * start (exit 7) and leaves nothing behind.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT, sessionScript } from '../../support/loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { bwrapPrereqs } from '../../support/sandbox-fixtures';
import { startScriptedModel, toolCall, type ScriptedModel } from '../../support/scripted-model';

const PLAN = '# Tiny\n\n## Only\nWrite nothing.\n';

describe('forge run and status say how a loop is confined (real CLI, opencode, bwrap)', function () {
  this.timeout(300_000);
  let model: ScriptedModel;
  let env: OpencodeTestEnvironment;
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  let planPath: string;
  let attempt = 0;

  before(async () => {
    bwrapPrereqs();
    const cliPath = ensureCliBuilt(REPO_ROOT);
    model = await startScriptedModel();
    model.setHandler(
      sessionScript((role) => [
        role === 'code'
          ? toolCall('forge_loop_handoff', { decisions: 'nothing to do', verification: 'none', notesForAuditor: '' })
          : toolCall('forge_loop_handoff', { summary: 'clean', done: true, deviations: '', followUps: '' }),
      ]).handler,
    );
    env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    repo = await createTestRepository({ 'README.md': '# tiny\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-confinement-'));
    planPath = join(work, 'plan.md');
    await writeFile(planPath, PLAN);
    runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', join(work, 'data'), '--repo', repo.dir] });
  });
  after(async () => {
    await runner?.killAll();
    await model?.close();
    await env?.cleanup();
    await repo?.cleanup();
    if (work) await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  const name = (what: string) => `${what}-${++attempt}`;
  async function statusJson(loop: string): Promise<{ confinement: { sandboxed: boolean; driver?: string; reason?: string; detail?: string } }> {
    const r = await runner.run(['status', loop, '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout.trim());
  }

  it('no flag: sandboxed by bwrap, and forge status says so', async () => {
    const loop = name('default');
    const r = await runner.run(['run', planPath, '--name', loop]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^\\[${loop}\\] started, sandboxed \\(bwrap\\)`, 'm'));
    assert.doesNotMatch(r.stdout, /UNCONFINED/);
    assert.deepEqual((await statusJson(loop)).confinement, { sandboxed: true, driver: 'bwrap' });
    const detail = await runner.run(['status', loop]);
    assert.match(detail.stdout, /^confinement: sandboxed \(bwrap\)/m);
  });

  it('--no-sandbox: UNCONFINED, said as a WARNING with the reason, in run and status', async () => {
    const loop = name('off');
    const r = await runner.run(['run', planPath, '--name', loop, '--no-sandbox']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^\\[${loop}\\] started, UNCONFINED \\(sandbox turned off\\)`, 'm'));
    assert.match(r.stdout, new RegExp(`^\\[${loop}\\] WARNING: This loop runs UNCONFINED because the sandbox is turned off`, 'm'));
    assert.equal((await statusJson(loop)).confinement.sandboxed, false);
    const list = await runner.run(['status']);
    assert.match(list.stdout, new RegExp(`^${loop}\\s.*UNCONFINED`, 'm'));
    assert.doesNotMatch(list.stdout, /^default-\d+\s.*UNCONFINED/m);
  });

  it('no working driver: UNCONFINED with the reason; --sandbox, forge.sandbox.required or a named driver that cannot run refuse to start, leaving nothing', async () => {
    // A PATH with git, a shell and node but no bwrap, docker or podman: auto finds no driver.
    const bin = join(work, 'no-driver-bin');
    await mkdir(bin, { recursive: true });
    for (const tool of ['git', 'bash', 'sh', 'env', 'node', 'cat', 'ls', 'rm', 'mkdir', 'uname']) {
      const found = spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      if (found) await symlink(found, join(bin, tool)).catch(() => undefined);
    }
    const noDriver = { env: { PATH: bin } };
    const loop = name('nodriver');
    const r = await runner.run(['run', planPath, '--name', loop], noDriver);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /started, UNCONFINED \(no sandbox driver works here\)/);
    assert.match(r.stdout, /WARNING: This loop runs UNCONFINED because no sandbox driver works here \(No sandbox driver is available \(bwrap: bubblewrap \(bwrap\) is not installed/);
    const s = await statusJson(loop);
    assert.equal(s.confinement.sandboxed, false);
    assert.equal(s.confinement.reason, 'no-driver');

    const refusedName = name('required');
    const refused = await runner.run(['run', planPath, '--name', refusedName, '--sandbox'], noDriver);
    assert.equal(refused.code, 7, `${refused.stdout}\n${refused.stderr}`);
    assert.match(refused.stderr, /A sandbox was required for this loop, but none can run here: No sandbox driver is available/);
    assert.notEqual((await runner.run(['status', refusedName])).code, 0, 'the refused loop must not exist');

    const bySetting = await runner.run(['run', planPath, '--name', name('required-setting')], { ...noDriver, settings: { 'forge.sandbox.required': true } });
    assert.equal(bySetting.code, 7, bySetting.stderr);
    assert.match(bySetting.stderr, /A sandbox was required/);

    // msb needs hardware virtualisation and a binary this machine does not have.
    const named = await runner.run(['run', planPath, '--name', name('named-driver')], { settings: { 'forge.sandbox.driver': 'msb' } });
    assert.equal(named.code, 7, named.stderr);
    assert.match(named.stderr, /The sandbox driver "msb" chosen in forge\.sandbox\.driver is not available.*forge\.sandbox\.driver names this driver/s);
  });
});
