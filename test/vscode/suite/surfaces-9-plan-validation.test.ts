// Plans checked as the user types, in the real workbench: the plan's diagnostics (the same
// validation as `forge check`), updated on edit and dropped when the file is deleted while
// open; the Execute Plan lens at the top; and Execute Plan refusing a plan with errors.
import * as assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { PLAN_DIAGNOSTIC_SOURCE } from '../../../src/vscode/plan-diagnostics';
import { forgeApi, waitFor } from './forge-test-kit';
import { harnessInfo, requestScreenshot } from './support/harness';

const planDiagnostics = (uri: vscode.Uri) => vscode.languages.getDiagnostics(uri).filter((d) => d.source === PLAN_DIAGNOSTIC_SOURCE);

describe('plan validation in the editor', function () {
  this.timeout(120_000);
  const file = join(harnessInfo().workspaceFolder, 'thirty-plan.md');
  const uri = vscode.Uri.file(file);

  before(async () => {
    await forgeApi();
    const sections = Array.from({ length: 30 }, (_, i) => `## Step ${i + 1}\nDo step ${i + 1}.`).join('\n');
    await writeFile(file, `# Thirty\nLoop Name: thirty\n${sections}\n## Verification\n- \`node scripts/check-all.mjs\`\n`);
  });
  after(async () => {
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await rm(file, { force: true });
  });

  it('a plan with 30 sections shows the cap as an Error on the first section that would not run, and a missing file as a Warning', async () => {
    const editor = await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri));
    const diagnostics = await waitFor('the plan diagnostics', () => (planDiagnostics(uri).length >= 2 ? planDiagnostics(uri) : undefined), 30_000);
    const cap = diagnostics.find((d) => d.code === 'too-many-sections')!;
    assert.equal(cap.severity, vscode.DiagnosticSeverity.Error);
    assert.equal(editor.document.lineAt(cap.range.start.line).text, '## Step 25');
    assert.match(cap.message, /30 sections; Forge runs at most 24/);
    const missing = diagnostics.find((d) => d.code === 'missing-file')!;
    assert.equal(missing.severity, vscode.DiagnosticSeverity.Warning);
    assert.match(missing.message, /"scripts\/check-all\.mjs", which is not in the repository/);
    await requestScreenshot('plan-validation-diagnostics');
  });

  it('shows Execute Plan and the problem count as lenses at the top of the plan', async () => {
    const lenses = await waitFor('the plan lenses', async () => {
      const found = await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', uri);
      return found && found.length >= 2 ? found : undefined;
    }, 30_000);
    const execute = lenses.find((l) => l.command?.command === 'forge.executePlan')!;
    assert.ok(execute, 'an Execute Plan lens');
    assert.equal(execute.range.start.line, 0);
    assert.equal((execute.command!.arguments![0] as vscode.Uri).fsPath, file);
    assert.ok(lenses.some((l) => /1 error\(s\), 1 warning\(s\)/.test(l.command?.title ?? '')), JSON.stringify(lenses.map((l) => l.command?.title)));
  });

  it('the lens\'s command refuses the plan while it has errors, before anything starts', async () => {
    const lens = (await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', uri)).find((l) => l.command?.command === 'forge.executePlan')!;
    const result = await vscode.commands.executeCommand<{ status: string; reason?: string; message?: string }>(lens.command!.command, ...lens.command!.arguments!);
    assert.equal(result.status, 'refused', JSON.stringify(result));
    assert.equal(result.reason, 'bad-plan');
    assert.match(result.message!, /thirty-plan\.md cannot run as written.*\n.*line 51: The plan has 30 sections/);
  });

  it('follows edits: fixing the plan clears the error', async () => {
    const editor = vscode.window.activeTextEditor!;
    const text = editor.document.getText();
    const cut = text.indexOf('## Step 25');
    const end = text.indexOf('## Verification');
    await editor.edit((b) => b.delete(new vscode.Range(editor.document.positionAt(cut), editor.document.positionAt(end))));
    await waitFor('the cap error to go', () => !planDiagnostics(uri).some((d) => d.code === 'too-many-sections'), 30_000);
    assert.ok(planDiagnostics(uri).some((d) => d.code === 'missing-file'), 'the warning stays');
    await editor.document.save();
  });

  it('a plan file deleted while open loses its diagnostics', async () => {
    assert.ok(planDiagnostics(uri).length > 0);
    await vscode.workspace.fs.delete(uri);
    await waitFor('the diagnostics of the deleted plan to go', () => planDiagnostics(uri).length === 0, 30_000);
  });

  it('markdown that is not a plan gets no plan diagnostics', async () => {
    const notes = vscode.Uri.file(join(harnessInfo().workspaceFolder, 'NOTES-guide.md'));
    await writeFile(notes.fsPath, '# Guide\n\n## Install\n\n');
    try {
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(notes));
      // Give the (debounced) validation time to have run if it were going to.
      await new Promise((r) => setTimeout(r, 1000));
      assert.deepEqual(planDiagnostics(notes), []);
      const lenses = await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', notes);
      assert.ok(!lenses.some((l) => l.command?.command === 'forge.executePlan'));
    } finally {
      await rm(notes.fsPath, { force: true });
    }
  });
});
