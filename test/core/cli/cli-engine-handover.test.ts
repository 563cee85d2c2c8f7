/**
 * One engine per data folder (issue 14 part 2): a second `forge run` on a data folder whose
 * engine runs hands its loop to that process, prints it as its own and exits with its code; the
 * engine takes the lease as any supervisor does. Its death shows as supervision lost (nothing
 * takes the loop over silently); a stale socket is ignored; a client without the secret is
 * refused; a bad plan or name handed over is refused with a clear message and creates nothing.
 *
 * Real parts: the built CLI (`dist/cli.mjs`) in child processes, the opencode binary they start,
 * Forge's embedded scripted model (no model configured anywhere), real git, the real database.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, PROCESS_MARKER_VARIABLE, type CliProcess, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT } from '../../support/loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { startScriptedModel, type ScriptedModel } from '../../support/scripted-model';

/** A one-section plan whose check waits for `gate` in the worktree (the loop runs until the test opens it). */
function gatedPlan(name: string, file: string): string {
  const fence = '```';
  return `# ${name}
Loop Name: ${name}

## Write ${file}
${fence}txt file=${file}
${name}
${fence}
Run: \`touch running-${name} && while [ ! -f gate-${name} ]; do sleep 0.2; done && echo gate open\`
`;
}

/** The watchdogs must not fire while a check waits for its gate. */
const SETTINGS = { 'forge.loop.stallTimeoutMs': 300_000, 'forge.loop.busyStallTimeoutMs': 300_000 };

interface Supervision {
  pid: number;
  kind: string | null;
  engine: boolean;
  alive: boolean;
}
interface StatusRow {
  name: string;
  status: string;
  supervised: boolean;
  supervisor: Supervision | null;
}

interface World {
  model: ScriptedModel;
  env: OpencodeTestEnvironment;
  repo: TestRepository;
  work: string;
  dataDir: string;
  runner: CliRunner;
}

