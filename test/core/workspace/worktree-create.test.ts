import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkspaceError } from '../../../src/core/workspace';
import { createGitSandbox, rejection, type GitSandbox } from './git-fixture';

describe('workspace: worktree creation', () => {
  let box: GitSandbox;
  let repo: string;
  let worktrees: string;
  beforeEach(() => {
    box = createGitSandbox();
    repo = box.initRepo('repo', { files: { 'README.md': '# repo\n', 'src/app.ts': 'export {};\n' } });
    worktrees = path.join(box.root, 'data', 'worktrees');
  });
  afterEach(() => box.cleanup());

  const branchExists = (name: string) => box.gitStatus(repo, 'rev-parse', '--verify', '-q', `refs/heads/${name}`) === 0;

  it('creates forge/<name> from HEAD in <dataDir>/worktrees/<name>, outside the working tree', async () => {
    const head = box.git(repo, 'rev-parse', 'HEAD');
    const created = await box.service().createWorktree({ repoPath: repo, loopName: 'add-login' });
    assert.deepEqual(created, {
      loopName: 'add-login',
      worktreeDir: path.join(worktrees, 'add-login'),
      branch: 'forge/add-login',
      baseBranch: 'main',
      baseCommit: head,
      repoDir: repo,
      gitCommonDir: path.join(repo, '.git'),
    });
    assert.equal(readFileSync(path.join(created.worktreeDir, 'src/app.ts'), 'utf8'), 'export {};\n');
    assert.equal(box.git(created.worktreeDir, 'symbolic-ref', '--short', 'HEAD'), 'forge/add-login');
    assert.equal(box.git(created.worktreeDir, 'rev-parse', 'HEAD'), head);
    // The user's working tree is untouched: same branch, nothing new in it.
    assert.equal(box.git(repo, 'symbolic-ref', '--short', 'HEAD'), 'main');
    assert.equal(box.git(repo, 'status', '--porcelain'), '');
  });

  it('works from a subfolder and reports the top-level folder', async () => {
    const created = await box.service().createWorktree({ repoPath: path.join(repo, 'src'), loopName: 'sub' });
    assert.equal(created.repoDir, repo);
  });

  it('reports baseBranch null when HEAD is detached', async () => {
    const first = box.git(repo, 'rev-parse', 'HEAD');
    box.commit(repo, { 'second.txt': '2' });
    box.git(repo, 'checkout', '-q', '--detach', first);
    const created = await box.service().createWorktree({ repoPath: repo, loopName: 'detached' });
    assert.equal(created.baseBranch, null);
    assert.equal(created.baseCommit, first);
    assert.equal(box.git(created.worktreeDir, 'rev-parse', 'HEAD'), first);
  });

  it('starts from a pinned commit (sha or ref) instead of HEAD', async () => {
    const first = box.git(repo, 'rev-parse', 'HEAD');
    box.commit(repo, { 'second.txt': '2' });
    const service = box.service();
    const bySha = await service.createWorktree({ repoPath: repo, loopName: 'pinned', baseCommit: first.slice(0, 10) });
    assert.equal(bySha.baseCommit, first);
    assert.equal(bySha.baseBranch, 'main');
    assert.ok(!existsSync(path.join(bySha.worktreeDir, 'second.txt')));
    const byRef = await service.createWorktree({ repoPath: repo, loopName: 'pinned-ref', baseCommit: 'main~1' });
    assert.equal(byRef.baseCommit, first);
  });

  it('rejects a pinned commit that does not exist, or that looks like an option', async () => {
    const service = box.service();
    for (const baseCommit of ['deadbeef', 'no-such-branch', '--all', '-h']) {
      const error = await rejection(service.createWorktree({ repoPath: repo, loopName: 'bad-base', baseCommit }));
      assert.equal((error as WorkspaceError).code, 'invalid_base_commit', baseCommit);
      assert.match(error.message, /is not a commit/);
    }
    assert.ok(!branchExists('forge/bad-base'));
    assert.ok(!existsSync(path.join(worktrees, 'bad-base')));
  });

  it('refuses a loop name that is not a slug, before touching anything', async () => {
    const service = box.service();
    for (const loopName of ['../escape', '..', '.', '/abs', 'a/b', 'a\\b', 'UPPER', '', 'nul\u0000', 'x'.repeat(49), '-lead']) {
      const error = await rejection(service.createWorktree({ repoPath: repo, loopName }));
      assert.ok(error instanceof WorkspaceError);
      assert.equal(error.code, 'invalid_loop_name', JSON.stringify(loopName));
    }
    assert.ok(!existsSync(path.join(box.root, 'data')), 'not even the data folder was created');
    assert.equal(box.git(repo, 'branch', '--list', 'forge/*'), '');
  });

  it('refuses a leftover forge/<name> branch at another commit, and never moves it', async () => {
    const first = box.git(repo, 'rev-parse', 'HEAD');
    box.git(repo, 'branch', 'forge/taken', first);
    box.commit(repo, { 'second.txt': '2' });
    const error = await rejection(box.service().createWorktree({ repoPath: repo, loopName: 'taken' }));
    assert.ok(error instanceof WorkspaceError);
    assert.equal(error.code, 'branch_exists');
    assert.match(error.message, /forge\/taken already exists.*never reuses it.*another loop name/);
    assert.equal(box.git(repo, 'rev-parse', 'forge/taken'), first);
    assert.ok(!existsSync(path.join(worktrees, 'taken')));
  });

  it('reuses a leftover branch at the same commit that has no worktree', async () => {
    box.git(repo, 'branch', 'forge/same');
    const created = await box.service().createWorktree({ repoPath: repo, loopName: 'same' });
    assert.equal(box.git(created.worktreeDir, 'symbolic-ref', '--short', 'HEAD'), 'forge/same');
    assert.ok(box.logLines.some((line) => /reused branch forge\/same/.test(line)));
  });

  it('refuses a same-commit branch that is checked out elsewhere', async () => {
    const elsewhere = path.join(box.root, 'elsewhere');
    box.git(repo, 'worktree', 'add', '-q', '-b', 'forge/busy', elsewhere);
    const error = await rejection(box.service().createWorktree({ repoPath: repo, loopName: 'busy' }));
    assert.equal((error as WorkspaceError).code, 'branch_checked_out');
    assert.match(error.message, new RegExp(`forge/busy is checked out in ${elsewhere}`));
    assert.ok(!existsSync(path.join(worktrees, 'busy')));
  });

  it('reuses a same-commit branch whose old worktree folder was deleted (stale registration)', async () => {
    const old = path.join(box.root, 'old-worktree');
    box.git(repo, 'worktree', 'add', '-q', '-b', 'forge/stale', old);
    rmSync(old, { recursive: true, force: true });
    const created = await box.service().createWorktree({ repoPath: repo, loopName: 'stale' });
    assert.equal(box.git(created.worktreeDir, 'symbolic-ref', '--short', 'HEAD'), 'forge/stale');
    assert.doesNotMatch(box.git(repo, 'worktree', 'list', '--porcelain'), /old-worktree/);
  });

  it('refuses an existing folder (or symlink) at the worktree path', async () => {
    mkdirSync(path.join(worktrees, 'occupied'), { recursive: true });
    writeFileSync(path.join(worktrees, 'occupied', 'keep.txt'), 'mine');
    symlinkSync(box.root, path.join(worktrees, 'linked'));
    const service = box.service();
    for (const loopName of ['occupied', 'linked']) {
      const error = await rejection(service.createWorktree({ repoPath: repo, loopName }));
      assert.equal((error as WorkspaceError).code, 'worktree_path_exists', loopName);
      assert.match(error.message, /already exists/);
      assert.ok(!branchExists(`forge/${loopName}`));
    }
    assert.equal(readFileSync(path.join(worktrees, 'occupied', 'keep.txt'), 'utf8'), 'mine');
  });

  it('refuses a data folder inside the repository', async () => {
    const service = box.service({ dataDir: path.join(repo, '.forge-data') });
    const error = await rejection(service.createWorktree({ repoPath: repo, loopName: 'inside' }));
    assert.equal((error as WorkspaceError).code, 'worktree_inside_repository');
    assert.match(error.message, /FORGE_DATA_DIR/);
    assert.ok(!branchExists('forge/inside'));
  });

  it('resolves a symlinked data folder and still keeps worktrees inside it', async () => {
    const realData = path.join(box.root, 'real-data');
    mkdirSync(realData);
    symlinkSync(realData, path.join(box.root, 'data-link'));
    const created = await box.service({ dataDir: path.join(box.root, 'data-link') }).createWorktree({ repoPath: repo, loopName: 'via-link' });
    assert.equal(created.worktreeDir, path.join(realData, 'worktrees', 'via-link'));
  });

  it('explains a branch named "forge" that blocks forge/<name>', async () => {
    box.git(repo, 'branch', 'forge');
    const error = await rejection(box.service().createWorktree({ repoPath: repo, loopName: 'blocked' }));
    assert.equal((error as WorkspaceError).code, 'branch_namespace_taken');
    assert.match(error.message, /git branch -m forge/);
  });

  it('keeps .opencode/ out of commits without creating it or touching .gitignore or the shared info/exclude', async () => {
    box.commit(repo, { '.gitignore': 'node_modules/\n' });
    const sharedExclude = path.join(repo, '.git', 'info', 'exclude');
    const excludeBefore = existsSync(sharedExclude) ? readFileSync(sharedExclude, 'utf8') : null;

    const service = box.service();
    const created = await service.createWorktree({ repoPath: repo, loopName: 'artefacts' });
    // What git does: a linked worktree's info/exclude is the shared one.
    assert.equal(box.git(created.worktreeDir, 'rev-parse', '--path-format=absolute', '--git-path', 'info/exclude'), sharedExclude);
    // No .opencode/ folder appears: opencode would install @opencode-ai/plugin into it.
    assert.ok(!existsSync(path.join(created.worktreeDir, '.opencode')));

    box.write(created.worktreeDir, { '.opencode/package.json': '{}', '.opencode/node_modules/x/index.js': '', 'feature.ts': 'x' });
    assert.ok(await service.commitAll(created.worktreeDir, 'section 1: feature'));
    assert.equal(box.git(created.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), 'feature.ts');

    assert.equal(readFileSync(path.join(created.worktreeDir, '.gitignore'), 'utf8'), 'node_modules/\n');
    assert.equal(existsSync(sharedExclude) ? readFileSync(sharedExclude, 'utf8') : null, excludeBefore);
    // The user's own working tree still sees its own .opencode/ folder.
    box.write(repo, { '.opencode/agent.md': 'mine' });
    assert.equal(box.git(repo, 'status', '--porcelain', '--untracked-files=all'), '?? .opencode/agent.md');
  });

  it('leaves .opencode/ alone when the repository tracks it', async () => {
    box.commit(repo, { '.opencode/agent/reviewer.md': 'tracked' });
    const created = await box.service().createWorktree({ repoPath: repo, loopName: 'tracked-config' });
    assert.ok(!existsSync(path.join(created.worktreeDir, '.opencode', '.gitignore')));
    box.write(created.worktreeDir, { '.opencode/agent/new.md': 'new agent' });
    assert.equal(box.git(created.worktreeDir, 'status', '--porcelain', '--untracked-files=all'), '?? .opencode/agent/new.md');
  });

  it('creates several loops side by side, each on its own branch', async () => {
    const service = box.service();
    const names = ['one', 'two', 'three'];
    const created = await Promise.all(names.map((loopName) => service.createWorktree({ repoPath: repo, loopName })));
    assert.deepEqual(created.map((c) => c.branch), names.map((n) => `forge/${n}`));
    assert.deepEqual(readdirSync(worktrees).sort(), [...names].sort());
  });
});
