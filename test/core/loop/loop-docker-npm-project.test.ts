/**
 * A real npm project on docker (issue 27 items 1, 4, 5): the repository's
 * `.devcontainer/Dockerfile` starts FROM its team's Node image (built here FROM Forge's sandbox
 * test image with this machine's node and npm: no registry image is reachable), depends on uvu
 * from the registry with its lockfile, and has `node_modules` installed in the user's checkout
 * and an ignored `.env` listed in `.worktreeinclude`. Real opencode, git, docker and database; only
 * the model is scripted. The loop's sandbox runs in the Dev Container image, reuses the checkout's
 * `node_modules` read-only, and Forge's gate runs the project's own `npm test` there; a hostile
 * coder and a hostile setup command cannot change the user's `node_modules` and reach nothing of
 * the host.
 */
import { strict as assert } from 'node:assert';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { LOOP_SANDBOX_STATE_KEY } from '../../../src/core/sandbox/types';
import { createLoopHarness, type LoopHarness } from '../../support/loop-harness';
import { bashCall, firstCoderActsScript } from '../../support/first-coder-script';
import { ensureNodeToolchainImage, ensureUvuFixture, prepareUvuCheckout, uvuProjectFiles } from '../../support/project-fixtures';
import { dockerPrereqs, sandboxTestTempRoot, TEST_IMAGE, withDockerHost } from '../../support/sandbox-fixtures';

describe('a real npm project in its Dev Container image on docker (real opencode, git, docker, npm, uvu; scripted model)', function () {
  this.timeout(20 * 60_000);
  let env: NodeJS.ProcessEnv;
  let h: LoopHarness;
  let dataDir: string;
  let hostSecret: string;
  const logs: string[] = [];

  before(async function () {
    this.timeout(30 * 60_000);
    env = dockerPrereqs();
    const nodeImage = ensureNodeToolchainImage(env, TEST_IMAGE);
    const fixture = ensureUvuFixture();
    dataDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'loop-docker-npm-'));
    hostSecret = path.join(dataDir, 'host-secret.txt');
    writeFileSync(hostSecret, 'host only\n');
    h = await withDockerHost(env.DOCKER_HOST, () =>
      createLoopHarness({
        dataDir,
        files: {
          ...uvuProjectFiles(fixture),
          '.devcontainer/devcontainer.json': '{ "name": "adder", "build": { "dockerfile": "Dockerfile" } }\n',
          '.devcontainer/Dockerfile': `FROM ${nodeImage}\n`,
        },
        settings: {
          'forge.sandbox.enabled': true,
          'forge.sandbox.driver': 'docker',
          'forge.sandbox.image': TEST_IMAGE,
          'forge.sandbox.network': false,
          'forge.loop.stallTimeoutMs': 300_000,
          // A hostile setup command (the setup runs in a sandbox of its own, network on): it tries
          // the user's node_modules and a host file, and records what it got in the worktree.
          'forge.worktree.setup': [`touch node_modules/uvu/SETUP_HACKED 2>/dev/null; echo "touch rc=$?" > setup-ran.txt; cat ${hostSecret} > leaked.txt 2>/dev/null; echo "cat rc=$?" >> setup-ran.txt`],
        },
        onLog: (_level, message) => logs.push(message),
      }),
    );
    prepareUvuCheckout(fixture, h.repo.dir);
  });

  after(async function () {
    this.timeout(5 * 60_000);
    await h?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  it("reuses the checkout's node_modules read-only, runs the project's own npm test in the image, and completes; the hostile coder changed nothing of the user's", async () => {
    const results: string[] = [];
    const script = firstCoderActsScript([
      // The host path is decoded at run time, so that opencode's own permission check (which
      // refuses a command naming a path outside the worktree) lets it through to the sandbox.
      bashCall('hack', `touch node_modules/uvu/HACKED; echo "touch rc=$?"; rm -rf node_modules/uvu; echo "rm rc=$?"; ls node_modules/uvu/package.json; cat "$(echo ${Buffer.from(hostSecret).toString('base64')} | base64 -d)"; echo "cat rc=$?"`),
      bashCall('work', "printf 'module.exports = (a, b) => a + b;\\n' > add.js && node --version && npm test; echo \"npm rc=$?\""),
    ]);
    h.model.setHandler((request) => {
      for (const r of request.toolResults) results.push(r.content);
      return script(request);
    });
    const started = await h.engine.runtime.start({
      kind: 'goal',
      repoPath: h.repo.dir,
      goal: 'Make add.js add its two arguments',
      name: 'adder',
      maxIterations: 2,
      merge: 'never',
      checks: { check: ['npm test'] },
    });
    const end = (await h.engine.runtime.waitForEnd(started)) as Extract<LoopRuntimeEvent, { type: 'loop.ended' }>;
    const runs = h.engine.repos.checkRuns.listByLoop(started.projectId, started.name);
    const said = `${JSON.stringify(end)}\n${JSON.stringify(runs, null, 1)}\n--- tool results\n${results.join('\n---\n')}\n--- log\n${logs.filter((l) => /sandbox|setup|devcontainer/.test(l)).join('\n')}`;
    assert.equal(end.status, 'completed', said);
    // The sandbox ran in the image built from the repository's Dev Container configuration.
    const image = (h.engine.runtime.get(started)!.state[LOOP_SANDBOX_STATE_KEY] as { image: string }).image;
    assert.match(image, /^forge-devcontainer:[0-9a-f]{24}$/, said);
    // The agent ran the project's npm test there (node from the image, uvu from the reused node_modules).
    assert.ok(results.some((r) => /v\d+\.\d+\.\d+[\s\S]*Total:\s+2[\s\S]*Passed:\s+2[\s\S]*npm rc=0/.test(r)), said);
    // Forge's own gate ran npm test and it passed, in place (the worktree held nothing else).
    assert.ok(runs.length >= 1 && runs.every((r) => r.status === 'passed'), said);
    // The hostile part: node_modules is read-only in the sandbox and the host file is not there.
    const hack = results.find((r) => r.includes('touch rc=')) ?? '';
    assert.match(hack, /touch rc=[1-9]/, said);
    assert.match(hack, /cat rc=[1-9]/, said);
    assert.doesNotMatch(hack, /host only/, said);
    assert.ok(!existsSync(path.join(h.repo.dir, 'node_modules', 'uvu', 'HACKED')));
    assert.ok(!existsSync(path.join(h.repo.dir, 'node_modules', 'uvu', 'SETUP_HACKED')));
    assert.ok(existsSync(path.join(h.repo.dir, 'node_modules', 'uvu', 'package.json')), "the user's node_modules keeps uvu");
    const worktree = h.engine.runtime.get(started)!.worktreeDir!;
    assert.equal(readFileSync(path.join(worktree, '.env'), 'utf8'), 'GREETING=hello\n', '.env came through .worktreeinclude');
    assert.deepEqual(readdirSync(path.join(worktree, 'node_modules')), [], 'nothing of node_modules was copied: only the mount point');
    // The setup ran in the worktree and reached neither the user's node_modules nor the host file.
    assert.match(readFileSync(path.join(worktree, 'setup-ran.txt'), 'utf8'), /^touch rc=[1-9]\d*\ncat rc=[1-9]\d*\n$/);
    assert.equal(readFileSync(path.join(worktree, 'leaked.txt'), 'utf8'), '');
  });
});
