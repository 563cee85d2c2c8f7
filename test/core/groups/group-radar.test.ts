/**
 * The conflict radar in the feature-group service, over a real database file and real git
 * worktrees; the loop runtime is a stand-in that only emits events (which events come when is
 * made certain here; the CLI test runs real loops). On demand, `radar(ref)` reads the live
 * loops' worktrees (as another process would), and while this process drives the group each loop
 * event re-reads them and `group.overlap` tells when the overlaps changed.
 */
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createFeatureGroupService, type FeatureGroupServiceDeps, type FeatureGroupServiceHandle } from '../../../src/core/groups/feature-group-service';
import type { GroupEvent } from '../../../src/core/groups/group-types';
import type { FileOverlap } from '../../../src/core/groups/overlap';
import type { LoopRuntime, LoopRuntimeEvent, LoopRuntimeListener } from '../../../src/core/loop/runtime-types';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { createForgeRepositories, type ForgeRepositories } from '../../../src/core/storage/repositories';
import { createTestRepository, git, type TestRepository } from '../../support/git-repo';
import { makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

const P = 'project-1';
const ref = { projectId: P, id: 'g' };

function eventsRuntime(): { runtime: LoopRuntime; emit(e: LoopRuntimeEvent): void } {
  const listeners = new Set<LoopRuntimeListener>();
  const runtime = {
    subscribe(l: LoopRuntimeListener) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    isSupervising: () => true,
    async restart() {},
    async start() {
      throw new Error('no loop starts in this test');
    },
  } as unknown as LoopRuntime;
  return { runtime, emit: (e) => [...listeners].forEach((l) => l(e)) };
}

describe('groups: the conflict radar in the service (real database, real git worktrees)', function () {
  this.timeout(120_000);
  let data: TempDataDir;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;
  let repo: TestRepository;
  let base: string;
  const worktrees: Record<string, string> = {};
  const services: FeatureGroupServiceHandle[] = [];

  const service = (runtime: LoopRuntime) => {
    const s = createFeatureGroupService({
      dataDir: data.dir,
      repos,
      runtime,
      settings: () => ({}),
      resolveSplitterModel: async () => null,
      log: { info() {}, warn() {}, error() {}, debug() {} },
    } as unknown as FeatureGroupServiceDeps);
    services.push(s);
    return s;
  };

  beforeEach(async () => {
    data = makeTempDataDir('forge-group-radar-');
    db = await openForgeDatabase({ path: data.dbPath });
    repos = createForgeRepositories(db);
    repo = await createTestRepository({ 'README.md': '# r\n', 'shared.txt': 'base\n' });
    base = (await repo.git('rev-parse', 'HEAD')).trim();
    for (const id of ['a', 'b', 'c', 'd']) {
      worktrees[id] = `${repo.dir}-wt-${id}`;
      await repo.git('worktree', 'add', '-q', '-b', `forge/g-${id}`, worktrees[id]!, base);
    }
    // a and b change shared.txt; c changes only its own file; d changed shared.txt but is done.
    await writeFile(join(worktrees.a!, 'shared.txt'), 'a\n');
    await git(worktrees.a!, 'commit', '-q', '-am', 'a');
    await writeFile(join(worktrees.b!, 'shared.txt'), 'b\n');
    await writeFile(join(worktrees.c!, 'c.txt'), 'c\n');
    await writeFile(join(worktrees.d!, 'shared.txt'), 'd\n');
    const status = { a: 'running', b: 'paused', c: 'running', d: 'completed' } as const;
    repos.featureGroups.create(P, {
      id: 'g',
      title: 'G',
      status: 'paused',
      source: 'PRD.md',
      repoDir: repo.dir,
      maxConcurrent: 4,
      features: (['a', 'b', 'c', 'd'] as const).map((id) => ({ id, title: id, dependsOn: [], plan: `# ${id}`, planPath: `/r/${id}.md`, status: status[id], loopName: `g-${id}`, error: null })),
    });
    for (const id of ['a', 'b', 'c', 'd']) {
      repos.loops.create(P, { name: `g-${id}`, kind: 'plan', status: id === 'd' ? 'completed' : 'running', worktreeDir: worktrees[id]!, baseCommit: base, repoDir: repo.dir });
    }
  });

  afterEach(async () => {
    for (const s of services.splice(0)) s.dispose();
    await db.close();
    data.cleanup();
    await repo.cleanup();
    for (const dir of Object.values(worktrees)) await rm(dir, { recursive: true, force: true });
  });

  const shared: FileOverlap = { file: 'shared.txt', features: ['a', 'b'], loops: ['g-a', 'g-b'] };

  it('radar(ref) on demand: the files two live loops (running or paused) changed; a completed feature and a loop of its own file are not in it; the view keeps the reading', async () => {
    const { runtime } = eventsRuntime();
    const groups = service(runtime);
    const events: GroupEvent[] = [];
    groups.subscribe((e) => events.push(e));
    assert.deepEqual(groups.get(ref)?.overlaps, [], 'nothing read yet');
    assert.deepEqual(await groups.radar(ref), [shared]);
    assert.deepEqual(groups.get(ref)?.overlaps, [shared]);
    assert.deepEqual(groups.list(P)[0]?.overlaps, [shared]);
    assert.deepEqual(events, [{ type: 'group.overlap', group: ref, overlaps: [shared] }]);
    // Read again, unchanged: no new event.
    assert.deepEqual(await groups.radar(ref), [shared]);
    assert.equal(events.length, 1);
    // b's change undone: no overlap, and the event says so.
    await git(worktrees.b!, 'checkout', '--', 'shared.txt');
    assert.deepEqual(await groups.radar(ref), []);
    assert.deepEqual(events.at(-1), { type: 'group.overlap', group: ref, overlaps: [] });
    await assert.rejects(groups.radar({ projectId: P, id: 'nope' }), /No feature group "nope"/);
  });

  it('while this process drives the group, a loop event re-reads the worktrees and group.overlap tells each change', async () => {
    const { runtime, emit } = eventsRuntime();
    const groups = service(runtime);
    const overlaps: FileOverlap[][] = [];
    let waiting: (() => void) | null = null;
    groups.subscribe((e) => {
      if (e.type !== 'group.overlap') return;
      overlaps.push(e.overlaps);
      waiting?.();
    });
    const nextOverlap = (count: number) => new Promise<void>((resolve) => {
      waiting = () => overlaps.length >= count && resolve();
      waiting();
    });
    // The resume restarts the running and paused features: the radar reads when their status is set.
    await groups.resume(ref);
    await nextOverlap(1);
    assert.deepEqual(overlaps[0], [shared]);

    // c writes shared.txt too: its next turn's usage shows it.
    await writeFile(join(worktrees.c!, 'shared.txt'), 'c\n');
    const zero = { inputTokens: 0, outputTokens: 0, reasoningTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, cost: 0 };
    emit({ type: 'loop.usage', loop: { projectId: P, name: 'g-c' }, sessionId: 'ses_c', role: 'code', session: zero, total: zero });
    await nextOverlap(2);
    assert.deepEqual(overlaps[1], [{ file: 'shared.txt', features: ['a', 'b', 'c'], loops: ['g-a', 'g-b', 'g-c'] }]);

    // a completes: it is no longer live, so only b and c overlap.
    repos.loops.update(P, 'g-a', { status: 'completed' });
    emit({ type: 'loop.ended', loop: { projectId: P, name: 'g-a' }, status: 'completed', reason: { kind: 'completed' }, iterations: 1, branch: 'forge/g-a', worktreeDir: worktrees.a!, merge: null } as unknown as LoopRuntimeEvent);
    await nextOverlap(3);
    assert.deepEqual(overlaps[2], [{ file: 'shared.txt', features: ['b', 'c'], loops: ['g-b', 'g-c'] }]);
    assert.deepEqual(groups.get(ref)?.overlaps, overlaps[2]);
    assert.equal(groups.get(ref)?.features.find((f) => f.id === 'a')?.status, 'completed');
  });
});
