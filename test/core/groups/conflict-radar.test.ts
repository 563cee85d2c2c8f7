/**
 * The conflict radar's adapter (conflict-radar.ts) on real git repositories and worktrees: the
 * files a loop's worktree changed against its base (committed, staged, unstaged, untracked, not
 * ignored), the overlaps between worktrees, and that reading them writes nothing — not the index
 * of the worktree, nothing under .git, nothing in the work tree.
 */
import { strict as assert } from 'node:assert';
import { lstat, mkdir, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { changedFiles, createReadOnlyGitRunner, scanLoops } from '../../../src/core/groups/conflict-radar';
import { createTestRepository, git, type TestRepository } from '../../support/git-repo';

/** Every file and folder under `dir` with its size and mtime (ns): any write shows. */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  async function walk(d: string): Promise<void> {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      const s = await lstat(path, { bigint: true });
      out.set(path, `${s.size}:${s.mtimeNs}`);
      if (entry.isDirectory()) await walk(path);
    }
  }
  await walk(dir);
  return out;
}

function differences(before: Map<string, string>, after: Map<string, string>): string[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys].filter((k) => before.get(k) !== after.get(k));
}

describe('conflict radar: changed files of live worktrees (real git)', function () {
  this.timeout(120_000);
  const readOnlyGit = createReadOnlyGitRunner();
  let repo: TestRepository;
  let base: string;
  let wtA: string;
  let wtB: string;

  beforeEach(async () => {
    repo = await createTestRepository({
      'README.md': '# test\n',
      'shared.txt': 'base\n',
      'gone.txt': 'bye\n',
      'src/keep.ts': 'export {};\n',
      '.gitignore': 'build/\n*.log\n',
    });
    base = (await repo.git('rev-parse', 'HEAD')).trim();
    wtA = `${repo.dir}-wt-a`;
    wtB = `${repo.dir}-wt-b`;
    await repo.git('worktree', 'add', '-q', '-b', 'forge/g-a', wtA, base);
    await repo.git('worktree', 'add', '-q', '-b', 'forge/g-b', wtB, base);
  });

  afterEach(async () => {
    await repo.cleanup();
    await rm(wtA, { recursive: true, force: true });
    await rm(wtB, { recursive: true, force: true });
  });

  it('a fresh worktree changed nothing', async () => {
    assert.deepEqual(await changedFiles(readOnlyGit, wtA, base), []);
  });

  it('counts committed, staged, unstaged, deleted and untracked files, not ignored ones; names are exact (spaces, non-ASCII, folders)', async () => {
    await writeFile(join(wtA, 'shared.txt'), 'a\n');
    await git(wtA, 'commit', '-q', '-am', 'committed change');
    await writeFile(join(wtA, 'committed-new.txt'), 'new\n');
    await git(wtA, 'add', 'committed-new.txt');
    await git(wtA, 'commit', '-q', '-m', 'committed file');
    await writeFile(join(wtA, 'staged.txt'), 'staged\n');
    await git(wtA, 'add', 'staged.txt');
    await writeFile(join(wtA, 'src/keep.ts'), 'export const x = 1;\n');
    await rm(join(wtA, 'gone.txt'));
    await mkdir(join(wtA, 'deep/er'), { recursive: true });
    await writeFile(join(wtA, 'deep/er/naïve file.txt'), 'untracked\n');
    await mkdir(join(wtA, 'build'), { recursive: true });
    await writeFile(join(wtA, 'build/out.js'), 'ignored\n');
    await writeFile(join(wtA, 'debug.log'), 'ignored\n');
    assert.deepEqual(await changedFiles(readOnlyGit, wtA, base), ['committed-new.txt', 'deep/er/naïve file.txt', 'gone.txt', 'shared.txt', 'src/keep.ts', 'staged.txt']);
  });

  it('a file touched but not changed is no change; a file changed in a commit counts even when the work tree is clean again', async () => {
    const later = new Date(Date.now() + 3_600_000);
    await utimes(join(wtA, 'README.md'), later, later);
    assert.deepEqual(await changedFiles(readOnlyGit, wtA, base), []);
    await writeFile(join(wtA, 'README.md'), '# changed\n');
    await git(wtA, 'commit', '-q', '-am', 'c');
    assert.deepEqual(await changedFiles(readOnlyGit, wtA, base), ['README.md']);
  });

  it('finds the files two worktrees both changed (committed in one, uncommitted in the other), and only those', async () => {
    await writeFile(join(wtA, 'shared.txt'), 'a\n');
    await git(wtA, 'commit', '-q', '-am', 'a');
    await writeFile(join(wtA, 'only-a.txt'), 'a\n');
    await writeFile(join(wtB, 'shared.txt'), 'b\n');
    await writeFile(join(wtB, 'only-b.txt'), 'b\n');
    const scan = await scanLoops(readOnlyGit, [
      { featureId: 'a', loopName: 'g-a', worktreeDir: wtA, baseCommit: base },
      { featureId: 'b', loopName: 'g-b', worktreeDir: wtB, baseCommit: base },
      // Still starting: no worktree yet, nothing changed.
      { featureId: 'c', loopName: 'g-c', worktreeDir: null, baseCommit: null },
    ]);
    assert.deepEqual(scan.overlaps, [{ file: 'shared.txt', features: ['a', 'b'], loops: ['g-a', 'g-b'] }]);
    assert.deepEqual(scan.loops, [
      { featureId: 'a', loopName: 'g-a', files: ['only-a.txt', 'shared.txt'] },
      { featureId: 'b', loopName: 'g-b', files: ['only-b.txt', 'shared.txt'] },
      { featureId: 'c', loopName: 'g-c', files: [] },
    ]);
  });

  it('a worktree that is gone is reported, and the others are still compared', async () => {
    await writeFile(join(wtA, 'shared.txt'), 'a\n');
    await rm(wtB, { recursive: true, force: true });
    const scan = await scanLoops(readOnlyGit, [
      { featureId: 'a', loopName: 'g-a', worktreeDir: wtA, baseCommit: base },
      { featureId: 'b', loopName: 'g-b', worktreeDir: wtB, baseCommit: base },
    ]);
    assert.deepEqual(scan.overlaps, []);
    assert.deepEqual(scan.loops[0], { featureId: 'a', loopName: 'g-a', files: ['shared.txt'] });
    assert.ok('error' in scan.loops[1]! && scan.loops[1].error.includes(wtB), JSON.stringify(scan.loops[1]));
  });

  it('refuses a base that is not a commit id (never handed to git as an option)', async () => {
    await assert.rejects(changedFiles(readOnlyGit, wtA, '--output=x'), /not a commit id/);
  });

  it('writes nothing: the index, .git and the work tree are untouched even when stat data is stale (where plain git status rewrites the index)', async () => {
    await writeFile(join(wtA, 'shared.txt'), 'a\n');
    await git(wtA, 'commit', '-q', '-am', 'a');
    await writeFile(join(wtA, 'untracked.txt'), 'u\n');
    await writeFile(join(wtA, 'src/keep.ts'), 'export const y = 2;\n');
    // Stale stat data on unchanged files: git would like to refresh the index.
    const later = new Date(Date.now() + 3_600_000);
    for (const f of ['README.md', 'gone.txt', '.gitignore']) await utimes(join(wtA, f), later, later);
    const indexPath = (await git(wtA, 'rev-parse', '--path-format=absolute', '--git-path', 'index')).trim();
    const watched = async () => new Map([...(await snapshot(join(repo.dir, '.git'))), ...(await snapshot(wtA))]);

    const before = await watched();
    assert.ok(before.has(indexPath), `the worktree's index ${indexPath} is watched`);
    for (let i = 0; i < 3; i++) assert.deepEqual(await changedFiles(readOnlyGit, wtA, base), ['shared.txt', 'src/keep.ts', 'untracked.txt']);
    assert.deepEqual(differences(before, await watched()), [], 'the radar wrote nothing');

    // The check can fail: plain git status (optional locks allowed) refreshes and rewrites that index.
    await git(wtA, 'status', '--porcelain');
    assert.ok(differences(before, await watched()).includes(indexPath), 'plain git status rewrote the index');
  });
});
