import { strict as assert } from 'node:assert';
import { parseVerificationChecks } from '../../../src/core/checks/parse';
import { DEFAULT_MAX_OUTPUT_BYTES, runCheck, sandboxCheckExecutor } from '../../../src/core/checks/runner';
import type { CheckSpec } from '../../../src/core/checks/types';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import { bwrapPrereqs, dockerPrereqs, makeSandboxTestDirs, SMALL_LIMITS, TEST_IMAGE, uniqueLoopName, type SandboxTestDirs } from '../../support/sandbox-fixtures';
import { processesRunning } from '../../support/processes';

function commandCheck(script: string): CheckSpec {
  return parseVerificationChecks(`\`\`\`sh\n${script}\n\`\`\``).checks[0]!;
}


describe('checks: running a command inside a bwrap sandbox', function () {
  this.timeout(120_000);
  let dirs: SandboxTestDirs;
  let runtime: BwrapRuntime;
  let name: string;

  before(async () => {
    bwrapPrereqs();
    dirs = makeSandboxTestDirs('checks-bwrap');
    runtime = new BwrapRuntime({ stateDir: dirs.stateDir });
    name = uniqueLoopName('checks');
    await runtime.create({ name, worktreeDir: dirs.worktreeDir, gitCommonDir: dirs.gitCommonDir, network: false, limits: SMALL_LIMITS });
  });
  after(async () => {
    await runtime?.remove(name).catch(() => undefined);
    dirs?.cleanup();
  });

  it('passes, fails and says command not found like on the host, in the worktree, output interleaved', async () => {
    const exec = sandboxCheckExecutor(runtime, name);
    const passed = await runCheck(commandCheck('echo one; echo two >&2; echo three; pwd; cat README.md'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([passed.status, passed.exitCode], ['passed', 0]);
    assert.equal(passed.outputTail, `one\ntwo\nthree\n${dirs.worktreeDir}\n# fixture\nneedle-in-readme\n`);
    const failed = await runCheck(commandCheck('echo bad >&2; exit 3'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([failed.status, failed.exitCode, failed.message, failed.outputTail], ['failed', 3, 'exited with code 3', 'bad\n']);
    const dash = await runCheck(commandCheck('-n; echo ran'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([dash.exitCode, dash.outputTail], [0, 'bash: line 1: -n: command not found\nran\n']);
    const missing = await runCheck(commandCheck('forge-no-such-command'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([missing.status, missing.exitCode], ['not-started', 127]);
    assert.match(missing.message, /^command not found \(exit 127\): bash: .*forge-no-such-command: command not found$/);
  });

  it('keeps only the tail of 100 MB of output, inside the sandbox', async () => {
    const result = await runCheck(commandCheck("head -c 100000000 /dev/zero | tr '\\0' x\necho\necho THE END"), {
      cwd: dirs.worktreeDir,
      exec: sandboxCheckExecutor(runtime, name),
    });
    assert.equal(result.status, 'passed');
    assert.equal(Buffer.byteLength(result.outputTail), DEFAULT_MAX_OUTPUT_BYTES);
    assert.ok(result.outputTail.endsWith('xxx\nTHE END\n'));
    assert.equal(result.outputTruncated, true);
  });

  it('kills a hanging check with its disowned and setsid\'d children at the timeout', async () => {
    const result = await runCheck(commandCheck('sleep 987651 & disown\nsetsid sleep 987652 &\necho started\nsleep 987653'), {
      cwd: dirs.worktreeDir,
      exec: sandboxCheckExecutor(runtime, name),
      timeoutMs: 1_500,
    });
    assert.equal(result.status, 'timed-out');
    assert.equal(result.message, 'timed out after 1500 ms; Forge killed it and everything it started');
    // Give the kernel a moment to tear the sandbox's pid namespace down.
    const deadline = Date.now() + 5_000;
    let left: number[] = [];
    do {
      left = [...(await processesRunning('sleep 987651')), ...(await processesRunning('sleep 987652')), ...(await processesRunning('sleep 987653'))];
      if (left.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } while (Date.now() < deadline);
    assert.deepEqual(left, []);
  });
});

describe('checks: a hanging check inside a docker sandbox', function () {
  this.timeout(600_000);
  let dirs: SandboxTestDirs;
  let runtime: OciRuntime;
  let name: string;
  const savedDockerHost = process.env.DOCKER_HOST;

  before(async function () {
    this.timeout(30 * 60_000);
    const env = dockerPrereqs();
    dirs = makeSandboxTestDirs('checks-docker');
    runtime = new OciRuntime({ engine: 'docker', env });
    name = uniqueLoopName('checks');
    await runtime.create({ name, worktreeDir: dirs.worktreeDir, gitCommonDir: dirs.gitCommonDir, network: false, limits: SMALL_LIMITS, image: TEST_IMAGE });
  });
  after(async () => {
    await runtime?.remove(name).catch(() => undefined);
    dirs?.cleanup();
    if (savedDockerHost === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = savedDockerHost;
  });

  it('passes and fails like on the host, and kills a hanging check with its disowned and setsid\'d children at the timeout', async () => {
    const exec = sandboxCheckExecutor(runtime, name);
    const passed = await runCheck(commandCheck('echo one; cat README.md'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([passed.status, passed.exitCode], ['passed', 0]);
    assert.match(passed.outputTail, /needle-in-readme/);
    const failed = await runCheck(commandCheck('echo bad >&2; exit 3'), { cwd: dirs.worktreeDir, exec });
    assert.deepEqual([failed.status, failed.exitCode], ['failed', 3]);
    const result = await runCheck(commandCheck('sleep 987661 & disown\nsetsid sleep 987662 &\necho started\nsleep 987663'), {
      cwd: dirs.worktreeDir,
      exec,
      timeoutMs: 3_000,
    });
    assert.equal(result.status, 'timed-out');
    const deadline = Date.now() + 15_000;
    let left: number[] = [];
    do {
      left = [...(await processesRunning('sleep 987661')), ...(await processesRunning('sleep 987662')), ...(await processesRunning('sleep 987663'))];
      if (left.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    } while (Date.now() < deadline);
    assert.deepEqual(left, [], 'processes of the timed-out check still run in the container');
  });
});
