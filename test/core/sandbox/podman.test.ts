import { spawnSync } from 'node:child_process';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import { describeSandboxDriver } from '../../support/sandbox-contract';
import { podmanPrereqs, TEST_IMAGE } from '../../support/sandbox-fixtures';

// Rootful Podman 4 on a cgroup v1 host needs the driver's ulimit work-around (seen here:
// "error setting rlimit type 7: operation not permitted"), so this also proves it applies.
describeSandboxDriver({
  driver: 'podman',
  prereqs: podmanPrereqs,
  image: TEST_IMAGE,
  // Podman 4's `update` has no --pids-limit: a limit change recreates the sandbox.
  resizesInPlace: false,
  runtime: (_dirs, env) => new OciRuntime({ engine: 'podman', env }),
  brokenRuntime: (dirs, env) => new OciRuntime({ engine: 'podman', env, binary: `${dirs.base}/no-such-podman` }),
  removeOutOfBand: (name, _dirs, env) => {
    const r = spawnSync('podman', ['rm', '-f', name], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`podman rm -f ${name} failed: ${r.stderr}`);
  },
});
