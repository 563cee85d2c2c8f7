/**
 * The sandbox has the project's toolchain (issue 27 item 4), end to end on docker: a repository
 * whose `.devcontainer/devcontainer.json` builds a Dockerfile FROM the Forge sandbox test image
 * (no registry image is reachable here) that adds a marker tool, `projtool`. Real opencode, real
 * git, real docker, real database; only the model is scripted. The coder's shell and the plan's
 * check both run `projtool` in the loop's sandbox, built from the base commit, and the loop
 * completes. A second loop reuses the cached image, and its check on a command the image lacks
 * (exit 127) gets a finding naming the command and the image. A configuration Forge does not
 * support is then refused at the start, naming the key, with nothing left behind; a bwrap loop in
 * the same repository starts with a notice that it uses the host's toolchains instead.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { LoopRuntimeError, type LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { LOOP_SANDBOX_STATE_KEY } from '../../../src/core/sandbox/types';
import { createLoopHarness, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { bwrapPrereqs, dockerPrereqs, sandboxTestTempRoot, TEST_IMAGE, withDockerHost } from '../../support/sandbox-fixtures';
import { text, toolCall, toolCalls, type ScriptStep } from '../../support/scripted-model';

const FILES = {
  'README.md': '# demo\n',
  '.devcontainer/devcontainer.json': '// the project\'s toolchain\n{\n  "name": "demo",\n  "build": { "dockerfile": "Dockerfile" },\n  "customizations": { "vscode": { "extensions": [] } },\n}\n',
  '.devcontainer/Dockerfile': `FROM ${TEST_IMAGE}\nUSER root\nCOPY projtool /usr/local/bin/projtool\nRUN chmod 755 /usr/local/bin/projtool\nUSER agent\n`,
  '.devcontainer/projtool': '#!/bin/sh\necho "projtool-ok $*"\n',
};

describe('a loop in the Dev Container image on docker (real opencode, real docker, scripted model)', function () {
  this.timeout(15 * 60_000);
  let env: NodeJS.ProcessEnv;
  let h: LoopHarness;
  let dataDir: string;
  const logs: string[] = [];

  before(async function () {
    this.timeout(30 * 60_000);
    env = dockerPrereqs();
    dataDir = mkdtempSync(path.join(sandboxTestTempRoot(), 'loop-devcontainer-'));
    // The engine's docker CLI takes DOCKER_HOST from the harness's environment (process.env): the project's dockerd.
    h = await withDockerHost(env.DOCKER_HOST, () =>
      createLoopHarness({
        dataDir,
        files: FILES,
        settings: {
          'forge.sandbox.enabled': true,
          'forge.sandbox.driver': 'docker',
          'forge.sandbox.image': TEST_IMAGE,
          'forge.sandbox.network': false,
          'forge.loop.stallTimeoutMs': 120_000,
        },
        onLog: (_level, message) => logs.push(message),
      }),
    );
  });

  after(async function () {
    this.timeout(5 * 60_000);
    await h?.close();
    const images = spawnSync('docker', ['images', '--format', '{{.Repository}}:{{.Tag}}', 'forge-devcontainer'], { env, encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    for (const image of images.filter((i) => usedImages.has(i))) spawnSync('docker', ['rmi', '-f', image], { env });
    if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  const usedImages = new Set<string>();

  it('builds the image from the base commit, the agent and the check run projtool in it, and the loop completes', async () => {
    const script = sessionScript((role): ScriptStep[] =>
      role === 'code'
        ? [
            toolCalls([{ id: 'tool-1', name: 'bash', args: { command: 'projtool from-the-agent > tool.txt; echo "rc=$?"; cat tool.txt', description: 'projtool' } }]),
            toolCall('forge_loop_handoff', { decisions: 'wrote tool.txt with projtool', verification: 'ran projtool', notesForAuditor: '' }),
          ]
        : [toolCall('forge_loop_handoff', { summary: 'approved', done: true, deviations: '', followUps: '' }), text('Done.')],
    );
    const results = new Map<string, string>();
    h.model.setHandler((request) => {
      for (const r of request.toolResults) results.set(r.toolCallId, r.content);
      return script.handler(request);
    });
    const started = await h.engine.runtime.start({
      kind: 'goal',
      repoPath: h.repo.dir,
      goal: 'Write the output of projtool into tool.txt',
      name: 'devc',
      maxIterations: 2,
      merge: 'never',
      checks: { check: ['projtool from-the-check && grep -q "projtool-ok from-the-agent" tool.txt'] },
    });
    const end = (await h.engine.runtime.waitForEnd(started)) as Extract<LoopRuntimeEvent, { type: 'loop.ended' }>;
    const runs = h.engine.repos.checkRuns.listByLoop(started.projectId, started.name);
    assert.equal(end.status, 'completed', `${JSON.stringify(end)}\n${JSON.stringify(runs)}\n${logs.filter((l) => l.includes('sandbox')).join('\n')}`);
    // The loop's sandbox used the image built from the repository's Dev Container configuration.
    const loop = h.engine.runtime.get(started)!;
    const image = (loop.state[LOOP_SANDBOX_STATE_KEY] as { image: string; driver: string }).image;
    usedImages.add(image);
    assert.match(image, /^forge-devcontainer:[0-9a-f]{24}$/);
    assert.ok(
      started.notices.some((n) => new RegExp(`^The docker sandbox uses the image ${image} of \\.devcontainer/devcontainer\\.json \\(built now from the base commit in \\d+\\.\\d s, reused by later loops\\), not forge\\.sandbox\\.image\\.$`).test(n)),
      started.notices.join('\n'),
    );
    assert.equal(spawnSync('docker', ['image', 'inspect', '--format', '{{.Id}}', image], { env }).status, 0, 'the built image is kept (cached for the next loop)');
    assert.ok(logs.some((l) => l.includes(`[devcontainer] building ${image} with docker from .devcontainer/Dockerfile`)), logs.join('\n'));
    assert.ok(logs.some((l) => l.includes(`loop devc uses the newly built image ${image} of .devcontainer/devcontainer.json (docker)`)), logs.join('\n'));
    // The agent's shell ran projtool in the sandbox; the check ran it too and passed.
    assert.match(results.get('tool-1') ?? '', /rc=0\s+projtool-ok from-the-agent/, JSON.stringify([...results]));
    assert.ok(runs.length >= 1 && runs.every((r) => r.status === 'passed'), JSON.stringify(runs));
  });

  it('a second loop reuses the cached image; a check whose command the image lacks gets a finding naming the command and the image', async () => {
    const script = sessionScript((role): ScriptStep[] =>
      role === 'code'
        ? [toolCall('forge_loop_handoff', { decisions: 'nothing to do', verification: 'none', notesForAuditor: '' })]
        : [toolCall('forge_loop_handoff', { summary: 'approved', done: true, deviations: '', followUps: '' }), text('Done.')],
    );
    h.model.setHandler(script.handler);
    const started = await h.engine.runtime.start({
      kind: 'goal',
      repoPath: h.repo.dir,
      goal: 'Nothing',
      name: 'devc-missing',
      maxIterations: 1,
      merge: 'never',
      checks: { check: ['nosuchtool-forge --version'] },
    });
    const end = (await h.engine.runtime.waitForEnd(started)) as Extract<LoopRuntimeEvent, { type: 'loop.ended' }>;
    assert.notEqual(end.status, 'completed', JSON.stringify(end));
    const image = (h.engine.runtime.get(started)!.state[LOOP_SANDBOX_STATE_KEY] as { image: string }).image;
    assert.ok(usedImages.has(image), `the same image as the first loop: ${image}`);
    assert.ok(started.notices.includes(`The docker sandbox uses the image ${image} of .devcontainer/devcontainer.json (built by an earlier loop, reused), not forge.sandbox.image.`), started.notices.join('\n'));
    assert.ok(logs.some((l) => l.includes(`loop devc-missing uses the cached image ${image} of .devcontainer/devcontainer.json (docker)`)), logs.join('\n'));
    const findings = h.engine.repos.reviewFindings.listByLoop(started.projectId, started.name).map((f) => f.description);
    const expected = `\`nosuchtool-forge\` is not in the sandbox image ${image} (docker): this is the environment, not the work. Add it to the image`;
    assert.ok(findings.some((f) => f.includes(expected)), findings.join('\n---\n'));
  });

  it('refuses a start on a configuration Forge does not support, naming the key, and leaves nothing behind', async () => {
    writeFileSync(path.join(h.repo.dir, '.devcontainer', 'devcontainer.json'), '{ "image": "forge-sandbox:test", "features": { "ghcr.io/devcontainers/features/node:1": {} } }\n');
    await h.repo.git('add', '-A');
    await h.repo.git('commit', '-q', '-m', 'features');
    const error = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Never starts', name: 'devc-refused', merge: 'never' }).then(
      () => assert.fail('the start must be refused'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof LoopRuntimeError, String(error));
    assert.equal(error.code, 'sandbox');
    assert.match(error.message, /The sandbox could not start, so the loop was not started: The Dev Container configuration cannot be used: \.devcontainer\/devcontainer\.json: `features` are not supported/);
    assert.ok(!h.engine.runtime.get({ projectId: h.projectId, name: 'devc-refused' }), 'no loop row');
    assert.doesNotMatch(await h.repo.git('worktree', 'list'), /devc-refused/);
  });

  it('a bwrap loop in the same repository says it uses the host toolchains instead', async () => {
    bwrapPrereqs();
    h.settings['forge.sandbox.driver'] = 'bwrap';
    h.model.setHandler(sessionScript(() => [text('Working.')]).handler);
    const started = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Nothing', name: 'devc-bwrap', merge: 'never' });
    try {
      assert.equal((h.engine.runtime.get(started)!.state[LOOP_SANDBOX_STATE_KEY] as { driver: string }).driver, 'bwrap');
      assert.ok(
        started.notices.includes(
          'This repository has .devcontainer/devcontainer.json; the bwrap sandbox does not use it: the loop sees the host\'s toolchains. Set forge.sandbox.driver to docker or podman to run the loop in the Dev Container image.',
        ),
        started.notices.join('\n'),
      );
    } finally {
      await h.engine.runtime.cancel(started).catch(() => undefined);
      await h.engine.runtime.waitForEnd(started);
      h.settings['forge.sandbox.driver'] = 'docker';
    }
  });
});
