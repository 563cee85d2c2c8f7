#!/usr/bin/env node
// Forge's VS Code surfaces at scale. Medians over several runs:
//   1. plain Node: the pure builders (Loop Explorer model for 1 000 loops; diagnostics model for
//      20 000 findings on 1 000 files);
//   2. inside a real VS Code extension host (code-server harness, bench/ui-scale-host.ts):
//      activation (the extension's own activate() time, and loading its bundle afresh), the
//      Loop Explorer's TreeItems for 1 000 loops, and publishing 20 000 diagnostics through a
//      DiagnosticCollection (and clearing them).
// Targets: activation < 50 ms with no process started, tree < 20 ms, diagnostics < 100 ms.
//   3. (--live-only runs this alone; it runs after 1 and 2 with --live) the dashboard's live
//      view: a loop whose coder streams RATE parts/s for SECONDS s (the scripted model),
//      first with the dashboard closed (baseline), then open on the loop
//      (bench/ui-scale-live-host.ts): text deltas sent, received by the engine, applied by the
//      webview, its lag and catch-up, and the extension host's CPU share in both windows.
//
//   node bench/ui-scale.mjs [--runs N] [--host-runs N] [--no-host] [--json]
//   node bench/ui-scale.mjs --live-only [--host-runs N] [--rate 200] [--seconds 30] [--json]
//   npm run bench:ui
//   node bench/ui-scale.mjs --quick [--timeout S]   (what `npm test` runs: 1 run in plain Node and 1 host
//     run of 1 run; the live view with --live: one host run streaming 50 parts/s for 3 s)
//
// The extension host loads the build a user installs: `node esbuild.mjs --production` (what
// `npm run package` puts in the VSIX: dist/extension.cjs, and the engine in dist/core.cjs,
// loaded on first use) written into a temporary copy of the extension, so the repository's
// dist/ is not touched.
import * as esbuild from 'esbuild';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { benchRun } from './bench-common.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '15' },
    'host-runs': { type: 'string', default: '3' },
    'no-host': { type: 'boolean', default: false },
    'live-only': { type: 'boolean', default: false },
    live: { type: 'boolean', default: false },
    rate: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '30' },
    json: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    timeout: { type: 'string' },
  },
});
const bench = benchRun('bench:ui', { timeoutS: 3600, quickTimeoutS: 300 });
if (bench.quick) Object.assign(values, { runs: '1', 'host-runs': '1', rate: '50', seconds: '3' });
const runs = Number(values.runs);
const hostRuns = Number(values['host-runs']);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (ms) => `${ms.toFixed(2)} ms`;
const out = [];
const line = (label, value, target) => {
  out.push({ label, value, target });
  if (!values.json) process.stdout.write(`${label.padEnd(64)} ${fmt(value).padStart(12)}${target ? `   (target < ${target} ms: ${value < target ? 'met' : 'MISSED'})` : ''}\n`);
};

// Under the checkout's ignored .cache/, not /tmp: the workbench must be able to serve the copy's
// webview files (the live view's run saw the dashboard answer "Not found" from a /tmp copy).
mkdirSync(join(root, '.cache', 'bench-tmp'), { recursive: true });
const work = mkdtempSync(join(root, '.cache', 'bench-tmp', 'ui-'));
bench.cleanup(() => rmSync(work, { recursive: true, force: true }));

/** The production build in a temporary copy of the extension (what a VSIX carries). */
function productionExtension() {
  const extensionDevelopmentPath = join(work, 'extension');
  mkdirSync(extensionDevelopmentPath, { recursive: true });
  for (const entry of ['package.json', 'package.nls.json', 'l10n', 'media', 'container']) cpSync(join(root, entry), join(extensionDevelopmentPath, entry), { recursive: true });
  const build = spawnSync(process.execPath, [join(root, 'esbuild.mjs'), '--production', '--outdir', join(extensionDevelopmentPath, 'dist')], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`node esbuild.mjs --production failed (exit ${build.status ?? build.signal}):\n${build.stderr}`);
  return extensionDevelopmentPath;
}

