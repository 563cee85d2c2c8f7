/**
 * A Dev Container Dockerfile built for real with docker and podman: from the repository's base
 * commit (an uncommitted change in the checkout is not built), once (the second resolution
 * reuses the tag without building), a broken one fails with the build output's tail, and one that
 * does not end is stopped at its time-out. No
 * registry is reachable here, so the Dockerfile starts FROM the locally made test image.
 */
import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { resolveDevcontainerImage } from '../../../src/core/sandbox/devcontainer/resolve';
import { SandboxError } from '../../../src/core/sandbox/types';
import { dockerPrereqs, podmanPrereqs, sandboxTestTempRoot, TEST_IMAGE } from '../../support/sandbox-fixtures';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Forge Test', '-c', 'user.email=forge@test.invalid', ...args], { cwd, encoding: 'utf8' }).trim();
}

for (const engine of ['docker', 'podman'] as const) {
  describe(`Dev Container image: build.dockerfile built with ${engine} (real engine)`, function () {
    this.timeout(10 * 60_000);
    let env: NodeJS.ProcessEnv;
    let base: string;
    let repo: string;
    let commit: string;
    const tags = new Set<string>();

    before(function () {
      this.timeout(30 * 60_000);
      env = engine === 'docker' ? dockerPrereqs() : podmanPrereqs();
      base = mkdtempSync(path.join(sandboxTestTempRoot(), `devc-image-${engine}-`));
      repo = path.join(base, 'repo');
      mkdirSync(path.join(repo, '.devcontainer'), { recursive: true });
      git(repo, 'init', '-q', '-b', 'main');
      // A unique argument per run: the content tag (and so the build) is this run's own.
      const mark = `mark-${engine}-${process.pid}-${Date.now()}`;
      writeFileSync(
        path.join(repo, '.devcontainer', 'devcontainer.json'),
        `// built by Forge's test\n{\n  "name": "fixture",\n  "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "MARK": "${mark}" }, },\n}\n`,
      );
      writeFileSync(
        path.join(repo, '.devcontainer', 'Dockerfile'),
        `FROM ${TEST_IMAGE}\nARG MARK\nUSER root\nCOPY tools/projtool /usr/local/bin/projtool\nRUN chmod 755 /usr/local/bin/projtool && echo "$MARK" > /etc/forge-mark\nUSER agent\n`,
      );
      mkdirSync(path.join(repo, 'tools'));
      writeFileSync(path.join(repo, 'tools', 'projtool'), '#!/bin/sh\necho "projtool from the commit: $(cat /etc/forge-mark)"\n');
      git(repo, 'add', '-A');
      git(repo, 'commit', '-q', '-m', 'dev container');
      commit = git(repo, 'rev-parse', 'HEAD');
      // The checkout (like a loop's worktree) changes the tool afterwards: never built.
      writeFileSync(path.join(repo, 'tools', 'projtool'), '#!/bin/sh\necho "projtool from the checkout"\n');
    });

    after(function () {
      for (const tag of tags) spawnSync(engine, ['rmi', '-f', tag], { env });
      if (base) rmSync(base, { recursive: true, force: true });
    });

    const resolve = (at: string, lines: string[] = [], buildTimeoutMs?: number) =>
      resolveDevcontainerImage({
        gitDir: path.join(repo, '.git'),
        commit: at,
        engine,
        env,
        scratchDir: path.join(base, 'scratch'),
        onLog: (l) => lines.push(l),
        ...(buildTimeoutMs ? { buildTimeoutMs } : {}),
      });

    it('builds the base commit once under a content tag and reuses the tag the second time', async () => {
      const lines: string[] = [];
      const first = await resolve(commit, lines);
      assert.equal(first.kind, 'built');
      if (first.kind !== 'built') return;
      tags.add(first.image);
      assert.match(first.image, /^forge-devcontainer:[0-9a-f]{24}$/);
      assert.equal(first.cached, false);
      assert.equal(first.configPath, '.devcontainer/devcontainer.json');
      assert.ok(lines.some((l) => /\[devcontainer\] building forge-devcontainer:/.test(l)), lines.join('\n'));
      // Rootful podman here cannot raise the default rlimits: set them (as Forge's podman sandboxes do).
      const limits = engine === 'podman' ? ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096'] : [];
      const run = spawnSync(engine, ['run', '--rm', '--network', 'none', ...limits, first.image, 'sh', '-c', 'projtool; id -un'], { env, encoding: 'utf8' });
      assert.match(run.stdout, /^projtool from the commit: mark-/, run.stderr);
      assert.match(run.stdout, /\nagent\n$/);
      const created = spawnSync(engine, ['image', 'inspect', '--format', '{{.Id}}', first.image], { env, encoding: 'utf8' }).stdout.trim();

      const again: string[] = [];
      const second = await resolve(commit, again);
      assert.deepEqual(second, { kind: 'built', configPath: '.devcontainer/devcontainer.json', image: first.image, cached: true });
      assert.deepEqual(again, [], 'nothing was built the second time');
      assert.equal(spawnSync(engine, ['image', 'inspect', '--format', '{{.Id}}', first.image], { env, encoding: 'utf8' }).stdout.trim(), created);
      assert.ok(!spawnSync('ls', [path.join(base, 'scratch')], { encoding: 'utf8' }).stdout.trim(), 'the extracted context is removed');
    });

    it('fails a broken Dockerfile with the output tail, stops one that does not end, and refuses an unsupported configuration', async () => {
      writeFileSync(path.join(repo, '.devcontainer', 'Dockerfile'), `FROM ${TEST_IMAGE}\nRUN echo broken-step-output && exit 7\n`);
      git(repo, 'commit', '-q', '-am', 'broken');
      await assert.rejects(resolve(git(repo, 'rev-parse', 'HEAD')), (e: unknown) => {
        assert.ok(e instanceof SandboxError, String(e));
        assert.match(e.message, /Building the Dev Container image forge-devcontainer:[0-9a-f]{24} \(\.devcontainer\/Dockerfile\) with \w+ failed \(exit \d+\)/);
        assert.match(e.message, /broken-step-output/);
        return true;
      });
      // A build that does not end is stopped at its time-out, and nothing of it keeps running.
      const sleeper = `sleep ${4000 + (process.pid % 1000)}`;
      writeFileSync(path.join(repo, '.devcontainer', 'Dockerfile'), `FROM ${TEST_IMAGE}\nRUN echo before-the-hang && ${sleeper}\n`);
      git(repo, 'commit', '-q', '-am', 'hangs');
      const workingContainers = () =>
        engine === 'podman' ? spawnSync('podman', ['ps', '-a', '--external', '--format', '{{.ID}}'], { env, encoding: 'utf8' }).stdout.split('\n').filter(Boolean) : [];
      const before = new Set(workingContainers());
      await assert.rejects(resolve(git(repo, 'rev-parse', 'HEAD'), [], 8_000), (e: unknown) => {
        assert.ok(e instanceof SandboxError, String(e));
        assert.match(e.message, /Building the Dev Container image forge-devcontainer:[0-9a-f]{24} \(\.devcontainer\/Dockerfile\) did not end within 8 s: Forge stopped it\. Last output:/);
        return true;
      });
      let left = 1;
      for (let i = 0; i < 60 && left > 0; i++) {
        left = spawnSync('pgrep', ['-f', `^${sleeper}$`]).stdout.toString().trim().split('\n').filter(Boolean).length;
        if (left > 0) await new Promise((r) => setTimeout(r, 500));
      }
      assert.equal(left, 0, `the stopped build's ${sleeper} is still running`);
      // podman keeps a stopped build's working container in its storage (nothing runs in it): the test's own goes.
      for (const id of workingContainers().filter((c) => !before.has(c))) spawnSync('podman', ['rm', '-f', id], { env });
      writeFileSync(path.join(repo, '.devcontainer', 'devcontainer.json'), '{ "dockerComposeFile": "compose.yml", "service": "app" }');
      git(repo, 'commit', '-q', '-am', 'compose');
      await assert.rejects(resolve(git(repo, 'rev-parse', 'HEAD')), /The Dev Container configuration cannot be used: \.devcontainer\/devcontainer\.json: `dockerComposeFile` is not supported/);
      // No configuration at all: the setting's image applies.
      git(repo, 'rm', '-q', '-r', '.devcontainer');
      git(repo, 'commit', '-q', '-m', 'none');
      assert.deepEqual(await resolve(git(repo, 'rev-parse', 'HEAD')), { kind: 'none' });
    });
  });
}
