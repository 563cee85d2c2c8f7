// Runs inside the real VS Code extension host (bench/ui-scale.mjs --live-only, through the test
// harness as extensionTestsPath): the dashboard's live view under a steady stream. One plan loop
// on the scripted model; its coder streams a text at RATE pieces per second for SECONDS twice:
// first with the dashboard closed (the baseline: opencode's events reach the engine and its live
// feed, nobody draws them), then with the dashboard open on the loop, following it. Per window:
// pieces sent by the model, text deltas the engine received, updates the webview applied, the
// webview's lag (host post → DOM updated), its catch-up after the stream ended, and the extension
// host's CPU share (process.cpuUsage over wall time; the scripted model runs in this process too,
// in both windows alike, hence the baseline).
import { writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { ForgeExtensionApi } from '../src/vscode/api';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../test/support/scripted-model';
import { calledTools, forgeApi, forgeTestEnvironment, disposeForgeTestEnvironment, MOCK_MODEL, waitFor } from '../test/vscode/suite/forge-test-kit';
import { harnessInfo } from '../test/vscode/suite/support/harness';

const RATE = Number(process.env.FORGE_BENCH_LIVE_RATE ?? 200);
const SECONDS = Number(process.env.FORGE_BENCH_LIVE_SECONDS ?? 30);

interface WindowResult {
  dashboard: boolean;
  sent: number;
  sentChars: number;
  /** Text deltas of the streamed part the engine's live feed received. */
  engineDeltas: number;
  engineChars: number;
  streamMs: number;
  cpuMs: number;
  cpuShare: number;
  /** The webview (dashboard window only). */
  webviewUpdates?: number;
  webviewChars?: number;
  webviewBatches?: number;
  webviewFrames?: number;
  lagMedianMs?: number;
  lagMaxMs?: number;
  catchUpMs?: number;
}

export async function run(): Promise<void> {
  const env = await forgeTestEnvironment();
  const api: ForgeExtensionApi = await forgeApi();
  const pieces = RATE * SECONDS;
  const piece = (i: number) => `w${String(i).padStart(5, '0')} `;
  const streamText = Array.from({ length: pieces }, (_, i) => piece(i)).join('');
  const pacing = { pieces: Array.from({ length: pieces }, (_, i) => piece(i)), intervalMs: 1000 / RATE };
  let ref: { projectId: string; name: string } | undefined;
  let streams = 0;
  const results: WindowResult[] = [];
  // Which window is on, and the engine-side count of its deltas.
  let measuring: { partId: string | null; deltas: number; chars: number; firstAt: number; lastAt: number; cpu0: NodeJS.CpuUsage | null; cpu1: NodeJS.CpuUsage | null } | undefined;
  const done = { resolve: () => {} };
  // The second stream waits until the dashboard is open and its window is being measured.
  let startSecond: () => void = () => {};
  const secondMayStart = new Promise<void>((resolve) => (startSecond = resolve));

  env.model.setHandler(async (request): Promise<ScriptStep> => {
    const agent = forgeAgentOf(request);
    const called = calledTools(request);
    if (called.includes('forge_loop_handoff')) return text('Handed off.');
    if (agent === 'forge-code') {
      streams += 1;
      if (streams === 1) return { kind: 'tool-calls', text: streamText, pacing, calls: [{ name: 'read', args: { filePath: 'README.md' } }] };
      if (streams === 2) await secondMayStart;
      if (streams === 2) return { kind: 'tool-calls', text: streamText, pacing, calls: [{ name: 'forge_loop_handoff', args: { decisions: 'Streamed.', verification: 'none', notesForAuditor: '' } }] };
      return toolCall('forge_loop_handoff', { decisions: 'Streamed.', verification: 'none', notesForAuditor: '' });
    }
    if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'ok', done: true });
    return text('ok');
  });

  await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
  const planFile = join(harnessInfo().workspaceFolder, 'live-bench-plan.md');
  await writeFile(planFile, '# Live bench\nLoop Name: live-bench\n\n## Stream\nStream a long text.\n');
  await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  const started = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', { mode: 'loop', model: MOCK_MODEL, auditorModel: MOCK_MODEL, maxIterations: 3, sandbox: false });
  if (started.status !== 'started') throw new Error(`the bench loop did not start: ${JSON.stringify(started)}`);
  ref = started.loop!;
  const engine = api.engine()!;
  const unsubscribe = engine.live.subscribe((e) => {
    if (e.type !== 'part' || !measuring || e.update.kind !== 'text' || e.update.fromUser) return;
    if (e.update.delta === undefined) return;
    // The streamed part: the first text part whose deltas start with the first piece.
    if (measuring.partId === null) {
      if (!e.update.delta.startsWith('w00000')) return;
      measuring.partId = e.update.partId;
      measuring.firstAt = performance.now();
      measuring.cpu0 = process.cpuUsage();
    }
    if (e.update.partId !== measuring.partId) return;
    measuring.deltas += 1;
    measuring.chars += e.update.delta.length;
    measuring.lastAt = performance.now();
    if (measuring.chars >= streamText.length) {
      measuring.cpu1 = process.cpuUsage(measuring.cpu0!);
      done.resolve();
    }
  });

  async function window(dashboard: boolean, begin: () => void = () => {}): Promise<WindowResult> {
    measuring = { partId: null, deltas: 0, chars: 0, firstAt: 0, lastAt: 0, cpu0: null, cpu1: null };
    const finished = new Promise<void>((resolve) => (done.resolve = resolve));
    begin();
    await Promise.race([finished, new Promise((_, reject) => setTimeout(() => reject(new Error(`the stream did not complete within ${SECONDS * 4} s (${measuring!.chars}/${streamText.length} characters reached the engine)`)), SECONDS * 4000 + 120_000))]);
    const m = measuring;
    const streamMs = m.lastAt - m.firstAt;
    const cpuMs = (m.cpu1!.user + m.cpu1!.system) / 1000;
    const result: WindowResult = { dashboard, sent: pieces, sentChars: streamText.length, engineDeltas: m.deltas, engineChars: m.chars, streamMs, cpuMs, cpuShare: cpuMs / streamMs };
    if (dashboard) {
      const endAt = performance.now();
      const partId = m.partId;
      const { probe, part } = await waitFor('the webview to show every character streamed', async () => {
        const p = (await api.dashboard().probe()).live;
        const shown = p.parts.find((x) => x.partId === partId);
        return shown && shown.chars >= streamText.length ? { probe: p, part: shown } : undefined;
      }, 60_000, 20);
      Object.assign(result, {
        catchUpMs: performance.now() - endAt,
        webviewUpdates: part.updates,
        webviewChars: part.chars,
        webviewBatches: probe.batches,
        webviewFrames: probe.frames,
        lagMedianMs: probe.lagMedianMs,
        lagMaxMs: probe.lagMaxMs,
      });
    }
    measuring = undefined;
    return result;
  }

  try {
    results.push(await window(false));
    // The second stream starts once the coder's read returned: open the dashboard before it.
    await vscode.commands.executeCommand('forge.openDashboard', ref);
    await waitFor('the dashboard live view to show the loop', async () => (await api.dashboard().probe()).live.state === 'live', 120_000, 100);
    results.push(await window(true, startSecond));
    await waitFor('the bench loop to end', () => engine.runtime.get(ref!)!.status !== 'running', 240_000, 500);
  } finally {
    startSecond();
    unsubscribe();
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
  }
  const out = { rate: RATE, seconds: SECONDS, windows: results };
  console.log(`[ui-scale live] ${JSON.stringify(out)}`);
  if (process.env.FORGE_BENCH_OUT) writeFileSync(process.env.FORGE_BENCH_OUT, JSON.stringify(out, null, 2));
}