async function hostBundle(name, entry) {
  await esbuild.build({
    entryPoints: { index: join(root, entry) },
    outdir: join(root, `out/${name}`),
    outExtension: { '.js': '.cjs' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode'],
    logLevel: 'warning',
    // The test support it shares reads import.meta.url (as test/vscode/build-suite.mjs does).
    define: { 'import.meta.url': '__forgeImportMetaUrl' },
    banner: { js: "const __forgeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
  });
  return join(root, `out/${name}/index.cjs`);
}

/** 3. The live view under a steady stream, in the real extension host. */
async function measureLive() {
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  if (!(rate > 0) || !(seconds > 0)) throw new Error('--rate and --seconds must be positive numbers');
  bench.step('live view: bundle the host side and the production build');
  const entry = await hostBundle('bench-ui-live', 'bench/ui-scale-live-host.ts');
  const extensionDevelopmentPath = productionExtension();
  // Loops need opencode: the copy finds the checkout's binary as a user's install finds theirs.
  symlinkSync(join(root, 'node_modules'), join(extensionDevelopmentPath, 'node_modules'), 'dir');
  const { runVsCodeTests } = await import('../test/vscode/run-host.mjs');
  const results = [];
  const loads = [];
  const logs = [];
  for (let i = 0; i < hostRuns; i++) {
    const file = join(work, `live-${i}.json`);
    bench.step(`live view: host run ${i + 1} of ${hostRuns}`, `code-server and the live-view run (${seconds} s of streaming, dashboard closed then open) to finish`);
    const { exitCode } = await runVsCodeTests({
      run: 'main',
      extensionTestsPath: entry,
      extensionDevelopmentPath,
      env: { FORGE_BENCH_OUT: file, FORGE_BENCH_LIVE_RATE: String(rate), FORGE_BENCH_LIVE_SECONDS: String(seconds) },
      log: (l) => logs.push(l),
    });
    if (exitCode !== 0) throw new Error(`the live-view host run ${i + 1} failed (exit ${exitCode}); its last output:\n${logs.slice(-40).join('\n')}`);
    results.push(JSON.parse(readFileSync(file, 'utf8')));
    loads.push(loadavg()[0]);
  }
  const closed = results.map((r) => r.windows.find((w) => !w.dashboard));
  const open = results.map((r) => r.windows.find((w) => w.dashboard));
  // Plausibility: every piece the model sent reached the engine and the webview, as characters.
  for (const [i, w] of open.entries()) {
    if (w.engineChars !== w.sentChars || w.webviewChars < w.sentChars) throw new Error(`host run ${i + 1}: the model sent ${w.sentChars} characters in ${w.sent} pieces, the engine received ${w.engineChars}, the webview shows ${w.webviewChars}`);
  }
  const m = (list, f) => median(list.map(f));
  if (!values.json) {
    process.stdout.write(`\nlive view: the scripted model streams ${rate} parts/s for ${seconds} s, ${hostRuns} host run(s); load average (1 min) after each: ${loads.map((l) => l.toFixed(1)).join(', ')}\n`);
    for (const [i, w] of open.entries()) {
      process.stdout.write(`  run ${i + 1}: sent ${w.sent} pieces (${w.sentChars} chars); engine got ${w.engineDeltas} deltas (${w.engineChars} chars); webview applied ${w.webviewUpdates} updates in ${w.webviewBatches} batches, ${w.webviewFrames} frames; baseline engine got ${closed[i].engineDeltas}/${closed[i].sent}\n`);
    }
  }
  const rateLine = (label, value, unit) => {
    out.push({ label, value, unit });
    if (!values.json) process.stdout.write(`${label.padEnd(64)} ${`${value.toFixed(unit === '%' ? 1 : unit === 'ms' ? 1 : 0)} ${unit}`.padStart(12)}\n`);
  };
  rateLine('parts/s sent by the model (dashboard open)', m(open, (w) => (w.sent / w.streamMs) * 1000), '/s');
  rateLine('text deltas/s received by the engine', m(open, (w) => (w.engineDeltas / w.streamMs) * 1000), '/s');
  rateLine('updates/s the webview applied and drew', m(open, (w) => (w.webviewUpdates / w.streamMs) * 1000), '/s');
  rateLine('batches/s posted to the webview', m(open, (w) => (w.webviewBatches / w.streamMs) * 1000), '/s');
  rateLine('webview lag, host post → DOM updated (median of batches)', m(open, (w) => w.lagMedianMs), 'ms');
  rateLine('webview lag, worst batch', m(open, (w) => w.lagMaxMs), 'ms');
  rateLine('webview shows the last part after the stream ended', m(open, (w) => w.catchUpMs), 'ms');
  rateLine('extension host CPU share, dashboard closed (baseline)', m(closed, (w) => w.cpuShare * 100), '%');
  rateLine('extension host CPU share, dashboard open, following', m(open, (w) => w.cpuShare * 100), '%');
  rateLine('  difference: the live view', m(results.map((_, i) => i), (i) => (open[i].cpuShare - closed[i].cpuShare) * 100), '%');
  return results;
}

try {
  if (values['live-only']) {
    if (!values.json) process.stdout.write(`machine: ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
    const results = await measureLive();
    if (values.json) process.stdout.write(`${JSON.stringify({ figures: out, runs: results }, null, 2)}\n`);
    rmSync(work, { recursive: true, force: true });
    bench.done();
    process.exit(0);
  }
  // 1. Plain Node.
  bench.step('plain Node: the pure builders', `${runs} run(s) each`);
  const pureBundle = join(work, 'pure.cjs');
  // The models translate their labels through vscode.l10n.t; in plain Node that is English with the placeholders filled in.
  const l10nShim = {
    name: 'vscode-l10n-shim',
    setup(build) {
      build.onResolve({ filter: /^vscode$/ }, () => ({ path: 'vscode', namespace: 'vscode-l10n-shim' }));
      build.onLoad({ filter: /.*/, namespace: 'vscode-l10n-shim' }, () => ({
        contents: 'export const l10n = { t: (message, ...args) => message.replace(/\\{(\\d+)\\}/g, (_, i) => String(args[Number(i)])) };',
        loader: 'js',
      }));
    },
  };
  await esbuild.build({ entryPoints: [join(root, 'bench/ui-scale-fixtures.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile: pureBundle, logLevel: 'warning', plugins: [l10nShim] });
  const pure = createRequire(import.meta.url)(pureBundle);
  const measured = pure.measurePure(runs);
  // How busy the machine is: the same figures mean little on a loaded machine.
  const spin = () => {
    let x = 0;
    for (let k = 0; k < 1e7; k++) x += k;
    return x;
  };
  const calibration = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    if (spin() < 0) throw new Error('unreachable');
    calibration.push(performance.now() - t);
  }
  if (!values.json) {
    process.stdout.write(`machine: ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}; calibration loop (1e7 additions) ${fmt(median(calibration))} (seen 5–10 ms on an idle core of the machines here)\n`);
    process.stdout.write(`plain Node ${process.version}, ${runs} runs each (after one warm-up run)\n`);
  }
  line('Loop Explorer model, 1 000 loops (buildLoopTree)', median(measured.treeMs), 20);
  line('diagnostics model, 20 000 findings / 1 000 files', median(measured.diagnosticsModelMs), 100);

  // 2. The real extension host.
  if (!values['no-host']) {
    bench.step('extension host: bundle the host side and the production build');
    const hostEntry = join(root, 'out/bench-ui/index.cjs');
    await esbuild.build({
      entryPoints: { index: join(root, 'bench/ui-scale-host.ts') },
      outdir: join(root, 'out/bench-ui'),
      outExtension: { '.js': '.cjs' },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      external: ['vscode'],
      logLevel: 'warning',
    });
    // The production build, as the VSIX carries it, in a temporary copy of the extension.
    const extensionDevelopmentPath = join(work, 'extension');
    mkdirSync(extensionDevelopmentPath, { recursive: true });
    for (const entry of ['package.json', 'package.nls.json', 'l10n', 'media', 'container']) cpSync(join(root, entry), join(extensionDevelopmentPath, entry), { recursive: true });
    const build = spawnSync(process.execPath, [join(root, 'esbuild.mjs'), '--production', '--outdir', join(extensionDevelopmentPath, 'dist')], { cwd: root, encoding: 'utf8' });
    if (build.status !== 0) throw new Error(`node esbuild.mjs --production failed (exit ${build.status ?? build.signal}):\n${build.stderr}`);
    const size = (file) => statSync(join(extensionDevelopmentPath, 'dist', file)).size;
    const bundleSizes = `dist/extension.cjs ${(size('extension.cjs') / 1024).toFixed(0)} KB, dist/core.cjs ${(size('core.cjs') / 1024).toFixed(0)} KB`;
    const { runVsCodeTests } = await import('../test/vscode/run-host.mjs');
    const results = [];
    for (let i = 0; i < hostRuns; i++) {
      const file = join(work, `host-${i}.json`);
      bench.step(`extension host run ${i + 1} of ${hostRuns}`, `code-server and the bench's ${runs} run(s) in the extension host to finish`);
      const { exitCode } = await runVsCodeTests({
        run: 'main',
        extensionTestsPath: hostEntry,
        extensionDevelopmentPath,
        env: { FORGE_BENCH_OUT: file, FORGE_BENCH_RUNS: String(runs) },
        log: () => {},
      });
      if (exitCode !== 0) throw new Error(`the extension host run ${i + 1} failed (exit ${exitCode})`);
      results.push(JSON.parse(readFileSync(file, 'utf8')));
    }
    if (results.some((r) => r.engineStartedByActivation)) throw new Error('activation started the engine');
    const unshown = results.find((r) => r.workbenchShown !== r.publishedDiagnostics);
    if (unshown) throw new Error(`the workbench showed ${unshown.workbenchShown} of the ${unshown.publishedDiagnostics} diagnostics published`);
    if (!values.json) {
      process.stdout.write(`\nVS Code extension host (code-server 4.139.1 / VS Code 1.139.1, Node 24), ${hostRuns} host runs × ${runs} runs`);
      process.stdout.write(`, production build (${bundleSizes})\n`);
    }
    line('activate() of the extension (own measure, median of host runs)', median(results.map((r) => r.activationMs)), 50);
    line('loading dist/extension.cjs afresh (require, compiled anew)', median(results.map((r) => median(r.moduleLoadMs))));
    line('activation total = bundle load + activate()', median(results.map((r) => median(r.moduleLoadMs) + r.activationMs)), 50);
    line('Loop Explorer TreeItems, 1 000 loops (model + TreeItems)', median(results.map((r) => median(r.treeItemsMs))), 20);
    line('publish 20 000 diagnostics on 1 000 files (FindingsDiagnostics)', median(results.map((r) => r.medians.publishOnly)), 100);
    line('publish them and clear them again', median(results.map((r) => median(r.publishAndClearMs))));
    line('  parts: diagnostics model (pure)', median(results.map((r) => r.medians.model)));
    line('  parts: vscode.Diagnostic objects', median(results.map((r) => r.medians.diagnosticObjects)));
    line('  parts: DiagnosticCollection.set in batches + clear (VS Code itself)', median(results.map((r) => r.medians.collectionSetAndClear)));
    line('until the workbench shows them all (Problems view, polled)', median(results.map((r) => r.untilWorkbenchShowsMs)));
    if (!values.json) process.stdout.write(`engine started by activation: ${results.some((r) => r.engineStartedByActivation) ? 'yes' : 'no'}; dist/core.cjs loaded by then: ${results.some((r) => r.coreLoadedAfterActivation) ? 'yes' : 'no'}; diagnostics the extension host held after publishing: ${results.map((r) => r.publishedDiagnostics).join(', ')}; the workbench showed: ${results.map((r) => r.workbenchShown).join(', ')}\n`);
  }
  if (values.live) await measureLive();
  if (values.json) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  else if (bench.quick) process.stdout.write('QUICK MODE (1 run, 1 host run): figures not representative, targets not judged\n');
} finally {
  rmSync(work, { recursive: true, force: true });
}
bench.done();
