// Runs inside the real VS Code extension host (loaded by bench/ui-scale.mjs through the
// test harness as extensionTestsPath): activation of the extension under development,
// Loop Explorer items for 1 000 loops, and publishing 20 000 findings as diagnostics.
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as vscode from 'vscode';
import type { ForgeExtensionApi } from '../src/vscode/api';
import { buildLoopDiagnostics } from '../src/vscode/findings-diagnostics-model';
import { DIAGNOSTICS_PER_SET, FindingsDiagnostics, toDiagnostic } from '../src/vscode/findings-diagnostics';
import { toTreeItem } from '../src/vscode/loop-explorer';
import { buildLoopTree } from '../src/vscode/loop-tree-model';
import type { LoopsModel } from '../src/vscode/loops-model';
import { createForgeLog } from '../src/vscode/log';
import { requestWorkbenchProblems } from '../test/vscode/suite/support/harness';
import { measurePure, median, syntheticFindings, syntheticSummaries, timeRuns } from './ui-scale-fixtures';

const RUNS = Number(process.env.FORGE_BENCH_RUNS ?? 9);

export async function run(): Promise<void> {
  const harness = JSON.parse(process.env.FORGE_VSCODE_HARNESS ?? '{}') as { extensionId: string; extensionPath: string };
  const extension = vscode.extensions.getExtension<ForgeExtensionApi>(harness.extensionId)!;
  const wasActive = extension.isActive;
  const t0 = performance.now();
  const api = await extension.activate();
  const activateCallMs = performance.now() - t0;
  // Whether anything has loaded the engine bundle (dist/core.cjs) so far: activation must not.
  const coreBundle = join(harness.extensionPath, 'dist', 'core.cjs');
  const coreLoadedAfterActivation = Object.keys(require.cache).includes(coreBundle);

  // Loading the extension's bundle afresh, as VS Code does before activate(): each run loads a
  // copy under a new file name, so V8 compiles it again (a reload of the same file would hit
  // V8's compilation cache and look cheaper than a real start). The running instance is untouched.
  const bundle = join(harness.extensionPath, 'dist', 'extension.cjs');
  const moduleLoadMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const copy = join(harness.extensionPath, 'dist', `.bench-load-${process.pid}-${i}.cjs`);
    copyFileSync(bundle, copy);
    try {
      const t = performance.now();
      require(copy);
      moduleLoadMs.push(performance.now() - t);
    } finally {
      delete require.cache[copy];
      rmSync(copy, { force: true });
    }
  }

  const summaries = syntheticSummaries(1000);
  const treeItemsMs = timeRuns(RUNS, () => {
    const groups = buildLoopTree(summaries);
    for (const group of groups) {
      toTreeItem(group);
      for (const loop of group.loops) toTreeItem(loop);
    }
  });

  const noModel = { onDidChange: () => ({ dispose() {} }) } as unknown as LoopsModel;
  const log = createForgeLog({ trace() {}, debug() {}, info() {}, warn() {}, error() {} });
  const diagnostics = new FindingsDiagnostics(noModel, () => undefined, log, 'forge-bench');
  const data = syntheticFindings(20_000, 1000, 50);
  const keys = data.map((loop) => `bench/${loop.loopName}`);
  // Publishing alone (what the target is about), each run starting from an empty collection.
  // Measured first, before the breakdown below fills the heap with copies a user's host never holds.
  const publishOnlyMs: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const t = performance.now();
    diagnostics.update(data.map((loop, k) => [keys[k]!, buildLoopDiagnostics(loop.worktreeDir, loop.findings)] as const));
    const elapsed = performance.now() - t;
    if (i > 0) publishOnlyMs.push(elapsed); // the first run warms up
    diagnostics.update([], keys);
  }
  const publishMs = timeRuns(RUNS, () => {
    diagnostics.update(data.map((loop, i) => [keys[i]!, buildLoopDiagnostics(loop.worktreeDir, loop.findings)] as const));
    diagnostics.update([], keys);
  });
  const { modelMs, objectsMs, setMs } = measureParts(data);
  const leftAfterClear = vscode.languages.getDiagnostics().filter(([, list]) => list.some((d) => d.source === 'Forge')).length;
  if (leftAfterClear !== 0) throw new Error(`${leftAfterClear} files still carry Forge diagnostics after clearing`);
  // Publish once more: the extension host's copy, and what reached the workbench (the Problems view).
  const before = await requestWorkbenchProblems();
  const shownFrom = performance.now();
  diagnostics.update(data.map((loop, i) => [keys[i]!, buildLoopDiagnostics(loop.worktreeDir, loop.findings)] as const));
  const published = vscode.languages.getDiagnostics().filter(([, list]) => list.some((d) => d.source === 'Forge')).reduce((n, [, list]) => n + list.length, 0);
  let shown = 0;
  let untilShownMs = NaN;
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
    const now = await requestWorkbenchProblems();
    shown = now.errors + now.warnings - before.errors - before.warnings;
    if (shown >= published) {
      untilShownMs = performance.now() - shownFrom;
      break;
    }
  }
  diagnostics.dispose();

  const result = {
    wasActiveBeforeBench: wasActive,
    activationMs: api.activationMs,
    activateCallMs,
    engineStartedByActivation: api.engine() !== undefined,
    coreLoadedAfterActivation,
    moduleLoadMs,
    treeItemsMs,
    publishAndClearMs: publishMs,
    publishedDiagnostics: published,
    workbenchShown: shown,
    untilWorkbenchShowsMs: untilShownMs,
    pureInHost: measurePure(RUNS),
    breakdown: { modelMs, objectsMs, setAndClearMs: setMs, publishOnlyMs },
    medians: {
      moduleLoad: median(moduleLoadMs),
      treeItems: median(treeItemsMs),
      publishAndClear: median(publishMs),
      model: median(modelMs),
      diagnosticObjects: median(objectsMs),
      collectionSetAndClear: median(setMs),
      publishOnly: median(publishOnlyMs),
    },
  };
  console.log(`[ui-scale] ${JSON.stringify(result.medians)} activation ${api.activationMs.toFixed(1)} ms, ${published} diagnostics, ${shown} in the workbench`);
  if (process.env.FORGE_BENCH_OUT) writeFileSync(process.env.FORGE_BENCH_OUT, JSON.stringify(result, null, 2));
}

