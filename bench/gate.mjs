#!/usr/bin/env node
// Verification gate overhead (issue 13): what a passing trivial check (`true`) adds to each
// gated transition, on the host and in a bwrap sandbox, against the plain hand-over measured in
// the same run.
//
// The scripted two-section plan of bench/loop-overhead.mjs runs through the whole engine
// (createForgeEngine + runtime, clean audits: code → audit → code → audit → final audit), in
// four variants per round, interleaved so load drift on a shared machine hits all alike:
//   host  plain: no checks, sandbox off          host  gated: `Verify: true` in each section
//   bwrap plain: no checks, bwrap sandbox        bwrap gated: + a `## Verification` ```sh true```
// A gated plan has three gated transitions: each section's checkpoint (its one Verify: check)
// and the final audit's completion (every check: three). For each, the time from the idle
// that ends the auditor's clean session (the supervisor's timing hook, engine option
// onLoopTiming) to the next prompt handed to opencode (`prompt_dispatched`), or, for the final
// audit, to the loop.ended event. The plain plan's same transitions are the baseline. The check
// log's own durations (loop.check events, CheckRunRow.durationMs) say how much of it is the
// check process itself. Medians over --runs rounds after --warmup rounds; load average from
// /proc/loadavg at start and end.
//
//   node bench/gate.mjs [--runs 5] [--warmup 1] [--modes host,bwrap] [--quick] [--timeout S]
// (--quick: one round of bwrap plain and gated, no warm-up)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { benchRun, median as medianOf, stringArg } from './bench-common.mjs';

const bench = benchRun('bench:gate', { timeoutS: 3600, quickTimeoutS: 300 });
bench.step('load the engine');
register();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const load = (file) => import(path.join(root, file));
const { createForgeEngine } = await load('src/core/engine.ts');
const { defaultSettings } = await load('src/core/config/settings.ts');
const { defaultSqlWasmPath } = await load('src/core/storage/index.ts');
const { resolveOpencodeBinary, startOpencodeProcess } = await load('src/core/opencode/server-process.ts');
const { startScriptedModel, toolCall } = await load('src/core/opencode/scripted-model.ts');
const { writeOpencodeTestEnvironment, MOCK_MODEL } = await load('test/support/opencode-test-env.ts');
const { sessionScript } = await load('test/support/loop-harness.ts');
const { sandboxTestTempRoot } = await load('test/support/sandbox-fixtures.ts');

const RUNS = bench.quick ? 1 : Math.max(1, Number(stringArg('runs', '5')));
const WARMUP = bench.quick ? 0 : Math.max(0, Number(stringArg('warmup', '1')));
// Quick: bwrap only (the gate's checks in a sandbox: the longer path), plain and gated.
const MODES = stringArg('modes', bench.quick ? 'bwrap' : 'host,bwrap').split(',');
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const loadAtStart = loadavg();

const PLAIN_PLAN = `# Bench pair
Loop Name: bench

## First file
Create a.txt containing "a".

## Second file
Create b.txt containing "b".

## Verification
Both files exist.
`;

const GATED_PLAN = `# Bench pair
Loop Name: bench

## First file
Create a.txt containing "a".
Verify: true

## Second file
Create b.txt containing "b".
Verify: true

## Verification
Both files exist.

\`\`\`sh
true
\`\`\`
`;

const median = (xs) => (xs.length === 0 ? NaN : medianOf(xs));

/** Coder writes its file and hands off; audits are clean (as in bench/loop-overhead.mjs). */
const script = (dirOf) =>
  sessionScript((role, nth) =>
    role === 'code'
      ? [
          toolCall('write', { filePath: path.join(dirOf(), nth === 1 ? 'a.txt' : 'b.txt'), content: `${nth}\n` }),
          toolCall('forge_loop_handoff', { decisions: `file ${nth}`, verification: 'read back', notesForAuditor: '' }),
        ]
      : [toolCall('forge_loop_handoff', { summary: `audit ${nth} clean`, done: true, deviations: '', followUps: '' })],
  );

const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
// Outside /tmp: a bwrap sandbox has a private /tmp (as the sandbox tests, see sandboxTestTempRoot).
const tmpRoot = sandboxTestTempRoot();
const makeRepo = (prefix) => {
  const dir = mkdtempSync(path.join(tmpRoot, prefix));
  writeFileSync(path.join(dir, 'README.md'), '# bench\n');
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir, env: gitEnv });
  execFileSync('git', ['add', '-A'], { cwd: dir, env: gitEnv });
  execFileSync('git', ['commit', '-q', '-m', 'init'], { cwd: dir, env: gitEnv });
  return dir;
};

