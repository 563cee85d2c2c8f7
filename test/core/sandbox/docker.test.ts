import { spawnSync } from 'node:child_process';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import { describeSandboxDriver } from '../../support/sandbox-contract';
import { dockerPrereqs, TEST_IMAGE } from '../../support/sandbox-fixtures';

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
