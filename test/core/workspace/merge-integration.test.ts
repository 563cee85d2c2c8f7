/**
 * A feature group's integration branch in git (merge-integration.ts), on real repositories: made
 * once at a commit, merged into with --no-ff only after the merged tree passed the check (the
 * branch stays where it was on a conflict or a refusal), and the merge started in a loop's own
 * worktree for its coder to resolve, completed by the loop's next commit.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { LoopWorktree, WorktreeService } from '../../../src/core/workspace';
import { integrationBranchOf } from '../../../src/core/workspace/merge-integration';
import { createGitSandbox, type GitSandbox } from './git-fixture';

describe('workspace: a group integration branch and the merges into it', () => {
  let box: GitSandbox;
  let repo: string;
  let service: WorktreeService;
  let first: LoopWorktree;
  let second: LoopWorktree;
  let start: string;

  beforeEach(async () => {
    box = createGitSandbox();
    box.setGlobalIdentity('Ada Lovelace', 'ada@example.com');
    repo = box.initRepo('repo', { files: { 'README.md': '# repo\n' } });
    service = box.service();
    start = box.git(repo, 'rev-parse', 'HEAD');
    first = await service.createWorktree({ repoPath: repo, loopName: 'g-first' });
    second = await service.createWorktree({ repoPath: repo, loopName: 'g-second' });
    box.write(first.worktreeDir, { 'shared.txt': 'first\n', 'a.txt': 'a\n' });
    await service.commitAll(first.worktreeDir, 'first');
    box.write(second.worktreeDir, { 'shared.txt': 'second\n' });
    await service.commitAll(second.worktreeDir, 'second');
  });
  afterEach(() => box.cleanup());

  const tip = (ref: string) => box.git(repo, 'rev-parse', ref);
  const scratchFolders = () => readdirSync(path.join(box.root, 'data', 'worktrees')).filter((name) => name.startsWith('.'));
  const merge = (loop: LoopWorktree, check: (dir: string) => Promise<string | null> = async () => null) =>
    service.integration.mergeIntoIntegration({ repoDir: repo, groupId: 'g', loopBranch: loop.branch, loopName: loop.loopName, check });

  it('makes forge/group/<id> once, at the commit given, and never moves an existing one', async () => {
    assert.equal(integrationBranchOf('g'), 'forge/group/g');
    assert.equal(await service.integration.ensureIntegrationBranch(repo, 'g', start), start);
    assert.equal(tip('forge/group/g'), start);
    box.commit(repo, { 'user.txt': 'mine\n' }, 'user work');
    assert.equal(await service.integration.ensureIntegrationBranch(repo, 'g', tip('main')), start);
    assert.equal(tip('forge/group/g'), start);
  });

  it('merges with --no-ff after the check passed on the merged tree; a second loop on the same file conflicts and changes nothing', async () => {
    await service.integration.ensureIntegrationBranch(repo, 'g', start);
    const seen: string[] = [];
    const merged = await merge(first, async (dir) => {
      seen.push(readFileSync(path.join(dir, 'shared.txt'), 'utf8'));
      return null;
    });
    assert.equal(merged.kind, 'merged');
    assert.deepEqual(seen, ['first\n'], 'the check ran on the merged tree');
    const integrated = tip('forge/group/g');
    assert.equal(box.git(repo, 'log', '-1', '--format=%P', integrated).split(' ').length, 2, 'a merge commit (--no-ff)');
    assert.equal(box.git(repo, 'show', 'forge/group/g:a.txt'), 'a');

    const conflict = await merge(second);
    assert.equal(conflict.kind, 'conflict');
    assert.deepEqual(conflict.kind === 'conflict' ? conflict.conflicts : [], ['shared.txt']);
    assert.equal(tip('forge/group/g'), integrated, 'the integration branch did not move');
    assert.equal(tip('main'), start, "the user's branch did not move");
    assert.equal(box.git(repo, 'status', '--porcelain'), '');
    assert.deepEqual(scratchFolders(), [], 'the throw-away worktree is gone');

    assert.equal((await merge(first)).kind, 'up_to_date');
  });

  it('a check that fails on the merged tree refuses the merge: the integration branch stays, the failure is said', async () => {
    await service.integration.ensureIntegrationBranch(repo, 'g', start);
    const refused = await merge(first, async () => 'Check "grep" of feature first exited with code 1.');
    assert.equal(refused.kind, 'check_failed');
    assert.match(refused.message, /a check failed on the merged tree; forge\/group\/g was not moved\. Check "grep" of feature first exited with code 1\./);
    assert.equal(tip('forge/group/g'), start);
    assert.deepEqual(scratchFolders(), []);
  });

  it('says what is missing: the integration branch, the loop branch', async () => {
    const noIntegration = await merge(first);
    assert.equal(noIntegration.kind, 'failed');
    assert.match(noIntegration.message, /integration branch forge\/group\/g no longer exists/);
    await service.integration.ensureIntegrationBranch(repo, 'g', start);
    const gone = await service.integration.mergeIntoIntegration({ repoDir: repo, groupId: 'g', loopBranch: 'forge/nope', loopName: 'nope', check: async () => null });
    assert.equal(gone.kind, 'failed');
    assert.match(gone.message, /forge\/nope no longer exists/);
  });

  it("starts the merge in the loop's worktree: a conflict stays in progress with markers, and the loop's next commit completes it", async () => {
    await service.integration.ensureIntegrationBranch(repo, 'g', start);
    await merge(first);
    const integrated = tip('forge/group/g');
    const started = await service.integration.startMergeInLoop({ worktreeDir: second.worktreeDir, groupId: 'g' });
    assert.equal(started.kind, 'conflict');
    const files = started.kind === 'conflict' ? started.files : [];
    assert.equal(files.length, 1);
    assert.equal(files[0]!.path, 'shared.txt');
    assert.match(files[0]!.content!, /^<{7} HEAD\nsecond\n={7}\nfirst\n>{7} refs\/heads\/forge\/group\/g\n$/);
    // Asked again while it is in progress: the same conflict, nothing new started.
    const again = await service.integration.startMergeInLoop({ worktreeDir: second.worktreeDir, groupId: 'g' });
    assert.equal(again.kind, 'conflict');

    // The coder resolves the file; Forge's commit (with its usual pathspec) completes the merge.
    box.write(second.worktreeDir, { 'shared.txt': 'first\nsecond\n' });
    const sha = await service.commitAll(second.worktreeDir, 'loop done', { likelyClean: true });
    assert.ok(sha);
    assert.deepEqual(box.git(second.worktreeDir, 'log', '-1', '--format=%P').split(' ')[1], integrated, 'a merge commit with the integration branch as second parent');
    assert.ok(!existsSync(path.join(box.git(second.worktreeDir, 'rev-parse', '--absolute-git-dir'), 'MERGE_HEAD')));
    // Now the queue's merge goes through.
    const merged = await merge(second);
    assert.equal(merged.kind, 'merged');
    assert.equal(box.git(repo, 'show', 'forge/group/g:shared.txt'), 'first\nsecond');
    // A loop that started from the integration branch has nothing to merge in.
    const dependent = await service.createWorktree({ repoPath: repo, loopName: 'g-dependent', baseCommit: 'forge/group/g' });
    assert.equal((await service.integration.startMergeInLoop({ worktreeDir: dependent.worktreeDir, groupId: 'g' })).kind, 'up_to_date');
  });

  it('a clean merge into the loop is committed at once; a resolution staged by hand but left uncommitted is completed', async () => {
    await service.integration.ensureIntegrationBranch(repo, 'g', start);
    await merge(first);
    // A third loop touching another file merges cleanly into its worktree.
    const third = await service.createWorktree({ repoPath: repo, loopName: 'g-third', baseCommit: start });
    box.write(third.worktreeDir, { 'c.txt': 'c\n' });
    await service.commitAll(third.worktreeDir, 'third');
    const clean = await service.integration.startMergeInLoop({ worktreeDir: third.worktreeDir, groupId: 'g' });
    assert.equal(clean.kind, 'merged');
    assert.equal(box.git(third.worktreeDir, 'status', '--porcelain'), '');
    assert.equal(readFileSync(path.join(third.worktreeDir, 'a.txt'), 'utf8'), 'a\n');

    // The second loop's conflict, resolved and staged by an agent, never committed.
    await service.integration.startMergeInLoop({ worktreeDir: second.worktreeDir, groupId: 'g' });
    box.write(second.worktreeDir, { 'shared.txt': 'both\n' });
    box.git(second.worktreeDir, 'add', 'shared.txt');
    // Forge's commit still completes it (add finds nothing new; the dry run asks about the whole merge).
    assert.ok(await service.commitAll(second.worktreeDir, 'loop done'));
    assert.equal(box.git(second.worktreeDir, 'log', '-1', '--format=%P').split(' ').length, 2);
  });
});
