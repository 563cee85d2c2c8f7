#!/usr/bin/env node
// Loop overhead: what Forge's loop runtime costs on top of opencode itself.
//
// - Forge: the scripted two-section plan through the whole engine (createForgeEngine + runtime:
//   worktree, database, Forge's MCP tools, state machine, checkpoints, teardown), clean audits:
//   code → audit → code → audit → final audit, 5 sessions.
// - Bare: the same prompts (the very texts Forge sent, captured from the model), the same
//   number of sessions, agents, rulesets and scripted replies, sent to an opencode server
//   (started the same way, with Forge's tool server behind a recording backend) straight
//   through the SDK client: create session, promptAsync, wait for idle, next.
// Both include starting and stopping one opencode server. Runs alternate (Forge, bare, …) so
// load drift on a shared machine hits both alike; a warm-up pair is not counted.
//
// Also: Forge's own latency from an idle event (received by the loop supervisor) to the next
// prompt accepted by opencode, from the supervisor's timing hook (engine option onLoopTiming).
//
// Forge runs with its default server mode (`shared`: the loop joins the engine's shared opencode
// server, which lingers after the last loop leaves); before each Forge run the bench waits until
// that server has stopped, so every run starts one, as the bare side does. `--server-mode perLoop`
// measures loops with a server of their own. The bare side answers opencode's permission requests
// with Forge's own policy (the loop ruleset sends file tools to the host to decide), as Forge does.
//
// A Forge run ends on the runtime's `loop.ended` event (`--end-event NAME` waits for another
// name: the test of the time-out uses one that never comes).
//
//   node bench/loop-overhead.mjs [--runs 3] [--warmup 1] [--server-mode shared|perLoop] [--quick] [--timeout S]
//   (BENCH_LOG=1 also prints the engine's info lines on stderr; BENCH_LOG=debug its debug lines too,
//   among them each loop's start timings: worktree, setup planned, sandbox, opencode)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, median, numberArg, percentile, stringArg } from './bench-common.mjs';

const run = benchRun('bench:loop', { timeoutS: 3600, quickTimeoutS: 300 });
run.step('load the engine', 'its modules to import');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (file) => import(path.join(root, file));
const { createForgeEngine } = await load('src/core/engine.ts');
const { defaultSettings } = await load('src/core/config/settings.ts');
const { defaultSqlWasmPath } = await load('src/core/storage/index.ts');
const { loadAgentPrompts } = await load('src/core/opencode/forge-config.ts');
const { startForgeToolServer } = await load('src/core/opencode/forge-tool-server.ts');
const { startLoopOpencode } = await load('src/core/opencode/loop-opencode.ts');
const { FORGE_AGENT_NAMES } = await load('src/core/opencode/forge-tools.ts');
const { resolveOpencodeBinary, startOpencodeProcess } = await load('src/core/opencode/server-process.ts');
const { startScriptedModel, toolCall } = await load('src/core/opencode/scripted-model.ts');
const { writeOpencodeTestEnvironment, MOCK_MODEL, MOCK_PROVIDER_ID, MOCK_MODEL_ID } = await load('test/support/opencode-test-env.ts');
const { createRecordingToolBackend } = await load('test/support/recording-tool-backend.ts');
const { sessionScript } = await load('test/support/loop-harness.ts');
const { attachPermissionResponder } = await load('src/core/opencode/permission-responder.ts');

const arg = numberArg;
const RUNS = run.quick ? 1 : Math.max(1, arg('runs', 3));
const WARMUP = run.quick ? 0 : Math.max(0, arg('warmup', 1));
const SERVER_MODE = stringArg('server-mode', 'shared');
const END_EVENT = stringArg('end-event', 'loop.ended');
if (SERVER_MODE !== 'shared' && SERVER_MODE !== 'perLoop') throw new Error(`--server-mode must be shared or perLoop, not ${SERVER_MODE}`);

const PLAN = `# Bench pair
Loop Name: bench

## First file
Create a.txt containing "a".

## Second file
Create b.txt containing "b".

## Verification
Both files exist.
`;


