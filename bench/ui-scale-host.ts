// Runs inside the real VS Code extension host (loaded by bench/ui-scale.mjs through the
// test harness as extensionTestsPath): activation of the extension under development,
// Loop Explorer items for 1 000 loops, and publishing 20 000 findings as diagnostics.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as vscode from 'vscode';
import type { ForgeExtensionApi } from '../src/vscode/api';
import { buildLoopDiagnostics } from '../src/vscode/findings-diagnostics-model';
import { FindingsDiagnostics } from '../src/vscode/findings-diagnostics';
import { toTreeItem } from '../src/vscode/loop-explorer';
import { buildLoopTree } from '../src/vscode/loop-tree-model';
import type { LoopsModel } from '../src/vscode/loops-model';
import { createForgeLog } from '../src/vscode/log';
import { measurePure, median, syntheticFindings, syntheticSummaries, timeRuns } from './ui-scale-fixtures';

const RUNS = Number(process.env.FORGE_BENCH_RUNS ?? 9);

export async function run(): Promise<void> {
  const harness = JSON.parse(process.env.FORGE_VSCODE_HARNESS ?? '{}') as { extensionId: string; extensionPath: string };
  const extension = vscode.extensions.getExtension<ForgeExtensionApi>(harness.extensionId)!;
  const wasActive = extension.isActive;
  const t0 = performance.now();
  const api = await extension.activate();
  const activateCallMs = performance.now() - t0;

  // Loading the extension's bundle afresh (a new module instance; the running one is untouched).
  const bundle = join(harness.extensionPath, 'dist', 'extension.cjs');
  const moduleLoadMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    delete require.cache[require.resolve(bundle)];
    const t = performance.now();
    require(bundle);
    moduleLoadMs.push(performance.now() - t);
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
  const publishMs = timeRuns(RUNS, () => {
    for (const loop of data) diagnostics.publishLoop(`bench/${loop.loopName}`, buildLoopDiagnostics(loop.worktreeDir, loop.findings));
    for (const loop of data) diagnostics.clearLoop(`bench/${loop.loopName}`);
  });
  const leftAfterClear = vscode.languages.getDiagnostics().filter(([, list]) => list.some((d) => d.source === 'Forge')).length;
  if (leftAfterClear !== 0) throw new Error(`${leftAfterClear} files still carry Forge diagnostics after clearing`);
  // Publish once more and check VS Code has them (what the Problems view reads).
  for (const loop of data) diagnostics.publishLoop(`bench/${loop.loopName}`, buildLoopDiagnostics(loop.worktreeDir, loop.findings));
  const published = vscode.languages.getDiagnostics().filter(([, list]) => list.some((d) => d.source === 'Forge')).reduce((n, [, list]) => n + list.length, 0);
  diagnostics.dispose();

  const result = {
    wasActiveBeforeBench: wasActive,
    activationMs: api.activationMs,
    activateCallMs,
    engineStartedByActivation: api.engine() !== undefined,
    moduleLoadMs,
    treeItemsMs,
    publishAndClearMs: publishMs,
    publishedDiagnostics: published,
    pureInHost: measurePure(RUNS),
    medians: { moduleLoad: median(moduleLoadMs), treeItems: median(treeItemsMs), publishAndClear: median(publishMs) },
  };
  console.log(`[ui-scale] ${JSON.stringify(result.medians)} activation ${api.activationMs.toFixed(1)} ms, ${published} diagnostics`);
  if (process.env.FORGE_BENCH_OUT) writeFileSync(process.env.FORGE_BENCH_OUT, JSON.stringify(result, null, 2));
}
