// The setup phase in the real workbench (issue 27): Execute Plan on a repository whose worktree
// has a setup command (`forge.worktree.setup`) shows the setup's progress notification while it
// runs (screenshot saved), the engine reports the setup's steps, and then the loop completes.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { LoopRuntimeEvent } from '../../../../../src/core/loop/runtime-types';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo, requestScreenshot, requestWorkbench } from '../../support/harness';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** Marks the worktree while it runs, long enough for the notification to be seen. */
const SETUP = 'echo running > .setup-running && sleep 25 && rm .setup-running && echo prepared';
const PLAN = `# Setup note
Loop Name: setup-note

## Note
Create setup-note.txt containing "ready".
`;

describe('the setup phase through Execute Plan (scripted model)', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let ref: { projectId: string; name: string } | undefined;
  const planFile = join(harnessInfo().workspaceFolder, 'setup-note-plan.md');
  const events: LoopRuntimeEvent[] = [];
  let unsubscribe: () => void = () => {};

  before(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        if (!called.includes('write')) {
          const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
          return toolCall('write', { filePath: join(worktree, 'setup-note.txt'), content: 'ready\n' });
        }
        return toolCall('forge_loop_handoff', { decisions: 'Wrote setup-note.txt.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'The note is there.', done: true });
      return text('Nothing to do.');
    });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    // A setup that takes a few seconds, so its notification can be seen.
    await vscode.workspace.getConfiguration('forge').update('worktree.setup', [SETUP], vscode.ConfigurationTarget.Global);
    await writeFile(planFile, PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });

  after(async () => {
    unsubscribe();
    await rm(planFile, { force: true });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await vscode.workspace.getConfiguration('forge').update('worktree.setup', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
  });

  it('shows the setup while it runs, then the loop completes', async () => {
    const api = await forgeApi();
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', {
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 4,
      sandbox: false,
    });
    assert.equal(result.status, 'started', JSON.stringify(result));
    ref = result.loop!;
    unsubscribe = api.engine()!.runtime.subscribe((e) => {
      if (e.loop.name === ref!.name) events.push(e);
    });
    const worktree = api.engine()!.runtime.get(ref)!.worktreeDir!;
    await waitFor('the setup command to run', () => existsSync(join(worktree, '.setup-running')), 120_000, 100);
    assert.equal(api.engine()!.runtime.get(ref)!.currentSessionId, null, 'no coder session during the setup');
    if (harnessInfo().host === 'code-server') {
      // The progress notification, as a toast or in the notification center (the bell).
      const shown = await requestWorkbench<{ message: string }>('notification', { contains: 'preparing the worktree of loop' });
      assert.match(shown.message, /^Forge: preparing the worktree of loop "setup-note"/);
      assert.deepEqual(readFileSync(await requestScreenshot('worktree-setup-progress')).subarray(0, 8), PNG_SIGNATURE);
    }
    const done = await waitFor('the setup to end', () => events.find((e) => e.type === 'loop.setup' && e.step === `setup: ${SETUP}` && e.status !== 'started'), 120_000, 200);
    assert.equal(done.type === 'loop.setup' && done.status, 'passed', JSON.stringify(done));
    assert.match(done.type === 'loop.setup' ? done.output ?? '' : '', /prepared/);
    await waitFor('the loop to complete', () => api.engine()!.runtime.get(ref!)!.status === 'completed', 240_000, 500);
    // The coder started only after the setup: its first session follows the setup's end.
    const setupEnd = events.findIndex((e) => e.type === 'loop.setup' && e.step === 'setup' && e.status === 'passed');
    const firstSession = events.findIndex((e) => e.type === 'loop.session');
    assert.ok(setupEnd >= 0 && firstSession > setupEnd, events.map((e) => e.type).join(', '));
  });
});