/** The same scripted replies for both sides: coder writes its file and hands off; audits are clean. */
const script = (dirOf) => {
  const s = sessionScript((role, nth) =>
    role === 'code'
      ? [
          toolCall('write', { filePath: path.join(dirOf(), nth === 1 ? 'a.txt' : 'b.txt'), content: `${nth}\n` }),
          toolCall('forge_loop_handoff', { decisions: `file ${nth}`, verification: 'read back', notesForAuditor: '' }),
        ]
      : [toolCall('forge_loop_handoff', { summary: `audit ${nth} clean`, done: true, deviations: '', followUps: '' })],
  );
  // When each model request arrived (to split opencode's time from Forge's).
  const arrivals = [];
  const handler = (request, ctx) => {
    arrivals.push(performance.now());
    return s.handler(request, ctx);
  };
  return { ...s, handler, arrivals };
};

const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
const makeRepo = (prefix) => {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  writeFileSync(path.join(dir, 'README.md'), '# bench\n');
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir, env: gitEnv });
  execFileSync('git', ['add', '-A'], { cwd: dir, env: gitEnv });
  execFileSync('git', ['commit', '-q', '-m', 'init'], { cwd: dir, env: gitEnv });
  return dir;
};

run.step('set up the scripted model, opencode home and repositories');
const model = await startScriptedModel();
run.cleanup(() => model.close());
const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
run.cleanup(() => env.cleanup());
const repo = makeRepo('forge-bench-loop-repo-');
const bareDir = makeRepo('forge-bench-bare-');
run.cleanup(() => [repo, bareDir].forEach((dir) => rmSync(dir, { recursive: true, force: true })));
// A fresh opencode home installs @opencode-ai/plugin into its config folder from the npm registry
// once, in the background, and holds every shutdown until that install is done; a user's
// machine has done it long ago. Let it finish before measuring, or whichever side stops first
// pays for it (and, killed half way, the next server starts it again).
// (The test environment normally seeds that install from .cache/; this covers a failed seed.)
if (!existsSync(path.join(env.env.XDG_CONFIG_HOME, 'opencode', 'package-lock.json'))) {
  const configDir = path.join(env.env.XDG_CONFIG_HOME, 'opencode');
  run.step("opencode's one-time plugin install in a fresh home", 'package-lock.json in its config folder (180 s at most)');
  const server = await startOpencodeProcess({ binaryPath: resolveOpencodeBinary(), cwd: bareDir, baseEnv: { ...process.env, ...env.env } });
  const t0 = performance.now();
  while (!existsSync(path.join(configDir, 'package-lock.json')) && performance.now() - t0 < 180_000) await new Promise((r) => setTimeout(r, 250));
  await server.stop();
  console.error(`opencode's one-time plugin install in a fresh home: ${(performance.now() - t0).toFixed(0)} ms${existsSync(path.join(configDir, 'package-lock.json')) ? '' : ' (not finished after 180 s; stop times below include it)'}`);
}
const dataDir = mkdtempSync(path.join(tmpdir(), 'forge-bench-data-'));
run.cleanup(() => rmSync(dataDir, { recursive: true, force: true }));
run.step('start the engine', 'createForgeEngine');
const prompts = await loadAgentPrompts(path.join(root, 'src/core/opencode/agents'));
const bareToolServer = await startForgeToolServer({ backend: createRecordingToolBackend() });

let marks = [];
let commitsAt = [];
const engine = await createForgeEngine({
  dataDir,
  settings: () => ({ ...defaultSettings(), 'forge.model': MOCK_MODEL, 'forge.opencode.serverMode': SERVER_MODE }),
  log: { debug: (m) => process.env.BENCH_LOG === 'debug' && console.error(m), info: (m) => process.env.BENCH_LOG && console.error(m), warn: (m) => console.warn(m), error: (m) => console.error(m) },
  assetsDir: path.join(root, 'dist'),
  agentsDir: path.join(root, 'src/core/opencode/agents'),
  wasmPath: defaultSqlWasmPath(),
  env: { ...process.env, ...env.env },
  opencodeExtraEnv: env.env,
  onLoopTiming: (m) => marks.push(m),
});
run.cleanup(() => engine.close());
// The loop's end: the runtime event named END_EVENT (loop.ended), or supervision lost, by loop
// name (the plan names its loop "bench"; the runtime makes that bench-2, bench-3, … in later runs).
const endsByName = new Map();
const endWaiters = new Map();
engine.runtime.subscribe((e) => {
  if (e.type === 'loop.commit') commitsAt.push(performance.now());
  if (e.loop && (e.type === END_EVENT || e.type === 'loop.supervision_lost')) {
    const waiter = endWaiters.get(e.loop.name);
    if (waiter) waiter(e);
    else endsByName.set(e.loop.name, e);
  }
});
const endOf = (name) => (endsByName.has(name) ? Promise.resolve(endsByName.get(name)) : new Promise((resolve) => endWaiters.set(name, resolve)));

