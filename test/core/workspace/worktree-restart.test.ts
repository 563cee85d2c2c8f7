import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { WorkspaceError, type LoopWorktree, type WorktreeService } from '../../../src/core/workspace';
import { createGitSandbox, rejection, type GitSandbox } from './git-fixture';

describe('workspace: restart (ensureWorktree)', () => {
  let box: GitSandbox;
  let repo: string;
  let service: WorktreeService;
  let loop: LoopWorktree;
  beforeEach(async () => {
    box = createGitSandbox();
    repo = box.initRepo('repo');
    service = box.service();
    loop = await service.createWorktree({ repoPath: repo, loopName: 'restartable' });
  });
  afterEach(() => box.cleanup());

  it('accepts a worktree that exists and is on its branch', async () => {
    assert.deepEqual(await service.ensureWorktree(loop), { status: 'present', worktreeDir: loop.worktreeDir });
  });

  it('recreates a deleted worktree folder from the surviving branch, with its commits', async () => {
    box.write(loop.worktreeDir, { 'work.txt': 'section one\n' });
    const sha = await service.commitAll(loop.worktreeDir, 'section 1: work');
    rmSync(loop.worktreeDir, { recursive: true, force: true });

    const result = await service.ensureWorktree(loop);
    assert.deepEqual(result, { status: 'recreated', worktreeDir: loop.worktreeDir });
    assert.equal(readFileSync(path.join(loop.worktreeDir, 'work.txt'), 'utf8'), 'section one\n');
    assert.equal(box.git(loop.worktreeDir, 'rev-parse', 'HEAD'), sha);
    assert.equal(box.git(loop.worktreeDir, 'symbolic-ref', '--short', 'HEAD'), loop.branch);
    // Exactly one registration for the folder, and it is healthy.
    const listed = box.git(repo, 'worktree', 'list', '--porcelain');
    assert.equal(listed.split(`worktree ${loop.worktreeDir}\n`).length, 2);
    assert.doesNotMatch(listed, /prunable/);
    // No .opencode/ folder is made for it (opencode would install a plugin package there).
    assert.ok(!existsSync(path.join(loop.worktreeDir, '.opencode')));
    // And a second call finds it present.
    assert.equal((await service.ensureWorktree(loop)).status, 'present');
  });

  it('recreates after the registration was already pruned', async () => {
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    box.git(repo, 'worktree', 'prune');
    assert.equal((await service.ensureWorktree(loop)).status, 'recreated');
    assert.ok(existsSync(path.join(loop.worktreeDir, 'README.md')));
  });

  it('only drops its own stale registration, not the user\'s other missing worktrees', async () => {
    const usersOwn = path.join(box.root, 'users-own');
    box.git(repo, 'worktree', 'add', '-q', '-b', 'user-branch', usersOwn);
    rmSync(usersOwn, { recursive: true, force: true }); // e.g. on an unplugged drive
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    await service.ensureWorktree(loop);
    assert.match(box.git(repo, 'worktree', 'list', '--porcelain'), new RegExp(`worktree ${usersOwn}\n`));
  });

  it('fails with missing_worktree when both folder and branch are gone', async () => {
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    box.git(repo, 'worktree', 'prune');
    box.git(repo, 'branch', '-D', loop.branch);
    const error = await rejection(service.ensureWorktree(loop));
    assert.ok(error instanceof WorkspaceError);
    assert.equal(error.code, 'missing_worktree');
    assert.match(error.message, /worktree .* and its branch forge\/restartable are both gone.*Start a new loop/);
    assert.ok(!existsSync(loop.worktreeDir), 'nothing was created');
  });

  it('fails with missing_worktree when the repository itself is gone', async () => {
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    rmSync(repo, { recursive: true, force: true });
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'missing_worktree');
    assert.match(error.message, /repository .* no longer exists|so is its repository/);
  });

  it('refuses a worktree that was switched to another branch', async () => {
    box.git(loop.worktreeDir, 'switch', '-q', '-c', 'other');
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'worktree_mismatch');
    assert.match(error.message, /is on branch other, not on forge\/restartable.*switch forge\/restartable/);
  });

  it('refuses a worktree on a detached HEAD', async () => {
    box.git(loop.worktreeDir, 'checkout', '-q', '--detach');
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'worktree_mismatch');
    assert.match(error.message, /detached HEAD/);
  });

  it('refuses a plain folder where the worktree should be, and leaves it alone', async () => {
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    box.git(repo, 'worktree', 'prune');
    mkdirSync(loop.worktreeDir);
    box.write(loop.worktreeDir, { 'notes.txt': 'keep me' });
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'worktree_mismatch');
    assert.match(error.message, /not a working git worktree/);
    assert.equal(readFileSync(path.join(loop.worktreeDir, 'notes.txt'), 'utf8'), 'keep me');
  });

  it('refuses a worktree of another repository at the loop path', async () => {
    const other = box.initRepo('other');
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    box.git(repo, 'worktree', 'prune');
    box.git(other, 'worktree', 'add', '-q', '-b', 'forge/restartable', loop.worktreeDir);
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'worktree_mismatch');
    assert.match(error.message, /another repository/);
  });

  it('refuses when the branch is checked out somewhere else', async () => {
    rmSync(loop.worktreeDir, { recursive: true, force: true });
    box.git(repo, 'worktree', 'prune');
    box.git(repo, 'switch', '-q', loop.branch);
    const error = await rejection(service.ensureWorktree(loop));
    assert.equal((error as WorkspaceError).code, 'branch_checked_out');
    assert.match(error.message, new RegExp(`checked out in ${repo}`));
  });

  it('refuses folders outside <dataDir>/worktrees', async () => {
    for (const worktreeDir of [repo, path.join(box.root, 'data'), path.join(loop.worktreeDir, 'nested'), path.join(box.root, 'data', 'worktrees', '..', 'x')]) {
      const error = await rejection(service.ensureWorktree({ ...loop, worktreeDir }));
      assert.equal((error as WorkspaceError).code, 'worktree_outside_data_dir', worktreeDir);
    }
  });
});
