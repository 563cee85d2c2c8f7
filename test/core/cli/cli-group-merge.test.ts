/**
 * A feature group's merge queue at the `forge` CLI (built `dist/cli.mjs`, real processes, real
 * opencode, real git, the database file; issue 14 part 4): completed loops merge one at a time
 * into the group's integration branch `forge/group/<id>`, their checks run again on the merged
 * tree, and a conflict sends its loop back to coding with the conflict as a finding, in its own
 * worktree. No model is configured, so Forge's embedded scripted model plays the splitter, the
 * coder (which resolves a conflict it is shown by keeping both sides) and the auditor. The
 * user's own working tree and branch are never touched, unless `forge group merge --into` asks.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import type { CliRunner } from '../../support/cli-runner';
import type { TestRepository } from '../../support/git-repo';

const run = promisify(execFile);
const fence = '```';

/** A PRD feature writing `file` with `content`, whose section verifies exactly that line is in it. */
function feature(id: string, title: string, file: string, content: string): string {
  return [`## Feature ${id}: ${title}`, '', `### Write ${file}`, `${fence}txt file=${file}`, content, fence, `Verify: \`grep -qx ${content} ${file}\``, ''].join('\n');
}

/** Three features; notes and search both create shared.txt, so the second of them to merge conflicts. */
const PRD = ['# Merge shop', '', 'A small shop.', '', feature('catalog', 'Product catalog', 'catalog.txt', 'apples'), feature('notes', 'Release notes', 'shared.txt', 'notes'), feature('search', 'Search', 'shared.txt', 'search')].join('\n');

interface EventLine {
  type: string;
  group: string;
  featureId?: string;
  status?: string;
  state?: string;
  message?: string | null;
  commit?: string | null;
}

interface GroupJson {
  group: string;
  status: string;
  integrationBranch: string;
  features: Array<{ id: string; status: string; loop: string | null; merge: { state: string; commit: string | null; reopened: number } | null }>;
}

