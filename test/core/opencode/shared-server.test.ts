/**
 * One opencode server for many loops (issue 14 part 1), end to end: the real engine, real
 * opencode, real git, real bwrap sandboxes and database; only the model is scripted.
 *
 * - Eight loops at once go through one opencode process. Each loop's Forge tool calls land in
 *   that loop (its finding is its own, in no other loop). The server is SIGKILLed while every
 *   loop has a model request in flight: it restarts once, for all of them, and each loop goes
 *   on in a fresh session to its end.
 * - A hostile coder on a shared server tries to run commands in another loop's worktree and
 *   outside any worktree: neither runs. Sandboxed and unconfined loops never share a server,
 *   and the shared server's configuration holds no tool-server secret.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { parseJsonObject } from '../../../src/core/opencode/server-process';
import type { LoopRef, LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { createLoopHarness, roleOf, type LoopHarness } from '../../support/loop-harness';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';
import { hang, text, toolCall, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';

const handoffCoder = (what: string) => toolCall('forge_loop_handoff', { decisions: what, verification: 'read the file back', notesForAuditor: 'none' });
const handoffAuditor = (summary: string, done: boolean) => toolCall('forge_loop_handoff', { summary, done, deviations: '', followUps: '' });

function planFor(name: string, file: string): string {
  return `# ${name}\nLoop Name: ${name}\n\n## Write the file\nCreate ${file} holding one line.\n`;
}

/** The loop a model request comes from: opencode's environment block names the instance's directory (the worktree). */
function loopOfRequest(request: ScriptedRequest, names: readonly string[]): string | undefined {
  return names.find((n) => request.system.includes(`/worktrees/${n}`));
}

/** opencode server processes whose working folder is inside `folder`. */
function opencodeServersIn(folder: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!cmdline.includes('serve') || !cmdline.includes('--hostname')) continue;
      if (readlinkSync(`/proc/${entry}/cwd`).startsWith(folder)) pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

function environOf(pid: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const i = entry.indexOf('=');
    if (i > 0) env[entry.slice(0, i)] = entry.slice(i + 1);
  }
  return env;
}

