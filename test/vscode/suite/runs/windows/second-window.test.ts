// Runs in the run `windows` (runs.mjs): this window drives a loop while a second workbench
// window on the same folder (its own extension host, same data folder) displays it live, and
// keeps its dashboard across a reload of that window (the WebviewPanelSerializer).
import * as assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { descendsFrom, processesWorkingIn } from '../../../../support/processes';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo, requestSecondWindow } from '../../support/harness';

const PLAN = `# Shared view
Loop Name: shared

## Note
Create note.txt containing "shared".

## Verification
note.txt exists.
`;

async function loopRowsOfSecondWindow(): Promise<string[]> {
  const { rows } = await requestSecondWindow<{ rows: string[] | null }>('view-rows', { title: 'Loop Explorer' });
  return rows ?? [];
}

async function secondWindowFrameTexts(): Promise<string[]> {
  return (await requestSecondWindow<{ texts: string[] }>('frame-texts')).texts;
}

describe('several windows on one folder: one drives the loop, the other shows it live', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const loopName = 'shared';
  let ref: { projectId: string; name: string } | undefined;

  before(async function () {
    if (harnessInfo().host !== 'code-server') this.skip(); // the second window is the code-server harness's
    const env = await forgeTestEnvironment();
    assert.equal(env.dataDir, process.env.FORGE_DATA_DIR, "this run's windows share the data folder runs.mjs gives code-server");
    // The coder waits for the test (so the loop is seen running), then writes and hands off; audits are clean.
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        if (!called.includes('write')) {
          await released;
          const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
          return toolCall('write', { filePath: join(worktree, 'note.txt'), content: 'shared\n' });
        }
        return toolCall('forge_loop_handoff', { decisions: 'Wrote note.txt.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'Done.', done: true });
      return text('Nothing to do.');
    });
    // A single-folder window: the worktree is not added as a folder (that would restart this extension host).
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    const planFile = join(harnessInfo().workspaceFolder, 'shared-plan.md');
    await writeFile(planFile, PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });

  after(async () => {
    release();
    await requestSecondWindow('close').catch(() => undefined);
    await rm(join(harnessInfo().workspaceFolder, 'shared-plan.md'), { force: true });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
  });

  it('the second window lists the loop this window started, in its phase, without driving it', async () => {
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', {
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 4,
      sandbox: false,
    });
    assert.equal(result.status, 'started', JSON.stringify(result));
    assert.equal(result.loop?.name, loopName);
    ref = result.loop!;
    const api = await forgeApi();
    assert.equal(api.engine()!.runtime.isSupervising(ref), true, 'this window drives the loop');

    await requestSecondWindow('open');
    const row = await waitFor('the second window to list the running loop in its coding phase', async () => {
      const rows = await loopRowsOfSecondWindow();
      return rows.find((r) => r.includes(loopName) && /coding/.test(r));
    }, 120_000, 500);
    assert.match(row, /iter 1 · §1\/1/);
    assert.equal(api.engine()!.runtime.get(ref)!.status, 'running');
    // The second window displays the loop, it does not drive it: the opencode server serving the
    // loop (the one this window's loops share, whose instance is the worktree) and every process
    // working in the loop's worktree descend from this extension host.
    const server = api.engine()!.opencodeServers().find((s) => s.loops.includes(loopName));
    assert.ok(server?.pid, `an opencode server of this window serves the loop: ${JSON.stringify(api.engine()!.opencodeServers())}`);
    assert.ok(await descendsFrom(server.pid, process.pid), `the loop's opencode server ${server.pid} was not started by this window`);
    const worktree = api.engine()!.runtime.get(ref)!.worktreeDir!;
    for (const p of await processesWorkingIn(worktree)) assert.ok(await descendsFrom(p.pid, process.pid), `process ${p.pid} (${p.command}) in the worktree was not started by this window`);
  });

  it("while the loop runs, the second window's dashboard says its live view is in the window that drives it", async () => {
    await requestSecondWindow('command', { title: 'Forge: Open Dashboard' });
    await waitFor("the second window's dashboard to say where the live view is", async () => {
      const texts = await secondWindowFrameTexts();
      return texts.some((t) => t.includes(`loop ${loopName}`) && t.includes('The live view is available in the window that runs this loop'));
    }, 60_000, 500);
    await requestSecondWindow('screenshot', { name: 'second-window-live-elsewhere' });
    // This window, which drives the loop, shows it live.
    await vscode.commands.executeCommand('forge.openDashboard', ref);
    const live = await waitFor('this window\'s live view', async () => {
      const p = (await (await forgeApi()).dashboard().probe()).live;
      return p.state === 'live' || p.state === 'none' ? p : undefined;
    }, 60_000, 300);
    assert.notEqual(live.state, 'elsewhere');
  });

  it('follows the loop live to completion (no reload, no refresh command)', async () => {
    release();
    const api = await forgeApi();
    await waitFor('the loop to complete in this window', () => api.engine()!.runtime.get(ref!)!.status === 'completed', 180_000, 500);
    const row = await waitFor('the second window to show the loop as completed', async () => {
      const rows = await loopRowsOfSecondWindow();
      return rows.find((r) => r.includes(loopName) && /completed/.test(r));
    }, 60_000, 500);
    assert.doesNotMatch(row, /coding/);
    assert.match(row, /waits for you/, 'the second window marks the loop as waiting for the user');
    // The window that only watched the loop tells of its end too, once, with the next steps (issue 29 item 7).
    await requestSecondWindow('command', { title: 'Notifications: Show Notifications' });
    const told = `loop "${loopName}" completed`;
    const texts = await waitFor("the second window's notice of the loop's end", async () => {
      const all = await secondWindowFrameTexts();
      return all.some((t) => t.includes(told)) ? all : undefined;
    }, 60_000, 1000);
    const main = texts.find((t) => t.includes(told))!;
    // One entry in the notification center (the screen reader's "Info: …" announcement aside).
    const entries = main.split('\n').filter((l) => l.trim() === `Forge: ${told}. Review its changes, then accept them.`);
    assert.equal(entries.length, 1, `one notice:\n${main}`);
    await requestSecondWindow('screenshot', { name: 'second-window-notice' });
    await requestSecondWindow('command', { title: 'Notifications: Clear All Notifications' });
  });

  it("the second window's dashboard shows the loop, and again after that window reloads", async () => {
    await requestSecondWindow('command', { title: 'Forge: Open Dashboard' });
    const shows = (texts: string[]) => texts.some((t) => t.includes(`loop ${loopName}`));
    await waitFor('the dashboard of the second window to show the loop', async () => shows(await secondWindowFrameTexts()), 60_000, 500);
    await requestSecondWindow('screenshot', { name: 'second-window-dashboard' });
    await requestSecondWindow('reload');
    const texts = await waitFor('the restored dashboard to show the loop after the reload', async () => {
      const now = await secondWindowFrameTexts();
      return shows(now) ? now : undefined;
    }, 120_000, 500).catch(async (error: unknown) => {
      await requestSecondWindow('screenshot', { name: 'second-window-after-reload' }).catch(() => undefined);
      throw error;
    });
    assert.ok(texts.some((t) => /completed/.test(t)), 'the restored dashboard shows the loop as completed');
    await requestSecondWindow('screenshot', { name: 'second-window-dashboard-restored' });
  });
});
