/**
 * The bwrap driver's launch ahead (issue 30): after each command through the exec API the next
 * bwrap is started and set up while nothing waits, and the next command is handed to it on stdin.
 * Real bwrap and cgroups: the command sees what a fresh launch gives it, a stale or stopped launch
 * never runs a command, and nothing of it outlives the sandbox or the process that started it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import type { SandboxSpec } from '../../../src/core/sandbox/types';
import { processesWorkingIn } from '../../support/processes';
import { bwrapPrereqs, makeSandboxTestDirs, REPO_ROOT, SMALL_LIMITS, type SandboxTestDirs } from '../../support/sandbox-fixtures';

async function eventually(what: string, check: () => Promise<boolean>, withinMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > withinMs) assert.fail(`${what} (not within ${withinMs} ms)`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Pids of the sandbox processes waiting in the worktree (the launch started ahead: its reader shell). */
async function waitingIn(dir: string): Promise<number[]> {
  return (await processesWorkingIn(dir)).map((p) => p.pid);
}

describe('bwrap: the next launch is started ahead of its command (real bwrap)', function () {
  this.timeout(120_000);
  let dirs: SandboxTestDirs;
  let spec: SandboxSpec;
  before(() => bwrapPrereqs());
  beforeEach(() => {
    dirs = makeSandboxTestDirs('bwrap-ahead');
    mkdirSync(path.join(dirs.worktreeDir, 'sub'));
    spec = { name: `forge-ahead-${process.pid}`, worktreeDir: dirs.worktreeDir, network: false, limits: SMALL_LIMITS };
  });
  afterEach(() => rmSync(dirs.base, { recursive: true, force: true }));

  it('gives a command the same folder, input, environment and exit status as a fresh launch, and one launch waits between commands', async () => {
    const runtime = new BwrapRuntime({ stateDir: dirs.stateDir });
    await runtime.create(spec);
    try {
      const probe = 'pwd; cat; echo "[${forge_cwd-}${forge_command-}${FORGE_COMMAND-}${FORGE_CWD-}]"; exit 7';
      const first = await runtime.exec(spec.name, probe, { cwd: path.join(dirs.worktreeDir, 'sub'), stdin: 'one\ntwo' });
      await eventually('a launch waits in the sandbox after the first command', async () => (await waitingIn(dirs.worktreeDir)).length > 0);
      const waiting = await waitingIn(dirs.worktreeDir);
      const second = await runtime.exec(spec.name, probe, { cwd: path.join(dirs.worktreeDir, 'sub'), stdin: 'one\ntwo' });
      for (const r of [first, second]) {
        assert.equal(r.exitCode, 7, r.stderr);
        assert.equal(r.stdout, `${path.join(dirs.worktreeDir, 'sub')}\none\ntwo[]\n`, 'folder, input and no launcher variable');
      }
      assert.ok(!(await waitingIn(dirs.worktreeDir)).some((pid) => waiting.includes(pid)), 'the waiting launch ran the second command (and a new one waits)');
      // A command without input reads end-of-file at once, as with a fresh launch.
      assert.equal((await runtime.exec(spec.name, 'cat; echo done')).stdout, 'done\n');
      // With extra environment a fresh launch runs it (the waiting one has the sandbox's only).
      assert.equal((await runtime.exec(spec.name, 'echo "$EXTRA"', { env: { EXTRA: 'given' } })).stdout, 'given\n');
      // Writes land in the worktree, nothing outside: the waiting launch is the same sandbox.
      const outside = await runtime.exec(spec.name, `echo in > inside.txt; echo out > ${JSON.stringify(path.join(dirs.base, 'outside.txt'))}`);
      assert.notEqual(outside.exitCode, 0);
      assert.equal(spawnSync('cat', [path.join(dirs.worktreeDir, 'inside.txt')], { encoding: 'utf8' }).stdout, 'in\n');
      assert.equal(spawnSync('test', ['-e', path.join(dirs.base, 'outside.txt')]).status, 1);
    } finally {
      await runtime.remove(spec.name);
    }
    await eventually('nothing of the sandbox runs once it is removed', async () => (await waitingIn(dirs.worktreeDir)).length === 0);
  });

  it('kills a timed-out command with its launch, ends a stale launch when the record changes, and starts none when turned off', async () => {
    const runtime = new BwrapRuntime({ stateDir: dirs.stateDir });
    await runtime.create(spec);
    try {
      await runtime.exec(spec.name, 'true');
      const timed = await runtime.exec(spec.name, 'sleep 30', { timeoutMs: 500 });
      assert.equal(timed.timedOut, true);
      assert.equal(timed.killed, 'timeout');
      assert.equal((await runtime.exec(spec.name, 'echo after')).stdout, 'after\n');
      await eventually('a launch waits', async () => (await waitingIn(dirs.worktreeDir)).length > 0);
      const stale = await waitingIn(dirs.worktreeDir);
      await runtime.updateLimits(spec.name, { ...SMALL_LIMITS, pids: 100 });
      assert.equal((await runtime.exec(spec.name, 'echo new')).stdout, 'new\n');
      await eventually('the launch from the old record is gone', async () => !(await waitingIn(dirs.worktreeDir)).some((pid) => stale.includes(pid)));
      await runtime.stop(spec.name);
      await eventually('a stopped sandbox keeps no launch', async () => (await waitingIn(dirs.worktreeDir)).length === 0);
    } finally {
      await runtime.remove(spec.name);
    }
    const off = new BwrapRuntime({ stateDir: dirs.stateDir, launchAhead: false });
    await off.create(spec);
    try {
      assert.equal((await off.exec(spec.name, 'echo off')).stdout, 'off\n');
      assert.deepEqual(await waitingIn(dirs.worktreeDir), [], 'no launch waits when launching ahead is off');
    } finally {
      await off.remove(spec.name);
    }
  });

  it('lets the process that started it exit, and ends with it', async () => {
    const script = path.join(dirs.base, 'one-command.ts');
    writeFileSync(
      script,
      `import { BwrapRuntime } from ${JSON.stringify(path.join(REPO_ROOT, 'src/core/sandbox/bwrap-driver.ts'))};\n` +
        `const runtime = new BwrapRuntime({ stateDir: ${JSON.stringify(dirs.stateDir)} });\n` +
        `await runtime.create(${JSON.stringify(spec)});\n` +
        `const r = await runtime.exec(${JSON.stringify(spec.name)}, 'echo ran');\n` +
        `process.stdout.write(r.stdout);\n`,
    );
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `the process exits on its own with a launch waiting: ${r.error ?? r.stderr}`);
    assert.equal(r.stdout, 'ran\n');
    await eventually('the waiting launch ended with its process (bwrap --die-with-parent)', async () => (await waitingIn(dirs.worktreeDir)).length === 0);
    await new BwrapRuntime({ stateDir: dirs.stateDir }).remove(spec.name);
  });
});
