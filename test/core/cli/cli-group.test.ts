/**
 * Feature groups at the `forge` CLI (built `dist/cli.mjs`, real processes, real opencode, real
 * git, the database file): `forge group PRD.md` splits a PRD with the read-only feature
 * splitter and runs the features as loops under a cap, dependencies first, within a group
 * budget. No model is configured, so Forge's embedded scripted model plays the splitter (it
 * splits "## Feature <id>: <title>" sections), the coder and the auditor.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import type { CliRunner } from '../../support/cli-runner';
import type { TestRepository } from '../../support/git-repo';
import { forgeAgentOf, text, toolCall, toolCalls, type ScriptedModel, type ScriptStep } from '../../support/scripted-model';

const fence = '```';
function feature(id: string, title: string, file: string, content: string, dependsOn?: string): string {
  return [`## Feature ${id}: ${title}`, ...(dependsOn ? [`Depends on: ${dependsOn}`] : []), '', `### Write ${file}`, `${fence}txt file=${file}`, content, fence, ''].join('\n');
}

/** Three features free to start at once, and one after another: the cap of 2 is what holds them back. */
const SHOP_PRD = [
  '# Shop',
  '',
  'A small shop.',
  '',
  feature('catalog', 'Product catalog', 'catalog.txt', 'apples'),
  feature('notes', 'Release notes', 'shared.txt', 'notes'),
  feature('search', 'Search', 'shared.txt', 'search'),
  feature('cart', 'Shopping cart', 'cart.txt', 'cart', 'catalog'),
].join('\n');

const CYCLE_PRD = ['# Loops', '', feature('a', 'First', 'a.txt', 'a', 'b'), feature('b', 'Second', 'b.txt', 'b', 'a')].join('\n');
const BUDGET_PRD = ['# Budget', '', feature('one', 'One', 'one.txt', '1'), feature('two', 'Two', 'two.txt', '2')].join('\n');

interface EventLine {
  type: string;
  group: string;
  featureId?: string;
  status?: string;
  level?: string;
  pauseReason?: string | null;
  at: number;
}

interface GroupJson {
  group: string;
  status: string;
  pauseReason: string | null;
  maxConcurrent: number;
  spend: { cost: number; tokens: number };
  features: Array<{ id: string; status: string; loop: string | null; dependsOn: string[]; planPath: string }>;
}

