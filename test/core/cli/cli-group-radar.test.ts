/**
 * The conflict radar at the `forge` CLI (built `dist/cli.mjs`, real processes, real opencode,
 * real git, the database file; the embedded scripted model plays splitter, coder and auditor):
 * while a group's loops run, `forge group status` in another process shows the files two live
 * loops changed, and `forge group … --json` prints `group.overlap` lines as they appear, the last
 * one (read before the process exits) saying none once the loops ended. Each
 * feature's check ("Run: …") holds its loop running until the test opens its gate file.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import type { CliRunner } from '../../support/cli-runner';
import type { TestRepository } from '../../support/git-repo';

const fence = '```';

/** A feature writing `file`, whose check waits for `<id>-gate` in its worktree (and says it runs with `<id>-running`). */
function heldFeature(id: string, title: string, file: string, content: string): string {
  return [
    `## Feature ${id}: ${title}`,
    '',
    `### Write ${file}`,
    `${fence}txt file=${file}`,
    content,
    fence,
    `Run: \`touch ${id}-running && while [ ! -f ${id}-gate ]; do sleep 0.2; done && echo gate open\``,
    '',
  ].join('\n');
}

interface Overlap {
  file: string;
  features: string[];
  loops: string[];
}

interface GroupJson {
  group: string;
  status: string;
  features: Array<{ id: string; status: string }>;
  overlaps: Overlap[];
}

describe('forge group: the conflict radar (real CLI processes, real opencode, embedded scripted model)', function () {
  this.timeout(900_000);
  const world = useCliLoopWorld('forge-cli-radar-', { 'README.md': '# radar\n', 'shared.txt': 'base\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  before(() => {
    ({ repo, work, runner } = world);
  });

  it('shows the file two running loops both changed, from another process and as group.overlap lines; a loop of its own files is not in it; released, the group completes', async function () {
    // A name of its own on a retry: the failed attempt's group and worktrees stay (nothing is ever lost).
    // currentRetry() is protected in the typings but public at run time.
    const attempt = (this.test as unknown as { currentRetry(): number } | undefined)?.currentRetry() ?? 0;
    const id = attempt > 0 ? `radar-retry${attempt}` : 'radar';
    const settings = { 'forge.loop.stallTimeoutMs': 300_000, 'forge.loop.busyStallTimeoutMs': 300_000 };
    const worktree = (feature: string) => join(work, 'data', 'worktrees', `${id}-${feature}`);
    const prd = join(work, `${id}.md`);
    await writeFile(
      prd,
      ['# Radar', '', heldFeature('notes', 'Release notes', 'shared.txt', 'notes'), heldFeature('search', 'Search', 'shared.txt', 'search'), heldFeature('catalog', 'Catalog', 'catalog.txt', 'apples')].join('\n'),
    );
    const group = runner.start(['group', prd, '--name', id, '--launch', '--max-concurrent', '3', '--json'], { settings });
    try {
      const features = ['notes', 'search', 'catalog'];
      const deadline = Date.now() + 400_000;
      // Each loop wrote its file and runs its check, held at its gate: all three are live.
      while (!features.every((f) => existsSync(join(worktree(f), `${f}-running`)))) {
        assert.ok(Date.now() < deadline, `the checks never all ran\n${group.describe()}`);
        await new Promise((r) => setTimeout(r, 200));
      }

      const status = await runner.run(['group', 'status', '--json']);
      assert.equal(status.code, 0, status.stderr);
      const radar = status.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as GroupJson).find((g) => g.group === id);
      assert.ok(radar, status.stdout);
      assert.equal(radar.status, 'running');
      assert.deepEqual(radar.features.map((f) => [f.id, f.status]), [['notes', 'running'], ['search', 'running'], ['catalog', 'running']]);
      // Only shared.txt: catalog.txt and each loop's own marker files are changed by one loop each.
      assert.deepEqual(radar.overlaps, [{ file: 'shared.txt', features: ['notes', 'search'], loops: [`${id}-notes`, `${id}-search`] }]);

      // forge status (loops, then groups) reads the radar too.
      const all = await runner.run(['status', '--json']);
      assert.equal(all.code, 0, all.stderr);
      const fromStatus = all.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as GroupJson).find((g) => g.group === id);
      assert.deepEqual(fromStatus?.overlaps, radar.overlaps, all.stdout);

      const text = await runner.run(['group', 'status', id]);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /^ {2}overlap: shared\.txt — notes, search$/m);
      assert.doesNotMatch(text.stdout, /overlap: .*catalog/);

      // The driving process printed the overlap as it appeared, while both loops still run.
      const sharedOverlap = JSON.stringify([{ file: 'shared.txt', features: ['notes', 'search'], loops: [`${id}-notes`, `${id}-search`] }]);
      await group.waitForLine((l) => l.startsWith('{"type":"group.overlap"') && JSON.stringify((JSON.parse(l) as { overlaps: Overlap[] }).overlaps) === sharedOverlap, 300_000);

      for (const f of features) await writeFile(join(worktree(f), `${f}-gate`), '');
      const end = await group.exited;
      assert.equal(end.code, 0, group.describe());
      const lines = group.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { type: string; overlaps?: Overlap[]; status?: string });
      assert.equal(lines.find((l) => l.type === 'group.ended')?.status, 'completed', group.describe());
      // Never an overlap with catalog.
      const overlapEvents = lines.filter((l) => l.type === 'group.overlap');
      assert.ok(overlapEvents.length > 0, group.describe());
      assert.ok(overlapEvents.every((l) => l.overlaps!.every((o) => !o.features.includes('catalog'))), group.describe());
      // The stream ends with the true state: the process read the radar once more before it
      // exited, so its last group.overlap says no file overlaps (no loop is live any more).
      assert.deepEqual(overlapEvents.at(-1)!.overlaps, [], group.describe());
      assert.ok(overlapEvents.some((l) => l.overlaps!.length > 0), group.describe());

      // Ended: no live loops, so no overlap.
      const after = await runner.run(['group', 'status', id, '--json']);
      assert.equal(after.code, 0, after.stderr);
      const done = JSON.parse(after.stdout) as GroupJson;
      assert.equal(done.status, 'completed');
      assert.deepEqual(done.overlaps, []);
      // The radar only warned; the merge queue then met the conflict it foretold: the second of
      // the two to merge went back to coding and took in the first's line too.
      assert.match(await repo.git('show', `forge/${id}-notes:shared.txt`), /^notes$/m);
      assert.match(await repo.git('show', `forge/${id}-search:shared.txt`), /^search$/m);
      assert.deepEqual((await repo.git('show', `forge/group/${id}:shared.txt`)).split('\n').filter(Boolean).sort(), ['notes', 'search']);
      assert.equal((await repo.git('status', '--porcelain')).trim(), '', "the user's working tree is untouched");
    } finally {
      if ((await Promise.race([group.exited.then(() => true), Promise.resolve(false)])) === false) group.signal('SIGKILL');
    }
  });
});
