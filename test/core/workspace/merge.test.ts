import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { LoopWorktree, MergeResult, WorktreeService } from '../../../src/core/workspace';
import { createGitSandbox, type GitSandbox } from './git-fixture';

describe('workspace: merge into the base branch', () => {
  let box: GitSandbox;
  let repo: string;
  let service: WorktreeService;
  let loop: LoopWorktree;
  let loopTip: string;

  beforeEach(async () => {
    box = createGitSandbox();
    box.setGlobalIdentity('Ada Lovelace', 'ada@example.com');
    repo = box.initRepo('repo', { files: { 'shared.txt': 'line 1\nline 2\nline 3\n', 'README.md': '# repo\n' } });
    service = box.service();
    loop = await service.createWorktree({ repoPath: repo, loopName: 'merger' });
    box.write(loop.worktreeDir, { 'feature.txt': 'feature\n', 'shared.txt': 'line 1 (loop)\nline 2\nline 3\n' });
    loopTip = (await service.commitAll(loop.worktreeDir, 'section 1: feature'))!;
  });
  afterEach(() => box.cleanup());

  const tip = (ref: string) => box.git(repo, 'rev-parse', ref);
  const parents = (ref: string) => box.git(repo, 'log', '-1', '--format=%P', ref).split(' ');
  const assertLoopBranchKept = () => assert.equal(tip(loop.branch), loopTip, 'the loop branch is never moved or deleted');
  const scratchFolders = () => readdirSync(path.join(box.root, 'data', 'worktrees')).filter((name) => name.startsWith('.'));

  /** Moves main on in the user's tree so it no longer is an ancestor of the loop branch. */
  const divergeMain = (files: Record<string, string>) => box.commit(repo, files, 'user work on main');

  describe("mode 'never'", () => {
    it('keeps the branch and changes nothing', async () => {
      const result = await service.mergeIntoBase(loop, 'never');
      assert.equal(result.kind, 'kept');
      assert.match(result.message, /forge\/merger.*git merge forge\/merger/);
      assert.equal(tip('main'), loop.baseCommit);
      assertLoopBranchKept();
    });
  });

  describe("mode 'fast-forward'", () => {
    it('fast-forwards main checked out in a clean user tree, updating its files', async () => {
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.deepEqual(result, { kind: 'fast-forwarded', commit: loopTip, message: `Fast-forwarded main to forge/merger (${loopTip.slice(0, 12)}).` });
      assert.equal(tip('main'), loopTip);
      assert.equal(readFileSync(path.join(repo, 'feature.txt'), 'utf8'), 'feature\n');
      assert.equal(box.git(repo, 'status', '--porcelain'), '');
      assertLoopBranchKept();
    });

    it('fast-forwards with untracked files around, which git leaves in place', async () => {
      box.write(repo, { 'scratch-notes.txt': 'untracked' });
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'fast-forwarded');
      assert.equal(readFileSync(path.join(repo, 'scratch-notes.txt'), 'utf8'), 'untracked');
    });

    it('refuses when the user tree has uncommitted changes, and touches nothing', async () => {
      box.write(repo, { 'README.md': '# user edit in progress\n' });
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /uncommitted changes.*never touches.*git merge forge\/merger/);
      assert.equal(tip('main'), loop.baseCommit);
      assert.equal(readFileSync(path.join(repo, 'README.md'), 'utf8'), '# user edit in progress\n');
      assert.ok(!existsSync(path.join(repo, 'feature.txt')));
      assertLoopBranchKept();
      assert.ok(box.logLines.some((line) => line.startsWith('info ') && /not merging/.test(line)));
    });

    it('refuses when only the index is dirty (staged change)', async () => {
      box.write(repo, { 'staged.txt': 'staged' });
      box.git(repo, 'add', 'staged.txt');
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'refused');
      assert.equal(tip('main'), loop.baseCommit);
      assert.equal(box.git(repo, 'diff', '--cached', '--name-only'), 'staged.txt');
    });

    it('refuses when an untracked file would be overwritten (git refuses, Forge reports)', async () => {
      box.write(repo, { 'feature.txt': 'users own untracked feature.txt\n' });
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /refused to fast-forward/);
      assert.equal(readFileSync(path.join(repo, 'feature.txt'), 'utf8'), 'users own untracked feature.txt\n');
      assert.equal(tip('main'), loop.baseCommit);
    });

    it('refuses while the user is in the middle of a merge', async () => {
      box.git(repo, 'switch', '-q', '-c', 'side');
      box.commit(repo, { 'README.md': '# side\n' });
      box.git(repo, 'switch', '-q', 'main');
      box.commit(repo, { 'README.md': '# main\n' });
      assert.notEqual(box.gitStatus(repo, 'merge', 'side'), 0);
      const mainBefore = tip('main');
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /in progress/);
      assert.equal(tip('main'), mainBefore);
      assert.ok(existsSync(path.join(repo, '.git', 'MERGE_HEAD')), 'the user\'s merge is left as it was');
    });

    it('moves the ref directly when main is not checked out anywhere', async () => {
      box.git(repo, 'switch', '-q', '-c', 'elsewhere');
      box.write(repo, { 'README.md': '# dirty, but not on main\n' });
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'fast-forwarded');
      assert.equal(tip('main'), loopTip);
      assert.equal(box.git(repo, 'symbolic-ref', '--short', 'HEAD'), 'elsewhere');
      assert.equal(readFileSync(path.join(repo, 'README.md'), 'utf8'), '# dirty, but not on main\n');
      assert.match(box.git(repo, 'reflog', '-1', '--format=%gs', 'main'), /forge: fast-forward to forge\/merger/);
    });

    it('refuses when main has moved on (not an ancestor)', async () => {
      const mainTip = divergeMain({ 'other.txt': 'other' });
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /cannot be fast-forwarded.*kept on forge\/merger/);
      assert.equal(tip('main'), mainTip);
      assertLoopBranchKept();
    });

    it('fast-forwards main checked out in another linked worktree', async () => {
      box.git(repo, 'switch', '-q', '-c', 'parking');
      const mainTree = path.join(box.root, 'main-tree');
      box.git(repo, 'worktree', 'add', '-q', mainTree, 'main');
      const result = await service.mergeIntoBase(loop, 'fast-forward');
      assert.equal(result.kind, 'fast-forwarded');
      assert.equal(readFileSync(path.join(mainTree, 'feature.txt'), 'utf8'), 'feature\n');
    });
  });

  describe("mode 'merge'", () => {
    it('fast-forwards when possible', async () => {
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'fast-forwarded');
      assert.equal(tip('main'), loopTip);
    });

    it('creates a merge commit in a clean user tree when main moved on', async () => {
      const mainTip = divergeMain({ 'other.txt': 'other\n' });
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'merged');
      assert.equal(result.commit, tip('main'));
      assert.deepEqual(parents('main'), [mainTip, loopTip]);
      assert.equal(box.git(repo, 'log', '-1', '--format=%s', 'main'), "Merge branch 'forge/merger' into main");
      assert.equal(readFileSync(path.join(repo, 'feature.txt'), 'utf8'), 'feature\n');
      assert.equal(readFileSync(path.join(repo, 'other.txt'), 'utf8'), 'other\n');
      assert.equal(box.git(repo, 'status', '--porcelain'), '');
      assertLoopBranchKept();
    });

    it('uses a caller-supplied merge message', async () => {
      divergeMain({ 'other.txt': 'other\n' });
      const result = await service.mergeIntoBase(loop, 'merge', { message: 'Forge: merge loop merger (plan: Auth)' });
      assert.equal(result.kind, 'merged');
      assert.equal(box.git(repo, 'log', '-1', '--format=%s', 'main'), 'Forge: merge loop merger (plan: Auth)');
    });

    it('merges with the Forge identity when the user has none', async () => {
      box.git(box.root, 'config', '--global', '--unset', 'user.email');
      box.git(box.root, 'config', '--global', '--unset', 'user.name');
      divergeMain({ 'other.txt': 'other\n' });
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'merged');
      assert.equal(box.git(repo, 'log', '-1', '--format=%an <%ae>', 'main'), 'Forge <forge@localhost>');
    });

    it('aborts on conflicts, restores the user tree and reports the files', async () => {
      const mainTip = divergeMain({ 'shared.txt': 'line 1 (user)\nline 2\nline 3\n' });
      const result: MergeResult = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'refused');
      assert.deepEqual(result.conflicts, ['shared.txt']);
      assert.match(result.message, /conflicts in shared\.txt.*aborted the merge.*as it was/);
      assert.equal(tip('main'), mainTip);
      assert.equal(box.git(repo, 'status', '--porcelain'), '');
      assert.equal(readFileSync(path.join(repo, 'shared.txt'), 'utf8'), 'line 1 (user)\nline 2\nline 3\n');
      assert.ok(!existsSync(path.join(repo, 'feature.txt')));
      assert.ok(!existsSync(path.join(repo, '.git', 'MERGE_HEAD')));
      assertLoopBranchKept();
    });

    it('refuses a merge commit when the user tree is dirty', async () => {
      const mainTip = divergeMain({ 'other.txt': 'other\n' });
      box.write(repo, { 'other.txt': 'user editing\n' });
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /uncommitted changes/);
      assert.equal(tip('main'), mainTip);
      assert.equal(readFileSync(path.join(repo, 'other.txt'), 'utf8'), 'user editing\n');
    });

    it('merges without a checkout when main is not checked out, in a scratch worktree it removes', async () => {
      const mainTip = divergeMain({ 'other.txt': 'other\n' });
      box.git(repo, 'switch', '-q', '-c', 'elsewhere');
      box.write(repo, { 'README.md': '# user is busy on another branch\n' });
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'merged');
      assert.deepEqual(parents('main'), [mainTip, loopTip]);
      assert.equal(box.git(repo, 'show', 'main:feature.txt'), 'feature');
      assert.equal(box.git(repo, 'show', 'main:other.txt'), 'other');
      assert.equal(readFileSync(path.join(repo, 'README.md'), 'utf8'), '# user is busy on another branch\n');
      assert.deepEqual(scratchFolders(), []);
      assert.doesNotMatch(box.git(repo, 'worktree', 'list'), /\.merge-/);
      assertLoopBranchKept();
    });

    it('reports conflicts without a checkout and leaves main alone', async () => {
      const mainTip = divergeMain({ 'shared.txt': 'line 1 (user)\nline 2\nline 3\n' });
      box.git(repo, 'switch', '-q', '-c', 'elsewhere');
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'refused');
      assert.deepEqual(result.conflicts, ['shared.txt']);
      assert.equal(tip('main'), mainTip);
      assert.deepEqual(scratchFolders(), []);
      assertLoopBranchKept();
    });
  });

  describe('squash (forge accept --squash)', () => {
    it('without a checkout: one commit on main with the merged tree, the loop branch kept', async () => {
      const mainTip = divergeMain({ 'other.txt': 'other\n' });
      box.git(repo, 'switch', '-q', '-c', 'elsewhere');
      const result = await service.mergeIntoBase(loop, 'merge', { squash: true, message: 'squashed it' });
      assert.equal(result.kind, 'merged', result.message);
      assert.match(result.message, /^Squashed /);
      assert.deepEqual(parents('main'), [mainTip]);
      assert.equal(tip('main'), result.commit);
      assert.equal(box.git(repo, 'log', '-1', '--format=%s', 'main'), 'squashed it');
      assert.equal(box.git(repo, 'show', 'main:feature.txt'), 'feature');
      assert.equal(box.git(repo, 'show', 'main:other.txt'), 'other');
      assertLoopBranchKept();
    });

    it('reports conflicts and leaves main alone', async () => {
      const mainTip = divergeMain({ 'shared.txt': 'line 1 (user)\nline 2\nline 3\n' });
      const result = await service.mergeIntoBase(loop, 'merge', { squash: true });
      assert.equal(result.kind, 'refused');
      assert.deepEqual(result.conflicts, ['shared.txt']);
      assert.equal(tip('main'), mainTip);
      assert.equal(box.git(repo, 'status', '--porcelain', '--untracked-files=no'), '');
      assertLoopBranchKept();
    });
  });

  describe('nothing to merge, or nowhere to merge', () => {
    it('reports kept when main already contains the loop branch', async () => {
      box.git(repo, 'merge', '-q', '--ff-only', loop.branch);
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'kept');
      assert.match(result.message, /already contains/);
    });

    it('refuses when the loop started from a detached HEAD', async () => {
      const result = await service.mergeIntoBase({ ...loop, baseBranch: null }, 'fast-forward');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /detached HEAD.*kept on forge\/merger/);
    });

    it('refuses when the base branch was deleted', async () => {
      box.git(repo, 'switch', '-q', '-c', 'other');
      box.git(repo, 'branch', '-D', 'main');
      const result = await service.mergeIntoBase(loop, 'merge');
      assert.equal(result.kind, 'refused');
      assert.match(result.message, /main no longer exists/);
      assertLoopBranchKept();
    });
  });
});
