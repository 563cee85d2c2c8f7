/**
 * The behaviour every sandbox driver must show, run against a real engine (docker,
 * bwrap): confinement of writes, network on/off, memory and process limits, lifecycle,
 * removal out of band, and the state mapping. Each driver's test file calls
 * `describeSandboxDriver` with how to reach its engine.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SandboxManager, type LoopSandboxRequest } from '../../src/core/sandbox/manager';
import { prepareOpencodeSandbox } from '../../src/core/sandbox/shell-shim';
import { SandboxError, type SandboxRuntime } from '../../src/core/sandbox/types';
import { makeSandboxTestDirs, REPO_ROOT, SMALL_LIMITS, startHostListener, uniqueLoopName, type SandboxTestDirs } from './sandbox-fixtures';

export interface DriverUnderTest {
  driver: 'docker' | 'podman' | 'bwrap';
  /** Installs/starts prerequisites; returns the environment engine CLIs need. */
  prereqs(): NodeJS.ProcessEnv;
  runtime(dirs: SandboxTestDirs, env: NodeJS.ProcessEnv): SandboxRuntime;
  /** A runtime of the same driver whose engine cannot be reached or read. */
  brokenRuntime(dirs: SandboxTestDirs, env: NodeJS.ProcessEnv): SandboxRuntime;
  /** Removes a sandbox behind Forge's back (as a user or another tool would). */
  removeOutOfBand(name: string, dirs: SandboxTestDirs, env: NodeJS.ProcessEnv): void | Promise<void>;
  /** Makes the state of an existing sandbox unreadable without removing it; returns an undo. */
  breakStateOf?(name: string, dirs: SandboxTestDirs): () => void;
  image?: string;
  /** False when the engine cannot change every limit of a live sandbox (then it is recreated). */
  resizesInPlace?: boolean;
}

async function expectSandboxError(p: Promise<unknown>, code: SandboxError['code'] | SandboxError['code'][], message?: RegExp): Promise<SandboxError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof SandboxError, `expected a SandboxError, got ${String(e)}`);
    const codes = Array.isArray(code) ? code : [code];
    assert.ok(codes.includes(e.code), `expected code ${codes.join('|')}, got ${e.code}: ${e.message}`);
    if (message) assert.match(e.message, message);
    return e;
  }
  assert.fail('expected the operation to be refused');
}

