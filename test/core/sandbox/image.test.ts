/**
 * buildImage drives a real `docker build`. No registry is reachable on the test machines,
 * so the build context derives from the locally made test image instead of
 * container/Dockerfile's Debian base; the Dockerfile itself is checked for what Forge
 * relies on (a plain OCI base and a non-root final user).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildImage } from '../../../src/core/sandbox/image';
import { SandboxError } from '../../../src/core/sandbox/types';
import { dockerPrereqs, REPO_ROOT, TEST_IMAGE } from '../../support/sandbox-fixtures';

describe('sandbox image', function () {
  this.timeout(300_000);
  let env: NodeJS.ProcessEnv;

  before(function () {
    this.timeout(20 * 60_000);
    env = dockerPrereqs();
  });

  it('container/Dockerfile starts from a plain base, installs the agent tools and ends as a non-root user', () => {
    const text = readFileSync(path.join(REPO_ROOT, 'container', 'Dockerfile'), 'utf8');
    assert.match(text, /^FROM debian:bookworm-slim$/m);
    for (const tool of ['git', 'ripgrep', 'nodejs', 'python3', 'build-essential']) assert.match(text, new RegExp(`\\b${tool}\\b`));
    const users = [...text.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1]);
    assert.ok(users.length > 0 && users.at(-1) !== 'root' && users.at(-1) !== '0', `final USER is ${users.at(-1)}`);
  });

  it('builds a context with the engine and streams its output', async () => {
    const context = mkdtempSync(path.join(REPO_ROOT, '.cache', 'forge-image-ctx-'));
    const tag = `forge-sandbox-buildtest:${process.pid}`;
    try {
      writeFileSync(path.join(context, 'Dockerfile'), `FROM ${TEST_IMAGE}\nRUN echo built-by-forge > /home/agent/marker\nUSER agent\n`);
      const lines: string[] = [];
      const result = await buildImage({ engine: 'docker', contextDir: context, tag, env, onLog: (l) => lines.push(l) });
      assert.equal(result.tag, tag);
      assert.ok(lines.some((l) => /built-by-forge|RUN echo/.test(l)), `build output was streamed: ${lines.join('\n')}`);
      const run = spawnSync('docker', ['run', '--rm', '--network', 'none', tag, 'sh', '-c', 'cat /home/agent/marker; id -un'], { env, encoding: 'utf8' });
      assert.equal(run.stdout, 'built-by-forge\nagent\n', run.stderr);
    } finally {
      spawnSync('docker', ['rmi', '-f', tag], { env });
      rmSync(context, { recursive: true, force: true });
    }
  });

  it('fails with the build output when the Dockerfile is broken', async () => {
    const context = mkdtempSync(path.join(REPO_ROOT, '.cache', 'forge-image-ctx-'));
    try {
      writeFileSync(path.join(context, 'Dockerfile'), `FROM ${TEST_IMAGE}\nRUN exit 7\n`);
      await assert.rejects(buildImage({ engine: 'docker', contextDir: context, tag: `forge-broken:${process.pid}`, env }), (e: unknown) => {
        assert.ok(e instanceof SandboxError);
        assert.match(e.message, /failed \(exit \d+\)/);
        assert.match(e.message, /exit 7|returned a non-zero code: 7|exit code: 7/);
        return true;
      });
    } finally {
      rmSync(context, { recursive: true, force: true });
    }
  });
});
