import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { SandboxManager } from '../../../src/core/sandbox/manager';
import { SandboxError } from '../../../src/core/sandbox/types';
import { prepareOpencodeSandbox } from '../../../src/core/sandbox/shell-shim';
import { describeSandboxDriver } from '../../support/sandbox-contract';
import { bwrapPrereqs, makeSandboxTestDirs, SMALL_LIMITS } from '../../support/sandbox-fixtures';

describeSandboxDriver({
  driver: 'bwrap',
  prereqs: () => {
    bwrapPrereqs();
    return process.env;
  },
  runtime: (dirs) => new BwrapRuntime({ stateDir: dirs.stateDir }),
  brokenRuntime: (dirs) => {
    // The state store cannot be read: its folder is a regular file.
    const blocker = path.join(dirs.base, 'state-is-a-file');
    writeFileSync(blocker, 'not a folder');
    return new BwrapRuntime({ stateDir: path.join(blocker, 'sandboxes') });
  },
  removeOutOfBand: async (name, dirs) => {
    rmSync(path.join(dirs.stateDir, `${name}.json`));
    // Drop its cgroup too, as a reboot would. Through remove(), which waits out EBUSY: a
    // command that just ended can keep the cgroup busy for a moment (seen once in CI).
    await new SandboxCgroups().remove(name);
  },
  breakStateOf: (name, dirs) => {
    const record = path.join(dirs.stateDir, `${name}.json`);
    renameSync(record, `${record}.aside`);
    mkdirSync(record);
    return () => {
      rmdirSync(record);
      renameSync(`${record}.aside`, record);
    };
  },
});

describe('sandbox driver: bwrap without a usable cgroup', function () {
  this.timeout(120_000);
  before(() => bwrapPrereqs());

  it('still confines commands and warns clearly that the limits are not enforced', async () => {
    const dirs = makeSandboxTestDirs('bwrap-nocg');
    try {
      // A host where Forge may not create cgroups looks like this: no cgroup file system to write.
      const runtime = new BwrapRuntime({ stateDir: dirs.stateDir, cgroups: new SandboxCgroups({ root: path.join(dirs.base, 'no-cgroupfs') }) });
      const warnings: string[] = [];
      const manager = new SandboxManager({ runtime, prefix: `ft${process.pid}nocg-`, isLoopRunning: () => false, onWarning: (w) => warnings.push(w) });
      const h = await manager.start({ loopName: 'x', worktreeDir: dirs.worktreeDir, network: false, limits: SMALL_LIMITS });
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /cpu, memory and process limits: no cgroup file system .*The loop runs without that limit/);
      assert.deepEqual((await runtime.readSettings(h.name))?.unenforcedLimits.length, 1);
      const r = await runtime.exec(h.name, 'echo ok > inside.txt; echo x > /etc/forge-nocg-x');
      assert.notEqual(r.exitCode, 0);
      assert.equal(readFileSync(path.join(dirs.worktreeDir, 'inside.txt'), 'utf8'), 'ok\n');
      await manager.stop('x');
      assert.equal(await runtime.state(h.name), 'missing');
    } finally {
      dirs.cleanup();
    }
  });
});

describe('sandbox driver: bwrap start failure', () => {
  before(() => bwrapPrereqs());

  it('fails loop start with a clear error and leaves nothing behind when the worktree is missing', async () => {
    const dirs = makeSandboxTestDirs('bwrap-nowt');
    try {
      const runtime = new BwrapRuntime({ stateDir: dirs.stateDir });
      const manager = new SandboxManager({ runtime, prefix: `ft${process.pid}nw-`, isLoopRunning: () => false });
      const missing = path.join(dirs.base, 'gone');
      await assert.rejects(manager.start({ loopName: 'x', worktreeDir: missing, network: false, limits: SMALL_LIMITS }), (e: unknown) => {
        assert.ok(e instanceof SandboxError);
        assert.match(e.message, new RegExp(`Could not create the sandbox of loop "x" \\(bwrap\\): The worktree ${missing} does not exist`));
        return true;
      });
      assert.equal(await runtime.state(manager.sandboxName('x')), 'missing');
      assert.deepEqual(await runtime.listByPrefix(''), []);
    } finally {
      dirs.cleanup();
    }
  });
});

