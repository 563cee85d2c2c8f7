#!/usr/bin/env node
// opencode baseline: cold start of Forge's opencode server (spawn to "listening", and to first
// answer: health check and configuration loaded) and one prompt round-trip on the scripted
// model (promptAsync to the session's idle event), text-only and with one Forge MCP tool call.
// Median of several runs; prints a table. The loop-overhead benchmark divides by these.
//
//   node bench/opencode.mjs [--starts 5] [--prompts 10] [--quick] [--timeout S]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, median, numberArg } from './bench-common.mjs';

const run = benchRun('bench:opencode', { timeoutS: 1200, quickTimeoutS: 180 });
run.step('load the modules');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (file) => import(path.join(root, file));
const { startOpencodeProcess, resolveOpencodeBinary } = await load('src/core/opencode/server-process.ts');
const { buildForgeOpencodeConfig, loadAgentPrompts } = await load('src/core/opencode/forge-config.ts');
const { startForgeToolServer } = await load('src/core/opencode/forge-tool-server.ts');
const { startLoopOpencode } = await load('src/core/opencode/loop-opencode.ts');
const { FORGE_AGENT_NAMES } = await load('src/core/opencode/forge-tools.ts');
const { startScriptedModel, text, toolCall } = await load('src/core/opencode/scripted-model.ts');
const { writeOpencodeTestEnvironment, MOCK_PROVIDER_ID, MOCK_MODEL_ID } = await load('test/support/opencode-test-env.ts');
const { createRecordingToolBackend } = await load('test/support/recording-tool-backend.ts');

const STARTS = run.quick ? 1 : numberArg('starts', 5);
const PROMPTS = run.quick ? 1 : numberArg('prompts', 10);

const now = () => Number(process.hrtime.bigint()) / 1e6;

run.step('set up the scripted model, opencode home and repository');
const model = await startScriptedModel();
run.cleanup(() => model.close());
const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
run.cleanup(() => env.cleanup());
const repo = mkdtempSync(path.join(tmpdir(), 'forge-bench-repo-'));
run.cleanup(() => rmSync(repo, { recursive: true, force: true }));
const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
writeFileSync(path.join(repo, 'README.md'), '# bench\n');
execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo, env: gitEnv });
execFileSync('git', ['add', '-A'], { cwd: repo, env: gitEnv });
execFileSync('git', ['commit', '-q', '-m', 'init'], { cwd: repo, env: gitEnv });

const toolServer = await startForgeToolServer({ backend: createRecordingToolBackend() });
const prompts = await loadAgentPrompts(path.join(root, 'src/core/opencode/agents'));
const rows = [];
const cleanups = [];
try {
  // Cold starts: a fresh process each time (opencode's data folder stays warm, as on a user's machine).
  const listening = [];
  const ready = [];
  const scope = toolServer.openScope({ loopName: 'bench' });
  const forgeConfig = buildForgeOpencodeConfig({ prompts, toolServer: scope.mcpEntry });
  const binaryPath = resolveOpencodeBinary();
  for (let i = 0; i < STARTS; i++) {
    run.step(`cold start ${i + 1} of ${STARTS}`, 'opencode to answer its first request, then to stop');
    const t0 = now();
    let tListening;
    const proc = await startOpencodeProcess({
      binaryPath,
      cwd: repo,
      extraEnv: env.env,
      forgeConfig,
      logLevel: 'INFO',
      onOutput: (line) => {
        if (tListening === undefined && line.includes('opencode server listening')) tListening = now();
      },
    });
    const t1 = now();
    listening.push((tListening ?? t1) - t0);
    ready.push(t1 - t0);
    await proc.stop();
  }
  rows.push(['cold start: spawn → "listening"', listening]);
  rows.push(['cold start: spawn → first answer (health + config)', ready]);

  // Prompt round-trips on one running server.
  run.step(`prompt round-trips (1 + ${PROMPTS} text, ${PROMPTS} with a tool call)`, 'the server to start');
  const opencode = await startLoopOpencode({ loopName: 'bench-prompts', worktreeDir: repo, toolServer, prompts, extraEnv: env.env });
  cleanups.push(run.cleanup(() => opencode.stop()));
  const client = opencode.client;
  const idles = new Map();
  client.subscribe((event) => {
    if (event.type === 'session.idle') idles.get(event.sessionId)?.();
  });
  const roundTrip = async (sessionId, steps) => {
    model.enqueue(...steps);
    const done = new Promise((resolve) => idles.set(sessionId, resolve));
    const t0 = now();
    run.waiting(`session ${sessionId} to go idle after a prompt`);
    await client.promptAsync({ sessionId, text: 'go', agent: FORGE_AGENT_NAMES.code });
    await done;
    return now() - t0;
  };
  const { id } = await client.createSession({
    title: 'bench',
    agent: FORGE_AGENT_NAMES.code,
    model: { providerId: MOCK_PROVIDER_ID, modelId: MOCK_MODEL_ID },
    permission: opencode.permissionRuleset('code'),
  });
  opencode.scope.setActiveSession({ sessionId: id, role: 'code' });
  const first = await roundTrip(id, [text('warm-up')]);
  rows.push(['first prompt on a fresh server (text)', [first]]);
  const textOnly = [];
  for (let i = 0; i < PROMPTS; i++) textOnly.push(await roundTrip(id, [text('ok')]));
  rows.push(['warm prompt round-trip (text)', textOnly]);
  const withTool = [];
  for (let i = 0; i < PROMPTS; i++) withTool.push(await roundTrip(id, [toolCall('forge_review_read', {}), text('ok')]));
  rows.push(['warm prompt round-trip (one Forge MCP tool call)', withTool]);
} finally {
  run.waiting('the servers to stop (clean-up after this step)');
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await toolServer.close();
  await model.close();
  await env.cleanup();
  rmSync(repo, { recursive: true, force: true });
}

const fmt = (x) => x.toFixed(0).padStart(8);
console.log(`opencode baseline (opencode ${execFileSync(resolveOpencodeBinary(), ['--version']).toString().trim()}, ${new Date().toISOString()})${run.quick ? ' QUICK MODE: not representative' : ''}`);
console.log(`${'measure'.padEnd(52)} ${'runs'.padStart(4)} ${'median ms'.padStart(9)} ${'min'.padStart(8)} ${'max'.padStart(8)}`);
for (const [name, xs] of rows) {
  console.log(`${name.padEnd(52)} ${String(xs.length).padStart(4)} ${fmt(median(xs)).padStart(9)} ${fmt(Math.min(...xs))} ${fmt(Math.max(...xs))}`);
}
run.done();
process.exit(0);
