// Forge: Review Loop (issue 29 items 1–3) in the real workbench: a completed loop's multi-file
// diff opens; a comment on the changed line (the review controller's command with a real comment
// thread, as the Comments UI hands it) becomes a finding of the user in the Problems view; Send
// Review to Forge runs another pass whose coder prompt (recorded by the scripted model) carries
// the comment verbatim; the coder changes the line and answers, the loop awaits the review;
// resolving the comment completes it; Accept Loop fast-forwards the base. Screenshots of each step.
import * as assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { forgeAgentOf, text, toolCall, type ScriptStep } from '../../../../support/scripted-model';
import { calledTools, disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { harnessInfo, requestScreenshot, requestWorkbench } from '../../support/harness';

const PLAN = `# Review note
Loop Name: review-note

## Note
Create review-note.txt containing "first".
`;

const COMMENT = 'Write "second" here — "first" is the wrong word.';

describe('Forge: Review Loop — comments are findings, sent back, resolved, accepted (scripted model)', function () {
  this.timeout(900_000);
  this.bail(true);
  reportFailuresEarly();
  let ref: { projectId: string; name: string } | undefined;
  let pass = 1;
  let findingId = 0;
  const planFile = join(harnessInfo().workspaceFolder, 'review-note-plan.md');

  before(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    const env = await forgeTestEnvironment();
    env.model.setHandler(async (request): Promise<ScriptStep> => {
      const agent = forgeAgentOf(request);
      const called = calledTools(request);
      if (called.includes('forge_loop_handoff')) return text('Handed off.');
      if (agent === 'forge-code') {
        const worktree = (await forgeApi()).engine()!.runtime.get(ref!)!.worktreeDir!;
        if (!called.includes('write')) return toolCall('write', { filePath: join(worktree, 'review-note.txt'), content: pass === 1 ? 'first\n' : 'second\n' });
        if (pass === 2 && !called.includes('forge_review_reply')) return toolCall('forge_review_reply', { id: findingId, reply: 'The line says "second" now.' });
        return toolCall('forge_loop_handoff', { decisions: 'Wrote review-note.txt.', verification: 'Read it back.', notesForAuditor: '' });
      }
      if (agent === 'forge-auditor') return toolCall('forge_loop_handoff', { summary: 'Fine.', done: true });
      return text('Nothing to do.');
    });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', 'never', vscode.ConfigurationTarget.Global);
    await writeFile(planFile, PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });

  after(async () => {
    // The diff editors and the Problems panel this test opened would shrink the next test file's dashboard.
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('workbench.action.closePanel');
    await rm(planFile, { force: true });
    await vscode.workspace.getConfiguration('forge').update('openWorktree', undefined, vscode.ConfigurationTarget.Global);
    await disposeForgeTestEnvironment();
  });

  it('diff → comment → Problems → send → awaiting review → resolve → completed → accept', async () => {
    const env = await forgeTestEnvironment();
    const started = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string } }>('forge.executePlan', { mode: 'loop', model: MOCK_MODEL, auditorModel: MOCK_MODEL, maxIterations: 6, sandbox: false });
    assert.equal(started.status, 'started', JSON.stringify(started));
    ref = started.loop!;
    const api = await forgeApi();
    const engine = () => api.engine()!;
    await waitFor('the loop to complete', () => engine().runtime.get(ref!)!.status === 'completed', 300_000, 500);
    const worktree = engine().runtime.get(ref)!.worktreeDir!;
    const file = vscode.Uri.file(join(worktree, 'review-note.txt'));

    const review = await vscode.commands.executeCommand<{ status: string; detail?: { files: number } }>('forge.reviewLoop', ref);
    assert.equal(review.status, 'done', JSON.stringify(review));
    assert.ok(review.detail!.files >= 1, 'the loop changed files');
    assert.ok((await requestScreenshot('review-loop-1-diff')).endsWith('.png'));

    // Through the Comments UI, as a user: the cursor on the changed line, Comments: Add Comment on
    // Current Selection, the text typed into Forge's comment form and its "Add Comment (bug)" button.
    await vscode.window.showTextDocument(file, { selection: new vscode.Range(0, 0, 0, 0) });
    // The command shows once the workbench has asked Forge's controller for the editor's commenting ranges.
    await waitFor('Comments: Add Comment on Current Selection in the palette', async () => {
      try {
        await requestWorkbench('command', { title: 'Comments: Add Comment on Current Selection' });
        return true;
      } catch {
        await vscode.commands.executeCommand('workbench.action.closeQuickOpen');
        await vscode.window.showTextDocument(file, { selection: new vscode.Range(0, 0, 0, 0) });
        return false;
      }
    }, 30_000, 1_000);
    const form = await requestWorkbench<{ buttons: string[] }>('comment-form', { text: COMMENT, button: 'Add Comment (bug)' });
    assert.ok(form.buttons.includes('Add as Warning') || form.buttons.some((b) => /Warning/.test(b)), `the form offers both severities: ${form.buttons.join(' | ')}`);
    const added = await waitFor('the comment stored as a finding of the user', () => engine().review.list(ref!).find((f) => f.description === COMMENT), 60_000, 300);
    assert.deepEqual({ file: added.file, line: added.line, severity: added.severity, source: added.source, status: added.status }, { file: 'review-note.txt', line: 1, severity: 'bug', source: 'user', status: 'open' });
    findingId = added.id;
    const diagnostic = await waitFor('the comment in the Problems view', () => vscode.languages.getDiagnostics(file).find((d) => d.message.includes(COMMENT)), 60_000, 300);
    assert.equal(diagnostic.severity, vscode.DiagnosticSeverity.Error);
    await vscode.window.showTextDocument(file);
    assert.ok((await requestScreenshot('review-loop-2-comment')).endsWith('.png'));

    pass = 2;
    const coderRequestsBefore = env.model.agentRequests.filter((r) => forgeAgentOf(r) === 'forge-code').length;
    const sent = await vscode.commands.executeCommand<{ status: string }>('forge.review.send', ref);
    assert.equal(sent.status, 'done', JSON.stringify(sent));
    await waitFor('the loop to await the review', () => engine().runtime.get(ref!)!.status === 'awaiting_review', 300_000, 500);
    const coderPrompt = env.model.agentRequests.filter((r) => forgeAgentOf(r) === 'forge-code').slice(coderRequestsBefore)[0]!;
    assert.ok(JSON.stringify(coderPrompt.messages).includes(JSON.stringify(COMMENT).slice(1, -1)), 'the comment reaches the coder verbatim');
    assert.equal(await readFile(join(worktree, 'review-note.txt'), 'utf8'), 'second\n');
    const [finding] = engine().review.list(ref);
    assert.deepEqual([finding!.status, finding!.reply], ['open', 'The line says "second" now.']);
    assert.ok((await requestScreenshot('review-loop-3-answered')).endsWith('.png'));

    const resolved = await vscode.commands.executeCommand<{ status: string; detail?: { next: string } }>('forge.review.resolve', { ...ref, id: findingId });
    assert.equal(resolved.status, 'done', JSON.stringify(resolved));
    assert.equal(resolved.detail!.next, 'complete');
    await waitFor('the loop to complete after the review', () => engine().runtime.get(ref!)!.status === 'completed', 300_000, 500);
    await waitFor('the comment to leave the Problems view', () => !vscode.languages.getDiagnostics(file).some((d) => d.message.includes(COMMENT)), 60_000, 300);
    assert.ok((await requestScreenshot('review-loop-4-completed')).endsWith('.png'));

    const tip = (await engine().worktrees.diffAgainstBase({ repoDir: engine().runtime.get(ref)!.repoDir!, branch: 'forge/review-note', baseCommit: engine().runtime.get(ref)!.baseCommit! }, { includeUncommitted: false })).length;
    assert.ok(tip >= 1);
    const accepted = await vscode.commands.executeCommand<{ status: string; detail?: { kind: string; how: string | null } }>('forge.acceptLoop', ref, { strategy: 'merge-commit', remove: false });
    assert.equal(accepted.status, 'done', JSON.stringify(accepted));
    assert.deepEqual([accepted.detail!.kind, accepted.detail!.how], ['accepted', 'fast-forward']);
    assert.equal(await readFile(join(harnessInfo().workspaceFolder, 'review-note.txt'), 'utf8'), 'second\n');
    assert.ok((await requestScreenshot('review-loop-5-accepted')).endsWith('.png'));
  });
});