describe('forge group: feature groups (real CLI processes, real opencode, embedded scripted splitter and model)', function () {
  this.timeout(900_000);
  // The mock provider stays configured, but no default model is named: the embedded model runs.
  const world = useCliLoopWorld('forge-cli-group-', { 'README.md': '# shop\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });
  let model: ScriptedModel;
  let repo: TestRepository;
  let work: string;
  let dataDir: string;
  let runner: CliRunner;
  before(() => {
    ({ model, repo, work, runner } = world);
    dataDir = join(work, 'data');
  });

  async function prd(name: string, text: string): Promise<string> {
    const path = join(work, name);
    await writeFile(path, text);
    return path;
  }

  async function groups(): Promise<GroupJson[]> {
    const r = await runner.run(['group', 'status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as GroupJson);
  }

  const events = (stdout: string): EventLine[] => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as EventLine).filter((e) => typeof e.type === 'string' && e.type.startsWith('group.'));

  /** The most features whose loops ran at once, from the running → ended intervals the events bound. */
  function maxConcurrent(lines: EventLine[]): { max: number; intervals: Map<string, { start: number; end: number }> } {
    const intervals = new Map<string, { start: number; end: number }>();
    for (const e of lines.filter((l) => l.type === 'group.feature')) {
      if (e.status === 'running') intervals.set(e.featureId!, { start: e.at, end: Number.POSITIVE_INFINITY });
      else if (intervals.has(e.featureId!)) intervals.get(e.featureId!)!.end = e.at;
    }
    let max = 0;
    for (const { start } of intervals.values()) {
      const overlapping = [...intervals.values()].filter((o) => o.start <= start && start < o.end).length;
      max = Math.max(max, overlapping);
    }
    return { max, intervals };
  }

  it('splits a 4-feature PRD and runs it under a cap of 2: never three loops at once, the dependent after its dependency, all complete', async () => {
    const path = await prd('shop.md', SHOP_PRD);
    const r = await runner.run(['group', path, '--name', 'shop', '--launch', '--max-concurrent', '2', '--json'], { timeoutMs: 800_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const lines = events(r.stdout);
    const ended = lines.find((l) => l.type === 'group.ended');
    assert.equal(ended?.status, 'completed', r.stdout);
    const { max, intervals } = maxConcurrent(lines);
    assert.equal(intervals.size, 4, r.stdout);
    assert.ok(max <= 2, `at most 2 loops at once, but ${max} ran together:\n${r.stdout}`);
    assert.equal(max, 2, `the cap is used (2 loops ran together):\n${r.stdout}`);
    // The dependent started only once its dependency had completed.
    assert.ok(intervals.get('cart')!.start >= intervals.get('catalog')!.end, `cart started before catalog completed:\n${r.stdout}`);

    const [shop] = await groups();
    assert.equal(shop?.group, 'shop');
    assert.equal(shop.status, 'completed');
    assert.equal(shop.maxConcurrent, 2);
    assert.deepEqual(shop.features.map((f) => [f.id, f.status, f.loop]), [
      ['catalog', 'completed', 'shop-catalog'],
      ['notes', 'completed', 'shop-notes'],
      ['search', 'completed', 'shop-search'],
      ['cart', 'completed', 'shop-cart'],
    ]);
    assert.deepEqual(shop.features.find((f) => f.id === 'cart')?.dependsOn, ['catalog']);
    for (const f of shop.features) assert.ok(existsSync(f.planPath), `review copy ${f.planPath}`);
    // Each feature's work is on its own loop branch; two features wrote the same file on theirs.
    assert.equal(await repo.git('show', 'forge/shop-catalog:catalog.txt'), 'apples\n');
    // The second of them to merge into the integration branch met the conflict and, back in coding, took in the first's line too.
    assert.match(await repo.git('show', 'forge/shop-notes:shared.txt'), /^notes$/m);
    assert.match(await repo.git('show', 'forge/shop-search:shared.txt'), /^search$/m);
    assert.deepEqual((await repo.git('show', 'forge/group/shop:shared.txt')).split('\n').filter(Boolean).sort(), ['notes', 'search']);
    assert.equal(await repo.git('show', 'forge/shop-cart:cart.txt'), 'cart\n');

    // forge status lists the group beside the loops.
    const status = await runner.run(['status', '--json']);
    assert.equal(status.code, 0, status.stderr);
    const groupLines = status.stdout.split('\n').filter((l) => l.includes('"group"'));
    assert.equal(groupLines.length, 1, status.stdout);
    const text = await runner.run(['status']);
    assert.match(text.stdout, /^Feature groups:$/m);
    assert.match(text.stdout, /^shop\s+completed\s+4\/4 completed/m);
    assert.equal(model.agentRequests.length, 0, 'only the embedded model was asked');
  });

  it('review first: without --launch the plans wait as files; an edit wins, a broken edit is refused with the file named and the group kept', async () => {
    const path = await prd('review.md', ['# Review', '', feature('alpha', 'Alpha', 'alpha.txt', 'alpha')].join('\n'));
    const split = await runner.run(['group', path, '--name', 'review']);
    assert.equal(split.code, 0, split.stderr);
    assert.match(split.stdout, /^group review: 1 feature from .*review\.md, at most 3 at once, budget none$/m);
    assert.match(split.stdout, /^ {2}alpha: Alpha — depends on nothing — .*01-alpha\.md$/m);
    assert.match(split.stdout, /^Review \(and edit\) the plans above, then run: forge group launch review --repo /m);
    const [g] = (await groups()).filter((x) => x.group === 'review');
    assert.equal(g?.status, 'review');
    const planPath = g.features[0]!.planPath;

    await writeFile(planPath, '');
    const refused = await runner.run(['group', 'launch', 'review']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.ok(refused.stderr.includes(planPath), refused.stderr);
    assert.match(refused.stderr, /is empty.*The group stays in review/);
    assert.equal((await groups()).find((x) => x.group === 'review')?.status, 'review');

    await writeFile(planPath, `# Alpha, edited\n\n## Write alpha\n${fence}txt file=alpha.txt\nedited\n${fence}\n`);
    const launched = await runner.run(['group', 'launch', 'review'], { timeoutMs: 400_000 });
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    assert.match(launched.stdout, /^group review: completed/m);
    assert.equal(await repo.git('show', 'forge/review-alpha:alpha.txt'), 'edited\n');
  });

  it('bad input: an unsplittable PRD, a cap of 0 or 1000, a dependency cycle — each a clear message, nothing stored, the database intact', async () => {
    const before = (await groups()).map((g) => g.group);
    const prose = await prd('prose.md', '# Ideas\n\nMake everything better somehow.\n');
    const unsplittable = await runner.run(['group', prose]);
    assert.equal(unsplittable.code, 2, unsplittable.stderr);
    assert.match(unsplittable.stderr, /could not split .*prose\.md into features: it wrote none/);
    assert.match(unsplittable.stderr, /Nothing was stored/);

    const shop = await prd('shop-again.md', SHOP_PRD);
    for (const cap of ['0', '1000']) {
      const r = await runner.run(['group', shop, '--max-concurrent', cap]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`must be a whole number from 1 to 16, not ${cap}\\.`));
      assert.doesNotMatch(r.stderr, /forge: internal error/);
    }
    const launchCap = await runner.run(['group', 'launch', 'shop', '--max-concurrent', '0']);
    assert.equal(launchCap.code, 2, launchCap.stderr);
    assert.match(launchCap.stderr, /from 1 to 16, not 0/);

    const cycle = await prd('cycle.md', CYCLE_PRD);
    const cyclic = await runner.run(['group', cycle, '--name', 'loops']);
    assert.equal(cyclic.code, 2, cyclic.stderr);
    assert.match(cyclic.stderr, /The dependencies form a cycle: (a → b → a|b → a → b)/);

    // Nothing half-made: no new group, no review folder, no loop; the database opens as before.
    assert.deepEqual((await groups()).map((g) => g.group), before);
    assert.equal(existsSync(join(dataDir, 'groups')) ? (await readdir(join(dataDir, 'groups'))).length : 0, 1, 'only the project folder of the earlier groups');
    const status = await runner.run(['status', '--json']);
    assert.equal(status.code, 0, status.stderr);
    assert.doesNotMatch(status.stdout, /"loops-/);
  });

  it('a scripted splitter on a configured model: its writes and shell commands are refused, a cyclic split comes back with the cycle named, the fixed split is stored', async () => {
    const plan = (name: string) => `# ${name}\n\n## Write ${name}\n${fence}txt file=${name}.txt\n${name}\n${fence}\n`;
    const steps: ScriptStep[] = [
      toolCalls([
        { name: 'write', args: { filePath: join(repo.dir, 'pwned.txt'), content: 'pwned' } },
        { name: 'bash', args: { command: `touch ${join(repo.dir, 'pwned-bash.txt')}`, description: 'mutate' } },
      ]),
      toolCall('forge_features_write', { features: [{ id: 'x', title: 'X', dependsOn: ['y'], plan: plan('x') }, { id: 'y', title: 'Y', dependsOn: ['x'], plan: plan('y') }] }),
      toolCall('forge_features_write', { features: [{ id: 'x', title: 'X', dependsOn: [], plan: plan('x') }, { id: 'y', title: 'Y', dependsOn: ['x'], plan: plan('y') }] }),
      text('Split written.'),
    ];
    const splitterResults: string[] = [];
    model.setHandler((request) => {
      if (forgeAgentOf(request) !== 'forge-splitter') return text('not for this test');
      splitterResults.push(...request.toolResults.map((r) => `${r.name}: ${r.content}`));
      return steps.shift() ?? text('done');
    });
    try {
      const path = await prd('scripted.md', '# Anything\n\nFree-form text a real model would split.\n');
      const r = await runner.run(['group', path, '--name', 'scripted', '--splitter-model', 'mock/fake-1'], { timeoutMs: 300_000 });
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /^ {2}y: Y — depends on x — /m);
      for (const tool of ['write', 'bash']) assert.ok(splitterResults.some((x) => x.includes(`unavailable tool '${tool}'`)), `the ${tool} call was refused: ${splitterResults.join('\n')}`);
      assert.ok(splitterResults.some((x) => /cannot use this split.*\n- The dependencies form a cycle: (x → y → x|y → x → y)/s.test(x)), splitterResults.join('\n'));
      assert.ok(splitterResults.some((x) => x.includes('Forge stored 2 features')), splitterResults.join('\n'));
      assert.equal(existsSync(join(repo.dir, 'pwned.txt')) || existsSync(join(repo.dir, 'pwned-bash.txt')), false, 'nothing written to the repository');
      assert.equal((await repo.git('status', '--porcelain')).trim(), '');
      assert.equal((await groups()).find((g) => g.group === 'scripted')?.status, 'review');
    } finally {
      model.setHandler(undefined);
    }
  });

  it('a group whose process dies (SIGKILL) is not lost: forge group resume continues it to completion', async () => {
    const settings = { 'forge.loop.stallTimeoutMs': 300_000, 'forge.loop.busyStallTimeoutMs': 300_000 };
    const worktree = join(dataDir, 'worktrees', 'phoenix-slow');
    const running = join(worktree, 'slow-running');
    const gate = join(worktree, 'slow-gate');
    const slow = [
      '## Feature slow: Slow',
      '### Write slow',
      `${fence}txt file=slow.txt`,
      'slow',
      fence,
      'Run: `touch slow-running && while [ ! -f slow-gate ]; do sleep 0.2; done && echo gate open`',
      '',
    ].join('\n');
    const path = await prd('phoenix.md', ['# Phoenix', '', slow, feature('quick', 'Quick', 'quick.txt', 'quick')].join('\n'));
    const first = runner.start(['group', path, '--name', 'phoenix', '--launch', '--json'], { settings });
    const deadline = Date.now() + 300_000;
    while (!existsSync(running)) {
      assert.ok(Date.now() < deadline, `the slow feature's check never ran\n${first.describe()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    first.signal('SIGKILL');
    await first.exited;
    const dead = (await groups()).find((g) => g.group === 'phoenix')!;
    assert.equal(dead.status, 'running', 'the group is still marked running');
    assert.equal(dead.features.find((f) => f.id === 'slow')?.status, 'running');

    await writeFile(gate, '');
    const resumed = await runner.run(['group', 'resume', 'phoenix'], { settings, timeoutMs: 400_000 });
    assert.equal(resumed.code, 0, `${resumed.stdout}\n${resumed.stderr}`);
    assert.match(resumed.stdout, /^group phoenix: completed/m);
    assert.deepEqual((await groups()).find((g) => g.group === 'phoenix')?.features.map((f) => f.status), ['completed', 'completed']);
    assert.equal(await repo.git('show', 'forge/phoenix-slow:slow.txt'), 'slow\n');
  });

  it('a group budget: a tiny token budget pauses the group (budget_reached, exit 10), nothing lost; a resume without room is refused with a figure; with room it completes', async function () {
    // A name of its own on a retry: the failed attempt's group stays (nothing is ever lost).
    // currentRetry() is protected in the typings but public at run time.
    const attempt = (this.test as unknown as { currentRetry(): number } | undefined)?.currentRetry() ?? 0;
    const id = attempt > 0 ? `thrift-retry${attempt}` : 'thrift';
    const path = await prd('budget.md', BUDGET_PRD);
    const paused = await runner.run(['group', path, '--name', id, '--launch', '--budget-tokens', '1', '--json'], { timeoutMs: 400_000 });
    assert.equal(paused.code, 10, `${paused.stdout}\n${paused.stderr}`);
    const lines = events(paused.stdout);
    assert.ok(lines.some((l) => l.type === 'group.budget' && l.level === 'paused'), paused.stdout);
    const ended = lines.find((l) => l.type === 'group.ended');
    assert.equal(ended?.status, 'paused');
    assert.equal(ended?.pauseReason, 'budget_reached');
    const g = (await groups()).find((x) => x.group === id)!;
    assert.equal(g.status, 'paused');
    assert.equal(g.pauseReason, 'budget_reached');
    assert.ok(g.spend.tokens > 1, JSON.stringify(g));
    assert.ok(g.features.every((f) => f.status !== 'failed' && f.status !== 'blocked'), JSON.stringify(g.features));

    const refused = await runner.run(['group', 'resume', id]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(String.raw`budget leaves no room\. Resume it with a higher budget, for example forge group resume ${id} --budget-tokens \d+`));
    assert.equal((await groups()).find((x) => x.group === id)?.status, 'paused');

    const resumed = await runner.run(['group', 'resume', id, '--budget-tokens', '100000000', '--json'], { timeoutMs: 400_000 });
    assert.equal(resumed.code, 0, `${resumed.stdout}\n${resumed.stderr}\n${JSON.stringify(await groups())}\n${(await runner.run(['status', `${id}-one`, '--json'])).stdout}`);
    const done = (await groups()).find((x) => x.group === id)!;
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.features.map((f) => f.status), ['completed', 'completed']);
    assert.equal(await repo.git('show', `forge/${id}-one:one.txt`), '1\n');
    assert.equal(await repo.git('show', `forge/${id}-two:two.txt`), '2\n');
  });
});
