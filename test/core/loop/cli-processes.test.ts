/**
 * The `forge` CLI as real processes (SPEC §2 supervision, §8 headless): a CLI killed mid-loop and
 * taken over with `forge restart --force`, two CLIs on one data folder, Ctrl-C, and `--json`.
 *
 * Real parts: the built CLI (`dist/cli.mjs`) in child processes, the opencode binary they start,
 * a git repository and Forge's database file in temp folders. The only fake is the language
 * model, scripted here in the test process and reached by the children's opencode servers
 * through the isolated opencode configuration.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROCESS_MARKER_VARIABLE as OPENCODE_MARKER_VARIABLE } from '../../../src/core/opencode/server-process';
import { createForgeRepositories, defaultSqlWasmPath, openForgeDatabase, type LoopAttemptRow } from '../../../src/core/storage';
import { createCliRunner, ensureCliBuilt, PROCESS_MARKER_VARIABLE, type CliProcess, type CliRunner } from '../../support/cli-runner';
import { createTestRepository, type TestRepository } from '../../support/git-repo';
import { REPO_ROOT, roleOf, sessionScript } from '../../support/loop-harness';
import { MOCK_MODEL, writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { hang, startScriptedModel, toolCall, type ScriptedModel, type ScriptStep } from '../../support/scripted-model';

const LOOP = 'pair';
const PLAN = `# Pair of files
Loop Name: ${LOOP}

## First file
Create a.txt containing "a".

## Second file
Create b.txt containing "b".

## Verification
Both files exist.
`;

const handoffCoder = (what: string) => toolCall('forge_loop_handoff', { decisions: what, verification: 'read it back', notesForAuditor: '' });
const handoffAuditor = (summary = 'clean') => toolCall('forge_loop_handoff', { summary, done: true, deviations: '', followUps: '' });

/** The watchdog must not fire while a test holds a phase open (nor abort opencode's cold provider load). */
const SETTINGS = { 'forge.loop.stallTimeoutMs': 300_000 };

interface World {
  model: ScriptedModel;
  env: OpencodeTestEnvironment;
  repo: TestRepository;
  work: string;
  dataDir: string;
  planPath: string;
  worktreeDir: string;
  runner: CliRunner;
  /** Extra resources a test opened (a second model, another environment). */
  extra: Array<() => Promise<unknown>>;
}

