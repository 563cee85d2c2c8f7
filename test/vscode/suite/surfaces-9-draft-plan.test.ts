// Forge: Draft Plan (issue 15, plan authoring) in a real extension host: the scripted model plays
// the read-only architect over real opencode; the drafted plan opens as a markdown document; the
// follow-up (Answer the Architect) continues the same session and the document shows the change;
// the workspace repository is left as it was.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as vscode from 'vscode';
import { forgeAgentOf, text, toolCall, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';
import { disposeForgeTestEnvironment, forgeTestEnvironment, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo } from './support/harness';

const PLAN = `# Greeting file

## Objective
The repository has a greeting file.

## Verification
- exists: hello.txt

## Write the greeting
Create hello.txt.`;

interface DraftDetail {
  draftId: string;
  status: string;
  outPath: string | null;
  reply: string;
  turns: number;
}

describe('Forge: Draft Plan (the architect drafts, the plan opens as a document)', function () {
  this.timeout(300_000);
  reportFailuresEarly();
  const sessions = new Map<string, ScriptStep[]>();
  const architect: ScriptedRequest[] = [];

  after(async () => {
    (await forgeTestEnvironment()).model.setHandler(undefined);
  });

  it('opens the drafted plan; Answer the Architect revises it in the same session; the repository is unchanged', async () => {
    const { model } = await forgeTestEnvironment();
    const repo = harnessInfo().workspaceFolder;
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' });
    const before = { status: git('status', '--porcelain', '--untracked-files=all'), head: git('rev-parse', 'HEAD') };
    model.setHandler((request) => {
      if (forgeAgentOf(request) !== 'forge-architect') return text('Done.');
      architect.push(request);
      const sid = request.sessionId ?? '-';
      if (!sessions.has(sid)) {
        sessions.set(sid, [
          toolCall('forge_plan_write', { content: PLAN }),
          text('Should hello.txt say "hello"?'),
          toolCall('forge_plan_edit', { oldString: 'Create hello.txt.', newString: 'Create hello.txt containing "hello".' }),
          text('Done: section 1 now says what hello.txt holds.'),
        ]);
      }
      return sessions.get(sid)!.shift() ?? text('Done.');
    });

    const result = await vscode.commands.executeCommand<{ status: string; detail?: DraftDetail; message?: string }>('forge.draftPlan', 'add a greeting file');
    assert.equal(result.status, 'done', result.message);
    const detail = result.detail!;
    assert.equal(detail.status, 'drafted');
    assert.ok(detail.outPath, 'a plan file');
    assert.match(detail.reply, /Should hello\.txt say "hello"\?/);
    assert.match(architect[0]!.lastUserText, /add a greeting file/);
    const editor = vscode.window.activeTextEditor;
    assert.equal(editor?.document.uri.fsPath, detail.outPath, 'the drafted plan is the active editor');
    assert.equal(editor!.document.languageId, 'markdown');
    assert.equal(editor!.document.getText(), `${PLAN}\n`);

    const answered = await vscode.commands.executeCommand<{ status: string; detail?: DraftDetail; message?: string }>('forge.continueDraft', { id: detail.draftId, answer: 'yes, "hello"' });
    assert.equal(answered.status, 'done', answered.message);
    assert.equal(answered.detail!.turns, 2);
    assert.equal(answered.detail!.reply, 'Done: section 1 now says what hello.txt holds.');
    const followUp = architect.find((r) => r.lastUserText.includes('yes, "hello"'));
    assert.equal(followUp?.sessionId, architect[0]!.sessionId, 'the answer went to the same architect session');
    await waitFor('the document to show the revised plan', () => vscode.window.activeTextEditor?.document.getText().includes('Create hello.txt containing "hello".'), 30_000);
    assert.deepEqual({ status: git('status', '--porcelain', '--untracked-files=all'), head: git('rev-parse', 'HEAD') }, before, 'drafting changed nothing in the repository');
  });
});

after(() => disposeForgeTestEnvironment());
