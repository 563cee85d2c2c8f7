/**
 * The cost governor at the `forge` CLI (built `dist/cli.mjs`, real processes): `--dry-run` prints
 * an estimate priced from opencode's catalog (real opencode, the mock provider's price) and starts
 * nothing — no worktree, no branch, no loop row; bad budgets are usage errors (exit 2).
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { startScriptedModel, type ScriptedModel } from '../../support/scripted-model';

const PLAN = `# Two parts
Loop Name: parts

## First part
Create a.txt containing "a".

## Second part
Create b.txt containing "b".
`;

describe('forge CLI: budgets and --dry-run (real processes, real opencode catalog)', function () {
  this.timeout(300_000);
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  let model: ScriptedModel;
  let env: OpencodeTestEnvironment;
  let planPath: string;
  let dataDir: string;

  before(async () => {
    const cliPath = ensureCliBuilt(REPO_ROOT);
    model = await startScriptedModel();
    env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL, cost: { input: 3, output: 15 } });
    repo = await createTestRepository({ 'README.md': '# parts\n' });
    work = await mkdtemp(join(tmpdir(), 'forge-cli-budget-'));
    dataDir = join(work, 'data');
    planPath = join(work, 'plan.md');
    await writeFile(planPath, PLAN);
    runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', dataDir, '--repo', repo.dir] });
  });

  after(async () => {
    await runner?.killAll();
    await model?.close();
    await env?.cleanup();
    await repo?.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  async function assertNothingStarted(): Promise<void> {
    assert.equal(existsSync(join(dataDir, 'worktrees', 'parts')), false, 'no worktree');
    assert.equal((await repo.git('branch', '--list', 'forge/*')).trim(), '', 'no loop branch');
    assert.equal((await repo.git('worktree', 'list')).trim().split('\n').length, 1, 'no git worktree');
    const status = await runner.run(['status', '--json']);
    assert.equal(status.code, 0, status.stderr);
    assert.equal(status.stdout.trim(), '', `no loop row: ${status.stdout}`);
  }

  it('--dry-run prints an estimate from the plan and the model\'s catalog price, labelled as one, and starts nothing', async () => {
    const r = await runner.run(['run', planPath, '--dry-run', '--model', 'mock/fake-1', '--budget', '0.01']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^dry run: nothing started/m, r.stderr);
    assert.match(r.stdout, /^models: coding mock\/fake-1, audit mock\/fake-1$/m);
    assert.match(r.stdout, /^estimate \(not a quote\): ~\$\d+\.\d\d, ~[\d,]+ tokens — 2 units of work/m);
    assert.match(r.stdout, /^budget: \$0\.01 — the estimate \(\$\d+\.\d\d\) is above the money budget \(\$0\.01\): the loop would likely pause before it ends$/m);
    assert.equal(model.agentRequests.length, 0, 'no model request');
    await assertNothingStarted();

    const json = await runner.run(['run', planPath, '--dry-run', '--model', 'mock/fake-1', '--json']);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout.trim()) as { dryRun: boolean; estimate: { cost: number; tokens: number; isEstimate: boolean } };
    assert.equal(parsed.dryRun, true);
    assert.equal(parsed.estimate.isEstimate, true);
    assert.ok(parsed.estimate.cost > 0 && parsed.estimate.tokens > 0, json.stdout);

    // Forge's embedded model costs nothing.
    const embedded = await runner.run(['run', planPath, '--dry-run', '--model', 'forge-embedded/scripted', '--json']);
    assert.equal(embedded.code, 0, embedded.stderr);
    assert.equal((JSON.parse(embedded.stdout.trim()) as { estimate: { cost: number } }).estimate.cost, 0);
    await assertNothingStarted();
  });

  it('bad budgets are usage errors (exit 2) that say what a good one looks like, and start nothing', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--budget', '-5'], /--budget must be an amount above 0 such as 5\.00, not "-5"/],
      [['--budget', 'five'], /--budget must be an amount above 0 such as 5\.00, not "five"/],
      [['--budget', '0'], /--budget must be an amount above 0/],
      [['--budget-tokens', '1.5'], /--budget-tokens must be a whole number above 0 such as 2000000, not "1\.5"/],
      [['--budget-auditor-share', '1.5'], /--budget-auditor-share must be a number from 0 to 1 such as 0\.3, not "1\.5"/],
      [['--budget-auditor-share', '-0.2'], /--budget-auditor-share must be a number from 0 to 1/],
    ];
    for (const [args, message] of cases) {
      const r = await runner.run(['run', planPath, ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code}\n${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.doesNotMatch(r.stderr, /forge: internal error/);
    }
    const restart = await runner.run(['restart', 'parts', '--budget', 'lots']);
    assert.equal(restart.code, 2, restart.stderr);
    assert.match(restart.stderr, /--budget must be an amount above 0/);
    await assertNothingStarted();
  });
});
