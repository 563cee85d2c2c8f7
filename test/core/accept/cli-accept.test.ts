/**
 * `forge accept` end to end (issue 29 item 4; built `dist/cli.mjs`, real opencode, real git, the
 * database file, scripted model): a completed loop's branch fast-forwards the base branch; a
 * dirty checkout of the base refuses it with nothing changed; a base that moved without conflict
 * gets a merge commit (or one squashed commit); `--push` sends the branch to a remote with the
 * user's git; each accept is recorded and shown by `forge status NAME`; `--remove` removes the
 * worktree and branch.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { git } from '../../support/git-repo';
import { sessionScript } from '../../support/loop-harness';
import { toolCall } from '../../support/scripted-model';

interface StatusJson {
  status: string;
  accepts: Array<{ how: string; into: string | null; remote: string | null; commit: string | null; by: string; at: number }>;
}

describe('forge accept: merge a completed loop into its base, or push it (real CLI, opencode, git)', function () {
  this.timeout(600_000);
  const w = useCliLoopWorld('forge-accept-', { 'README.md': '# accept\n' });
  const worktreeOf = (loop: string) => join(w.work, 'data', 'worktrees', loop);

  /** Runs a goal loop whose coder writes `file` and hands off; it completes. */
  async function completedLoop(loop: string, file: string, content: string): Promise<string> {
    w.model.setHandler(
      sessionScript((role) =>
        role === 'code'
          ? [toolCall('write', { filePath: join(worktreeOf(loop), file), content }), toolCall('forge_loop_handoff', { decisions: `Wrote ${file}.`, verification: 'none', notesForAuditor: '' })]
          : [toolCall('forge_loop_handoff', { summary: 'fine', done: true, deviations: '', followUps: '' })],
      ).handler,
    );
    const r = await w.runner.run(['goal', `write ${file}`, '--name', loop, '--no-sandbox']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    return (await w.repo.git('rev-parse', `refs/heads/forge/${loop}`)).trim();
  }

  async function status(loop: string): Promise<StatusJson> {
    const r = await w.runner.run(['status', loop, '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout.trim()) as StatusJson;
  }

  const mainTip = async () => (await w.repo.git('rev-parse', 'refs/heads/main')).trim();

  it('fast-forwards the base when it has not moved, records who/how/commit, and --remove removes the worktree and branch', async () => {
    const tip = await completedLoop('acc-ff', 'ff.txt', 'fast\n');
    const r = await w.runner.run(['accept', 'acc-ff']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^Fast-forwarded main to forge\/acc-ff \([0-9a-f]{12}\)\.$/m);
    assert.match(r.stdout, /remove them with: forge accept acc-ff --remove$/m);
    assert.equal(await mainTip(), tip);
    assert.equal(await readFile(join(w.repo.dir, 'ff.txt'), 'utf8'), 'fast\n', 'the checked-out base has the work');
    const s = await status('acc-ff');
    assert.equal(s.accepts.length, 1);
    assert.deepEqual({ ...s.accepts[0], at: 0 }, { how: 'fast-forward', into: 'main', remote: null, commit: tip, by: userInfo().username, at: 0 });
    const text = await w.runner.run(['status', 'acc-ff']);
    assert.match(text.stdout, /^accepted:\n {2}fast-forward into main \([0-9a-f]{12}\) by \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC$/m);

    const removed = await w.runner.run(['accept', 'acc-ff', '--remove']);
    assert.equal(removed.code, 0, `${removed.stdout}\n${removed.stderr}`);
    assert.match(removed.stdout, /was accepted already/);
    assert.equal(existsSync(worktreeOf('acc-ff')), false, 'worktree removed');
    assert.equal((await w.repo.git('branch', '--list', 'forge/acc-ff')).trim(), '', 'branch removed');
    assert.equal(await mainTip(), tip, 'the base is where the accept left it');
    assert.equal((await status('acc-ff')).accepts.length, 1, 'no second record');
  });

  it('refuses when the checkout of the base is dirty, changing nothing; --push then sends the branch to a bare remote with no URL for a file remote', async () => {
    const tip = await completedLoop('acc-dirty', 'dirty.txt', 'loop\n');
    const before = await mainTip();
    await writeFile(join(w.repo.dir, 'README.md'), '# accept\nmy edit\n');
    try {
      const r = await w.runner.run(['accept', 'acc-dirty']);
      assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0]!, /^forge: Forge did not merge forge\/acc-dirty into main: .* has uncommitted changes.*Commit or stash your changes, then run: git merge forge\/acc-dirty$/);
      assert.equal(await mainTip(), before, 'base ref unchanged');
      assert.equal((await w.repo.git('rev-parse', 'refs/heads/forge/acc-dirty')).trim(), tip, 'loop branch unchanged');
      assert.ok(existsSync(join(worktreeOf('acc-dirty'), 'dirty.txt')), 'worktree kept');
      assert.equal(existsSync(join(w.repo.dir, 'dirty.txt')), false, 'no file of the loop in the checkout');
      assert.equal(await readFile(join(w.repo.dir, 'README.md'), 'utf8'), '# accept\nmy edit\n', "the user's edit is untouched");
      assert.equal((await status('acc-dirty')).accepts.length, 0, 'nothing recorded');
    } finally {
      await w.repo.git('checkout', '--', 'README.md');
    }

    const bare = await mkdtemp(join(tmpdir(), 'forge-accept-remote-'));
    try {
      await git(bare, 'init', '-q', '--bare');
      await w.repo.git('remote', 'add', 'local', bare);
      const pushed = await w.runner.run(['accept', 'acc-dirty', '--push', 'local']);
      assert.equal(pushed.code, 0, `${pushed.stdout}\n${pushed.stderr}`);
      assert.match(pushed.stdout.trim(), /^Pushed forge\/acc-dirty to local \([0-9a-f]{12}\)\.$/);
      assert.equal((await git(bare, 'rev-parse', 'refs/heads/forge/acc-dirty')).trim(), tip, 'the branch arrived');
      assert.equal(await mainTip(), before, 'a push merges nothing');
      const s = await status('acc-dirty');
      assert.deepEqual(s.accepts.map((a) => [a.how, a.remote, a.commit]), [['push', 'local', tip]]);
      const unknown = await w.runner.run(['accept', 'acc-dirty', '--push', 'nowhere']);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /has no remote "nowhere"/);
    } finally {
      await w.repo.git('remote', 'remove', 'local').catch(() => undefined);
      await rm(bare, { recursive: true, force: true });
    }
  });

  it('makes a merge commit when the base moved without conflict, and one squashed commit with --squash', async () => {
    const tip = await completedLoop('acc-merge', 'merged.txt', 'merged\n');
    await writeFile(join(w.repo.dir, 'user.txt'), 'user\n');
    await w.repo.git('add', 'user.txt');
    await w.repo.git('commit', '-q', '-m', 'user work');
    const userTip = await mainTip();
    const r = await w.runner.run(['accept', 'acc-merge', '--merge-commit']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^Merged forge\/acc-merge into main \([0-9a-f]{12}\)\.$/m);
    const merge = await mainTip();
    assert.deepEqual((await w.repo.git('rev-list', '--parents', '-n', '1', merge)).trim().split(' ').slice(1), [userTip, tip]);
    assert.equal(await readFile(join(w.repo.dir, 'merged.txt'), 'utf8'), 'merged\n');
    assert.deepEqual((await status('acc-merge')).accepts.map((a) => [a.how, a.into, a.commit]), [['merge', 'main', merge]]);

    const squashTip = await completedLoop('acc-squash', 'squashed.txt', 'squashed\n');
    await writeFile(join(w.repo.dir, 'user2.txt'), 'user2\n');
    await w.repo.git('add', 'user2.txt');
    await w.repo.git('commit', '-q', '-m', 'more user work');
    const userTip2 = await mainTip();
    const sq = await w.runner.run(['accept', 'acc-squash', '--squash']);
    assert.equal(sq.code, 0, `${sq.stdout}\n${sq.stderr}`);
    assert.match(sq.stdout, /^Squashed forge\/acc-squash into main \([0-9a-f]{12}\)\.$/m);
    const squashed = await mainTip();
    assert.deepEqual((await w.repo.git('rev-list', '--parents', '-n', '1', squashed)).trim().split(' ').slice(1), [userTip2], 'one parent: a squash');
    assert.equal(await readFile(join(w.repo.dir, 'squashed.txt'), 'utf8'), 'squashed\n', 'the checkout moved with it');
    assert.equal((await w.repo.git('status', '--porcelain', '--untracked-files=no')).trim(), '', 'the checkout is clean');
    assert.notEqual(squashed, squashTip);
    assert.deepEqual((await status('acc-squash')).accepts.map((a) => a.how), ['squash']);
  });
});
