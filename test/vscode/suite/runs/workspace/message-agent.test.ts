// Forge: Message the Agent (issue 29 item 5) in the real workbench: while the coder's session is
// held busy by the scripted model, the command (its text given as the argument, as the input
// box would) sends the user's words into that session; the scripted model receives them in a
// later request of the same session, and the dashboard's live view shows them as the user's
// message. Screenshot saved.
import * as assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { LiveProbe } from '../../../../../src/vscode/dashboard/protocol';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo, requestScreenshot } from '../../support/harness';

const PLAN = `# Told note
Loop Name: told-note

## Note
Create told-note.txt containing "told".
`;

const WORDS = 'Please name the file in lower case (sent with Message the Agent).';

describe('Forge: Message the Agent reaches the running session (scripted model)', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let ref: { projectId: string; name: string } | undefined;
  const planFile = join(harnessInfo().workspaceFolder, 'told-note-plan.md');

  before(async () => {
    // The dashboard an earlier test file left open follows that file's test environment (its
    // engine and live feed are gone): this test opens its own.
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        if (!called.includes('write')) {
          const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
          return { kind: 'tool-calls', text: 'Writing the note now.', calls: [{ name: 'write', args: { filePath: join(worktree, 'told-note.txt'), content: 'told\n' } }] };
        }
        // The session stays busy (opencode waits for this answer) until the test has sent its message.
        await released;
        return toolCall('forge_loop_handoff', { decisions: 'Wrote told-note.txt.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'The note is there.', done: true });
      return text('Nothing to do.');
    });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    await writeFile(planFile, PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });

  after(async () => {
    release();
    await rm(planFile, { force: true });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
  });

  it('sends the words into the busy session; the model receives them there and the live view shows them', async () => {
    const env = await forgeTestEnvironment();
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', {
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 4,
      sandbox: false,
    });
    assert.equal(result.status, 'started', JSON.stringify(result));
    ref = result.loop!;
    await vscode.commands.executeCommand('forge.openDashboard', ref);
    const api = await forgeApi();
    // The coder wrote the note and its next turn is held: the session is busy.
    await waitFor('the coder to be held in its second turn', () => env.model.agentRequests.filter((r) => forgeAgentOf(r) === 'forge-code').length >= 2, 240_000, 300);
    const coderSession = api.engine()!.runtime.get(ref)!.currentSessionId;
    assert.ok(coderSession);

    const told = await vscode.commands.executeCommand<{ status: string; detail?: unknown }>('forge.messageAgent', { ...ref, text: WORDS });
    assert.deepEqual(told, { status: 'done', detail: 'session' });
    release();
    const received = await env.model.waitForRequest((r) => r.sessionId === coderSession && JSON.stringify(r.messages).includes(WORDS), 120_000);
    assert.ok(JSON.stringify(received.messages).includes('Message from the user (via forge tell):'), 'framed as the user\'s message');

    const probe = await waitFor('the live view to show the user\'s message', async () => {
      const p: LiveProbe = (await api.dashboard().probe()).live;
      return p.userMessages.includes(WORDS) ? p : undefined;
    }, 60_000, 300);
    assert.equal(probe.state, 'live');
    assert.ok((await requestScreenshot('message-agent-live-view')).endsWith('.png'));
    await waitFor('the loop to complete', () => api.engine()!.runtime.get(ref!)!.status === 'completed', 240_000, 500);

    // Not running any more: refused, nothing sent.
    const late = await vscode.commands.executeCommand<{ status: string; message?: string }>('forge.messageAgent', { ...ref, text: 'too late' });
    assert.equal(late.status, 'refused');
    assert.match(late.message ?? '', /is not running \(it is completed\)/);
  });
});