describe('forge group: the merge queue into the integration branch (real CLI processes, real opencode, embedded scripted model)', function () {
  this.timeout(900_000);
  const world = useCliLoopWorld('forge-cli-group-merge-', { 'README.md': '# shop\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  before(() => {
    ({ repo, work, runner } = world);
  });

  const events = (stdout: string): EventLine[] =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as EventLine)
      .filter((e) => typeof e.type === 'string' && e.type.startsWith('group.'));

  async function group(id: string): Promise<GroupJson> {
    const r = await runner.run(['group', 'status', id, '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout.trim()) as GroupJson;
  }

  it('three loops under a cap of 2, two writing the same file: the first merges, the second meets the conflict, goes back to coding with it as a finding and merges after; the integration branch holds all three and its checks pass; the user’s tree is untouched', async () => {
    const head = (await repo.git('rev-parse', 'HEAD')).trim();
    const path = join(work, 'merge-shop.md');
    await writeFile(path, PRD);
    const r = await runner.run(['group', path, '--name', 'mshop', '--launch', '--max-concurrent', '2', '--json'], { timeoutMs: 800_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const lines = events(r.stdout);
    assert.equal(lines.find((l) => l.type === 'group.ended')?.status, 'completed', r.stdout);

    // Never three loops at once: replay the feature events in order.
    const running = new Set<string>();
    let most = 0;
    for (const e of lines.filter((l) => l.type === 'group.feature')) {
      if (e.status === 'running') running.add(e.featureId!);
      else running.delete(e.featureId!);
      most = Math.max(most, running.size);
    }
    assert.ok(most <= 2, `at most 2 loops at once, but ${most} ran together:\n${r.stdout}`);

    // The queue: each feature merged once in the end; exactly one of notes/search met a conflict first.
    const merges = lines.filter((l) => l.type === 'group.merge');
    const mergedOrder = merges.filter((m) => m.state === 'merged').map((m) => m.featureId!);
    assert.deepEqual([...mergedOrder].sort(), ['catalog', 'notes', 'search'], r.stdout);
    const conflicted = [...new Set(merges.filter((m) => m.state === 'conflict').map((m) => m.featureId!))];
    assert.equal(conflicted.length, 1, `one feature met the conflict:\n${r.stdout}`);
    const second = conflicted[0]!;
    const first = second === 'notes' ? 'search' : 'notes';
    assert.ok(mergedOrder.indexOf(first) < mergedOrder.indexOf(second), `the first of the two merged before the second:\n${r.stdout}`);
    assert.match(merges.find((m) => m.state === 'conflict')!.message ?? '', /conflicts in shared\.txt/);
    // The conflict sent its loop back to coding (running again after the conflict), then it merged.
    const conflictAt = lines.findIndex((l) => l.type === 'group.merge' && l.state === 'conflict');
    assert.ok(lines.slice(conflictAt).some((l) => l.type === 'group.feature' && l.featureId === second && l.status === 'running'), r.stdout);

    const g = await group('mshop');
    assert.equal(g.status, 'completed');
    assert.equal(g.integrationBranch, 'forge/group/mshop');
    for (const f of g.features) {
      assert.equal(f.status, 'completed', JSON.stringify(f));
      assert.equal(f.merge?.state, 'merged', JSON.stringify(f));
    }
    assert.equal(g.features.find((f) => f.id === second)?.merge?.reopened, 1);
    assert.equal(g.features.find((f) => f.id === first)?.merge?.reopened, 0);

    // The conflict reached the reopened coder as a finding (recorded like a check's), with the file as the merge left it; resolved once merged.
    const findings = await runner.run(['findings', `mshop-${second}`, '--json']);
    assert.equal(findings.code, 0, findings.stderr);
    const mergeFinding = (JSON.parse(findings.stdout) as { description: string; source: string; status: string; file: string }[])
      .find((f) => f.description.startsWith('Merge conflict'));
    assert.ok(mergeFinding, findings.stdout);
    assert.equal(mergeFinding.source, 'check');
    assert.equal(mergeFinding.file, 'shared.txt');
    assert.equal(mergeFinding.status, 'resolved');
    assert.match(mergeFinding.description, /^<{7} HEAD\n/m);
    assert.match(mergeFinding.description, /^>{7} .*forge\/group\/mshop$/m);
    // The coder resolved it in the loop's own worktree: its branch now holds a merge of the integration branch.
    const parents = (await repo.git('log', '--merges', '--format=%P', `forge/mshop-${second}`)).trim().split('\n')[0]!.split(' ');
    assert.equal(parents.length, 2, 'a merge commit on the reopened loop branch');

    // The integration branch holds all three, the shared file with both features' lines (what was in first).
    assert.equal(await repo.git('show', 'forge/group/mshop:catalog.txt'), 'apples\n');
    assert.equal(await repo.git('show', 'forge/group/mshop:shared.txt'), `${first}\n${second}\n`);
    // Its checks pass: every feature's Verify line, run on a checkout of the integration branch.
    const checkout = await mkdtemp(join(tmpdir(), 'forge-integration-'));
    try {
      await repo.git('worktree', 'add', '--detach', checkout, 'forge/group/mshop');
      for (const [file, line] of [['catalog.txt', 'apples'], ['shared.txt', 'notes'], ['shared.txt', 'search']]) {
        await run('grep', ['-qx', line!, file!], { cwd: checkout });
      }
    } finally {
      await repo.git('worktree', 'remove', '--force', checkout);
      await rm(checkout, { recursive: true, force: true });
    }
    // Each merge into the integration branch is a --no-ff merge commit.
    assert.equal((await repo.git('rev-list', '--merges', '--first-parent', 'forge/group/mshop')).trim().split('\n').length, 3);

    // The user's own working tree and branch were never touched.
    assert.equal((await repo.git('status', '--porcelain')).trim(), '');
    assert.equal((await repo.git('rev-parse', 'HEAD')).trim(), head);
    assert.equal((await repo.git('rev-parse', 'main')).trim(), head);

    // forge group status shows the merge states and the integration branch.
    const text = await runner.run(['group', 'status', 'mshop']);
    assert.match(text.stdout, /integration branch: forge\/group\/mshop/);
    assert.match(text.stdout, new RegExp(`^ {2}${second}\\s+completed .*merge merged \\([0-9a-f]{12}\\)`, 'm'));
    const list = await runner.run(['status']);
    assert.match(list.stdout, /^mshop\s+completed\s+3\/3 completed, 3 merged/m);
    // Every feature was queued before it merged, and the conflicted one again after its return to coding.
    for (const id of ['catalog', 'notes', 'search']) {
      const states = merges.filter((m) => m.featureId === id).map((m) => m.state);
      assert.equal(states[0], 'queued', `${id}: ${states.join(' ')}`);
      assert.equal(states[states.length - 1], 'merged', `${id}: ${states.join(' ')}`);
    }
    const secondStates = merges.filter((m) => m.featureId === second).map((m) => m.state);
    assert.ok(secondStates.indexOf('queued', secondStates.indexOf('conflict')) > 0, secondStates.join(' '));
  });

  it('a check that fails on the merged tree sends the loop back to coding with the failure as a finding; after 3 returns its feature fails, its work kept, the integration branch holding only what passed', async () => {
    const head = (await repo.git('rev-parse', 'HEAD')).trim();
    // "alone" verifies that no b.txt exists: true on its own branch, false once "intruder" (which writes b.txt) is merged with it.
    // intruder starts after alone merged (from the integration branch), so intruder is the one whose merge breaks a check.
    const alone = ['## Feature alone: Alone', '', '### Write a.txt', `${fence}txt file=a.txt`, 'a', fence, 'Verify: `test ! -e b.txt`', ''].join('\n');
    const intruder = feature('intruder', 'Intruder', 'b.txt', 'b').replace('\n\n', '\nDepends on: alone\n\n');
    const path = join(work, 'clash.md');
    await writeFile(path, ['# Clash', '', alone, intruder].join('\n'));
    const r = await runner.run(['group', path, '--name', 'clash', '--launch', '--max-concurrent', '2', '--json'], { timeoutMs: 800_000 });
    assert.equal(r.code, 6, `${r.stdout}\n${r.stderr}`);
    const lines = events(r.stdout);
    assert.equal(lines.find((l) => l.type === 'group.ended')?.status, 'failed', r.stdout);
    const merges = lines.filter((l) => l.type === 'group.merge');
    const merged = merges.filter((m) => m.state === 'merged').map((m) => m.featureId!);
    assert.deepEqual(merged, ['alone'], r.stdout);
    const loser = 'intruder';
    assert.ok(merges.some((m) => m.featureId === loser && m.state === 'check_failed' && /a check failed on the merged tree.*test ! -e b\.txt.* of feature alone exited with code 1/s.test(m.message ?? '')), r.stdout);

    const g = await group('clash');
    assert.equal(g.status, 'failed');
    const failed = g.features.find((f) => f.id === loser)!;
    assert.equal(failed.status, 'failed');
    assert.deepEqual([failed.merge?.state, failed.merge?.reopened], ['check_failed', 3], `${JSON.stringify(failed)}\n${r.stdout}`);
    const detail = await runner.run(['group', 'status', 'clash']);
    assert.match(detail.stdout, new RegExp(`^ {2}${loser}\\s+failed .*merge check_failed.* — Its merge still did not hold after 3 returns to coding: .*Its work is kept on its loop branch\\.$`, 'm'));

    // The failure reached the reopened coder as a finding (recorded like a check's; it stays open, the merge never held).
    const findings = await runner.run(['findings', `clash-${loser}`, '--json']);
    const finding = (JSON.parse(findings.stdout) as { description: string; source: string; status: string; recurrenceCount: number }[])
      .find((f) => f.description.startsWith('A verification check failed on the combined tree'));
    assert.ok(finding, findings.stdout);
    assert.equal(finding.source, 'check');
    assert.equal(finding.status, 'open');
    assert.equal(finding.recurrenceCount, 3);
    assert.match(finding.description, /test ! -e b\.txt/);

    // Only what passed is integrated; nothing is lost: the failed feature's work is on its loop branch.
    const integrated = (await repo.git('ls-tree', '--name-only', 'forge/group/clash')).split('\n');
    assert.ok(integrated.includes('a.txt'), integrated.join(' '));
    assert.ok(!integrated.includes('b.txt'), integrated.join(' '));
    assert.equal(await repo.git('show', 'forge/clash-intruder:b.txt'), 'b\n');
    // The dependent started from the integration branch, which held its dependency merged: the merge commit of
    // alone is on the first-parent line of intruder's branch (had it started from HEAD, it would be reachable only
    // through the merge Forge made in its worktree when it went back to coding).
    const aloneMerge = merges.find((m) => m.featureId === 'alone' && m.state === 'merged')!.commit!;
    assert.ok((await repo.git('rev-list', '--first-parent', 'forge/clash-intruder')).split('\n').includes(aloneMerge), 'intruder started from forge/group/clash');
    assert.equal((await repo.git('status', '--porcelain')).trim(), '');
    assert.equal((await repo.git('rev-parse', 'HEAD')).trim(), head);

    // A group that did not complete is not merged into a branch of the user's.
    const refused = await runner.run(['group', 'merge', 'clash', '--into', 'main']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /Group "clash" is failed: forge\/group\/clash holds 1 of its 2 features\..*nothing was changed/);
  });

  it('forge group merge --into: a target branch that moved is refused with a clear message and nothing changes; one that did not is fast-forwarded', async () => {
    // The user commits on main after the group started: main moved.
    await writeFile(join(repo.dir, 'mine.txt'), 'my own work\n');
    await repo.git('add', 'mine.txt');
    await repo.git('commit', '-q', '-m', 'my own work');
    const mainTip = (await repo.git('rev-parse', 'main')).trim();
    const integrationTip = (await repo.git('rev-parse', 'forge/group/mshop')).trim();
    const refused = await runner.run(['group', 'merge', 'mshop', '--into', 'main']);
    assert.equal(refused.code, 2, `${refused.stdout}\n${refused.stderr}`);
    assert.match(refused.stderr, /main has commits that forge\/group\/mshop does not have/);
    assert.match(refused.stderr, /nothing was changed/i);
    assert.doesNotMatch(refused.stderr, /internal error/);
    assert.equal((await repo.git('rev-parse', 'main')).trim(), mainTip, 'main is where it was');
    assert.equal((await repo.git('rev-parse', 'forge/group/mshop')).trim(), integrationTip, 'the integration branch is where it was');
    assert.equal((await repo.git('status', '--porcelain')).trim(), '');

    // An unknown target: a clear message too.
    const unknown = await runner.run(['group', 'merge', 'mshop', '--into', 'no-such-branch']);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /no-such-branch/);

    // A branch that has not moved since the group started (made at the group's start commit) is fast-forwarded when asked.
    const start = (await repo.git('rev-parse', 'main~1')).trim();
    await repo.git('branch', 'release', start);
    const merged = await runner.run(['group', 'merge', 'mshop', '--into', 'release']);
    assert.equal(merged.code, 0, `${merged.stdout}\n${merged.stderr}`);
    assert.equal((await repo.git('rev-parse', 'release')).trim(), integrationTip);
    assert.equal((await repo.git('rev-parse', 'main')).trim(), mainTip);
    assert.equal((await repo.git('status', '--porcelain')).trim(), '');
  });
});