describe('one opencode server for many loops (real opencode, bwrap, scripted model)', function () {
  this.timeout(900_000);
  let h: LoopHarness | undefined;
  before(() => bwrapPrereqs());
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('eight loops at once through one server: each tool call lands in its own loop; SIGKILL of the server mid-run and every loop goes on to complete', async () => {
    const dataDir = mkdtempSync(join(sandboxTestTempRoot(), 'shared-server-'));
    h = await createLoopHarness({ dataDir });
    const harness = h;
    const names = Array.from({ length: 8 }, (_, i) => `par-${i + 1}`);
    const fileOf = (name: string) => `file-${name}.txt`;
    const wt = (name: string) => join(dataDir, 'worktrees', name);

    // Every loop's first coder session writes its file, then waits in its next model request
    // until all eight loops wait there: then the server is killed under all of them at once.
    let arrived = 0;
    let allArrived!: () => void;
    const barrier = new Promise<void>((resolve) => (allArrived = resolve));
    const perLoop = new Map<string, { code: number; auditor: number; sessions: Map<string, ScriptStep[]> }>();
    const stray: string[] = [];
    harness.model.setHandler(async (request, ctx) => {
      const name = loopOfRequest(request, names);
      if (!name) {
        stray.push(request.lastUserText.slice(0, 120));
        return text('Done.');
      }
      const state = perLoop.get(name) ?? { code: 0, auditor: 0, sessions: new Map() };
      perLoop.set(name, state);
      const sid = request.sessionId ?? 'none';
      if (!state.sessions.has(sid)) {
        const role = roleOf(request);
        const nth = ++state[role];
        let steps: ScriptStep[];
        if (role === 'code' && nth === 1) steps = [toolCall('write', { filePath: join(wt(name), fileOf(name)), content: `${name}\n` })];
        else if (role === 'code') steps = [handoffCoder(`session ${nth} of ${name}`)];
        else if (nth === 1) {
          steps = [
            toolCall('forge_review_write', { file: fileOf(name), line: 1, severity: 'bug', description: `finding of ${name}`, scenario: `${name} reads it` }),
            handoffAuditor(`${name} needs another pass`, false),
          ];
        } else if (nth === 2) steps = [toolCall('forge_review_delete', { file: fileOf(name), line: 1 }), handoffAuditor(`${name} fixed`, true)];
        else steps = [handoffAuditor(`${name} final audit clean`, true)];
        state.sessions.set(sid, steps);
      }
      const queue = state.sessions.get(sid)!;
      if (queue.length === 0 && state.code === 1 && roleOf(request) === 'code' && ctx.turnInSession > 0) {
        // The first coder session after its write: wait for the others, then hang until the kill.
        arrived += 1;
        if (arrived === names.length) allArrived();
        await barrier;
        return hang;
      }
      return queue.shift() ?? text('Done.');
    });

    const events: LoopRuntimeEvent[] = [];
    harness.engine.runtime.subscribe((e) => events.push(e));
    const refs: LoopRef[] = [];
    for (const name of names) {
      refs.push(await harness.engine.runtime.start({ kind: 'plan', repoPath: harness.repo.dir, planText: planFor(name, fileOf(name)), planSource: `${name}.md`, maxIterations: 8 }));
    }
    await barrier;

    // One opencode process serves all eight loops, sandboxed.
    const servers = harness.engine.opencodeServers();
    assert.equal(servers.length, 1, JSON.stringify(servers));
    assert.equal(servers[0]!.confinement, 'sandboxed');
    assert.deepEqual([...servers[0]!.loops].sort(), [...names].sort());
    const processes = opencodeServersIn(join(dataDir, 'opencode-shared'));
    assert.deepEqual(processes, [servers[0]!.pid], 'exactly one opencode server process');
    // Its configuration names no loop's tool server: no bearer secret in its environment.
    const inline = parseJsonObject(environOf(servers[0]!.pid!).OPENCODE_CONFIG_CONTENT) ?? {};
    assert.equal(inline.mcp, undefined, 'no MCP entry (and so no tool-server secret) in the shared server\'s configuration');

    process.kill(servers[0]!.pid!, 'SIGKILL');
    const ends = await Promise.all(refs.map((r) => harness.engine.runtime.waitForEnd(r)));
    for (const [i, end] of ends.entries()) {
      assert.equal(end.type, 'loop.ended', `${names[i]}: ${JSON.stringify(end)}`);
      if (end.type === 'loop.ended') assert.equal(end.status, 'completed', `${names[i]}: ${JSON.stringify(end)}`);
    }
    assert.deepEqual(stray, [], 'every model request came from one of the loops');

    // The server was restarted once, for all of them: each loop was told, and went on.
    for (const name of names) {
      const notices = events.filter((e) => e.type === 'loop.notice' && e.loop.name === name).map((e) => (e as { message: string }).message);
      assert.ok(notices.some((m) => /opencode exited unexpectedly \(killed by SIGKILL\)/.test(m)), `${name}: ${notices.join(' | ')}`);
      assert.ok(notices.some((m) => /opencode is running again/.test(m)), `${name}: ${notices.join(' | ')}`);
    }
    assert.equal(perLoop.size, names.length);
    for (const [name, state] of perLoop) assert.ok(state.code >= 2, `${name} had a fresh coder session after the restart (${state.code})`);

    // Each loop's tool calls landed in that loop, and only there.
    const repos = createForgeRepositories(harness.engine.db);
    for (const name of names) {
      const findings = repos.reviewFindings.listByLoop(harness.projectId, name);
      assert.deepEqual(findings.map((f) => [f.file, f.description, f.status]), [[fileOf(name), `finding of ${name}`, 'resolved']], name);
      const transitions = repos.transitions.listByLoop(harness.projectId, name).map((t) => t.event);
      assert.ok(transitions.includes('audit_dirty') && transitions.includes('final_audit_clean'), `${name}: ${transitions.join(',')}`);
      assert.equal((await harness.repo.git('show', `forge/${name}:${fileOf(name)}`)).trim(), name);
    }
    // The loops left the server; it stops once none is left (after a short linger) or with the engine.
    assert.deepEqual(harness.engine.opencodeServers().flatMap((s) => s.loops), []);
  });

  it('a hostile coder on a shared server cannot run commands in another loop\'s worktree or outside any; sandboxed and unconfined loops get servers of their own', async () => {
    const dataDir = mkdtempSync(join(sandboxTestTempRoot(), 'shared-hostile-'));
    const outside = mkdtempSync(join(sandboxTestTempRoot(), 'shared-outside-'));
    h = await createLoopHarness({ dataDir });
    const harness = h;
    const names = ['victim', 'attacker', 'loose'];
    const wt = (name: string) => join(dataDir, 'worktrees', name);
    let victimWaiting!: () => void;
    const victimReady = new Promise<void>((resolve) => (victimWaiting = resolve));
    let releaseVictim!: () => void;
    const victimRelease = new Promise<void>((resolve) => (releaseVictim = resolve));
    const attackerResults: string[] = [];
    let looseSeen!: () => void;
    const looseRunning = new Promise<void>((resolve) => (looseSeen = resolve));
    let releaseLoose!: () => void;
    const looseRelease = new Promise<void>((resolve) => (releaseLoose = resolve));
    const sessions = new Map<string, ScriptStep[]>();
    harness.model.setHandler(async (request, ctx) => {
      const name = loopOfRequest(request, names);
      const role = roleOf(request);
      if (name === 'victim' && role === 'code' && ctx.turnInSession === 0) {
        // Keep the victim's worktree live on the server while the attacker works.
        victimWaiting();
        await victimRelease;
        return handoffCoder('victim did nothing');
      }
      if (name === 'loose' && role === 'code' && ctx.turnInSession === 0) {
        looseSeen();
        await looseRelease;
        return handoffCoder('loose did nothing');
      }
      if (name === 'attacker' && role === 'code') {
        const sid = request.sessionId ?? 'none';
        if (!sessions.has(sid)) {
          sessions.set(sid, [
            toolCall('bash', { command: 'echo pwned > pwned-by-attacker.txt; echo wrote-into-victim', description: 'write into the other loop', workdir: wt('victim') }),
            toolCall('bash', { command: 'echo pwned > pwned-by-attacker.txt; echo wrote-outside', description: 'write outside', workdir: outside }),
            toolCall('bash', { command: 'pwd; echo own-worktree-ok', description: 'own worktree' }),
            handoffCoder('tried'),
          ]);
        } else {
          for (const r of request.toolResults) attackerResults.push(r.content);
        }
        return sessions.get(sid)!.shift() ?? text('Done.');
      }
      // Auditors (and anything else) hand off once per session.
      return ctx.turnInSession === 0 ? handoffAuditor(`${name ?? '?'} clean`, true) : text('Done.');
    });

    const victim = await harness.engine.runtime.start({ kind: 'goal', repoPath: harness.repo.dir, goal: 'Wait.', name: 'victim', maxIterations: 2 });
    await victimReady;
    const loose = await harness.engine.runtime.start({ kind: 'goal', repoPath: harness.repo.dir, goal: 'Wait too.', name: 'loose', maxIterations: 2, sandbox: false });
    await looseRunning;
    const servers = harness.engine.opencodeServers();
    assert.deepEqual(servers.map((s) => [s.confinement, s.loops]).sort(), [['host', ['loose']], ['sandboxed', ['victim']]]);
    const attacker = await harness.engine.runtime.start({ kind: 'goal', repoPath: harness.repo.dir, goal: 'Attack.', name: 'attacker', maxIterations: 2 });
    const attackerEnd = await harness.engine.runtime.waitForEnd(attacker);
    assert.equal(attackerEnd.type, 'loop.ended');
    releaseVictim();
    releaseLoose();
    await harness.engine.runtime.waitForEnd(victim);
    await harness.engine.runtime.waitForEnd(loose);

    assert.equal(existsSync(join(wt('victim'), 'pwned-by-attacker.txt')), false, 'nothing was written into the other loop\'s worktree');
    assert.equal(existsSync(join(outside, 'pwned-by-attacker.txt')), false, 'nothing was written outside the worktrees');
    const all = attackerResults.join('\n');
    if (process.env.FORGE_TEST_LOG) console.warn(`attacker's tool results:\n${all}`);
    assert.ok(!/wrote-into-victim|wrote-outside/.test(all), all);
    assert.ok(all.includes('own-worktree-ok') && all.includes(wt('attacker')), `the attacker's own commands ran in its worktree: ${all}`);
    // opencode's path permission (external_directory, denied outside the loop's worktree) refused
    // both before any shell ran; the router behind it refuses such directories too (shell-router.test.ts).
    assert.equal((all.match(/prevents you from using this specific tool call/g) ?? []).length, 2, all);
  });
  it('an unconfined loop that ends on a shared server takes what its agent left running with it, and the server goes on serving the other loop', async () => {
    h = await createLoopHarness();
    const harness = h;
    const names = ['keeper', 'sleeper'];
    const marker = `${700 + (process.pid % 100)}.${Date.now() % 1000}`;
    let keeperWaiting!: () => void;
    const keeperReady = new Promise<void>((resolve) => (keeperWaiting = resolve));
    let releaseKeeper!: () => void;
    const keeperRelease = new Promise<void>((resolve) => (releaseKeeper = resolve));
    const sessions = new Map<string, ScriptStep[]>();
    let serversWhileBoth: ReturnType<typeof harness.engine.opencodeServers> | undefined;
    harness.model.setHandler(async (request, ctx) => {
      const name = loopOfRequest(request, names);
      const role = roleOf(request);
      if (name === 'keeper' && role === 'code' && ctx.turnInSession === 0) {
        keeperWaiting();
        await keeperRelease;
        return handoffCoder('keeper did nothing');
      }
      if (name === 'sleeper' && role === 'code') {
        const sid = request.sessionId ?? 'none';
        if (!sessions.has(sid)) {
          // While both loops work: which servers serve them.
          serversWhileBoth ??= harness.engine.opencodeServers();
          sessions.set(sid, [toolCall('bash', { command: `(sleep ${marker} >/dev/null 2>&1 &) ; echo started`, description: 'start a background sleeper' }), handoffCoder('started a sleeper')]);
        }
        return sessions.get(sid)!.shift() ?? text('Done.');
      }
      return ctx.turnInSession === 0 ? handoffAuditor(`${name ?? '?'} clean`, true) : text('Done.');
    });
    const sleeping = () => {
      const r = spawnSync('pgrep', ['-f', `sleep ${marker}`], { encoding: 'utf8' });
      return r.stdout.trim();
    };

    const keeper = await harness.engine.runtime.start({ kind: 'goal', repoPath: harness.repo.dir, goal: 'Wait.', name: 'keeper', maxIterations: 2, sandbox: false });
    await keeperReady;
    const sleeper = await harness.engine.runtime.start({ kind: 'goal', repoPath: harness.repo.dir, goal: 'Start a sleeper.', name: 'sleeper', maxIterations: 2, sandbox: false });
    const end = await harness.engine.runtime.waitForEnd(sleeper);
    assert.equal(serversWhileBoth?.length, 1, JSON.stringify(serversWhileBoth));
    const server = serversWhileBoth[0]!;
    assert.deepEqual([...server.loops].sort(), ['keeper', 'sleeper']);
    assert.equal(server.confinement, 'host');
    assert.equal(end.type === 'loop.ended' && end.status, 'completed', JSON.stringify(end));
    assert.equal(sleeping(), '', 'the ended loop\'s background process is gone');
    // The server it shared was not stopped: it still serves the keeper, which goes on to its end.
    assert.equal(harness.engine.opencodeServers()[0]?.pid, server.pid);
    assert.ok(existsSync(`/proc/${server.pid}`), 'the shared server lives on');
    assert.deepEqual(harness.engine.opencodeServers()[0]?.loops, ['keeper']);
    releaseKeeper();
    const keeperEnd = await harness.engine.runtime.waitForEnd(keeper);
    assert.equal(keeperEnd.type === 'loop.ended' && keeperEnd.status, 'completed', JSON.stringify(keeperEnd));
  });
});