/** Where the time goes: the diagnostics model, vscode.Diagnostic objects, and the collection's set/clear. */
function measureParts(data: ReturnType<typeof syntheticFindings>): { modelMs: number[]; objectsMs: number[]; setMs: number[] } {
  const built = data.map((loop) => buildLoopDiagnostics(loop.worktreeDir, loop.findings));
  const modelMs = timeRuns(RUNS, () => {
    for (const loop of data) buildLoopDiagnostics(loop.worktreeDir, loop.findings);
  });
  let prepared: [vscode.Uri, vscode.Diagnostic[]][] = [];
  const objectsMs = timeRuns(RUNS, () => {
    prepared = [];
    for (const d of built) for (const [file, specs] of d.byFile) prepared.push([vscode.Uri.file(file), specs.map((spec) => toDiagnostic(spec))]);
  });
  // As FindingsDiagnostics hands them over: VS Code forwards at most ~1 100 diagnostics of one set() call.
  const batches: [vscode.Uri, vscode.Diagnostic[]][][] = [];
  for (let i = 0, n = 0; i < prepared.length; i++) {
    if (batches.length === 0 || n + prepared[i]![1].length > DIAGNOSTICS_PER_SET) {
      batches.push([]);
      n = 0;
    }
    batches[batches.length - 1]!.push(prepared[i]!);
    n += prepared[i]![1].length;
  }
  const raw = vscode.languages.createDiagnosticCollection('forge-bench-raw');
  const setMs = timeRuns(RUNS, () => {
    for (const batch of batches) raw.set(batch);
    raw.set(prepared.map(([uri]) => [uri, undefined]));
  });
  raw.dispose();
  return { modelMs, objectsMs, setMs };
}
