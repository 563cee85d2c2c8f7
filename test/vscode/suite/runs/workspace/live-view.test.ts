// The dashboard's live view (issue 15 part 3) in the real workbench: while the coder's session
// is held open by the scripted model (it waits for the test before answering its next turn),
// the loop detail shows the agent's streamed text and its tool call with arguments and result;
// with "follow" on it moves to the auditor's session at the phase change. Screenshot saved.
import * as assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { LiveProbe } from '../../../../../src/vscode/dashboard/protocol';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo, requestScreenshot } from '../../support/harness';

const PLAN = `# Live note
Loop Name: live-note

## Note
Create live-note.txt containing "live".

## Verification
live-note.txt exists.
`;

describe('the dashboard live view follows the running session (scripted model)', function () {
  this.timeout(600_000);
  this.bail(true);
  reportFailuresEarly();
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let ref: { projectId: string; name: string } | undefined;
  const planFile = join(harnessInfo().workspaceFolder, 'live-note-plan.md');

  before(async () => {
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        if (!called.includes('write')) {
          const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
          return { kind: 'tool-calls', text: 'Writing the note now.', calls: [{ name: 'write', args: { filePath: join(worktree, 'live-note.txt'), content: 'live\n' } }] };
        }
        // The session stays busy (opencode waits for this answer) until the test has looked.
        await released;
        return toolCall('forge_loop_handoff', { decisions: 'Wrote live-note.txt.', verification: 'Read it back.', notesForAuditor: '' });
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

  async function live(): Promise<LiveProbe> {
    return (await (await forgeApi()).dashboard().probe()).live;
  }

  it('shows the tool call, its arguments and result, and the streamed text while the session runs', async () => {
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
    const seen = await waitFor('the live view to show the write call', async () => {
      const p = await live();
      return p.toolCalls.includes('write completed') ? p : undefined;
    }, 240_000, 300);
    const row = api.engine()!.runtime.get(ref)!;
    assert.equal(row.status, 'running', 'the session is still running (held by the scripted model)');
    assert.equal(row.phase, 'coding');
    assert.equal(seen.state, 'live');
    assert.equal(seen.follow, true);
    assert.equal(seen.shownSession, row.currentSessionId, 'the live view shows the current session');
    assert.ok(seen.textChars >= 'Writing the note now.'.length, `the streamed text reached the view (${seen.textChars} characters)`);
    assert.match(seen.message, /Following the current session/);
    const shot = await requestScreenshot('live-view-tool-call');
    assert.ok(shot.endsWith('.png'));
  });

  it('with follow on, moves to each next session at the phase changes (the final audit is the last), and keeps the parts after the loop ended', async () => {
    release();
    const api = await forgeApi();
    await waitFor('the loop to complete', () => api.engine()!.runtime.get(ref!)!.status === 'completed', 240_000, 500);
    const sessions = api.engine()!.live.sessions(ref!).filter((s) => s.parentSessionId === null);
    assert.ok(sessions.length >= 2, `a coding and an audit session (${sessions.map((s) => s.phase).join(', ')})`);
    assert.deepEqual(sessions.map((s) => s.phase), ['coding', 'auditing', 'final_auditing']);
    const auditor = sessions[sessions.length - 1]!;
    const p = await waitFor('the live view to show the auditor session', async () => {
      const now = await live();
      // The dashboard's state (the loop ended) follows the database a moment later than the parts.
      return now.shownSession === auditor.sessionId && now.toolCalls.includes('forge_loop_handoff completed') && /not running/.test(now.message) ? now : undefined;
    }, 60_000, 300);
    assert.equal(p.state, 'live');
    assert.match(p.message, /not running/);
    assert.ok(p.sessions >= 2);
    assert.ok(p.updatesApplied > 0);
  });
});