interface StatusJson {
  status: string;
  phase: string;
  reason: string | null;
  supervised: boolean;
  worktree: string | null;
  branch: string | null;
  transitions: Array<{ event: string; from: string | null; to: string | null; iteration: number; section: number | null }>;
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** How long until no process carries `variable=value` (fails past `withinMs`): polled, never a fixed sleep. */
async function untilNoProcessWith(runner: CliRunner, variable: string, value: string, what: string, withinMs = 10_000): Promise<number> {
  const started = Date.now();
  for (;;) {
    const left = runner.processesWith(variable, value);
    if (left.length === 0) return Date.now() - started;
    if (Date.now() - started > withinMs) assert.fail(`${what} outlived its supervisor by more than ${withinMs} ms: pids ${left.join(', ')} remain`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const edges = (s: StatusJson) => s.transitions.map((t) => `${t.event}:${t.from ?? '-'}>${t.to ?? '-'}`);

describe('forge CLI processes (real opencode, scripted model, real git and database)', function () {
  this.timeout(600_000);
  let w: World | undefined;
  let cliPath: string;

  before(() => {
    cliPath = ensureCliBuilt(REPO_ROOT);
  });

  beforeEach(async () => {
    const model = await startScriptedModel();
    const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    const repo = await createTestRepository({ 'README.md': '# pair\n' });
    const work = await mkdtemp(join(tmpdir(), 'forge-cli-'));
    const dataDir = join(work, 'data');
    const planPath = join(work, 'plan.md');
    await writeFile(planPath, PLAN);
    const runner = createCliRunner({ cliPath, env: env.env, commonArgs: ['--data-dir', dataDir, '--repo', repo.dir], settings: SETTINGS });
    w = { model, env, repo, work, dataDir, planPath, worktreeDir: join(dataDir, 'worktrees', LOOP), runner, extra: [] };
  });

  afterEach(async () => {
    if (!w) return;
    const { runner, model, env, repo, work, extra } = w;
    w = undefined;
    await runner.killAll();
    for (const close of extra) await close().catch(() => {});
    await model.close().catch(() => {});
    await env.cleanup().catch(() => {});
    await repo.cleanup().catch(() => {});
    await rm(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });

  async function status(runner: CliRunner = w!.runner, env?: Record<string, string>): Promise<StatusJson> {
    const r = await runner.run(['status', LOOP, '--json'], env ? { env } : {});
    assert.equal(r.code, 0, `forge status failed:\n${r.stderr}`);
    return JSON.parse(r.stdout.trim()) as StatusJson;
  }

  /** Reads the database file the CLIs share (opened and closed around the read). */
  async function readDb<T>(read: (db: Awaited<ReturnType<typeof openForgeDatabase>>) => T): Promise<T> {
    const db = await openForgeDatabase({ path: join(w!.dataDir, 'forge.db'), wasmPath: defaultSqlWasmPath(), autoCompact: false });
    try {
      return read(db);
    } finally {
      await db.close();
    }
  }

  async function loopState(): Promise<Record<string, unknown>> {
    return readDb((db) => {
      const rows = db.query<{ state: string }>('SELECT state FROM loops WHERE name = ?', [LOOP]);
      assert.equal(rows.length, 1);
      return JSON.parse(rows[0]!.state) as Record<string, unknown>;
    });
  }

  async function attempts(): Promise<LoopAttemptRow[]> {
    return readDb((db) => {
      const row = db.query<{ project_id: string }>('SELECT project_id FROM loops WHERE name = ?', [LOOP])[0]!;
      return createForgeRepositories(db).attempts.listByLoop(row.project_id, LOOP);
    });
  }

  async function expectExit(proc: CliProcess, code: number): Promise<void> {
    const exit = await proc.exited;
    assert.equal(exit.code, code, `exit ${JSON.stringify(exit)}\n${proc.describe()}`);
  }

  it('SIGKILL mid-loop, then restart --force in a new process: completes once, no duplicate row, commit or session; the old opencode is gone', async () => {
    const { model, runner, planPath, worktreeDir } = w!;
    const secondAudit = deferred<string>();
    const script = sessionScript((role, nth, request) => {
      if (role === 'code' && nth === 1) return [toolCall('write', { filePath: join(worktreeDir, 'a.txt'), content: 'a\n' }), handoffCoder('wrote a.txt')];
      if (role === 'code' && nth === 2) return [toolCall('write', { filePath: join(worktreeDir, 'b.txt'), content: 'b\n' }), handoffCoder('wrote b.txt')];
      if (role === 'auditor' && nth === 2) {
        // Section 2's audit: the CLI is killed while this request is open.
        secondAudit.resolve(request.sessionId ?? '');
        return [hang];
      }
      return [handoffAuditor(`audit ${nth}`)];
    });
    model.setHandler(script.handler);

    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    const killedSession = await Promise.race([
      secondAudit.promise,
      a.exited.then(() => assert.fail(`the first CLI ended before section 2's audit\n${a.describe()}`)),
    ]);
    // Section 1 is committed before the kill; section 2's audit is in flight.
    const state = await loopState();
    // The loop's opencode server: its own (recorded on the loop), or the one the CLI's loops
    // share (not recorded: a takeover must never kill a server other loops use), found under the CLI.
    const shared = !state.opencodePid;
    const oldPid = shared ? runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker).find((pid) => commandLineOf(pid).includes(' serve '))! : (state.opencodePid as number);
    const oldMarker = shared ? environValue(oldPid, OPENCODE_MARKER_VARIABLE)! : (state.opencodeMarker as string);
    assert.ok(Number.isInteger(oldPid) && oldPid > 0, `the loop's opencode server: ${JSON.stringify(state)}`);
    if (shared) assert.match(String(state.opencodeLoopMarker), /^[0-9a-f]{16,}$/, 'a loop on a shared server records the marker of its own processes');
    assert.match(oldMarker ?? '', /^[0-9a-f]{16,}$/, 'the opencode server marker is stored with its pid');
    assert.ok(runner.processesWith(OPENCODE_MARKER_VARIABLE, oldMarker).includes(oldPid), 'the stored marker is the running server\'s');

    a.signal('SIGKILL');
    const killed = await a.exited;
    assert.equal(killed.signal, 'SIGKILL');
    // Forge's opencode runs in a process group of its own, which a SIGKILL of the CLI does not
    // reach: its guardian takes the server and everything it started down within seconds.
    const goneAfterMs = await untilNoProcessWith(runner, OPENCODE_MARKER_VARIABLE, oldMarker, 'the killed CLI\'s opencode server');
    console.log(`      the killed CLI's opencode server was gone ${goneAfterMs} ms after the CLI`);
    // The guardian itself (started by the CLI) may still be finishing its sweep for a moment.
    const survivors = runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker).map((pid) => `${pid} ${commandLineOf(pid)}`);
    const allGoneMs = await untilNoProcessWith(runner, PROCESS_MARKER_VARIABLE, a.marker, `what the killed CLI started (${survivors.join('; ')})`, 5_000);
    console.log(`      everything the killed CLI started was gone ${goneAfterMs + allGoneMs} ms after the CLI${survivors.length ? ` (last: ${survivors.join('; ')})` : ''}`);
    const orphaned = await status();
    assert.equal(orphaned.status, 'running', 'a killed CLI leaves its loop marked running');
    assert.equal(orphaned.supervised, false, 'its lease still runs, but its process is gone');
    const listed = await runner.run(['status']);
    assert.match(listed.stdout, /no live supervisor: restart with --force/);

    // Without --force: refused, and the loop stays as it was.
    const refused = await runner.run(['restart', LOOP]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /still marked running/);
    assert.match(refused.stderr, new RegExp(`its supervising process ${a.pid} is gone`));
    assert.match(refused.stderr, /force/);
    assert.equal((await status()).status, 'running');

    const requestsBefore = model.agentRequests.length;
    const b = runner.start(['restart', LOOP, '--force', '--json']);
    await expectExit(b, 0);

    // The takeover killed the dead CLI's opencode server and everything it started.
    assert.deepEqual(runner.processesWith(OPENCODE_MARKER_VARIABLE, oldMarker), [], 'old opencode server processes are gone');
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker), [], 'nothing the killed CLI started survives');
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, b.marker), [], 'the restarting CLI stopped its own opencode');

    const final = await status();
    assert.equal(final.status, 'completed');
    assert.deepEqual(edges(final), [
      'start:->coding',
      'coder_handoff:coding>auditing',
      'audit_clean:auditing>coding',
      'coder_handoff:coding>auditing',
      'force_restart:auditing>auditing',
      'audit_clean:auditing>final_auditing',
      'final_audit_clean:final_auditing>-',
    ]);

    // Each section is committed exactly once on the loop branch.
    const subjects = (await w!.repo.git('log', '--format=%s', `forge/${LOOP}`)).trim().split('\n');
    assert.equal(subjects.filter((s) => s === 'First file').length, 1, subjects.join('\n'));
    assert.equal(subjects.filter((s) => s === 'Second file').length, 1, subjects.join('\n'));
    assert.equal(await w!.repo.git('show', `forge/${LOOP}:b.txt`), 'b\n');

    // Sessions: one per phase run, none reused; the killed audit's session got nothing more.
    const rows = await attempts();
    assert.deepEqual(
      rows.map((r) => `${r.kind}:${r.sectionIndex}:${r.outcome}`),
      ['coding:0:succeeded', 'audit:0:succeeded', 'coding:1:succeeded', 'audit:1:abandoned', 'audit:1:succeeded', 'final_audit:1:succeeded'],
    );
    const sessionIds = rows.map((r) => r.sessionId);
    assert.equal(new Set(sessionIds).size, sessionIds.length, 'no session is used twice');
    assert.equal(rows[3]!.sessionId, killedSession);
    assert.deepEqual(new Set(model.agentRequests.map((r) => r.sessionId)), new Set(sessionIds), 'every session that reached the model is one of the loop\'s');
    assert.equal(model.agentRequests.filter((r) => r.sessionId === killedSession).length, 1, 'the killed audit session was never prompted again');
    const afterRestart = model.agentRequests.slice(requestsBefore);
    assert.ok(afterRestart.length > 0 && afterRestart.every((r) => r.sessionId !== killedSession));
    assert.deepEqual(
      script.firstRequests.map((r) => `${r.role}${r.nth}`),
      ['code1', 'auditor1', 'code2', 'auditor2', 'auditor3', 'auditor4'],
    );

    // The restarting CLI spoke JSON only, and reported the resumed phase first.
    const lines = b.stdoutLines().map((l) => JSON.parse(l) as { type: string; event?: string; status?: string });
    assert.equal(lines[0]!.type, 'loop.phase');
    assert.equal(lines[0]!.event, 'restart');
    assert.equal(lines.at(-1)!.type, 'loop.ended');
    assert.equal(lines.at(-1)!.status, 'completed');
  });

