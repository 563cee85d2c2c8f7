/**
 * The group runner over a real database file: a loop that ends while a resume is still
 * restarting the group's other loops is taken as its feature's end, and a feature marked
 * running whose loop ended unseen is reconciled from the loop's row. The loop runtime is a
 * stand-in that only emits events: these are orderings a real loop produces only by chance
 * (a fast model ending a loop in seconds), made certain here.
 */
import assert from 'node:assert/strict';
import { createGroupRunner } from '../../../src/core/groups/group-runner';
import type { GroupEvent } from '../../../src/core/groups/group-types';
import type { LoopRuntime, LoopRuntimeEvent, LoopRuntimeListener } from '../../../src/core/loop/runtime-types';
import { openForgeDatabase, type ForgeDatabase } from '../../../src/core/storage/database';
import { createForgeRepositories, type ForgeRepositories } from '../../../src/core/storage/repositories';
import { makeTempDataDir, type TempDataDir } from '../../support/storage-fixtures';

const P = 'project-1';

function eventsRuntime(supervising: Set<string>): { runtime: LoopRuntime; emit(e: LoopRuntimeEvent): void; started: string[] } {
  const listeners = new Set<LoopRuntimeListener>();
  const started: string[] = [];
  const runtime = {
    subscribe(l: LoopRuntimeListener) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    isSupervising: (ref: { name: string }) => supervising.has(ref.name),
    async start(request: { name?: string }) {
      started.push(request.name!);
      return { projectId: P, name: request.name!, notices: [], confinement: { kind: 'none' } };
    },
  } as unknown as LoopRuntime;
  return { runtime, emit: (e) => [...listeners].forEach((l) => l(e)), started };
}

const ended = (name: string, status: 'completed' | 'paused' | 'errored'): LoopRuntimeEvent => ({
  type: 'loop.ended',
  loop: { projectId: P, name },
  status,
  reason: status === 'errored' ? { kind: 'error', message: 'boom' } : { kind: status === 'completed' ? 'completed' : 'budget_reached' },
  iterations: 1,
  branch: `forge/${name}`,
  worktreeDir: null,
  merge: null,
} as unknown as LoopRuntimeEvent);

describe('groups: the runner (real database, events made certain)', () => {
  let data: TempDataDir;
  let db: ForgeDatabase;
  let repos: ForgeRepositories;

  beforeEach(async () => {
    data = makeTempDataDir('forge-group-runner-');
    db = await openForgeDatabase({ path: data.dbPath });
    repos = createForgeRepositories(db);
  });
  afterEach(async () => {
    await db.close();
    data.cleanup();
  });

  function group(features: Array<{ id: string; status: 'pending' | 'running' | 'paused'; loopName: string | null }>, status: 'running' | 'paused' = 'running') {
    repos.featureGroups.create(P, {
      id: 'g',
      title: 'G',
      status,
      source: 'PRD.md',
      repoDir: '/r',
      maxConcurrent: 3,
      features: features.map((f) => ({ id: f.id, title: f.id, dependsOn: [], plan: `# ${f.id}`, planPath: `/r/${f.id}.md`, status: f.status, loopName: f.loopName, error: null })),
    });
    for (const f of features) if (f.loopName) repos.loops.create(P, { name: f.loopName, kind: 'plan', status: 'running' });
  }

  it('watch before a resume drives: a loop that ends while the others restart is its feature\'s end, and the group completes', async () => {
    group([
      { id: 'one', status: 'running', loopName: 'g-one' },
      { id: 'two', status: 'running', loopName: 'g-two' },
    ]);
    const supervising = new Set(['g-one', 'g-two']);
    const { runtime, emit } = eventsRuntime(supervising);
    const events: GroupEvent[] = [];
    const runner = createGroupRunner({ repos, runtime, emit: (e) => events.push(e), log: { info() {}, warn: (m) => assert.fail(m) } });
    runner.watch({ projectId: P, id: 'g' });
    assert.equal(runner.isDriving({ projectId: P, id: 'g' }), false, 'watching schedules nothing');
    // Loop one ends before the resume has restarted loop two and started driving.
    repos.loops.terminate(P, 'g-one', { status: 'completed', terminationReason: 'completed' });
    supervising.delete('g-one');
    emit(ended('g-one', 'completed'));
    assert.equal(repos.featureGroups.get(P, 'g')!.features[0]!.status, 'completed');
    await runner.drive({ projectId: P, id: 'g' });
    repos.loops.terminate(P, 'g-two', { status: 'completed', terminationReason: 'completed' });
    supervising.delete('g-two');
    emit(ended('g-two', 'completed'));
    // The end's step runs on the group's chain.
    for (let i = 0; i < 50 && runner.isDriving({ projectId: P, id: 'g' }); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(repos.featureGroups.get(P, 'g')!.status, 'completed');
    assert.ok(events.some((e) => e.type === 'group.ended' && e.status === 'completed'), JSON.stringify(events));
    runner.dispose();
  });

  it('without watch the same early end goes unseen by events, and drive reconciles it from the loop row', async () => {
    group([
      { id: 'one', status: 'running', loopName: 'g-one' },
      { id: 'two', status: 'running', loopName: 'g-two' },
      { id: 'three', status: 'running', loopName: 'g-three' },
    ]);
    const supervising = new Set<string>(['g-three']);
    const { runtime, emit } = eventsRuntime(supervising);
    const runner = createGroupRunner({ repos, runtime, emit: () => {}, log: { info() {}, warn: (m) => assert.fail(m) } });
    repos.loops.terminate(P, 'g-one', { status: 'completed', terminationReason: 'completed' });
    emit(ended('g-one', 'completed'));
    repos.loops.terminate(P, 'g-two', { status: 'errored', terminationReason: 'error: boom' });
    // g-three is supervised here and its row says running: it stays running.
    await runner.drive({ projectId: P, id: 'g' });
    const features = repos.featureGroups.get(P, 'g')!.features;
    assert.deepEqual(features.map((f) => f.status), ['completed', 'failed', 'running']);
    assert.match(features[1]!.error!, /^Its loop g-two ended errored \(error: boom\) after 0 iterations\.$/);
    assert.equal(repos.featureGroups.get(P, 'g')!.status, 'running');
    runner.dispose();
  });

  it('a paused group whose last running loop ended unseen ends paused on drive, not waiting forever', async () => {
    group([{ id: 'one', status: 'running', loopName: 'g-one' }], 'paused');
    const { runtime } = eventsRuntime(new Set());
    const events: GroupEvent[] = [];
    const runner = createGroupRunner({ repos, runtime, emit: (e) => events.push(e), log: { info() {}, warn: (m) => assert.fail(m) } });
    repos.loops.terminate(P, 'g-one', { status: 'paused', terminationReason: 'budget_reached' });
    await runner.drive({ projectId: P, id: 'g' });
    assert.equal(repos.featureGroups.get(P, 'g')!.features[0]!.status, 'paused');
    assert.ok(events.some((e) => e.type === 'group.ended' && e.status === 'paused'), JSON.stringify(events));
    assert.equal(runner.isDriving({ projectId: P, id: 'g' }), false);
    runner.dispose();
  });
});
