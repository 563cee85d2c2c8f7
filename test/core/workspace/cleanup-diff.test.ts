import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { WorkspaceError, type LoopWorktree, type WorktreeService } from '../../../src/core/workspace';
import { createGitSandbox, rejection, type GitSandbox } from './git-fixture';

describe('workspace: cleanup and loop diff', () => {
  let box: GitSandbox;
  let repo: string;
  let service: WorktreeService;
  let loop: LoopWorktree;
  beforeEach(async () => {
    box = createGitSandbox();
    repo = box.initRepo('repo', {
      files: { 'keep.txt': 'keep\n', 'edit.txt': 'before\n', 'gone.txt': 'gone\n', 'move-me.txt': 'a stable body of text\nthat git can follow\nacross a rename\n' },
    });
    service = box.service();
    loop = await service.createWorktree({ repoPath: repo, loopName: 'cleanup' });
  });
  afterEach(() => box.cleanup());

  describe('removeWorktree', () => {
    it('removes the folder and its registration but keeps the branch', async () => {
      box.write(loop.worktreeDir, { 'work.txt': 'w' });
      const sha = await service.commitAll(loop.worktreeDir, 'work');
      box.write(loop.worktreeDir, { '.opencode/node_modules/pkg/index.js': '' }); // ignored artefacts do not block removal
      await service.removeWorktree(loop.worktreeDir);
      assert.ok(!existsSync(loop.worktreeDir));
      assert.doesNotMatch(box.git(repo, 'worktree', 'list', '--porcelain'), /cleanup/);
      assert.equal(box.git(repo, 'rev-parse', loop.branch), sha);
    });

    it('refuses while the worktree holds uncommitted work', async () => {
      box.write(loop.worktreeDir, { 'unsaved.txt': 'precious' });
      const error = await rejection(service.removeWorktree(loop.worktreeDir));
      assert.ok(error instanceof WorkspaceError);
      assert.equal(error.code, 'worktree_dirty');
      assert.match(error.message, /uncommitted changes.*keeps it/);
      assert.equal(readFileSync(path.join(loop.worktreeDir, 'unsaved.txt'), 'utf8'), 'precious');
    });

    it('is a no-op for a folder that is already gone', async () => {
      rmSync(loop.worktreeDir, { recursive: true, force: true });
      await service.removeWorktree(loop.worktreeDir);
      assert.ok(box.logLines.some((line) => /already gone/.test(line)));
    });

    it('leaves a folder that is not a worktree alone', async () => {
      const stray = path.join(path.dirname(loop.worktreeDir), 'stray');
      mkdirSync(stray);
      box.write(stray, { 'file.txt': 'x' });
      const error = await rejection(service.removeWorktree(stray));
      assert.equal((error as WorkspaceError).code, 'worktree_mismatch');
      assert.ok(existsSync(path.join(stray, 'file.txt')));
    });

    it('refuses folders outside <dataDir>/worktrees, such as the user\'s repository', async () => {
      const error = await rejection(service.removeWorktree(repo));
      assert.equal((error as WorkspaceError).code, 'worktree_outside_data_dir');
      assert.ok(existsSync(path.join(repo, 'keep.txt')));
    });

    it('lets ensureWorktree bring a removed worktree back from its branch', async () => {
      box.write(loop.worktreeDir, { 'work.txt': 'w' });
      await service.commitAll(loop.worktreeDir, 'work');
      await service.removeWorktree(loop.worktreeDir);
      assert.equal((await service.ensureWorktree(loop)).status, 'recreated');
      assert.equal(readFileSync(path.join(loop.worktreeDir, 'work.txt'), 'utf8'), 'w');
    });
  });

  describe('diffAgainstBase', () => {
    beforeEach(async () => {
      box.write(loop.worktreeDir, { 'edit.txt': 'after\n', 'added/new file.txt': 'new\n' });
      box.git(loop.worktreeDir, 'rm', '-q', 'gone.txt');
      box.git(loop.worktreeDir, 'mv', 'move-me.txt', 'moved.txt');
      await service.commitAll(loop.worktreeDir, 'section 1: changes');
    });

    it('lists the committed changes with git diff --name-status base...branch', async () => {
      assert.deepEqual(await service.diffAgainstBase(loop), [
        { status: 'A', path: 'added/new file.txt' },
        { status: 'M', path: 'edit.txt' },
        { status: 'D', path: 'gone.txt' },
        { status: 'R', path: 'moved.txt', oldPath: 'move-me.txt' },
      ]);
    });

    it('is unaffected by later commits on main and still complete after a merge', async () => {
      box.commit(repo, { 'main-only.txt': 'main' });
      const before = await service.diffAgainstBase(loop);
      assert.ok(!before.some((change) => change.path === 'main-only.txt'));
      assert.equal((await service.mergeIntoBase(loop, 'merge')).kind, 'merged');
      assert.deepEqual(await service.diffAgainstBase(loop), before);
    });

    it('adds uncommitted and untracked files on request, without artefacts', async () => {
      box.write(loop.worktreeDir, { 'keep.txt': 'edited, not committed\n', 'draft.txt': 'untracked\n', '.opencode/package.json': '{}' });
      const withPending = await service.diffAgainstBase(loop, { includeUncommitted: true });
      assert.deepEqual(withPending, [
        { status: 'A', path: 'added/new file.txt' },
        { status: 'A', path: 'draft.txt' },
        { status: 'M', path: 'edit.txt' },
        { status: 'D', path: 'gone.txt' },
        { status: 'M', path: 'keep.txt' },
        { status: 'R', path: 'moved.txt', oldPath: 'move-me.txt' },
      ]);
      assert.equal((await service.diffAgainstBase(loop)).length, 4, 'the default stays committed-only');
    });

    it('is empty for a loop without commits', async () => {
      const fresh = await service.createWorktree({ repoPath: repo, loopName: 'fresh' });
      assert.deepEqual(await service.diffAgainstBase(fresh), []);
    });

    it('reads a file as it was at the base commit, or null when it did not exist', async () => {
      assert.equal(await service.readFileAtBase(loop, 'edit.txt'), 'before\n');
      assert.equal(await service.readFileAtBase(loop, 'gone.txt'), 'gone\n');
      assert.equal(await service.readFileAtBase(loop, 'added/new file.txt'), null);
    });
  });
});