async function until(what: string, check: () => boolean, proc?: CliProcess, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void proc?.exited.then(() => (ended = true));
  while (!check()) {
    if (ended) assert.fail(`${what}: the CLI ended first\n${proc!.describe()}`);
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms${proc ? `\n${proc.describe()}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('forge CLI: one engine per data folder (real processes, real opencode, embedded model)', function () {
  this.timeout(600_000);
  let w: World | undefined;
  let cliPath: string;

  before(() => {
    cliPath = ensureCliBuilt(REPO_ROOT);
  });

  beforeEach(async () => {
    const model = await startScriptedModel();
    // No default model anywhere: every loop runs on Forge's embedded scripted model.
    const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL, extraUserConfig: { model: undefined, small_model: undefined } });
    const repo = await createTestRepository({ 'README.md': '# engine\n' });
    const work = await mkdtemp(join(tmpdir(), 'forge-cli-engine-'));
    const dataDir = join(work, 'data');
    const runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', dataDir, '--repo', repo.dir], settings: SETTINGS });
    w = { model, env, repo, work, dataDir, runner };
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

  async function plan(name: string, file = `${name}.txt`): Promise<string> {
    const path = join(w!.work, `${name}.md`);
    await writeFile(path, gatedPlan(name, file));
    return path;
  }
  const worktree = (name: string) => join(w!.dataDir, 'worktrees', name);
  const running = (name: string) => existsSync(join(worktree(name), `running-${name}`));
  const openGate = (name: string) => writeFile(join(worktree(name), `gate-${name}`), '');
  const engineInfo = (): { pid: number; kind: string; supervisorId: string } | null => {
    try {
      return JSON.parse(readFileSync(join(w!.dataDir, 'engine', 'engine.json'), 'utf8')) as { pid: number; kind: string; supervisorId: string };
    } catch {
      return null;
    }
  };
  async function statusRows(): Promise<StatusRow[]> {
    const r = await w!.runner.run(['status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l) as StatusRow).filter((row) => 'status' in row);
  }
  const jsonLines = (p: CliProcess) => p.stdoutLines().map((l) => JSON.parse(l) as { type: string; loop: string; status?: string });

  /** A's loop runs (its check waits) and A listens as the data folder's engine. */
  async function startEngine(name: string): Promise<CliProcess> {
    const a = w!.runner.start(['run', await plan(name), '--json']);
    await until(`loop ${name} reaches its gated check`, () => running(name), a);
    await until('A is the data folder\'s engine', () => engineInfo()?.pid === a.pid, a);
    // Only this user may reach it: folder 0700, socket and secret 0600.
    const dir = join(w!.dataDir, 'engine');
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, 'engine.sock')).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'secret')).mode & 0o777, 0o600);
    return a;
  }

  it('a second forge run hands its loop to the first process: both supervised by it, both complete, the second prints its loop and exits 0', async () => {
    const a = await startEngine('first');
    // --follow: the engine streams the agent's live feed of this loop too.
    const b = w!.runner.start(['run', await plan('second'), '--json', '--follow']);
    await until('loop second reaches its gated check', () => running('second'), b);

    assert.match(b.stderr(), new RegExp(`handed loop "second" to the Forge engine in process ${a.pid} \\(cli\\)`), b.describe());
    assert.match(a.stderr(), /supervising loop "second" handed over by process \d+/, a.describe());
    const rows = await statusRows();
    for (const name of ['first', 'second']) {
      const row = rows.find((r) => r.name === name)!;
      assert.equal(row.status, 'running');
      assert.deepEqual(row.supervisor, { pid: a.pid, kind: 'cli', engine: true, alive: true }, `${name} is supervised by A, the engine`);
    }
    const text = await w!.runner.run(['status']);
    assert.match(text.stdout, new RegExp(`^second .*supervised by process ${a.pid} \\(cli, the data folder's engine\\)$`, 'm'), text.stdout);
    // One process, one server: B started nothing (no opencode server carries its marker).
    assert.deepEqual(w!.runner.processesWith(PROCESS_MARKER_VARIABLE, b.marker), [b.pid], 'B runs no opencode of its own');

    // A's own loop ends first: A stays while the loop handed to it runs.
    await openGate('first');
    await until('A says it waits for the handed-over loop', () => /waits for 1 loop handed over by other forge processes/.test(a.stderr()), a);
    await openGate('second');
    const [ea, eb] = await Promise.all([a.exited, b.exited]);
    assert.equal(eb.code, 0, b.describe());
    assert.equal(ea.code, 0, a.describe());
    // B printed its own loop as a run of its own would, and nothing of A's loop; A the reverse.
    const bl = jsonLines(b);
    assert.equal(bl[0]!.type, 'loop.started');
    assert.ok(bl.every((l) => l.loop === 'second'), b.describe());
    assert.ok(bl.some((l) => l.type === 'live.tool' && (l as { tool?: string }).tool === 'write'), `the agent's write, followed through the engine\n${b.describe()}`);
    assert.deepEqual(bl.at(-1), { ...bl.at(-1)!, type: 'loop.ended', status: 'completed' });
    assert.ok(jsonLines(a).every((l) => l.loop === 'first'), a.describe());
    assert.equal(await w!.repo.git('show', 'forge/second:second.txt'), 'second\n');
    assert.deepEqual((await statusRows()).map((r) => [r.name, r.status]).sort(), [['first', 'completed'], ['second', 'completed']]);
    assert.equal(existsSync(join(w!.dataDir, 'engine', 'engine.sock')), false, 'the engine withdrew its socket');
    assert.equal(w!.model.agentRequests.length, 0, 'only the embedded model was asked');
  });

  it('the engine killed (SIGKILL) while a handed-over loop runs: the client exits with supervision lost and says how to restart; nobody takes the loop over', async () => {
    const a = await startEngine('first');
    const b = w!.runner.start(['run', await plan('second')]);
    await until('loop second reaches its gated check', () => running('second'), b);
    assert.match(b.stderr(), /handed loop "second"/, b.describe());
    a.signal('SIGKILL');
    const eb = await b.exited;
    assert.equal(eb.code, 9, b.describe());
    assert.match(b.stderr(), new RegExp(`the Forge engine \\(process ${a.pid}\\) that supervised loop "second" is gone\\. Nothing restarts the loop on its own: "forge restart second --force" takes it over`), b.describe());
    const row = (await statusRows()).find((r) => r.name === 'second')!;
    assert.equal(row.status, 'running', 'still marked running: nothing ended or took it over');
    assert.equal(row.supervised, false);
    assert.equal(row.supervisor?.pid, a.pid, 'the lease still names the dead engine');
    assert.equal(row.supervisor?.alive, false);
  });

  it('Ctrl-C on the run that handed its loop over cancels it through the engine (exit 3); forge restart hands over too, also a forced restart of the engine\'s own loop', async () => {
    const a = await startEngine('first');
    const b = w!.runner.start(['run', await plan('second')]);
    await until('loop second reaches its gated check', () => running('second'), b);
    b.signal('SIGINT');
    assert.equal((await b.exited).code, 3, b.describe());
    assert.match(b.stdout(), /^\[second\] ended: cancelled/m, b.describe());
    const rows = await statusRows();
    assert.equal(rows.find((r) => r.name === 'second')!.status, 'cancelled');
    assert.equal(rows.find((r) => r.name === 'first')!.supervisor?.pid, a.pid, 'the engine still supervises its own loop');

    // forge restart hands over too; so does a forced restart of the engine's own loop, which
    // the engine then drives for the restarting process (its own run ends as taken over: 9).
    const again = w!.runner.start(['restart', 'second', '--json']);
    const taken = w!.runner.start(['restart', 'first', '--force', '--json']);
    await until('both restarts handed over', () => /handed loop "second"/.test(again.stderr()) && /handed loop "first"/.test(taken.stderr()), again);
    await openGate('second');
    await openGate('first');
    const [ea, eagain, etaken] = await Promise.all([a.exited, again.exited, taken.exited]);
    assert.equal(eagain.code, 0, again.describe());
    assert.equal(etaken.code, 0, taken.describe());
    assert.equal(ea.code, 9, a.describe());
    assert.equal(jsonLines(taken).at(-1)!.status, 'completed', taken.describe());
    assert.deepEqual((await statusRows()).map((r) => [r.name, r.status]).sort(), [['first', 'completed'], ['second', 'completed']]);
  });

  it('a stale socket (its process gone) is ignored: forge run supervises its loop itself, becomes the engine, then withdraws', async () => {
    const engineDir = join(w!.dataDir, 'engine');
    await mkdir(engineDir, { recursive: true, mode: 0o700 });
    const sock = join(engineDir, 'engine.sock');
    // A process that listened on the socket and died without removing it (nor its files).
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => { console.log('up'); })`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => child.stdout!.once('data', r));
    const deadPid = child.pid!;
    await writeFile(join(engineDir, 'engine.json'), JSON.stringify({ pid: deadPid, supervisorId: `${deadPid}:cli-x`, kind: 'cli', started: 1, version: 1 }));
    await writeFile(join(engineDir, 'secret'), 'stale', { mode: 0o600 });
    await writeFile(join(engineDir, 'claim'), String(deadPid));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    assert.ok(existsSync(sock), 'the stale socket file stays');

    const a = w!.runner.start(['run', await plan('alone'), '--json']);
    await until('loop alone reaches its gated check', () => running('alone'), a);
    await until('A took the data folder over as its engine', () => engineInfo()?.pid === a.pid, a);
    assert.doesNotMatch(a.stderr(), /handed loop/);
    await openGate('alone');
    assert.equal((await a.exited).code, 0, a.describe());
    assert.deepEqual(readdirSync(engineDir), [], 'socket, info, secret and claim withdrawn');
  });

  it('a socket client without the secret is refused and starts nothing; with the secret, hello answers', async () => {
    const a = await startEngine('first');
    const sock = join(w!.dataDir, 'engine', 'engine.sock');
    /** Sends lines on a fresh connection; resolves with the first reply line. */
    const ask = (lines: string[]) =>
      new Promise<string>((resolve, reject) => {
        const s = connect(sock);
        let text = '';
        s.setEncoding('utf8');
        s.on('data', (c: string) => {
          text += c;
          if (text.includes('\n')) {
            s.destroy();
            resolve(text.slice(0, text.indexOf('\n')));
          }
        });
        s.on('error', reject);
        s.on('close', () => resolve(text));
        s.on('connect', () => s.write(lines.join('\n') + '\n'));
      });
    const readSecretOr = (d: string) => {
      try {
        return readFileSync(join(w!.dataDir, 'engine', 'secret'), 'utf8').trim() || d;
      } catch {
        return d;
      }
    };
    const start = (secret: string) => JSON.stringify({ type: 'start', secret, clientPid: 1, compat: 'x', request: { kind: 'goal', repoPath: w!.repo.dir, goal: 'write x.txt', name: 'intruder' } });
    const wrong = await ask([start('0'.repeat(64))]);
    assert.equal(JSON.parse(wrong).code, 'unauthorized');
    const none = await ask([JSON.stringify({ type: 'start', clientPid: 1, compat: 'x', request: { kind: 'goal', repoPath: w!.repo.dir, goal: 'g' } })]);
    assert.equal(JSON.parse(none).code, 'bad_message', 'no secret: not a request');
    const garbage = await ask(['{"type":"start"', 'not json']);
    assert.equal(JSON.parse(garbage).code, 'bad_message');
    assert.deepEqual((await statusRows()).map((r) => r.name), ['first'], 'nothing started');
    assert.equal(existsSync(worktree('intruder')), false);
    const hello = await ask([JSON.stringify({ type: 'hello', secret: readSecretOr('missing'), version: 1 })]);
    assert.equal(JSON.parse(hello).engine.pid, a.pid);
    await openGate('first');
    assert.equal((await a.exited).code, 0, a.describe());
  });

  it('a bad plan or a bad name handed over: a clear message, exit 2, nothing created; other settings or --no-handover: the run supervises itself', async () => {
    const a = await startEngine('first');
    const bad = join(w!.work, 'bad.md');
    await writeFile(bad, '\n   \n\n');
    const r1 = await w!.runner.run(['run', bad]);
    assert.equal(r1.code, 2, r1.stderr);
    assert.match(r1.stderr, /bad\.md.*is empty/);
    assert.doesNotMatch(r1.stderr, /handed loop/);
    const r2 = await w!.runner.run(['goal', 'write x.txt', '--name', '../escape']);
    assert.equal(r2.code, 2, r2.stderr);
    // Refused by the engine's runtime (the name rule lives there), said as a run of its own says it.
    assert.match(r2.stderr, /^forge: .*name/im);
    assert.doesNotMatch(r2.stderr, /internal error|handed loop/);
    assert.match(a.stderr(), /^(?![\s\S]*supervising loop "escape")/);
    assert.deepEqual((await statusRows()).map((r) => r.name), ['first'], 'no loop row was created');
    assert.deepEqual(readdirSync(join(w!.dataDir, 'worktrees')), ['first'], 'no worktree was created');

    // Other settings: the engine would run the loop differently, so the second run keeps it.
    const c = w!.runner.start(['run', await plan('other'), '--json'], { settings: { 'forge.loop.maxIterations': 7 } });
    await until('loop other reaches its gated check', () => running('other'), c);
    assert.match(c.stderr(), /runs with other Forge settings or another environment .*this process supervises the loop itself/, c.describe());
    const other = (await statusRows()).find((r) => r.name === 'other')!;
    assert.equal(other.supervisor?.pid, c.pid);
    assert.equal(other.supervisor?.engine, false);
    // --no-handover (CI isolation): the same settings, yet this process keeps its loop.
    const d = w!.runner.start(['run', await plan('own'), '--no-handover']);
    await until('loop own reaches its gated check', () => running('own'), d);
    assert.doesNotMatch(d.stderr(), /handed loop/);
    const own = (await statusRows()).find((r) => r.name === 'own')!;
    assert.deepEqual(own.supervisor, { pid: d.pid, kind: 'cli', engine: false, alive: true });
    await openGate('own');
    await openGate('other');
    await openGate('first');
    assert.equal((await d.exited).code, 0, d.describe());
    assert.equal((await c.exited).code, 0, c.describe());
    assert.equal((await a.exited).code, 0, a.describe());
  });
});
