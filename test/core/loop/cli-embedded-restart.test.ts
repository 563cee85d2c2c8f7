/**
 * `forge restart` of a loop that runs on Forge's embedded scripted model (no model configured
 * anywhere): the restarting CLI must bring the embedded model up as `forge run` does (it failed
 * with "Model not found: forge-embedded/scripted"), and the iteration it reports never goes back.
 *
 * Real parts: the built CLI (`dist/cli.mjs`) in child processes, the opencode binary they start,
 * the embedded model inside each CLI, a git repository and Forge's database file in temp folders.
 * The user's opencode configuration names no model, as on a fresh install.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliProcess, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { startScriptedModel, type ScriptedModel } from '../../support/scripted-model';

const LOOP = 'trio';

/**
 * Three sections; the third one's check waits for a gate file, so the test can stop the loop in
 * iteration 3. Both files are in the worktree (the agent's commands may not reach outside it).
 */
const RUNNING = 'third-check-running';
const GATE = 'third-check-gate';
function plan(): string {
  const fence = '```';
  return `# Three files
Loop Name: ${LOOP}

## First file
${fence}txt file=a.txt
a
${fence}

## Second file
${fence}txt file=b.txt
b
${fence}

## Third file
${fence}txt file=c.txt
c
${fence}
Run: \`touch ${RUNNING} && while [ ! -f ${GATE} ]; do sleep 0.2; done && echo gate open\`
`;
}

/** The watchdog must not fire while the third section's check waits for its gate. */
const SETTINGS = { 'forge.loop.stallTimeoutMs': 300_000, 'forge.loop.busyStallTimeoutMs': 300_000 };

interface PhaseLine {
  type: string;
  event?: string;
  iteration?: number;
  iterations?: number;
  status?: string;
  reason?: string;
}

interface World {
  model: ScriptedModel;
  env: OpencodeTestEnvironment;
  repo: TestRepository;
  work: string;
  planPath: string;
  running: string;
  gate: string;
  runner: CliRunner;
}

async function until(what: string, check: () => boolean, timeoutMs: number, proc?: CliProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void proc?.exited.then(() => (ended = true));
  while (!check()) {
    if (ended) assert.fail(`${what}: the CLI ended first\n${proc!.describe()}`);
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms${proc ? `\n${proc.describe()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const jsonLines = (proc: CliProcess): PhaseLine[] => proc.stdoutLines().map((l) => JSON.parse(l) as PhaseLine);

function assertNeverDecreases(iterations: number[], what: string): void {
  for (let i = 1; i < iterations.length; i++) {
    assert.ok(iterations[i]! >= iterations[i - 1]!, `${what}: the iteration went back from ${iterations[i - 1]} to ${iterations[i]} (${iterations.join(', ')})`);
  }
}

describe('forge restart of a loop on the embedded model (real CLI processes, real opencode)', function () {
  this.timeout(600_000);
  let w: World | undefined;
  let cliPath: string;

  before(() => {
    cliPath = ensureCliBuilt(REPO_ROOT);
  });

  beforeEach(async () => {
    // The mock provider stays configured (a user may have providers), but no default model is named.
    const model = await startScriptedModel();
    const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL, extraUserConfig: { model: undefined, small_model: undefined } });
    const repo = await createTestRepository({ 'README.md': '# trio\n' });
    const work = await mkdtemp(join(tmpdir(), 'forge-cli-embedded-'));
    const worktreeDir = join(work, 'data', 'worktrees', LOOP);
    const running = join(worktreeDir, RUNNING);
    const gate = join(worktreeDir, GATE);
    const planPath = join(work, 'plan.md');
    await writeFile(planPath, plan());
    const runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', join(work, 'data'), '--repo', repo.dir], settings: SETTINGS });
    w = { model, env, repo, work, planPath, running, gate, runner };
  });

  afterEach(async () => {
    if (!w) return;
    const { runner, model, env, repo, work } = w;
    w = undefined;
    await runner.killAll();
    await model.close().catch(() => {});
    await env.cleanup().catch(() => {});
    await repo.cleanup().catch(() => {});
    await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  async function statusIterations(): Promise<{ status: string; iterations: number[]; events: string[] }> {
    const r = await w!.runner.run(['status', LOOP, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout.trim()) as { status: string; transitions: Array<{ event: string; iteration: number }> };
    return { status: s.status, iterations: s.transitions.map((t) => t.iteration), events: s.transitions.map((t) => t.event) };
  }

  /** Starts the loop and waits until its third section's check runs (iteration 3). */
  async function runUntilThirdCheck(): Promise<CliProcess> {
    const { runner, planPath, running } = w!;
    const a = runner.start(['run', planPath, '--json']);
    await until('the third section\'s check runs', () => existsSync(running), 300_000, a);
    const started = jsonLines(a)[0];
    assert.equal(started?.type, 'loop.started');
    assert.match(JSON.stringify(started), /embedded scripted model/, 'the loop runs on the embedded model');
    const phases = jsonLines(a).filter((l) => l.type === 'loop.phase');
    assert.equal(phases.at(-1)!.iteration, 3, a.describe());
    return a;
  }

  async function restartAndCheck(first: CliProcess, args: string[]): Promise<void> {
    const { runner, gate, repo, model } = w!;
    await writeFile(gate, '');
    const b = runner.start(['restart', LOOP, ...args, '--json']);
    const exit = await b.exited;
    assert.equal(exit.code, 0, `the restarted loop did not complete: ${JSON.stringify(exit)}\n${b.describe()}`);
    assert.doesNotMatch(b.stderr() + b.stdout(), /Model not found/);
    const lines = jsonLines(b);
    const restartLine = lines[0]!;
    assert.equal(restartLine.event, 'restart', b.describe());
    assert.equal(restartLine.iteration, 3, 'the restarted loop goes on in iteration 3');
    const printed = [...jsonLines(first), ...lines].filter((l) => l.type === 'loop.phase').map((l) => l.iteration!);
    assertNeverDecreases(printed, 'printed phase changes');
    const ended = lines.at(-1)!;
    assert.equal(ended.type, 'loop.ended');
    assert.equal(ended.status, 'completed', b.describe());
    assert.equal(ended.iterations, 3);
    const recorded = await statusIterations();
    assert.equal(recorded.status, 'completed');
    assertNeverDecreases(recorded.iterations, `recorded transitions ${recorded.events.join(', ')}`);
    assert.equal(await repo.git('show', `forge/${LOOP}:c.txt`), 'c\n');
    assert.equal(model.agentRequests.length, 0, 'only the embedded model was asked');
  }

  it('cancelled (Ctrl-C) in iteration 3, `forge restart` completes on the embedded model and never reports an earlier iteration', async () => {
    const a = await runUntilThirdCheck();
    a.signal('SIGINT');
    const exit = await a.exited;
    assert.equal(exit.code, 3, a.describe());
    assert.equal((await statusIterations()).status, 'cancelled');
    await restartAndCheck(a, []);
  });

  it('killed (SIGKILL) in iteration 3, `forge restart --force` completes on the embedded model and never reports an earlier iteration', async () => {
    const a = await runUntilThirdCheck();
    a.signal('SIGKILL');
    await a.exited;
    assert.equal((await statusIterations()).status, 'running');
    await restartAndCheck(a, ['--force']);
  });
});
