import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LoopRuntimeError } from '../../../src/core/loop/runtime-types';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { git } from '../../support/git-repo';
import { processesWorkingIn } from '../../support/processes';
import { createLoopHarness, REPO_ROOT, sessionScript, type LoopHarness } from '../../support/loop-harness';
import { hang } from '../../support/scripted-model';

const run = promisify(execFile);

function rejectsWith(code: LoopRuntimeError['code'], message: RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof LoopRuntimeError, `expected a LoopRuntimeError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.match(e.message, message);
    return true;
  };
}

describe('bad input: a clear message, nothing created or lost', function () {
  this.timeout(300_000);
  let h: LoopHarness;
  let scratch: string;
  before(async () => {
    h = await createLoopHarness();
    scratch = await mkdtemp(join(tmpdir(), 'forge-bad-'));
  });
  after(async () => {
    await h?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  const plan = '# P\n## One\ndo it';
  async function nothingCreated(): Promise<void> {
    assert.deepEqual(h.engine.runtime.list(h.projectId), [], 'no loop row');
    const worktrees = await readdir(join(h.dataDir, 'worktrees')).catch(() => []);
    assert.deepEqual(worktrees, [], 'no worktree');
    const branches = (await h.repo.git('branch', '--list', 'forge/*')).trim();
    assert.equal(branches, '', 'no loop branch');
  }

  it('a folder that is not a git repository', async () => {
    const dir = join(scratch, 'plain');
    await run('mkdir', ['-p', dir]);
    await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: dir, planText: plan }), rejectsWith('workspace', /not a git repository|git init/i));
    await nothingCreated();
  });

  it('a repository with no commit', async () => {
    const dir = join(scratch, 'empty-repo');
    await run('mkdir', ['-p', dir]);
    await git(dir, 'init', '-q');
    await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: dir, planText: plan }), rejectsWith('workspace', /commit/i));
    await nothingCreated();
  });

  it('a path that does not exist', async () => {
    await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: join(scratch, 'nope'), planText: plan }), rejectsWith('workspace', /nope/));
    await nothingCreated();
  });

  it('an empty plan and a binary file as plan', async () => {
    await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: ' \n\n', planSource: 'plan.md' }), rejectsWith('bad_plan', /plan\.md is empty/));
    await assert.rejects(
      h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: 'PNG\u0000\u0001IHDR', planSource: 'logo.png' }),
      rejectsWith('bad_plan', /logo\.png looks like a binary file/),
    );
    await assert.rejects(h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: '   ' }), rejectsWith('bad_request', /goal is empty/));
    await nothingCreated();
  });

  it('checks Forge cannot run refuse the start, every problem named: an empty Verify:, a path leaving the worktree, an empty --check', async () => {
    const badPlan = '# P\n## One\ndo it\nVerify: exists: ../../etc/passwd\n\n## Verification\n```sh\n\n```\n';
    await assert.rejects(
      h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: badPlan, planSource: 'plan.md' }),
      (e: unknown) => {
        rejectsWith('bad_plan', /The plan's Verification part has a check Forge cannot run/)(e);
        assert.match((e as Error).message, /Section 1 of the plan has a check Forge cannot run:\n- .*\.\./);
        assert.match((e as Error).message, /Fix the plan and start it again\.$/);
        return true;
      },
    );
    await nothingCreated();
    await assert.rejects(
      h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'g', checks: { check: ['  '], contains: ['/etc/passwd:root'] } }),
      rejectsWith('bad_plan', /^The goal has 2 checks Forge cannot run:\n- --check option 1: [^\n]+\n- --contains "\/etc\/passwd:root": [^\n]+\nFix the options/),
    );
    await nothingCreated();
  });

  it('a name that would escape the data folder', async () => {
    for (const name of ['../evil', '/abs', 'a/../../b', '..']) {
      await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan, name }), rejectsWith('bad_name', /./));
    }
    await nothingCreated();
  });

  it('a path-like Loop Name in the plan is refused like --name ../x, not turned into another name', async () => {
    for (const name of ['../../evil', 'a/b', '..']) {
      await assert.rejects(
        h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: `# P\nLoop Name: ${name}\n## One\ndo it` }),
        rejectsWith('bad_name', /the plan's "Loop Name:" line/),
      );
    }
    await nothingCreated();
  });

  it('an existing loop branch at another commit is an error, never reused', async () => {
    await h.repo.git('branch', 'forge/taken');
    await writeFile(join(h.repo.dir, 'later.txt'), 'x\n');
    await h.repo.git('add', '-A');
    await h.repo.git('commit', '-q', '-m', 'later');
    await assert.rejects(h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan, name: 'taken' }), rejectsWith('workspace', /forge\/taken/));
    assert.deepEqual(h.engine.runtime.list(h.projectId), [], 'the reservation was given back');
    const tip = (await h.repo.git('rev-parse', 'forge/taken')).trim();
    assert.equal(tip, (await h.repo.git('rev-parse', 'HEAD~1')).trim(), 'the branch is untouched');
    await h.repo.git('branch', '-D', 'forge/taken');
  });

  it('the CLI reports bad input with exit code 2 and the message', async () => {
    const cli = join(REPO_ROOT, 'dist/cli.mjs');
    const emptyPlan = join(scratch, 'empty.md');
    await writeFile(emptyPlan, '\n');
    const r = await run(process.execPath, [cli, 'run', emptyPlan, '--repo', h.repo.dir, '--data-dir', h.dataDir]).catch((e) => e);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /empty\.md is empty/);
    const missing = await run(process.execPath, [cli, 'run', join(scratch, 'missing.md'), '--repo', h.repo.dir, '--data-dir', h.dataDir]).catch((e) => e);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /missing\.md does not exist/);
    const notRepo = await run(process.execPath, [cli, 'status', '--repo', scratch, '--data-dir', h.dataDir]).catch((e) => e);
    assert.equal(notRepo.code, 2);
    assert.match(notRepo.stderr, /git/i);
  });

  /** The start's notices other than the one saying no check gates the loop (these plans and goals name none). */
  const besidesNoCheck = (notices: readonly string[]) => notices.filter((n) => !n.startsWith('No check:'));

  let thirtyAttempts = 0;
  it('30 sections run as 24 (and it says so); restart of a completed loop is refused; restart with worktree and branch gone says why', async () => {
    // A retried attempt must not trip over the loop the failed attempt left behind.
    const name = `thirty-${thirtyAttempts++}`;
    h.model.setHandler(sessionScript(() => [hang]).handler);
    const sections = Array.from({ length: 30 }, (_, i) => `## Step ${i + 1}\nDo step ${i + 1}.`).join('\n');
    const started = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: `# Thirty\n${sections}`, name });
    // A plan without a Verification part also says that no check gates it (issue 28 item 5).
    assert.ok(started.notices.some((n) => n.startsWith('No check:')), started.notices.join('\n'));
    assert.equal(besidesNoCheck(started.notices).length, 1);
    assert.match(besidesNoCheck(started.notices)[0]!, /30 sections; Forge runs at most 24/);
    const repos = createForgeRepositories(h.engine.db);
    assert.equal(repos.sectionPlans.list(h.projectId, name).length, 24);
    await h.engine.runtime.cancel(started);
    await h.engine.runtime.waitForEnd(started);
    // Cancelled while its opencode server was still starting: that server is stopped too.
    assert.deepEqual(await processesWorkingIn(h.engine.runtime.get(started)!.worktreeDir!), []);

    // Completed loops are history.
    repos.loops.update(h.projectId, name, { status: 'completed', terminationReason: 'completed' });
    await assert.rejects(h.engine.runtime.restart(started), rejectsWith('completed', /completed loops are history/));
    repos.loops.update(h.projectId, name, { status: 'cancelled', terminationReason: 'cancelled' });

    // Worktree and branch gone: the restart says so and changes nothing.
    const loop = h.engine.runtime.get(started)!;
    await h.repo.git('worktree', 'remove', '--force', loop.worktreeDir!);
    await h.repo.git('branch', '-D', `forge/${name}`);
    const transitions = repos.transitions.listByLoop(h.projectId, name).length;
    await assert.rejects(h.engine.runtime.restart(started), rejectsWith('workspace', /cannot restart/));
    assert.equal(h.engine.runtime.get(started)!.status, 'cancelled');
    assert.equal(repos.transitions.listByLoop(h.projectId, name).length, transitions);
  });

  it('a Loop Name (plan) or --name that is not a valid name is changed, and the start says what it became', async () => {
    h.model.setHandler(sessionScript(() => [hang]).handler);
    const fromPlan = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# P\nLoop Name: 🔥Blaze\n## One\ndo it' });
    const fromOption = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: plan, name: 'My Feature' });
    try {
      assert.equal(fromPlan.name, 'blaze');
      assert.match(fromPlan.notices[0] ?? '', /^Loop name "🔥Blaze" from the plan was changed to "blaze": loop names use lower-case letters a-z, digits 0-9 and single dashes/);
      assert.equal(fromOption.name, 'my-feature');
      assert.match(fromOption.notices[0] ?? '', /^Loop name "My Feature" was changed to "my-feature": /);
      const started = h.events.filter((e) => e.type === 'loop.started' && (e.loop.name === 'blaze' || e.loop.name === 'my-feature'));
      assert.deepEqual(started.map((e) => e.type === 'loop.started' && e.notices[0]), [fromPlan.notices[0], fromOption.notices[0]], 'the started event carries the notice (the CLI prints it, VS Code shows it)');

      // The same plan again: its name is taken, and the start says which name it got instead.
      const again = await h.engine.runtime.start({ kind: 'plan', repoPath: h.repo.dir, planText: '# P\nLoop Name: blaze\n## One\ndo it' });
      try {
        assert.equal(again.name, 'blaze-2');
        assert.deepEqual(besidesNoCheck(again.notices), ['The name "blaze" is taken (by an earlier loop or its worktree folder), so this loop is named "blaze-2".']);
      } finally {
        await h.engine.runtime.cancel(again);
        await h.engine.runtime.waitForEnd(again);
      }
    } finally {
      for (const ref of [fromPlan, fromOption]) {
        await h.engine.runtime.cancel(ref);
        await h.engine.runtime.waitForEnd(ref);
      }
    }
  });

  it('uncommitted and untracked files in the repository: the start says they are not in the loop, with counts and the start commit', async () => {
    h.model.setHandler(sessionScript(() => [hang]).handler);
    const head = (await h.repo.git('rev-parse', 'HEAD')).trim();
    await writeFile(join(h.repo.dir, 'README.md'), 'changed, not committed\n');
    await writeFile(join(h.repo.dir, 'notes.txt'), 'untracked\n');
    await writeFile(join(h.repo.dir, 'todo.txt'), 'untracked\n');
    try {
      const started = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'tidy up', name: 'dirty' });
      await h.engine.runtime.cancel(started);
      await h.engine.runtime.waitForEnd(started);
      const branch = (await h.repo.git('symbolic-ref', '--short', 'HEAD')).trim();
      const repoDir = h.engine.runtime.get(started)!.repoDir!;
      assert.deepEqual(besidesNoCheck(started.notices), [
        `1 file with uncommitted changes and 2 untracked files in ${repoDir} are not part of the loop: it starts from HEAD ${head.slice(0, 7)} (${branch}). Commit them, or stash them with git stash --include-untracked, first if the loop needs them.`,
      ]);
      const event = h.events.find((e) => e.type === 'loop.started' && e.loop.name === 'dirty');
      assert.deepEqual(event?.type === 'loop.started' && event.notices, started.notices, 'the started event carries it (the CLI prints it, VS Code shows it)');
      // The loop indeed got HEAD, not the working tree.
      assert.equal((await h.repo.git('rev-parse', 'forge/dirty')).trim(), head);
    } finally {
      await h.repo.git('checkout', '--', 'README.md');
      await rm(join(h.repo.dir, 'notes.txt'));
      await rm(join(h.repo.dir, 'todo.txt'));
    }
  });
});
