import assert from 'node:assert/strict';
import { chmodSync, cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { FORGE_COMMIT_IDENTITY, WorkspaceError, loopTeardownMessage, sectionCheckpointMessage, type LoopWorktree, type WorktreeService } from '../../../src/core/workspace';
import { createGitSandbox, rejection, type GitSandbox } from './git-fixture';

describe('workspace: commits on the loop branch', () => {
  let box: GitSandbox;
  let repo: string;
  let service: WorktreeService;
  let loop: LoopWorktree;
  beforeEach(async () => {
    box = createGitSandbox();
    repo = box.initRepo('repo', { files: { 'README.md': '# repo\n', '.gitignore': 'build/\n', 'old.txt': 'old\n' } });
    service = box.service();
    loop = await service.createWorktree({ repoPath: repo, loopName: 'committer' });
  });
  afterEach(() => box.cleanup());

  const author = (dir: string) => box.git(dir, 'log', '-1', '--format=%an <%ae>|%cn <%ce>');

  it('stages everything (new, modified, deleted) and returns the commit sha', async () => {
    box.write(loop.worktreeDir, { 'new.txt': 'new\n', 'README.md': '# changed\n', 'deep/nested/file.ts': 'x' });
    box.git(loop.worktreeDir, 'rm', '-q', 'old.txt');
    const sha = await service.commitAll(loop.worktreeDir, (changes) => sectionCheckpointMessage({ number: 1, title: 'First section', loopName: 'committer', changes }));
    assert.ok(sha);
    assert.equal(sha, box.git(loop.worktreeDir, 'rev-parse', 'HEAD'));
    // The message names what the commit holds, also what was staged before (git rm).
    assert.equal(
      box.git(loop.worktreeDir, 'log', '-1', '--format=%B'),
      'First section\n\nChanges README.md, deep/nested/file.ts and new.txt; removes old.txt.\n\nSection 1 of Forge loop committer, approved by its auditor.',
    );
    assert.equal(box.git(loop.worktreeDir, 'show', '--name-status', '--format=', 'HEAD'), 'M\tREADME.md\nA\tdeep/nested/file.ts\nA\tnew.txt\nD\told.txt');
    assert.equal(box.git(loop.worktreeDir, 'status', '--porcelain'), '');
    // Only the loop branch moved.
    assert.equal(box.git(repo, 'rev-parse', 'main'), loop.baseCommit);
    assert.equal(box.git(repo, 'rev-parse', loop.branch), sha);
  });

  it('returns null when there is nothing to commit', async () => {
    assert.equal(await service.commitAll(loop.worktreeDir, 'nothing'), null);
    assert.equal(box.git(loop.worktreeDir, 'rev-parse', 'HEAD'), loop.baseCommit);
  });

  it('with likelyClean (a loop\'s last commit): the same outcomes, status first', async () => {
    assert.equal(await service.commitAll(loop.worktreeDir, 'nothing', { likelyClean: true }), null);
    box.write(loop.worktreeDir, { 'build/out.js': 'x', '.opencode/package.json': '{}' });
    assert.equal(await service.commitAll(loop.worktreeDir, 'only ignored and artefacts', { likelyClean: true }), null);
    box.write(loop.worktreeDir, { 'untracked.txt': 'u' });
    const first = await service.commitAll(loop.worktreeDir, 'untracked', { likelyClean: true });
    assert.equal(first, box.git(loop.worktreeDir, 'rev-parse', 'HEAD'));
    assert.equal(box.git(loop.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), 'untracked.txt');
    // Staged by an agent, nothing else changed in the working tree.
    box.write(loop.worktreeDir, { 'staged.txt': 's' });
    box.git(loop.worktreeDir, 'add', 'staged.txt');
    const second = await service.commitAll(loop.worktreeDir, 'staged', { likelyClean: true });
    assert.ok(second && second !== first);
    assert.equal(box.git(loop.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), 'staged.txt');
    box.write(loop.worktreeDir, { 'README.md': '# edited\n' });
    assert.ok(await service.commitAll(loop.worktreeDir, 'modified', { likelyClean: true }));
    assert.equal(box.git(loop.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), 'README.md');
    // The artefact folder stays out, as in every commit.
    assert.equal(box.git(loop.worktreeDir, 'status', '--porcelain'), '?? .opencode/');
  });

  it('returns null when only ignored files and artefacts changed', async () => {
    box.write(loop.worktreeDir, { 'build/out.js': 'x', '.opencode/package.json': '{}', '.opencode/node_modules/a.js': '' });
    assert.equal(await service.commitAll(loop.worktreeDir, 'nothing'), null);
  });

  it('keeps .opencode/ out even when an agent staged it or deleted the ignore file', async () => {
    box.write(loop.worktreeDir, { '.opencode/plugin.js': 'x', 'feature.ts': 'y' });
    box.git(loop.worktreeDir, 'add', '-f', '.opencode/plugin.js');
    box.git(loop.worktreeDir, 'rm', '-q', '--cached', '--ignore-unmatch', '.opencode/.gitignore');
    writeFileSync(path.join(loop.worktreeDir, '.opencode', '.gitignore'), 'node_modules\n'); // e.g. opencode rewrote it
    const sha = await service.commitAll(loop.worktreeDir, 'section 1: feature');
    assert.ok(sha);
    assert.equal(box.git(loop.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), 'feature.ts');
  });

  it('commits .opencode/ changes when the repository tracks that folder', async () => {
    box.commit(repo, { '.opencode/agent/a.md': 'v1' });
    const tracked = await service.createWorktree({ repoPath: repo, loopName: 'tracked' });
    box.write(tracked.worktreeDir, { '.opencode/agent/a.md': 'v2' });
    assert.ok(await service.commitAll(tracked.worktreeDir, 'edit agent'));
    assert.equal(box.git(tracked.worktreeDir, 'show', '--name-only', '--format=', 'HEAD'), '.opencode/agent/a.md');
  });

  it('uses the Forge identity when the user has no user.email', async () => {
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    await service.commitAll(loop.worktreeDir, 'identity');
    const forge = `${FORGE_COMMIT_IDENTITY.name} <${FORGE_COMMIT_IDENTITY.email}>`;
    assert.equal(author(loop.worktreeDir), `${forge}|${forge}`);
    // Without a global identity the repository config stays untouched: no user.* written.
    assert.equal(box.gitStatus(repo, 'config', '--get', 'user.email'), 1);
  });

  it('uses the user\'s global identity when configured', async () => {
    box.setGlobalIdentity('Ada Lovelace', 'ada@example.com');
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    await service.commitAll(loop.worktreeDir, 'identity');
    assert.equal(author(loop.worktreeDir), 'Ada Lovelace <ada@example.com>|Ada Lovelace <ada@example.com>');
  });

  it('uses the repository\'s own identity when configured there', async () => {
    box.git(repo, 'config', 'user.name', 'Repo Person');
    box.git(repo, 'config', 'user.email', 'repo@example.com');
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    await service.commitAll(loop.worktreeDir, 'identity');
    assert.equal(author(loop.worktreeDir), 'Repo Person <repo@example.com>|Repo Person <repo@example.com>');
  });

  it('writes multi-line teardown messages verbatim', async () => {
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    await service.commitAll(loop.worktreeDir, loopTeardownMessage({ loopName: 'committer', reason: 'completed', iterations: 3, objective: 'Summarise the work.', sectionTitle: null, changes: { changed: ['a.txt'], removed: [] } }));
    assert.equal(box.git(loop.worktreeDir, 'log', '-1', '--format=%B'), 'Summarise the work\n\nChanges a.txt.\n\nForge loop committer completed after 3 iterations.');
  });

  it('names what the agent staged itself when the working tree adds nothing', async () => {
    box.write(loop.worktreeDir, { 'staged.txt': 's' });
    box.git(loop.worktreeDir, 'mv', 'old.txt', 'moved.txt');
    box.git(loop.worktreeDir, 'add', 'staged.txt');
    await service.commitAll(loop.worktreeDir, (changes) => sectionCheckpointMessage({ number: 2, title: 'Move it', loopName: 'committer', changes }));
    assert.equal(box.git(loop.worktreeDir, 'log', '-1', '--format=%b').split('\n')[0], 'Changes moved.txt and staged.txt; removes old.txt.');
  });

  it('runs no hook of the repository on a loop\'s commit (issue 26: the worktree is hostile input)', async () => {
    const marker = path.join(repo, '..', 'hook-ran');
    for (const name of ['pre-commit', 'commit-msg', 'post-commit']) {
      const hook = path.join(repo, '.git', 'hooks', name);
      writeFileSync(hook, `#!/bin/sh\ntouch '${marker}'\nexit 1\n`);
      chmodSync(hook, 0o755);
    }
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    const sha = await service.commitAll(loop.worktreeDir, 'hooked');
    assert.match(sha ?? '', /^[0-9a-f]{40}$/);
    assert.equal(existsSync(marker), false, 'a hook ran');
  });

  it('puts back a .git file the agent pointed at a git dir of its own, commits on the loop\'s branch, and reports it (issue 26)', async () => {
    const fake = path.join(loop.worktreeDir, '.gg');
    cpSync(path.join(repo, '.git'), fake, { recursive: true });
    const marker = path.join(repo, '..', 'fake-hook-ran');
    writeFileSync(path.join(fake, 'hooks', 'pre-commit'), `#!/bin/sh\ntouch '${marker}'\n`);
    chmodSync(path.join(fake, 'hooks', 'pre-commit'), 0o755);
    const original = readFileSync(path.join(loop.worktreeDir, '.git'), 'utf8');
    writeFileSync(path.join(loop.worktreeDir, '.git'), `gitdir: ${fake}\n`);
    box.write(loop.worktreeDir, { 'a.txt': 'a' });
    const reported: string[] = [];
    const sha = await service.commitAll(loop.worktreeDir, 'after tampering', { onAgentGitChanges: (changes) => reported.push(...changes.map((c) => `${c.kind} ${c.path}: ${c.detail}`)) });
    assert.equal(readFileSync(path.join(loop.worktreeDir, '.git'), 'utf8').trim(), original.trim());
    assert.equal(box.git(repo, 'rev-parse', loop.branch), sha, 'the commit is on the loop\'s branch in the user\'s repository');
    assert.equal(existsSync(marker), false, 'the fake git dir\'s hook ran');
    assert.equal(reported.length, 1, reported.join('\n'));
    assert.match(reported[0]!, /^git-file \.git: .*rewritten to point at .*\.gg/);
  });

  it('refuses to commit outside Forge\'s worktrees (the user\'s own tree)', async () => {
    box.write(repo, { 'user-work.txt': 'mine' });
    for (const dir of [repo, path.join(loop.worktreeDir, 'deep')]) {
      const error = await rejection(service.commitAll(dir, 'nope'));
      assert.equal((error as WorkspaceError).code, 'worktree_outside_data_dir', dir);
    }
    assert.equal(box.git(repo, 'status', '--porcelain'), '?? user-work.txt');
    assert.equal(box.git(repo, 'rev-parse', 'HEAD'), loop.baseCommit);
  });

  it('reports a missing worktree', async () => {
    const gone = path.join(path.dirname(loop.worktreeDir), 'never-created');
    const error = await rejection(service.commitAll(gone, 'nope'));
    assert.equal((error as WorkspaceError).code, 'missing_worktree');
  });
});
