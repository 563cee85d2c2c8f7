import assert from 'node:assert/strict';
import { chownSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkspaceError, countWorkingTreeChanges, workingTreeChangesNotice, type WorkspaceErrorCode } from '../../../src/core/workspace';
import { createGitSandbox, rejection, type GitSandbox } from './git-fixture';

describe('workspace: repository checks', () => {
  let box: GitSandbox;
  beforeEach(() => {
    box = createGitSandbox();
  });
  afterEach(() => box.cleanup());

  async function expectCode(target: string, code: WorkspaceErrorCode, hint: RegExp): Promise<void> {
    const service = box.service();
    const error = await rejection(service.inspectRepository(target));
    assert.ok(error instanceof WorkspaceError, `expected a WorkspaceError, got ${error}`);
    assert.equal(error.code, code);
    assert.match(error.message, hint);
    // The same check guards createWorktree, before anything is created.
    const createError = await rejection(service.createWorktree({ repoPath: target, loopName: 'probe' }));
    assert.equal((createError as WorkspaceError).code, code);
    assert.ok(!existsSync(path.join(box.root, 'data', 'worktrees', 'probe')));
  }

  it('a folder that does not exist', async () => {
    await expectCode(path.join(box.root, 'nowhere'), 'path_not_found', /does not exist/);
  });

  it('a file instead of a folder', async () => {
    const file = path.join(box.root, 'file.txt');
    writeFileSync(file, 'x');
    await expectCode(file, 'not_a_directory', /is a file, not a folder/);
  });

  it('a folder that is not a repository: suggests git init', async () => {
    const plain = path.join(box.root, 'plain');
    mkdirSync(plain);
    await expectCode(plain, 'not_a_git_repository', /not a git repository.*git init/);
  });

  it('a repository without a commit: suggests a first commit', async () => {
    const repo = box.initRepo('empty', { commit: false });
    await expectCode(repo, 'no_commits', /no commits yet.*first commit/i);
    assert.equal(box.gitStatus(repo, 'rev-parse', '--verify', '-q', 'refs/heads/forge/probe'), 1, 'no branch was created');
  });

  it('a bare repository: suggests cloning', async () => {
    const bare = path.join(box.root, 'bare.git');
    box.git(box.root, 'init', '-q', '--bare', bare);
    await expectCode(bare, 'bare_repository', /bare repository.*git clone/);
  });

  it('the inside of a .git folder', async () => {
    const repo = box.initRepo('repo');
    await expectCode(path.join(repo, '.git'), 'not_a_work_tree', /\.git folder/);
  });

  it('a repository owned by another user ("dubious ownership")', async function () {
    if (process.getuid?.() !== 0) this.skip(); // only root can hand a folder to another user
    const repo = box.initRepo('foreign');
    chownSync(repo, 65534, 65534);
    await expectCode(repo, 'unsafe_repository', /safe\.directory/);
  });

  it('resolves a subfolder to the top level and reports branch and HEAD', async () => {
    const repo = box.initRepo('repo', { files: { 'src/a.ts': 'a\n' } });
    const info = await box.service().inspectRepository(path.join(repo, 'src'));
    assert.equal(info.repoDir, repo);
    assert.equal(info.gitCommonDir, path.join(repo, '.git'));
    assert.equal(info.headCommit, box.git(repo, 'rev-parse', 'HEAD'));
    assert.equal(info.currentBranch, 'main');
  });

  it('counts uncommitted and untracked files only when asked (one git status): staged, unstaged, deleted, renamed; untracked in folders; not ignored ones', async () => {
    const repo = box.initRepo('repo', { files: { 'a.txt': 'a\n', 'b.txt': 'b\n', 'c.txt': 'c\n', 'old name.txt': 'r\n', '.gitignore': 'build/\n' } });
    const service = box.service();
    assert.equal((await service.inspectRepository(repo)).workingTreeChanges, undefined, 'not counted unless asked');
    assert.deepEqual((await service.inspectRepository(repo, { workingTreeChanges: true })).workingTreeChanges, { changed: 0, untracked: 0 });

    box.write(repo, { 'a.txt': 'a2\n', 'b.txt': 'b2\n', 'new dir/x.txt': 'x', 'new dir/deeper/y.txt': 'y', 'z.txt': 'z', 'build/out.js': 'ignored' });
    box.git(repo, 'add', 'b.txt');
    box.git(repo, 'rm', '-q', 'c.txt');
    box.git(repo, 'mv', 'old name.txt', 'new name.txt');
    const info = await service.inspectRepository(path.join(repo, 'new dir'), { workingTreeChanges: true });
    assert.deepEqual(info.workingTreeChanges, { changed: 4, untracked: 3 });
  });

  it('countWorkingTreeChanges reads porcelain v1 -z: a rename\'s original path is not a file of its own', () => {
    assert.deepEqual(countWorkingTreeChanges(''), { changed: 0, untracked: 0 });
    assert.deepEqual(countWorkingTreeChanges(' M a.txt\0M  b.txt\0?? c d.txt\0'), { changed: 2, untracked: 1 });
    assert.deepEqual(countWorkingTreeChanges('R  new.txt\0old.txt\0?? u\0'), { changed: 1, untracked: 1 });
    assert.deepEqual(countWorkingTreeChanges(' C copy.txt\0orig.txt\0RM moved.txt\0from.txt\0 D gone.txt\0'), { changed: 3, untracked: 0 });
    assert.deepEqual(countWorkingTreeChanges('!! build/\0UU conflict.txt\0A  added.txt\0'), { changed: 2, untracked: 0 });
  });

  it('workingTreeChangesNotice says how many files the loop does not get, from which commit it starts, and what to do', () => {
    const repo = { repoDir: '/repo', headCommit: 'abc1234def5678', currentBranch: 'main' };
    assert.equal(workingTreeChangesNotice(repo, { changed: 0, untracked: 0 }), null);
    assert.equal(
      workingTreeChangesNotice(repo, { changed: 2, untracked: 1 }),
      '2 files with uncommitted changes and 1 untracked file in /repo are not part of the loop: it starts from HEAD abc1234 (main). Commit them, or stash them with git stash --include-untracked, first if the loop needs them.',
    );
    assert.equal(
      workingTreeChangesNotice({ ...repo, currentBranch: null }, { changed: 1, untracked: 0 }),
      '1 file with uncommitted changes in /repo is not part of the loop: it starts from HEAD abc1234. Commit or stash them first if the loop needs them.',
    );
    assert.equal(
      workingTreeChangesNotice(repo, { changed: 0, untracked: 3 }),
      '3 untracked files in /repo are not part of the loop: it starts from HEAD abc1234 (main). Commit them, or stash them with git stash --include-untracked, first if the loop needs them.',
    );
  });

  it('reports a detached HEAD as no current branch', async () => {
    const repo = box.initRepo('repo');
    box.commit(repo, { 'b.txt': 'b' });
    box.git(repo, 'checkout', '-q', '--detach', 'HEAD~1');
    const info = await box.service().inspectRepository(repo);
    assert.equal(info.currentBranch, null);
    assert.equal(info.headCommit, box.git(repo, 'rev-parse', 'HEAD'));
  });

  it('accepts a linked worktree and reports the shared .git folder', async () => {
    const repo = box.initRepo('repo');
    const linked = path.join(box.root, 'linked');
    box.git(repo, 'worktree', 'add', '-q', '-b', 'side', linked);
    const info = await box.service().inspectRepository(linked);
    assert.equal(info.repoDir, linked);
    assert.equal(info.gitCommonDir, path.join(repo, '.git'));
    assert.equal(info.currentBranch, 'side');
  });

  it('ignores GIT_DIR and GIT_WORK_TREE inherited from the environment', async () => {
    const repo = box.initRepo('repo');
    const other = box.initRepo('other');
    const { createWorktreeService } = await import('../../../src/core/workspace');
    const service = createWorktreeService({
      dataDir: path.join(box.root, 'data'),
      log: { debug() {}, info() {}, warn() {} },
      gitEnv: { ...box.env, GIT_DIR: path.join(other, '.git'), GIT_WORK_TREE: other },
    });
    const info = await service.inspectRepository(repo);
    assert.equal(info.repoDir, repo);
    assert.deepEqual(readdirSync(box.root).sort(), ['home', 'other', 'repo']);
  });
});