describe('sandbox driver: bwrap shell shim keeps the host environment out of the sandbox', function () {
  this.timeout(120_000);
  before(() => bwrapPrereqs());

  it('no variable of the shim\'s caller (opencode: its password, Forge\'s tool secret) is in any process the sandbox can see', async () => {
    const dirs = makeSandboxTestDirs('bwrap-env');
    const runtime = new BwrapRuntime({ stateDir: dirs.stateDir });
    const manager = new SandboxManager({ runtime, prefix: `ft${process.pid}env-`, isLoopRunning: () => false });
    try {
      const handle = await manager.start({ loopName: 'x', worktreeDir: dirs.worktreeDir, network: false, limits: SMALL_LIMITS });
      const shims = await prepareOpencodeSandbox(handle, { shimRoot: dirs.shimRoot });
      const secret = `pw-${process.pid}-${Date.now()}`;
      const r = spawnSync(shims.shellShimPath, ['-c', "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\"; done; echo pids=$(ls -d /proc/[0-9]* | wc -l)"], {
        cwd: dirs.worktreeDir,
        encoding: 'utf8',
        env: { PATH: process.env.PATH!, OPENCODE_SERVER_PASSWORD: secret, OPENCODE_CONFIG_CONTENT: `{"Authorization":"Bearer ${secret}"}`, FORGE_CWD_PROBE: secret },
      });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /^pids=[1-9]/m, 'the sandbox sees its own processes');
      assert.ok(!r.stdout.includes(secret), `the caller's secret is visible in the sandbox's /proc:\n${r.stdout}`);
      assert.match(r.stdout, /^FORGE_SANDBOX=1$/m);
    } finally {
      await manager.stop('x').catch(() => undefined);
      rmSync(dirs.base, { recursive: true, force: true });
    }
  });
});

describe('sandbox driver: bwrap joins real cgroups with either strategy', function () {
  this.timeout(120_000);
  before(() => bwrapPrereqs());

  for (const cgroupJoin of ['before-exec', 'overlapped'] as const) {
    it(`${cgroupJoin}: a command's processes are in every limited hierarchy while it runs`, async () => {
      const dirs = makeSandboxTestDirs(`bwrap-cg-${cgroupJoin}`);
      const runtime = new BwrapRuntime({ stateDir: dirs.stateDir, cgroupJoin });
      const name = `ft${process.pid}cg${cgroupJoin === 'overlapped' ? 'o' : 'b'}`;
      try {
        await runtime.create({ name, worktreeDir: dirs.worktreeDir, gitCommonDir: undefined, network: false, limits: SMALL_LIMITS });
        const { procsFiles } = JSON.parse(readFileSync(path.join(dirs.stateDir, `${name}.json`), 'utf8')) as { procsFiles: string[] };
        assert.ok(procsFiles.length > 0, 'this host must let Forge create cgroups (root): the test needs them');
        // The command reports it started, then waits for the host to look at its cgroups.
        const running = runtime.exec(name, 'echo started > started.txt; while [ ! -f go.txt ]; do sleep 0.05; done; echo done', { timeoutMs: 60_000 });
        const started = path.join(dirs.worktreeDir, 'started.txt');
        for (let i = 0; i < 400 && !existsSync(started); i++) await new Promise((r) => setTimeout(r, 50));
        assert.ok(existsSync(started), 'the sandboxed command started');
        for (const file of procsFiles) {
          const pids = readFileSync(file, 'utf8').split('\n').filter(Boolean);
          const commands = pids.map((pid) => {
            try {
              return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
            } catch {
              return '';
            }
          });
          assert.ok(commands.some((c) => c.includes('while [ ! -f go.txt ]')), `${file} holds the command's shell: ${JSON.stringify(commands)}`);
        }
        writeFileSync(path.join(dirs.worktreeDir, 'go.txt'), '');
        const r = await running;
        assert.equal(r.exitCode, 0, r.stderr);
        assert.equal(r.stdout, 'done\n');
      } finally {
        await runtime.remove(name).catch(() => undefined);
        dirs.cleanup();
      }
    });
  }
});