export function describeSandboxDriver(d: DriverUnderTest): void {
  describe(`sandbox driver: ${d.driver} (real engine)`, function () {
    this.timeout(300_000);
    let env: NodeJS.ProcessEnv;
    let dirs: SandboxTestDirs;
    let runtime: SandboxRuntime;
    let manager: SandboxManager;
    let prefix: string;
    const running = new Set<string>();

    before(function () {
      this.timeout(20 * 60_000);
      env = d.prereqs();
    });

    beforeEach(() => {
      dirs = makeSandboxTestDirs(d.driver);
      runtime = d.runtime(dirs, env);
      prefix = `ft${process.pid}${d.driver[0]}-`;
      running.clear();
      manager = new SandboxManager({ runtime, prefix, isLoopRunning: (loop) => running.has(loop) });
    });

    afterEach(async () => {
      for (const name of await runtime.listByPrefix(prefix).catch(() => [] as string[])) {
        await runtime.remove(name).catch(() => undefined);
      }
      dirs.cleanup();
    });

    const request = (loopName: string, extra: Partial<LoopSandboxRequest> = {}): LoopSandboxRequest => ({
      loopName,
      worktreeDir: dirs.worktreeDir,
      gitCommonDir: dirs.gitCommonDir,
      network: false,
      limits: SMALL_LIMITS,
      ...(d.image ? { image: d.image } : {}),
      ...extra,
    });

    it('lands worktree writes on the host as the invoking user; /etc, $HOME and paths beside the worktree stay untouched', async () => {
      const h = await manager.start(request(uniqueLoopName('fs')));
      const inWorktree = path.join(dirs.worktreeDir, 'from-sandbox.txt');
      const r = await runtime.exec(h.name, `echo written-inside > ${inWorktree} && mkdir -p sub && echo nested > sub/n.txt`);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(readFileSync(inWorktree, 'utf8'), 'written-inside\n');
      assert.equal(readFileSync(path.join(dirs.worktreeDir, 'sub', 'n.txt'), 'utf8'), 'nested\n');
      assert.equal(statSync(inWorktree).uid, process.getuid!(), 'files written inside belong to the invoking user');

      const tag = `forge-sbx-${process.pid}-${Date.now()}`;
      const outside = [
        path.join('/etc', tag),
        path.join(os.homedir(), tag),
        path.join(dirs.siblingDir, tag),
        path.join(path.dirname(dirs.worktreeDir), tag),
        path.join(dirs.gitCommonDir, tag),
      ];
      for (const target of outside) {
        const w = await runtime.exec(h.name, `echo escaped > '${target}'`);
        assert.notEqual(w.exitCode, 0, `writing ${target} must fail inside the sandbox`);
        assert.equal(existsSync(target), false, `${target} must not appear on the host`);
      }
    });

    it('lets git read the worktree (status, diff, log) through the read-only main .git, and refuses commits', async () => {
      const h = await manager.start(request(uniqueLoopName('git')));
      const r = await runtime.exec(
        h.name,
        'echo change >> README.md && git status --porcelain && git diff --stat && git log --oneline -1',
      );
      assert.equal(r.exitCode, 0, r.stderr);
      assert.match(r.stdout, /M README\.md/);
      assert.match(r.stdout, /1 file changed/);
      assert.match(r.stdout, /initial/);
      const c = await runtime.exec(h.name, 'git -c user.name=a -c user.email=a@b commit -qam inside');
      assert.notEqual(c.exitCode, 0, 'commits are Forge\'s job on the host');
    });

    it('blocks the host loopback with network off and reaches it with network on', async () => {
      const listener = await startHostListener();
      try {
        const probe = `exec 3<>/dev/tcp/127.0.0.1/${listener.port} && head -c 4 <&3`;
        const off = await manager.start(request(uniqueLoopName('netoff'), { network: false }));
        const r1 = await runtime.exec(off.name, probe, { timeoutMs: 60_000 });
        assert.notEqual(r1.exitCode, 0, 'connection must fail with network off');
        assert.equal(listener.connections(), 0);

        const on = await manager.start(request(uniqueLoopName('neton'), { network: true }));
        const r2 = await runtime.exec(on.name, probe, { timeoutMs: 60_000 });
        assert.equal(r2.exitCode, 0, r2.stderr);
        assert.equal(r2.stdout, 'pong');
        assert.equal(listener.connections(), 1);
      } finally {
        await listener.close();
      }
    });

    it('kills a command over the memory limit and says so', async () => {
      const ownOomBefore = existsSync(path.join(process.cwd(), 'oom'));
      const h = await manager.start(request(uniqueLoopName('mem'), { limits: { ...SMALL_LIMITS, memoryMb: 64 } }));
      const r = await runtime.exec(h.name, 'head -c 400M /dev/zero | tail > /dev/null; exit ${PIPESTATUS[1]}', { timeoutMs: 120_000 });
      assert.equal(r.exitCode, 137, `expected SIGKILL's 137, got ${r.exitCode}: ${r.stderr}`);
      assert.equal(r.killed, 'memory-limit');
      assert.match(r.note ?? '', /memory limit \(64 MiB\)/);
      const after = await runtime.exec(h.name, 'echo still-usable');
      assert.equal(after.stdout, 'still-usable\n');
      // Through the shell shim, from the worktree, as opencode runs commands: the kill leaves
      // nothing behind in the worktree (podman's conmon drops an `oom` marker file into its
      // working folder), nor in Forge's own working folder.
      const oc = await prepareOpencodeSandbox(h, { shimRoot: dirs.shimRoot });
      const viaShim = spawnSync(oc.shellShimPath, ['-c', 'head -c 400M /dev/zero | tail > /dev/null'], { cwd: dirs.worktreeDir, encoding: 'utf8' });
      assert.notEqual(viaShim.status, 0, 'the shim reports the kill');
      assert.deepEqual(readdirSync(dirs.worktreeDir).filter((f) => f === 'oom'), [], 'no oom file in the worktree');
      if (!ownOomBefore) assert.equal(existsSync(path.join(process.cwd(), 'oom')), false, "no oom file in Forge's working folder");
    });

    it('contains a fork bomb with the process limit', async () => {
      const h = await manager.start(request(uniqueLoopName('fork'), { limits: { ...SMALL_LIMITS, pids: 48 } }));
      // Refused forks make bash give up after its retries, or the time-out ends the bomb
      // with everything it spawned; either way the limit held it.
      const r = await runtime.exec(h.name, 'bomb() { bomb | bomb & }; bomb; sleep 4', { timeoutMs: 15_000 });
      assert.match(r.stderr, /fork: (retry: )?Resource temporarily unavailable/i, 'forks were refused by the process limit');
      // The host is unaffected and the sandbox is usable again once the bomb is gone.
      assert.equal(spawnSync('true').status, 0);
      let alive = await runtime.exec(h.name, 'echo alive', { timeoutMs: 30_000 }).catch((e: Error) => ({ stdout: e.message }));
      for (let i = 0; i < 10 && alive.stdout !== 'alive\n'; i++) {
        await new Promise((res) => setTimeout(res, 1000));
        alive = await runtime.exec(h.name, 'echo alive', { timeoutMs: 30_000 }).catch((e: Error) => ({ stdout: e.message }));
      }
      assert.equal(alive.stdout, 'alive\n');
      // Killed bomb processes may take a moment to be reaped by the sandbox's init.
      const bashes = async () => (await runtime.exec(h.name, 'grep -l "^bash$" /proc/[0-9]*/comm 2>/dev/null | wc -l; grep -h "^State" /proc/[0-9]*/status | sort | uniq -c')).stdout;
      let seen = await bashes();
      for (let i = 0; i < 20 && !seen.startsWith('1\n'); i++) {
        await new Promise((res) => setTimeout(res, 500));
        seen = await bashes();
      }
      assert.ok(seen.startsWith('1\n'), `only the checking shell may be left, found: ${seen}`);
    });

    it('reuses one sandbox across commands, is gone after stop, and never runs a command once removed', async () => {
      const loop = uniqueLoopName('life');
      running.add(loop);
      const h = await manager.start(request(loop));
      const again = await manager.ensureRunning(request(loop));
      assert.equal(again.name, h.name);
      const before = await runtime.readSettings(h.name);
      for (let i = 0; i < 3; i++) {
        const r = await runtime.exec(h.name, `echo ${i} >> calls.txt`);
        assert.equal(r.exitCode, 0, r.stderr);
      }
      assert.equal(readFileSync(path.join(dirs.worktreeDir, 'calls.txt'), 'utf8'), '0\n1\n2\n');
      assert.deepEqual(await runtime.listByPrefix(prefix), [h.name], 'exactly one sandbox for the loop');
      assert.deepEqual(await runtime.readSettings(h.name), before);
      assert.equal(await manager.isLive(loop), true);

      await manager.stop(loop);
      running.delete(loop);
      assert.equal(await runtime.state(h.name), 'missing');
      assert.equal(await manager.isLive(loop), false);
      assert.deepEqual(await runtime.listByPrefix(prefix), []);
      await expectSandboxError(runtime.exec(h.name, `touch ${dirs.worktreeDir}/after-stop`), 'not-usable', /never runs on the host/);
      assert.equal(existsSync(path.join(dirs.worktreeDir, 'after-stop')), false);
    });

    it('removes the orphan of a killed Forge process at the next cleanup, but never a running loop\'s sandbox', async () => {
      const orphanLoop = uniqueLoopName('orphan');
      const liveLoop = uniqueLoopName('live');
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'test', 'support', 'sandbox-orphan-child.ts')], {
        cwd: REPO_ROOT,
        env: {
          ...env,
          FORGE_ORPHAN_CHILD: JSON.stringify({ driver: d.driver, stateDir: dirs.stateDir, prefix, request: request(orphanLoop) }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (b: Buffer) => b.toString().includes('READY') && resolve());
        child.on('exit', (code) => reject(new Error(`orphan child exited early (${code}): ${stderr}`)));
      });
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const orphanName = manager.sandboxName(orphanLoop);
      assert.equal(await runtime.state(orphanName), 'running', 'the killed process left its sandbox behind');

      running.add(liveLoop);
      const live = await manager.start(request(liveLoop));
      const removed = await manager.cleanupOrphans();
      assert.deepEqual(removed, [orphanName]);
      assert.equal(await runtime.state(orphanName), 'missing');
      assert.equal(await runtime.state(live.name), 'running');
    });

    it('fails a command clearly, never on the host, when the sandbox was removed out of band (exec and shell shim)', async () => {
      const loop = uniqueLoopName('oob');
      const h = await manager.start(request(loop));
      const oc = await prepareOpencodeSandbox(h, { shimRoot: dirs.shimRoot });
      const ok = spawnSync(oc.shellShimPath, ['-c', 'echo via-shim > shim-ok.txt'], { cwd: dirs.worktreeDir, encoding: 'utf8' });
      assert.equal(ok.status, 0, ok.stderr);
      assert.equal(readFileSync(path.join(dirs.worktreeDir, 'shim-ok.txt'), 'utf8'), 'via-shim\n');

      await d.removeOutOfBand(h.name, dirs, env);
      const marker = path.join(dirs.worktreeDir, 'ran-on-host.txt');
      await expectSandboxError(runtime.exec(h.name, `touch ${marker}`), 'not-usable', /never runs on the host/);
      const viaShim = spawnSync(oc.shellShimPath, ['-c', `touch ${marker}`], { cwd: dirs.worktreeDir, encoding: 'utf8' });
      assert.notEqual(viaShim.status, 0, 'the shim must fail');
      assert.ok(viaShim.stderr.trim().length > 0, 'the shim says why');
      assert.equal(existsSync(marker), false, 'the command must not have run anywhere');
      assert.equal(await manager.isLive(loop), false);
      // ensureRunning brings a fresh sandbox back for the next phase.
      const back = await manager.ensureRunning(request(loop));
      assert.equal((await runtime.exec(back.name, 'echo back')).stdout, 'back\n');
    });

    it('maps states: running, stopped, missing, and unknown when the engine cannot be read (no create, no remove)', async () => {
      const loop = uniqueLoopName('state');
      const name = manager.sandboxName(loop);
      assert.equal(await runtime.state(name), 'missing');
      await manager.start(request(loop));
      assert.equal(await runtime.state(name), 'running');
      await runtime.stop(name);
      assert.equal(await runtime.state(name), 'stopped');
      await expectSandboxError(runtime.exec(name, 'true'), 'not-usable');
      const resumed = await manager.ensureRunning(request(loop));
      assert.equal(resumed.name, name);
      assert.equal(await runtime.state(name), 'running');

      const broken = d.brokenRuntime(dirs, env);
      assert.equal(await broken.state(name), 'unknown');
      const blind = new SandboxManager({ runtime: broken, prefix, isLoopRunning: () => false });
      await expectSandboxError(blind.start(request(uniqueLoopName('never'))), ['state-unknown'], /neither creates nor removes/);
      await expectSandboxError(blind.stop(loop), 'state-unknown');
      await assert.rejects(blind.cleanupOrphans());
      assert.equal(await runtime.state(name), 'running', 'an unknown state never removed the sandbox');

      if (d.breakStateOf) {
        const undo = d.breakStateOf(name, dirs);
        try {
          assert.equal(await runtime.state(name), 'unknown');
          await expectSandboxError(manager.stop(loop), 'state-unknown');
          await expectSandboxError(manager.start(request(loop)), 'state-unknown');
        } finally {
          undo();
        }
        assert.equal(await runtime.state(name), 'running');
      }

      await manager.stop(loop);
      assert.equal(await runtime.state(name), 'missing');
    });

    it('applies changed limits (in place where the engine can) and recreates on a network change', async () => {
      const loop = uniqueLoopName('limits');
      const h = await manager.start(request(loop));
      assert.equal(await manager.applyLimits(request(loop)), 'unchanged');
      const bigger = { cpus: 1.5, memoryMb: 384, pids: 200 };
      assert.equal(await manager.applyLimits(request(loop, { limits: bigger })), d.resizesInPlace === false ? 'recreated' : 'resized');
      assert.deepEqual((await runtime.readSettings(h.name))?.limits, bigger);
      assert.equal(await manager.applyLimits(request(loop, { limits: bigger, network: true })), 'recreated');
      assert.equal((await runtime.readSettings(h.name))?.network, true);
      assert.equal((await runtime.exec(h.name, 'echo ok')).stdout, 'ok\n');
    });
  });
}