/** Until the engine's shared opencode server stopped (it lingers after its last loop), so the next run starts one. */
async function sharedServerStopped() {
  const t0 = performance.now();
  while (engine.opencodeServers().length > 0) {
    if (performance.now() - t0 > 60_000) throw new Error(`the shared opencode server still runs 60 s after its last loop ended: ${JSON.stringify(engine.opencodeServers())}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One Forge loop; returns its wall time, the prompts it sent (per session) and its idle→prompt latencies. */
async function forgeRun() {
  let worktree = '';
  const s = script(() => worktree);
  model.setHandler(s.handler);
  marks = [];
  commitsAt = [];
  const firstRequest = model.requests.length;
  const t0 = performance.now();
  const ref = await engine.runtime.start({ kind: 'plan', repoPath: repo, planText: PLAN, planSource: 'bench.md' });
  worktree = engine.runtime.get(ref).worktreeDir;
  run.waiting(`the runtime's event ${END_EVENT} for Forge loop "${ref.name}"`);
  const end = await endOf(ref.name);
  const total = performance.now() - t0;
  if (end.type !== 'loop.ended' || end.status !== 'completed') throw new Error(`Forge loop did not complete: ${JSON.stringify(end)}`);
  const firstPrompt = marks.find((m) => m.mark === 'prompt_sent').at;
  // A hand-over: the idle that ended a session, to the next prompt Forge sent (handed to the
  // client: Forge's own work done) and to opencode accepting it.
  const latencies = [];
  const withCommit = [];
  const accepted = [];
  let lastIdle;
  let dispatchedAfterIdle = false;
  for (const m of marks) {
    if (m.mark === 'idle') {
      lastIdle = m.at;
      dispatchedAfterIdle = false;
    } else if (lastIdle !== undefined && m.mark === 'prompt_dispatched' && !dispatchedAfterIdle) {
      const committed = commitsAt.some((t) => t > lastIdle && t < m.at);
      (committed ? withCommit : latencies).push(m.at - lastIdle);
      dispatchedAfterIdle = true;
    } else if (lastIdle !== undefined && m.mark === 'prompt_sent') {
      accepted.push(m.at - lastIdle);
      lastIdle = undefined;
    }
  }
  const sessions = s.firstRequests.map((r) => ({ role: r.role, text: r.request.lastUserText }));
  const requests = model.requests.slice(firstRequest).filter((r) => !r.isTitleRequest).length;
  const firstAnswer = s.arrivals[0] - firstPrompt;
  // Time opencode spent inside sessions: each prompt accepted → that session's idle.
  let inSessions = 0;
  let promptAt;
  for (const m of marks) {
    if (m.mark === 'prompt_sent') promptAt = m.at;
    else if (m.mark === 'idle' && promptAt !== undefined) {
      inSessions += m.at - promptAt;
      promptAt = undefined;
    }
  }
  return { total, sessionsMs: total - (firstPrompt - t0), sessions, latencies, withCommit, accepted, requests, firstAnswer, startMs: firstPrompt - t0, inSessions };
}

/** The same sessions and prompts straight through the SDK client on a fresh opencode server. */
async function bareRun(sessions) {
  const s = script(() => bareDir);
  model.setHandler(s.handler);
  const firstRequest = model.requests.length;
  const t0 = performance.now();
  const opencode = await startLoopOpencode({ loopName: 'bench-bare', worktreeDir: bareDir, toolServer: bareToolServer, prompts, extraEnv: env.env, baseEnv: { ...process.env, ...env.env } });
  let firstPrompt;
  let stopMs = 0;
  const cleanupsOfRun = [];
  const handOvers = [];
  let inSessions = 0;
  try {
    const client = opencode.client;
    // What Forge's loop scope does: answer the session's permission requests by the loop's policy.
    let current;
    const detachPermissions = attachPermissionResponder({ client, resolve: (rootId) => (current && rootId === current.id ? opencode.permissionOptions(current.role) : undefined) });
    cleanupsOfRun.push(detachPermissions);
    const waiting = new Map();
    const seenBusy = new Set();
    let idleAt;
    client.subscribe((e) => {
      if (e.type === 'session.busy') seenBusy.add(e.sessionId);
      if (e.type === 'session.idle' && seenBusy.has(e.sessionId) && waiting.has(e.sessionId)) {
        idleAt = performance.now();
        waiting.get(e.sessionId)();
        waiting.delete(e.sessionId);
      }
    });
    for (const { role, text } of sessions) {
      const { id } = await client.createSession({
        title: `bench ${role}`,
        agent: FORGE_AGENT_NAMES[role],
        model: { providerId: MOCK_PROVIDER_ID, modelId: MOCK_MODEL_ID },
        permission: opencode.permissionRuleset(role),
      });
      opencode.scope.setActiveSession({ sessionId: id, role });
      current = { id, role };
      run.waiting(`the bare ${role} session ${id} to go idle`);
      const idle = new Promise((resolve) => waiting.set(id, resolve));
      await client.promptAsync({ sessionId: id, text, agent: FORGE_AGENT_NAMES[role], model: { providerId: MOCK_PROVIDER_ID, modelId: MOCK_MODEL_ID } });
      const sent = performance.now();
      firstPrompt ??= sent;
      if (idleAt !== undefined) handOvers.push(sent - idleAt);
      await idle;
      inSessions += idleAt - sent;
    }
  } finally {
    for (const c of cleanupsOfRun.splice(0)) c();
    run.waiting('the bare opencode server to stop');
    const stopAt = performance.now();
    await opencode.stop();
    stopMs = performance.now() - stopAt;
  }
  const total = performance.now() - t0;
  const requests = model.requests.slice(firstRequest).filter((r) => !r.isTitleRequest).length;
  return { total, stopMs, sessionsMs: total - (firstPrompt - t0), requests, sessionCount: s.firstRequests.length, handOvers, firstAnswer: s.arrivals[0] - firstPrompt, startMs: firstPrompt - t0, inSessions };
}

const forge = [];
const bare = [];
try {
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const tag = i < WARMUP ? 'warm-up' : `run ${i - WARMUP + 1}`;
    if (SERVER_MODE === 'shared') {
      run.step(`${tag}: before the Forge loop`, "the previous run's shared opencode server to stop (it lingers 10 s after its last loop)");
      await sharedServerStopped();
    }
    run.step(`${tag}: Forge loop (${SERVER_MODE} server)`, 'the loop to start');
    const f = await forgeRun();
    run.step(`${tag}: bare SDK, same prompts`, 'the bare opencode server to start');
    const b = await bareRun(f.sessions);
    if (b.requests !== f.requests || b.sessionCount !== f.sessions.length) {
      throw new Error(`bare run differs from Forge's: ${b.requests} vs ${f.requests} model requests, ${b.sessionCount} vs ${f.sessions.length} sessions`);
    }
    console.error(`${tag}: Forge ${f.total.toFixed(0)} ms, bare ${b.total.toFixed(0)} ms (${f.sessions.length} sessions, ${f.requests} model requests each), load ${loadavg()[0].toFixed(1)}`);
    if (i >= WARMUP) {
      forge.push(f);
      bare.push(b);
    }
  }
} finally {
  run.waiting('the engine to close (clean-up after this step)');
  await engine.close().catch((e) => console.error(String(e)));
  await bareToolServer.close().catch(() => undefined);
  await model.close();
  await env.cleanup();
  for (const dir of [repo, bareDir, dataDir]) rmSync(dir, { recursive: true, force: true });
}

const fmt = (x) => x.toFixed(0).padStart(9);
const row = (name, xs, extra = '') => console.log(`${name.padEnd(48)} ${String(xs.length).padStart(4)} ${fmt(median(xs))} ${fmt(Math.min(...xs))} ${fmt(Math.max(...xs))}${extra}`);
const fm = forge.map((r) => r.total);
const bm = bare.map((r) => r.total);
const fs = forge.map((r) => r.sessionsMs);
const bs = bare.map((r) => r.sessionsMs);
const lat = forge.flatMap((r) => r.latencies);
const latCommit = forge.flatMap((r) => r.withCommit);
const latAll = [...lat, ...latCommit];
const bareLat = bare.flatMap((r) => r.handOvers);
const pct = (xs) => `   p50 ${percentile(xs, 50).toFixed(1)}  p95 ${percentile(xs, 95).toFixed(1)}`;
console.log(`loop overhead (opencode ${execFileSync(resolveOpencodeBinary(), ['--version']).toString().trim()}, ${new Date().toISOString()}, load ${loadavg().map((l) => l.toFixed(1)).join(' ')})`);
console.log(`two-section plan, clean audits: ${forge[0].sessions.length} sessions, ${forge[0].requests} model requests per run; Forge's opencode server mode: ${SERVER_MODE}${run.quick ? '; QUICK MODE (one run, no warm-up): not representative' : ''}`);
console.log(`${'measure (ms)'.padEnd(48)} ${'n'.padStart(4)} ${'median'.padStart(9)} ${'min'.padStart(9)} ${'max'.padStart(9)}`);
row('Forge loop: start → ended (incl. opencode start/stop)', fm);
row('bare SDK: same prompts (incl. opencode start/stop)', bm);
row('bare: of which the server stop', bare.map((r) => r.stopMs));
row('Forge: start → first prompt accepted', forge.map((r) => r.startMs));
row('bare: start → first prompt accepted', bare.map((r) => r.startMs));
row('Forge: first prompt → first model request', forge.map((r) => r.firstAnswer));
row('bare: first prompt → first model request', bare.map((r) => r.firstAnswer));
row('Forge: in sessions (prompt accepted → idle), sum', forge.map((r) => r.inSessions));
row('bare: in sessions (prompt accepted → idle), sum', bare.map((r) => r.inSessions));
const forgeOut = forge.map((r) => r.total - r.inSessions);
const bareOut = bare.map((r) => r.total - r.inSessions);
row('Forge: outside sessions (total − in sessions)', forgeOut);
row('bare: outside sessions (total − in sessions)', bareOut);
row('Forge: first prompt → ended', fs);
row('bare: first prompt → last idle + stop', bs);
const latAccepted = forge.flatMap((r) => r.accepted);
row('Forge idle → next prompt sent, all', latAll, pct(latAll));
row('  … hand-overs without a checkpoint commit', lat, pct(lat));
row('  … hand-overs with a section commit (git)', latCommit, pct(latCommit));
row('Forge idle → next prompt accepted by opencode', latAccepted, pct(latAccepted));
row('bare idle → next prompt accepted (create + prompt)', bareLat, pct(bareLat));
console.log('');
console.log(`ratio Forge / bare, medians of whole runs:  ${(median(fm) / median(bm)).toFixed(3)}   (target ≤ 1.10)`);
if (SERVER_MODE === 'shared') {
  // A shared server stops after its linger, off the loop's path; the bare side waits for its stop.
  console.log(`ratio Forge / bare without the bare server's stop (a shared server stops later, off the loop's path): ${(median(fm) / median(bare.map((r) => r.total - r.stopMs))).toFixed(3)}`);
}
console.log(`ratio Forge / bare, from the first prompt: ${(median(fs) / median(bs)).toFixed(3)}`);
// In-session time is opencode and the model doing the same work on both sides, and it carries
// most of a loaded machine's noise: pool it, and compare what each side adds around it.
const pooled = median([...forge, ...bare].map((r) => r.inSessions));
console.log(`ratio with pooled in-session time (${pooled.toFixed(0)} ms) + each side's median outside time: ${((pooled + median(forgeOut)) / (pooled + median(bareOut))).toFixed(3)}`);
console.log(`Forge idle → next prompt sent: p50 ${percentile(latAll, 50).toFixed(1)} ms, p95 ${percentile(latAll, 95).toFixed(1)} ms over ${latAll.length} hand-overs   (target p95 < 50 ms)`);
console.log(`  … to opencode accepting it: p50 ${percentile(latAccepted, 50).toFixed(1)} ms, p95 ${percentile(latAccepted, 95).toFixed(1)} ms (bare create + prompt: p50 ${percentile(bareLat, 50).toFixed(1)} ms)`);
run.done();
process.exit(0);
