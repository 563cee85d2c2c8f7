#!/usr/bin/env node
// forge_shell overhead vs opencode's builtin bash tool, for a trivial command, host and bwrap,
// in one run (issue 16).
//
// Both go through the whole path an agent's call takes: the scripted model answers with the
// tool call, opencode runs it (bash: the loop's agent shell / sandbox shim; forge_shell: an MCP
// call to Forge's tool server, which starts a job through the same shell), and the result
// reaches the model in its next request. Measured per call: model reply sent → next request
// received, so the model round trip is in both. Calls alternate (bash, forge_shell, …) in
// one coder session per driver so load drift hits both alike; the first pair is a warm-up.
// The loops run through the whole engine, set up by the loop tests' harness (test/support).
//
//   node bench/shell.mjs [--calls 15] [--drivers host,bwrap] [--quick] [--timeout S]
// (--quick: one measured pair of calls per driver after the warm-up pair)
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, loadNow, median, numberArg, percentile, stringArg } from './bench-common.mjs';

const run = benchRun('bench:shell', { timeoutS: 1200, quickTimeoutS: 180 });
run.step('load the modules');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (file) => import(path.join(root, file));
const { createLoopHarness } = await load('test/support/loop-harness.ts');
const { bwrapPrereqs, sandboxTestTempRoot } = await load('test/support/sandbox-fixtures.ts');
const { text, toolCall, toolCalls } = await load('src/core/opencode/scripted-model.ts');

const CALLS = run.quick ? 1 : Math.max(3, numberArg('calls', 15));
const DRIVERS = stringArg('drivers', 'host,bwrap').split(',');
const COMMAND = 'echo hi';

async function measure(driver) {
  const dataDir = driver === 'bwrap' ? mkdtempSync(path.join(sandboxTestTempRoot(), 'bench-shell-')) : undefined;
  if (driver === 'bwrap') {
    run.waiting('the bwrap prerequisite (scripts/prereqs/bwrap.sh)');
    bwrapPrereqs();
  }
  run.waiting('the loop harness (engine, opencode, scripted model) to start');
  const h = await createLoopHarness({
    ...(dataDir ? { dataDir } : {}),
    settings: driver === 'bwrap' ? { 'forge.sandbox.enabled': true, 'forge.sandbox.driver': 'bwrap' } : { 'forge.sandbox.enabled': false },
  });
  run.cleanup(() => h.close());
  const times = { bash: [], forge_shell: [] };
  try {
    let pending; // { tool, at }
    let n = 0;
    let coder;
    const handedOff = new Set();
    h.model.setHandler((request) => {
      const now = performance.now();
      if (request.isTitleRequest) return text('title');
      const isCoder = request.toolNames.includes('write');
      // One hand-off per session; after it the session just ends its turn.
      if (handedOff.has(request.sessionId)) return text('Done.');
      if (!isCoder) {
        handedOff.add(request.sessionId);
        return toolCall('forge_loop_handoff', { summary: 'bench', done: true, deviations: '', followUps: '' });
      }
      coder ??= request.sessionId;
      if (request.sessionId !== coder) return text('Done.');
      if (pending) {
        const result = request.toolResults[request.toolResults.length - 1]?.content ?? '';
        if (!/hi/.test(result)) throw new Error(`${pending.tool} did not print "hi": ${result}`);
        if (n > 2) times[pending.tool].push(now - pending.at);
        pending = undefined;
      }
      if (n >= 2 * (CALLS + 1)) {
        handedOff.add(request.sessionId);
        return toolCall('forge_loop_handoff', { decisions: 'bench', verification: 'bench', notesForAuditor: '' });
      }
      const tool = n % 2 === 0 ? 'bash' : 'forge_shell';
      if (process.env.BENCH_DEBUG) console.error(driver, n, tool, request.toolResults.length);
      n += 1;
      const args = tool === 'bash' ? { command: COMMAND, description: 'bench' } : { command: COMMAND };
      pending = { tool, at: performance.now() };
      run.waiting(`the result of ${tool} call ${n} of ${2 * (CALLS + 1)} in the coder's next model request`);
      return toolCalls([{ id: `c${n}`, name: tool, args }]);
    });
    const ref = await h.engine.runtime.start({ kind: 'goal', goal: 'bench', repoPath: h.repo.dir, name: `bench-shell-${driver}` });
    run.waiting(`the end of loop ${ref.name}`);
    const end = await h.engine.runtime.waitForEnd(ref);
    if (end.type !== 'loop.ended' || end.status !== 'completed') throw new Error(`${driver}: the bench loop ended ${JSON.stringify(end)}`);
  } finally {
    run.waiting('the loop harness to close');
    await h.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
  return times;
}

const loadAtStart = loadNow();
const rows = [];
for (const driver of DRIVERS) {
  run.step(`driver ${driver}: ${CALLS + 1} pairs of calls (bash, forge_shell) in one coder session`, 'the loop to start');
  const t = await measure(driver);
  const bash = median(t.bash);
  const shell = median(t.forge_shell);
  rows.push({ driver, bash, shell, ratio: shell / bash, p90bash: percentile(t.bash, 90), p90shell: percentile(t.forge_shell, 90), n: t.bash.length });
}
console.log(`forge_shell vs builtin bash, "${COMMAND}", ${CALLS} calls each per driver (${new Date().toISOString()}), load at start ${loadAtStart}, at end ${loadNow()}${run.quick ? '; QUICK MODE: not representative' : ''}`);
console.log('driver  bash median (p90)      forge_shell median (p90)   ratio forge_shell/bash   overhead');
for (const r of rows) {
  console.log(
    `${r.driver.padEnd(7)} ${r.bash.toFixed(1).padStart(7)} ms (${r.p90bash.toFixed(1)})   ${r.shell.toFixed(1).padStart(7)} ms (${r.p90shell.toFixed(1)})       ${r.ratio.toFixed(2)}×                   ${(r.shell - r.bash).toFixed(1)} ms  (n=${r.n})`,
  );
}
console.log('Per call: scripted model reply sent → the next model request with the result (the model round trip is in both).');
run.done();
process.exit(0);
