import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { findMarkedProcesses, signalMarkedProcesses } from '../../../src/core/process/marked-processes';

const exited = (child: ReturnType<typeof spawn>) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

describe('marked processes (real processes)', function () {
  this.timeout(30_000);

  it('finds and kills a process marked in its environment, and one marked as bwrap carries it (--setenv VARIABLE MARKER in its arguments)', async () => {
    const marker = randomUUID();
    const byEnv = spawn('sleep', ['30'], { env: { PATH: process.env.PATH, FORGE_TEST_MARK: marker }, stdio: 'ignore' });
    // As bwrap started through `exec -c`: no environment, the marker in its arguments.
    const byArgs = spawn('/bin/sh', ['-c', 'sleep 30; :', 'sh', '--setenv', 'FORGE_TEST_MARK', marker], { env: {}, stdio: 'ignore' });
    // Not marked: the same marker under another variable, or a longer value.
    const other = spawn('/bin/sh', ['-c', 'sleep 30; :', 'sh', '--setenv', 'FORGE_OTHER_MARK', marker], { env: { FORGE_TEST_MARK: `${marker}x` }, stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 300));
      const found = findMarkedProcesses('FORGE_TEST_MARK', marker).map((p) => p.pid).sort();
      assert.deepEqual(found, [byEnv.pid!, byArgs.pid!].sort());
      assert.ok(signalMarkedProcesses('FORGE_TEST_MARK', marker, 'SIGKILL') >= 2);
      await Promise.all([exited(byEnv), exited(byArgs)]);
      assert.equal(other.exitCode, null, 'the unmarked process is left alone');
      assert.deepEqual(findMarkedProcesses('FORGE_TEST_MARK', marker), []);
    } finally {
      for (const c of [byEnv, byArgs, other]) c.kill('SIGKILL');
    }
  });
});
