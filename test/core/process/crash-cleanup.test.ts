/**
 * Clean-up after a crash, the fast parts: who owns a loop's resources (pure), and the sweep of
 * throw-away merge worktrees against real git (owner records of a live and of a dead process,
 * a folder already gone but still registered). End to end with SIGKILLed `forge` processes:
 * test/core/cli/cli-crash-cleanup.test.ts.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loopOwnedByLiveProcess } from '../../../src/core/crash-cleanup';
import { claimMergeScratch, sweepMergeScratch } from '../../../src/core/workspace/merge-scratch';
import { createGitRunner } from '../../../src/core/workspace/git-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { createEngineSandboxes } from '../../../src/core/engine-sandboxes';
import type { EngineLog } from '../../../src/core/loop/loop-supervisor';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { sandboxPrefixForDataDir } from '../../../src/core/sandbox/manager';
import { writeOwnerRecord } from '../../../src/core/process/owner-records';
import type { LoopRow } from '../../../src/core/storage/repositories';

describe('crash clean-up: loop ownership', () => {
  const now = 1_000_000;
  const alive = (pid: number) => pid === 42;
  const loop = (status: string, supervisorId: string | null, leaseExpiresAt: number | null) => ({ name: 'x', status, supervisorId, leaseExpiresAt });
  it('a running loop is owned while its lease holder runs, even past its lease', () => {
    assert.equal(loopOwnedByLiveProcess(loop('running', '42:cli-a', now - 1), now, alive), true);
    assert.equal(loopOwnedByLiveProcess(loop('starting', '42:cli-a', null), now, alive), true);
  });
  it('a dead lease holder owns nothing, whatever the lease says', () => {
    assert.equal(loopOwnedByLiveProcess(loop('running', '43:cli-a', now + 60_000), now, alive), false);
  });
  it('an ended loop is owned while its last holder runs, lease or not (it may be restarting it); never without a holder', () => {
    assert.equal(loopOwnedByLiveProcess(loop('completed', '42:vscode-a', now + 1), now, alive), true);
    assert.equal(loopOwnedByLiveProcess(loop('cancelled', '42:cli-a', now - 1), now, alive), true);
    assert.equal(loopOwnedByLiveProcess(loop('cancelled', '43:cli-a', now - 1), now, alive), false);
    assert.equal(loopOwnedByLiveProcess(loop('cancelled', null, null), now, alive), false);
  });
  it('a holder id without a pid cannot be checked: owned', () => {
    assert.equal(loopOwnedByLiveProcess(loop('running', 'remote:abc', null), now, alive), true);
  });
  it('this process owns its own loops', () => {
    assert.equal(loopOwnedByLiveProcess(loop('running', `${process.pid}:cli-a`, now - 1), now, () => false), true);
  });
});

describe('crash clean-up: merge worktrees (real git)', () => {
  let repo: TestRepository;
  let dataDir: string;
  let root: string;
  const git = createGitRunner();
  before(async () => {
    repo = await createTestRepository();
    dataDir = realpathSync(await mkdtemp(path.join(os.tmpdir(), 'forge-merge-scratch-')));
    root = path.join(dataDir, 'worktrees');
    mkdirSync(root);
  });
  after(async () => {
    await repo?.cleanup();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** A process that has exited: its pid is provably dead (unless reused, which counts as alive). */
  function deadOwner(file: string): void {
    const r = spawnSync('sh', ['-c', 'echo $$']);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify({ pid: Number(String(r.stdout).trim()), startTime: '1', host: os.hostname(), token: 't', acquiredAt: 0 }));
  }

  it('removes the worktrees of dead owners (registered, or registered with the folder gone) and keeps a live owner\'s', async () => {
    const owners = path.join(path.dirname(root), 'owners', 'merge-worktrees');
    const mine = path.join(root, '.merge-a-live');
    const dead = path.join(root, '.merge-b-dead');
    const gone = path.join(root, '.merge-c-gone');
    // The gate's clean checkout of a killed process's loop (delivered-work.ts) is swept alike.
    const gate = path.join(root, '.gate-e-dead');
    await claimMergeScratch(root, mine);
    deadOwner(path.join(owners, '.merge-b-dead.json'));
    deadOwner(path.join(owners, '.merge-c-gone.json'));
    deadOwner(path.join(owners, '.gate-e-dead.json'));
    for (const d of [mine, dead, gone, gate]) await repo.git('worktree', 'add', '--detach', d, 'HEAD');
    await rm(gone, { recursive: true, force: true });

    const removed = await sweepMergeScratch(git, root, [repo.dir]);
    assert.deepEqual(removed.sort(), [`gate checkout ${gate} (registered in ${repo.dir})`, `merge worktree ${dead} (registered in ${repo.dir})`, `merge worktree ${gone} (registered in ${repo.dir})`]);
    const list = await repo.git('worktree', 'list', '--porcelain');
    assert.match(list, /\.merge-a-live/);
    assert.doesNotMatch(list, /\.merge-b-dead|\.merge-c-gone|\.gate-e-dead/);
    assert.equal(existsSync(gate), false);
    assert.equal(existsSync(dead), false);
    assert.equal(existsSync(mine), true);
    assert.equal(existsSync(path.join(owners, '.merge-b-dead.json')), false);
    assert.equal(existsSync(path.join(owners, '.merge-a-live.json')), true);
    // Nothing more to remove the second time.
    assert.deepEqual(await sweepMergeScratch(git, root, [repo.dir]), []);
  });

  it('unregisters a dead owner\'s worktree of a repository it was not told about, through its .git file', async () => {
    const orphan = path.join(root, '.merge-d-unknown');
    deadOwner(path.join(path.dirname(root), 'owners', 'merge-worktrees', '.merge-d-unknown.json'));
    await repo.git('worktree', 'add', '--detach', orphan, 'HEAD');
    const removed = await sweepMergeScratch(git, root, []);
    assert.deepEqual(removed, [`merge worktree ${orphan} (registered in ${realpathSync(path.join(repo.dir, '.git'))})`]);
    assert.doesNotMatch(await repo.git('worktree', 'list', '--porcelain'), /\.merge-d-unknown/);
    assert.equal(existsSync(orphan), false);
  });
});

