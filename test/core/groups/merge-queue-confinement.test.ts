/**
 * The merge queue's checks and confinement (merge-queue.ts), over a real database file, a real
 * git repository and Forge's real worktree service: the merged tree's checks run code the agent
 * wrote, so a sandboxed loop's merge gets its checks' executor from the engine's port, and when
 * that port cannot give one (the sandbox cannot start) the merge fails with a message saying so,
 * the integration branch does not move, and nothing runs on the host. The port here is a stand-in
 * (the real one, with real bwrap, is test/core/cli/cli-group-merge-sandbox.test.ts).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CheckSpec } from '../../../src/core/checks';
import { createMergeQueue, type MergeCheckExecutorPort } from '../../../src/core/groups/merge-queue';
import type { LoopRuntime } from '../../../src/core/loop/runtime-types';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { createForgeRepositories, type ForgeRepositories } from '../../../src/core/storage/repositories';
import { createWorktreeService } from '../../../src/core/workspace';
import { integrationBranchOf } from '../../../src/core/workspace/merge-integration';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

const P = 'project-1';
const log = { info() {}, warn() {}, error() {}, debug() {} };

describe('groups: the merge queue runs the merged tree’s checks confined (real git, real database, stand-in sandbox port)', function () {
  this.timeout(120_000);
  let data: TempDataDir;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;
  let repo: TestRepository;
  let marker: string;

  beforeEach(async () => {
    data = makeTempDataDir('forge-merge-confine-');
    db = await openForgeDatabase({ path: data.dbPath });
    repos = createForgeRepositories(db);
    repo = await createTestRepository({ 'README.md': '# r\n' });
    // Outside the repository and the data folder: what a hostile check would write on the host.
    marker = join(tmpdir(), `forge-merge-escaped-${randomBytes(6).toString('hex')}`);
  });
  afterEach(async () => {
    await db.close();
    await repo.cleanup();
    rmSync(marker, { force: true });
    data.cleanup();
  });

  /**
   * A group whose feature `one` completed and is queued to merge (its loop branch has one commit;
   * its check writes `marker`); with `mergedBefore`, a feature `two` merged already, whose loop ran sandboxed.
   */
  async function setUp(sandbox: boolean, mergedBefore = false) {
    const base = (await repo.git('rev-parse', 'HEAD')).trim();
    await repo.git('branch', integrationBranchOf('g'), base);
    await repo.git('checkout', '-q', '-b', 'forge/g-one');
    await repo.git('commit', '-q', '--allow-empty', '-m', 'work');
    await repo.git('checkout', '-q', 'main');
    const check: CheckSpec = { id: 'plan-1', label: 'check 1: hostile', scope: { kind: 'plan' }, number: 1, key: 'command:hostile', origin: 'line 1 of the Verification part', kind: 'command', command: `echo escaped > ${marker}` };
    repos.loops.create(P, {
      name: 'g-one',
      kind: 'plan',
      status: 'completed',
      branch: 'forge/g-one',
      repoDir: repo.dir,
      worktreeDir: join(data.dir, 'worktrees', 'g-one'),
      sandbox,
      state: { gitCommonDir: join(repo.dir, '.git'), checks: [check] },
    });
    repos.featureGroups.create(P, {
      id: 'g',
      title: 'G',
      status: 'running',
      source: 'PRD.md',
      repoDir: repo.dir,
      maxConcurrent: 2,
      features: [
        { id: 'one', title: 'one', dependsOn: [], plan: '# one', planPath: join(repo.dir, 'one.md'), status: 'completed', loopName: 'g-one', error: null },
        ...(mergedBefore ? [{ id: 'two', title: 'two', dependsOn: [], plan: '# two', planPath: join(repo.dir, 'two.md'), status: 'completed' as const, loopName: 'g-two', error: null }] : []),
      ],
    });
    if (mergedBefore) {
      repos.loops.create(P, { name: 'g-two', kind: 'plan', status: 'completed', branch: 'forge/g-two', repoDir: repo.dir, sandbox: true, state: { gitCommonDir: join(repo.dir, '.git'), checks: [{ ...check, command: 'true' }] } });
      repos.featureGroups.updateFeature(P, 'g', 'two', { merge: { state: 'merged', message: null, commit: base, reopened: 0, at: Date.now(), awaitingReopen: false } });
    }
    return repos.featureGroups.updateFeature(P, 'g', 'one', { merge: { state: 'queued', message: null, commit: null, reopened: 0, at: Date.now(), awaitingReopen: false } });
  }

  function queue(port: MergeCheckExecutorPort | undefined) {
    const worktrees = createWorktreeService({ dataDir: data.dir, log: log as never });
    return createMergeQueue({
      repos,
      runtime: {} as LoopRuntime,
      worktrees,
      emit: () => undefined,
      log,
      ...(port ? { mergeCheckExecutor: port } : {}),
    });
  }

  it('a sandboxed loop whose merge sandbox cannot start: the merge fails saying so, the integration branch stays, nothing ran on the host', async () => {
    const g = await setUp(true);
    const before = (await repo.git('rev-parse', integrationBranchOf('g'))).trim();
    const asked: string[] = [];
    const after = await queue(async (loop, dir) => {
      asked.push(`${loop.name} ${dir}`);
      throw new Error('bwrap: setting up uid map: Permission denied');
    }).step(g);
    assert.equal(asked.length, 1, 'the port was asked once');
    assert.match(asked[0]!, new RegExp(`^g-one ${join(data.dir, 'worktrees')}/\\.merge-g-one-integration-[0-9a-f]+$`), 'for the scratch merge worktree under <dataDir>/worktrees/');
    const f = after.features[0]!;
    assert.equal(f.status, 'failed', JSON.stringify(f));
    assert.equal(f.merge?.state, 'queued');
    assert.match(f.merge?.message ?? '', /^Forge could not start the sandbox for the checks of the merged tree \(bwrap: setting up uid map: Permission denied\)\. The checks did not run, not on the host either; forge\/group\/g was not moved/);
    assert.match(f.error ?? '', /^Its merge failed: Forge could not start the sandbox/);
    assert.equal(existsSync(marker), false, 'the hostile check did not run on the host');
    assert.equal((await repo.git('rev-parse', integrationBranchOf('g'))).trim(), before, 'the integration branch did not move');
  });

  it('a sandboxed loop and no sandbox port at all: the merge fails, nothing ran on the host', async () => {
    const g = await setUp(true);
    const after = await queue(undefined).step(g);
    const f = after.features[0]!;
    assert.equal(f.status, 'failed', JSON.stringify(f));
    assert.match(f.merge?.message ?? '', /could not start the sandbox .*loop g-one runs sandboxed, and this Forge has no sandbox for the merge queue's checks/);
    assert.equal(existsSync(marker), false);
  });

  it('the port’s executor runs the checks and is released after them; an unconfined loop gets the host from the port', async () => {
    const g = await setUp(false);
    const calls: string[] = [];
    const after = await queue(async (loop) => {
      calls.push(`acquire ${loop.name} sandbox=${loop.sandbox}`);
      return {
        where: 'in a stand-in',
        exec: async (req) => {
          calls.push(`exec ${req.command}`);
          return { exitCode: 0, signal: null, timedOut: false, outputTail: '', outputBytes: 0, outputTruncated: false };
        },
        release: async () => {
          calls.push('release');
        },
      };
    }).step(g);
    assert.deepEqual(calls, ['acquire g-one sandbox=false', `exec echo escaped > ${marker}`, 'release']);
    const f = after.features[0]!;
    assert.equal(f.merge?.state, 'merged', JSON.stringify(f));
    assert.match(f.merge?.message ?? '', /its checks passed on the merged tree\. They ran in a stand-in\.$/);
    assert.equal(existsSync(marker), false, 'the stand-in ran nothing');
  });

  it('an unconfined loop merging into a tree that holds a sandboxed loop’s work: the checks get that loop’s confinement', async () => {
    const g = await setUp(false, true);
    const asked: Array<{ name: string; sandbox: boolean }> = [];
    const commands: string[] = [];
    const after = await queue(async (loop) => {
      asked.push({ name: loop.name, sandbox: loop.sandbox });
      return {
        where: 'in a stand-in sandbox',
        exec: async (req) => {
          commands.push(req.command);
          return { exitCode: 0, signal: null, timedOut: false, outputTail: '', outputBytes: 0, outputTruncated: false };
        },
        release: async () => undefined,
      };
    }).step(g);
    assert.deepEqual(asked, [{ name: 'g-two', sandbox: true }]);
    assert.deepEqual(commands, [`echo escaped > ${marker}`, 'true'], 'both features’ checks, through the sandboxed loop’s executor');
    assert.equal(after.features[0]!.merge?.state, 'merged');
    assert.equal(existsSync(marker), false);
  });
});