  it('forge cancel on a loop whose CLI was killed cancels it at once; the dead CLI\'s opencode server went with it', async () => {
    const { model, runner, planPath } = w!;
    const coding = deferred();
    model.setHandler(
      sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) {
          coding.resolve();
          return [hang];
        }
        return [role === 'code' ? handoffCoder('x') : handoffAuditor()];
      }).handler,
    );
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    await Promise.race([coding.promise, a.exited.then(() => assert.fail(`the CLI ended before coding\n${a.describe()}`))]);
    const marker = (await loopState()).opencodeMarker as string;
    a.signal('SIGKILL');
    await a.exited;
    await untilNoProcessWith(runner, OPENCODE_MARKER_VARIABLE, marker, 'the killed CLI\'s opencode server');

    // The lease still runs, but nobody will act on a cancel request: the cancel happens here.
    const cancel = await runner.run(['cancel', LOOP]);
    assert.equal(cancel.code, 0, cancel.stderr);
    assert.match(cancel.stdout, /: cancelled\./);
    assert.deepEqual(runner.processesWith(OPENCODE_MARKER_VARIABLE, marker), [], 'no opencode server process of the dead CLI came back');
    const end = await status();
    assert.equal(end.status, 'cancelled');
    assert.deepEqual(edges(end), ['start:->coding', 'cancel:coding>-']);
    await w!.repo.git('rev-parse', '--verify', `forge/${LOOP}`);
  });

  it('two CLIs on one data folder: B sees A supervising, cannot restart it, and cancels it through A', async () => {
    const { model, runner, planPath } = w!;
    // CLI B gets an opencode environment of its own, on a model of its own: had B ever driven
    // the loop, that model would have been asked.
    const modelB = await startScriptedModel();
    const envB = await writeOpencodeTestEnvironment({ modelBaseURL: modelB.baseURL });
    w!.extra.push(() => modelB.close(), () => envB.cleanup());

    const coding = deferred<string>();
    model.setHandler(
      sessionScript((role, nth, request) => {
        if (role === 'code' && nth === 1) {
          coding.resolve(request.sessionId ?? '');
          return [hang];
        }
        return [role === 'code' ? handoffCoder('x') : handoffAuditor()];
      }).handler,
    );
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    await Promise.race([coding.promise, a.exited.then(() => assert.fail(`CLI A ended before coding\n${a.describe()}`))]);

    const seen = await status(runner, envB.env);
    assert.equal(seen.status, 'running');
    assert.equal(seen.supervised, true, 'B shows the loop supervised');
    const list = await runner.run(['status'], { env: envB.env });
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`^${LOOP}\\s+running`, 'm'));
    assert.doesNotMatch(list.stdout, /no live supervisor/);

    const refused = await runner.run(['restart', LOOP], { env: envB.env });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /still marked running/);
    assert.match(refused.stderr, new RegExp(`process ${a.pid} supervises it`));

    const cancel = await runner.run(['cancel', LOOP], { env: envB.env });
    assert.equal(cancel.code, 0, cancel.stderr);
    // A is the data folder's engine: B asks it over its socket, and A has ended the loop when B returns.
    assert.match(cancel.stdout, /: cancelled\./);
    const requestsAtCancel = model.agentRequests.length;

    await expectExit(a, 3);
    assert.match(a.stdout(), /ended: cancelled/);
    const end = await status(runner, envB.env);
    assert.equal(end.status, 'cancelled');
    assert.equal(end.reason, 'cancelled');
    assert.deepEqual(edges(end), ['start:->coding', 'cancel:coding>-']);

    // Only A's opencode ever prompted for the loop, and nothing after the cancel.
    assert.equal(modelB.requests.length, 0, 'B never drove the loop');
    assert.equal(model.agentRequests.length, requestsAtCancel, 'no prompt after the cancel');
    const rows = await attempts();
    assert.deepEqual(rows.map((r) => `${r.kind}:${r.outcome}`), ['coding:abandoned']);
    assert.deepEqual([...new Set(model.agentRequests.map((r) => r.sessionId))], [rows[0]!.sessionId]);
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker), [], 'A stopped its opencode server');
  });

  it('Ctrl-C (SIGINT) on forge run cancels cleanly: exit 3, status cancelled, worktree and branch kept', async () => {
    const { model, runner, planPath, worktreeDir } = w!;
    const coding = deferred();
    model.setHandler(
      sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) {
          coding.resolve();
          return [toolCall('write', { filePath: join(worktreeDir, 'a.txt'), content: 'a\n' }), hang];
        }
        return [handoffAuditor()];
      }).handler,
    );
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    await Promise.race([coding.promise, a.exited.then(() => assert.fail(`the CLI ended before coding\n${a.describe()}`))]);
    // The file is written by the tool call before the session hangs on its next request.
    await model.waitForRequest((r) => roleOf(r) === 'code' && r.toolResults.some((t) => t.name === 'write'), 180_000);

    a.signal('SIGINT');
    await expectExit(a, 3);
    assert.match(a.stderr(), /cancelling loop "pair" \(worktree and branch are kept\)/);
    assert.match(a.stdout(), /ended: cancelled/);

    const end = await status();
    assert.equal(end.status, 'cancelled');
    assert.equal(end.reason, 'cancelled');
    assert.deepEqual(edges(end), ['start:->coding', 'cancel:coding>-']);
    assert.equal(end.worktree, worktreeDir);
    assert.ok(existsSync(join(worktreeDir, 'a.txt')), 'the worktree is kept with the work in it');
    await w!.repo.git('rev-parse', '--verify', `forge/${LOOP}`);
    // Teardown committed the unfinished work on the branch.
    assert.equal(await w!.repo.git('show', `forge/${LOOP}:a.txt`), 'a\n');
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker), [], 'no process of the cancelled run is left');
  });

  it('stdout closed after the first line (forge run … | head -1): the loop runs on to completed under supervision, exit 0, no EPIPE crash', async () => {
    const { model, runner, planPath, worktreeDir } = w!;
    const stdoutClosed = deferred();
    const script = sessionScript((role, nth) =>
      role === 'code' ? [toolCall('write', { filePath: join(worktreeDir, nth === 1 ? 'a.txt' : 'b.txt'), content: 'x\n' }), handoffCoder('wrote it')] : [handoffAuditor()],
    );
    // Nothing reaches the model before the pipe is closed: every later line is written into a closed pipe.
    model.setHandler(async (request) => {
      await stdoutClosed.promise;
      return script.handler(request);
    });
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    await a.waitForLine((l) => l.startsWith(`[${LOOP}] started`));
    a.closeStdout();
    stdoutClosed.resolve();

    await expectExit(a, 0);
    assert.doesNotMatch(a.stderr(), /EPIPE|internal error|\n\s+at /, 'no crash, no stack');
    assert.match(a.stderr(), /standard output was closed; what follows is dropped\. A running loop goes on to its end/);
    assert.equal(a.stderr().match(/standard output was closed/g)!.length, 1, 'said once');
    const end = await status();
    assert.equal(end.status, 'completed');
    assert.equal(end.reason, 'completed');
    assert.ok(script.counts.auditor >= 3, 'both sections and the final audit ran after the pipe was closed');
    assert.equal(await w!.repo.git('show', `forge/${LOOP}:b.txt`), 'x\n');
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker), [], 'the CLI stopped its opencode server');
  });

  it('stdout and stderr both closed, with debug logging writing to stderr all along: the loop still completes, exit 0', async () => {
    const { model, runner, planPath, worktreeDir } = w!;
    const closed = deferred();
    const script = sessionScript((role, nth) =>
      role === 'code' ? [toolCall('write', { filePath: join(worktreeDir, nth === 1 ? 'a.txt' : 'b.txt'), content: 'x\n' }), handoffCoder('wrote it')] : [handoffAuditor()],
    );
    model.setHandler(async (request) => {
      await closed.promise;
      return script.handler(request);
    });
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL], { env: { FORGE_LOG: 'debug' } });
    await a.waitForLine((l) => l.startsWith(`[${LOOP}] started`));
    a.closeStdout();
    a.closeStderr();
    closed.resolve();
    await expectExit(a, 0);
    const end = await status();
    assert.equal(end.status, 'completed');
    assert.ok(script.counts.auditor >= 3, 'the whole loop ran after both pipes were closed');
  });

  it('SIGHUP (the terminal closed) cancels cleanly like Ctrl-C: exit 3, status cancelled, worktree and branch kept; the start notice about untracked files was printed', async () => {
    const { model, runner, planPath } = w!;
    await writeFile(join(w!.repo.dir, 'scratch.txt'), 'not committed\n');
    const coding = deferred();
    model.setHandler(
      sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) {
          coding.resolve();
          return [hang];
        }
        return [handoffAuditor()];
      }).handler,
    );
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL]);
    await Promise.race([coding.promise, a.exited.then(() => assert.fail(`the CLI ended before coding\n${a.describe()}`))]);
    assert.match(a.stdout(), new RegExp(`^\\[${LOOP}\\] note: 1 untracked file in .+ is not part of the loop: it starts from HEAD [0-9a-f]{7} \\(main\\)\\.`, 'm'));

    a.signal('SIGHUP');
    await expectExit(a, 3);
    assert.match(a.stderr(), /cancelling loop "pair" \(worktree and branch are kept\)/);
    const end = await status();
    assert.equal(end.status, 'cancelled');
    assert.deepEqual(edges(end), ['start:->coding', 'cancel:coding>-']);
    assert.ok(existsSync(w!.worktreeDir), 'the worktree is kept');
    await w!.repo.git('rev-parse', '--verify', `forge/${LOOP}`);
    assert.deepEqual(runner.processesWith(PROCESS_MARKER_VARIABLE, a.marker), [], 'no process of the cancelled run is left');
  });

  it('--json: every stdout line is one JSON object, and the phase changes come in the order of the transition log', async () => {
    const { model, runner, planPath, worktreeDir } = w!;
    const coderSteps = (file: string): ScriptStep[] => [toolCall('write', { filePath: join(worktreeDir, file), content: `${file}\n` }), handoffCoder(`wrote ${file}`)];
    model.setHandler(
      sessionScript((role, nth) => (role === 'code' ? coderSteps(nth === 1 ? 'a.txt' : 'b.txt') : [handoffAuditor(`audit ${nth}`)])).handler,
    );
    const a = runner.start(['run', planPath, '--model', MOCK_MODEL, '--json']);
    await expectExit(a, 0);

    const lines = a.stdoutLines();
    assert.ok(lines.length > 0);
    const events = lines.map((line, i) => {
      try {
        return JSON.parse(line) as { type: string; loop: string; event?: string; from?: string | null; to?: string; status?: string; reason?: string };
      } catch (error) {
        throw new Error(`stdout line ${i + 1} is not JSON: ${line}\n${(error as Error).message}`);
      }
    });
    assert.ok(events.every((e) => e && typeof e === 'object' && e.loop === LOOP && typeof e.type === 'string'));
    assert.equal(events[0]!.type, 'loop.started');
    const ended = events.at(-1)!;
    assert.equal(ended.type, 'loop.ended');
    assert.equal(ended.status, 'completed');
    assert.equal(ended.reason, 'completed');

    const phases = events.filter((e) => e.type === 'loop.phase').map((e) => `${e.event}:${e.from ?? '-'}>${e.to}`);
    const expected = [
      'start:->coding',
      'coder_handoff:coding>auditing',
      'audit_clean:auditing>coding',
      'coder_handoff:coding>auditing',
      'audit_clean:auditing>final_auditing',
    ];
    assert.deepEqual(phases, expected);
    const log = await status();
    assert.deepEqual(edges(log), [...expected, 'final_audit_clean:final_auditing>-']);
    // Each session the loop ran is announced once, in phase order.
    assert.deepEqual(
      events.filter((e) => e.type === 'loop.session').map((e) => (e as { phase?: string }).phase),
      ['coding', 'auditing', 'coding', 'auditing', 'final_auditing'],
    );
    const commits = events.filter((e) => e.type === 'loop.commit').map((e) => (e as { message?: string }).message);
    assert.deepEqual(commits, ['First file', 'Second file']);
  });
});

/** A process's command line, for messages ('' once it is gone). */
function environValue(pid: number, name: string): string | undefined {
  const entry = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((e) => e.startsWith(`${name}=`));
  return entry?.slice(name.length + 1);
}

function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}