bench.step('set up the scripted model, opencode home and repository');
const model = await startScriptedModel();
bench.cleanup(() => model.close());
const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
bench.cleanup(() => env.cleanup());
const repo = makeRepo('forge-bench-gate-repo-');
bench.cleanup(() => rmSync(repo, { recursive: true, force: true }));
// A fresh opencode home installs its plugin once and holds shutdowns until done (see
// bench/loop-overhead.mjs): let that finish before measuring.
if (!existsSync(path.join(env.env.XDG_CONFIG_HOME, 'opencode', 'package-lock.json'))) {
  const configDir = path.join(env.env.XDG_CONFIG_HOME, 'opencode');
  bench.step("opencode's one-time plugin install in a fresh home", 'package-lock.json in its config folder (180 s at most)');
  const server = await startOpencodeProcess({ binaryPath: resolveOpencodeBinary(), cwd: repo, baseEnv: { ...process.env, ...env.env } });
  const t0 = performance.now();
  while (!existsSync(path.join(configDir, 'package-lock.json')) && performance.now() - t0 < 180_000) await new Promise((r) => setTimeout(r, 250));
  await server.stop();
  console.error(`opencode's one-time plugin install in a fresh home: ${(performance.now() - t0).toFixed(0)} ms`);
}
const dataDir = mkdtempSync(path.join(tmpRoot, 'forge-bench-gate-data-'));
bench.cleanup(() => rmSync(dataDir, { recursive: true, force: true }));
bench.step('start the engine', 'createForgeEngine');

const sandboxSettings = {
  host: { 'forge.sandbox.enabled': false },
  bwrap: { 'forge.sandbox.enabled': true, 'forge.sandbox.required': true, 'forge.sandbox.driver': 'bwrap' },
};
for (const m of MODES) if (!sandboxSettings[m]) throw new Error(`unknown mode "${m}": use --modes host,bwrap`);
let currentSettings = {};
let marks = [];
let events = [];
const engine = await createForgeEngine({
  dataDir,
  settings: () => ({ ...defaultSettings(), 'forge.model': MOCK_MODEL, ...currentSettings }),
  log: { debug() {}, info() {}, warn: (m) => console.warn(m), error: (m) => console.error(m) },
  assetsDir: path.join(root, 'dist'),
  agentsDir: path.join(root, 'src/core/opencode/agents'),
  wasmPath: defaultSqlWasmPath(),
  env: { ...process.env, ...env.env },
  opencodeExtraEnv: env.env,
  onLoopTiming: (m) => marks.push(m),
});
bench.cleanup(() => engine.close());
engine.runtime.subscribe((e) => events.push({ e, at: performance.now() }));

/**
 * One loop of `plan` in `mode`; returns per auditor hand-over (section 1, section 2, final) the
 * idle → next prompt dispatched / loop ended latency, and the check runs per gate.
 */
async function run(mode, gated) {
  let worktree = '';
  const s = script(() => worktree);
  model.setHandler(s.handler);
  currentSettings = sandboxSettings[mode];
  marks = [];
  events = [];
  const t0 = performance.now();
  const started = await engine.runtime.start({ kind: 'plan', repoPath: repo, planText: gated ? GATED_PLAN : PLAIN_PLAN, planSource: 'bench.md' });
  const ref = { projectId: started.projectId, name: started.name };
  const sandboxed = started.confinement.sandboxed ? started.confinement.driver : 'none';
  if ((mode === 'host') !== (sandboxed === 'none')) throw new Error(`${mode} run got confinement ${JSON.stringify(started.confinement)}`);
  worktree = engine.runtime.get(ref).worktreeDir;
  bench.waiting(`the end of loop "${ref.name}" (${mode}, ${gated ? 'gated' : 'plain'})`);
  const end = await engine.runtime.waitForEnd(ref);
  const total = performance.now() - t0;
  if (end.type !== 'loop.ended' || end.status !== 'completed') throw new Error(`${mode} ${gated ? 'gated' : 'plain'} loop did not complete: ${JSON.stringify(end)}`);
  const phaseOf = new Map(events.filter((x) => x.e.type === 'loop.session').map((x) => [x.e.sessionId, x.e.phase]));
  const endedAt = events.find((x) => x.e.type === 'loop.ended').at;
  const handOvers = []; // [{ phase, ms }] in order
  for (let i = 0; i < marks.length; i++) {
    const m = marks[i];
    if (m.mark !== 'idle') continue;
    const phase = phaseOf.get(m.sessionId);
    if (phase !== 'auditing' && phase !== 'final_auditing') continue;
    const next = marks.slice(i + 1).find((n) => n.mark === 'prompt_dispatched');
    const until = next ? next.at : endedAt;
    // The gate's last check in the log: what follows it is the checkpoint commit and the prompt.
    const checksDone = events.filter((x) => x.e.type === 'loop.check' && x.at > m.at && x.at < until).at(-1);
    handOvers.push({ phase, ms: until - m.at, checksDoneMs: checksDone ? checksDone.at - m.at : NaN, to: next ? 'prompt' : 'ended' });
  }
  const checks = events.filter((x) => x.e.type === 'loop.check').map((x) => x.e.run);
  if (checks.some((c) => c.status !== 'passed')) throw new Error(`a check did not pass: ${JSON.stringify(checks.filter((c) => c.status !== 'passed'))}`);
  return { total, handOvers, checks, sandboxed };
}

