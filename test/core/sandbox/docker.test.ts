import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import path from 'node:path';
import { SandboxManager } from '../../../src/core/sandbox/manager';
import { SandboxError } from '../../../src/core/sandbox/types';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import { describeSandboxDriver } from '../../support/sandbox-contract';
import { dockerPrereqs, makeSandboxTestDirs, SMALL_LIMITS, TEST_IMAGE } from '../../support/sandbox-fixtures';

describeSandboxDriver({
  driver: 'docker',
  prereqs: dockerPrereqs,
  image: TEST_IMAGE,
  runtime: (_dirs, env) => new OciRuntime({ engine: 'docker', env }),
  brokenRuntime: (dirs, env) => new OciRuntime({ engine: 'docker', env: { ...env, DOCKER_HOST: `unix://${dirs.base}/no-such-docker.sock` } }),
  removeOutOfBand: (name, _dirs, env) => {
    const r = spawnSync('docker', ['rm', '-f', name], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`docker rm -f ${name} failed: ${r.stderr}`);
  },
});

describe('sandbox driver: docker specifics', function () {
  this.timeout(300_000);
  let env: NodeJS.ProcessEnv;
  before(function () {
    this.timeout(20 * 60_000);
    env = dockerPrereqs();
  });

  it('fails loop start with a clear error and leaves nothing behind when the image is missing', async () => {
    const dirs = makeSandboxTestDirs('docker-noimg');
    try {
      const runtime = new OciRuntime({ engine: 'docker', env });
      const manager = new SandboxManager({ runtime, prefix: `ft${process.pid}ni-`, isLoopRunning: () => false });
      await assert.rejects(
        manager.start({ loopName: 'x', worktreeDir: dirs.worktreeDir, network: false, limits: SMALL_LIMITS, image: 'forge-no-such-image:never' }),
        (e: unknown) => {
          assert.ok(e instanceof SandboxError);
          assert.match(e.message, /Could not create the sandbox of loop "x" \(docker\).*build the image first \(Forge: Build Sandbox Image\)/s);
          return true;
        },
      );
      assert.equal(await runtime.state(manager.sandboxName('x')), 'missing');
    } finally {
      dirs.cleanup();
    }
  });

  it('runs commands as the invoking user (here a non-root uid), so worktree files are theirs', async () => {
    const dirs = makeSandboxTestDirs('docker-uid');
    try {
      chmodSync(dirs.worktreeDir, 0o777);
      const runtime = new OciRuntime({ engine: 'docker', env, uid: 4242, gid: 4343 });
      const manager = new SandboxManager({ runtime, prefix: `ft${process.pid}id-`, isLoopRunning: () => false });
      const h = await manager.start({ loopName: 'x', worktreeDir: dirs.worktreeDir, network: false, limits: SMALL_LIMITS, image: TEST_IMAGE });
      const r = await runtime.exec(h.name, 'id -u; touch owned.txt');
      assert.equal(r.stdout, '4242\n', r.stderr);
      const st = statSync(path.join(dirs.worktreeDir, 'owned.txt'));
      assert.deepEqual([st.uid, st.gid], [4242, 4343]);
      await manager.stop('x');
    } finally {
      dirs.cleanup();
    }
  });
});