describe('crash clean-up: a live process\'s sandbox records outrank a stale loop row (real cgroups)', function () {
  this.timeout(30_000);
  let dataDir: string;
  let cgroups: SandboxCgroups;
  let sandboxes: ReturnType<typeof createEngineSandboxes>;
  let available = true;
  const log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as EngineLog;
  before(async function () {
    dataDir = realpathSync(await mkdtemp(path.join(os.tmpdir(), 'forge-owned-')));
    cgroups = new SandboxCgroups();
    const probe = await cgroups.track(`forge-test-probe-${process.pid}`);
    if ('reason' in probe) {
      if (process.env.CI === 'true') throw new Error(`this CI host gives Forge no process cgroup: ${probe.reason}`);
      available = false;
      return this.skip();
    }
    await cgroups.remove(`forge-test-probe-${process.pid}`);
    sandboxes = createEngineSandboxes({
      dataDir,
      log,
      baseEnv: () => process.env,
      settings: () => ({}) as never,
      db: { query: () => [] },
      repos: {} as never,
    });
  });
  after(async () => {
    if (!available) return;
    const prefix = sandboxPrefixForDataDir(dataDir);
    for (const name of await cgroups.listByPrefix(prefix.slice(0, -1))) await cgroups.remove(name);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps the cgroups a live process recorded although no loop row owns them (a restart after the snapshot), removes them once the record names a dead process', async () => {
    const prefix = sandboxPrefixForDataDir(dataDir);
    // An unconfined loop's process cgroup, made the engine's way (its owner record first).
    await sandboxes.sandboxPort.trackHost!({ name: 'restarted' } as LoopRow);
    const host = `${prefix.slice(0, -1)}h-restarted`;
    // A sandboxed loop's cgroup, recorded as prepare() records it.
    const sandbox = `${prefix}again`;
    await writeOwnerRecord(path.join(dataDir, 'owners', 'sandboxes', `${sandbox}.json`));
    assert.ok('procsFiles' in (await cgroups.track(sandbox)));
    const nobodyOwns = () => false;
    const first = await sandboxes.removeUnowned(nobodyOwns, []);
    assert.deepEqual(first.removed, [], 'a live owner keeps its cgroups');
    assert.deepEqual((await cgroups.listByPrefix(prefix.slice(0, -1))).sort(), [sandbox, host].sort());
    // The owner died (a record naming a pid that does not run): the next start-up removes them.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    for (const name of [sandbox, host]) {
      writeFileSync(path.join(dataDir, 'owners', 'sandboxes', `${name}.json`), JSON.stringify({ pid: Number(dead), startTime: null, host: os.hostname(), token: 'x', acquiredAt: 1 }));
    }
    const second = await sandboxes.removeUnowned(nobodyOwns, []);
    assert.deepEqual(second.removed.filter((r) => r.startsWith('cgroup ')).sort(), [`cgroup ${host} (its processes killed)`, `cgroup ${sandbox} (its processes killed)`].sort(), second.removed.join('\n'));
    assert.deepEqual(await cgroups.listByPrefix(prefix.slice(0, -1)), []);
    assert.equal(existsSync(path.join(dataDir, 'owners', 'sandboxes', `${host}.json`)), false, 'the dead owner\'s records went too');
  });
});
