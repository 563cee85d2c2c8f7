// Run "untrusted": the commands that run agents refuse, say why, and start nothing.
import * as assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { forgeApi } from '../../forge-test-kit';
import { harnessInfo } from '../../support/harness';

describe('Forge in an untrusted workspace', () => {
  const planFile = join(harnessInfo().workspaceFolder, 'plan.md');

  before(async () => {
    await writeFile(planFile, '# Plan\n\n## Do it\nWrite a file.\n');
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(planFile));
  });
  after(() => rm(planFile, { force: true }));

  it('refuses Execute Plan from an open markdown file with a message saying why', async () => {
    assert.equal(vscode.workspace.isTrusted, false);
    const api = await forgeApi();
    const result = await vscode.commands.executeCommand<{ status: string; reason?: string; message?: string }>('forge.executePlan');
    assert.equal(result.status, 'refused');
    assert.equal(result.reason, 'untrusted');
    assert.match(result.message ?? '', /will not execute a plan in an untrusted workspace/);
    assert.match(result.message ?? '', /Trust this workspace/);
    const shown = api.notifications().at(-1);
    assert.equal(shown?.level, 'warning');
    assert.equal(shown?.message, result.message, 'the user was shown the same message');
    assert.equal(api.engine(), undefined, 'nothing was started');
  });

  it('refuses the other agent-running commands the same way', async () => {
    for (const [command, action] of [
      ['forge.executeGoal', 'execute a goal'],
      ['forge.draftPlan', 'draft a plan'],
      ['forge.continueDraft', 'continue a plan draft'],
      ['forge.restartLoop', 'restart a loop'],
      ['forge.forceRestartLoop', 'force-restart a loop'],
      ['forge.buildSandboxImage', 'build the sandbox image'],
      ['forge.executePrd', 'execute a PRD'],
      ['forge.launchGroup', 'launch a feature group'],
      ['forge.resumeGroup', 'resume a feature group'],
    ] as const) {
      const result = await vscode.commands.executeCommand<{ status: string; message?: string }>(command);
      assert.equal(result.status, 'refused', command);
      assert.match(result.message ?? '', new RegExp(`will not ${action} in an untrusted workspace`), command);
    }
    assert.equal((await forgeApi()).engine(), undefined);
  });
});