const VARIANTS = MODES.flatMap((mode) => [
  { mode, gated: false },
  { mode, gated: true },
]);
const results = new Map(VARIANTS.map((v) => [`${v.mode}/${v.gated}`, []]));
try {
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const line = [];
    for (const v of VARIANTS) {
      bench.step(`${i < WARMUP ? 'warm-up' : `run ${i - WARMUP + 1}`}: ${v.mode} ${v.gated ? 'gated' : 'plain'} loop`, 'the loop to start');
      const r = await run(v.mode, v.gated);
      if (r.handOvers.length !== 3) throw new Error(`expected 3 auditor hand-overs, got ${JSON.stringify(r.handOvers)}`);
      if (v.gated && r.checks.length !== 5) throw new Error(`expected 5 check runs (1 + 1 + 3), got ${r.checks.length}`);
      if (i >= WARMUP) results.get(`${v.mode}/${v.gated}`).push(r);
      line.push(`${v.mode} ${v.gated ? 'gated' : 'plain'} ${r.total.toFixed(0)} ms`);
    }
    console.error(`${i < WARMUP ? 'warm-up' : `run ${i - WARMUP + 1}`}: ${line.join(', ')}; load ${loadavg()}`);
  }
} finally {
  bench.waiting('the engine to close (clean-up after this step)');
  await engine.close().catch((e) => console.error(String(e)));
  await model.close();
  await env.cleanup();
  for (const dir of [repo, dataDir]) rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
}

const TRANSITIONS = [
  { label: 'section 1 checkpoint → next prompt', index: 0, gate: 'section', section: 0 },
  { label: 'section 2 checkpoint → next prompt', index: 1, gate: 'section', section: 1 },
  { label: 'final audit → loop ended', index: 2, gate: 'final' },
];
const f = (x, w = 9) => (Number.isFinite(x) ? x.toFixed(1) : '-').padStart(w);
console.log(`gate overhead (opencode ${execFileSync(resolveOpencodeBinary(), ['--version']).toString().trim()}, ${new Date().toISOString()}, ${RUNS} runs + ${WARMUP} warm-up, medians in ms)`);
console.log(`load average at start ${loadAtStart}, at end ${loadavg()}${bench.quick ? '; QUICK MODE (one run, no warm-up): not representative' : ''}`);
console.log('plain: the plan without checks; gated: `Verify: true` per section + ```sh true``` in ## Verification (final gate runs all 3)');
console.log(`${'mode'.padEnd(6)} ${'auditor idle → …'.padEnd(36)} ${'plain'.padStart(9)} ${'gated'.padStart(9)} ${'+gate'.padStart(9)} ${'ratio'.padStart(7)} ${'checks'.padStart(7)} ${'check ms'.padStart(9)} ${'→checked'.padStart(9)}`);
for (const mode of MODES) {
  const plain = results.get(`${mode}/false`);
  const gated = results.get(`${mode}/true`);
  for (const t of TRANSITIONS) {
    const p = median(plain.map((r) => r.handOvers[t.index].ms));
    const g = median(gated.map((r) => r.handOvers[t.index].ms));
    const runsOf = (r) => r.checks.filter((c) => c.gate === t.gate && (t.gate === 'final' || c.sectionIndex === t.section));
    const count = runsOf(gated[0]).length;
    const checkMs = median(gated.map((r) => runsOf(r).reduce((a, c) => a + c.durationMs, 0)));
    const checked = median(gated.map((r) => r.handOvers[t.index].checksDoneMs));
    console.log(`${mode.padEnd(6)} ${t.label.padEnd(36)} ${f(p)} ${f(g)} ${f(g - p)} ${(g / p).toFixed(2).padStart(7)} ${String(count).padStart(7)} ${f(checkMs)} ${f(checked)}`);
  }
  const gateSum = (rs) => median(rs.map((r) => r.handOvers.reduce((a, h) => a + h.ms, 0)));
  const p = gateSum(plain);
  const g = gateSum(gated);
  console.log(`${mode.padEnd(6)} ${'all three, summed per loop'.padEnd(36)} ${f(p)} ${f(g)} ${f(g - p)} ${(g / p).toFixed(2).padStart(7)} ${String(gated[0].checks.length).padStart(7)} ${f(median(gated.map((r) => r.checks.reduce((a, c) => a + c.durationMs, 0))))}`);
  const tp = median(plain.map((r) => r.total));
  const tg = median(gated.map((r) => r.total));
  console.log(`${mode.padEnd(6)} ${'whole loop: start → ended'.padEnd(36)} ${f(tp)} ${f(tg)} ${f(tg - tp)} ${(tg / tp).toFixed(2).padStart(7)}`);
}
console.log('+gate = gated − plain (medians); check ms = the check log\'s durations of that gate\'s runs, summed per loop, median;');
console.log('→checked = auditor idle → the gate\'s last check in the log (the rest of "gated" is the checkpoint commit, which a gated section');
console.log('cannot make early while the auditor winds down, and the next prompt or the teardown)');
bench.done();
process.exit(0);
