// One plan loop driven through the palette command against the scripted model, watched
// through every surface: the Loop Explorer's phases, a dirty audit's finding as a diagnostic
// (gone after the fix), the worktree as a workspace folder, and the dashboard's rendering.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { findLoop, GREETING_PLAN, scriptGreetingLoop } from '../../support/greeting-loop';
import { harnessInfo, requestScreenshot } from '../../support/harness';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('a plan loop through the VS Code surfaces (scripted model)', function () {
  this.timeout(720_000);
  // Each step builds on the one before: stop at the first failure.
  this.bail(true);
  reportFailuresEarly();
  let loopName: string;
  let projectId: string;
  let worktreeDir: string;
  let releaseFix: () => void = () => {};
  const phasesSeen: string[] = [];
  let subscription: vscode.Disposable | undefined;

  before(async () => {
    const env = await forgeTestEnvironment();
    // The greeting script: a misspelt greeting, a finding on it, the fix once the test saw the diagnostic.
    ({ releaseFix } = scriptGreetingLoop(env.model));

    const api = await forgeApi();
    subscription = api.onDidChangeLoops(() => {
      if (!loopName) return;
      const found = findLoop(api.treeSnapshot(), loopName);
      if (!found) return;
      const phase = (found.node.description ?? '').split(' · ')[0]!;
      if (phasesSeen[phasesSeen.length - 1] !== phase) phasesSeen.push(phase);
    });

    // The plan lives in the workspace's repository (untracked), as a user's plan would.
    const planFile = join(harnessInfo().workspaceFolder, 'greeting-plan.md');
    await writeFile(planFile, GREETING_PLAN);
    const document = await vscode.workspace.openTextDocument(planFile);
    await vscode.window.showTextDocument(document);
  });

  after(async () => {
    subscription?.dispose();
    await rm(join(harnessInfo().workspaceFolder, 'greeting-plan.md'), { force: true });
  });

  it('Execute Plan from the open markdown editor starts a loop and adds its worktree as a workspace folder', async () => {
    assert.ok(vscode.workspace.workspaceFile, 'this run opens a multi-root workspace, where adding a folder restarts nothing');
    const result = await vscode.commands.executeCommand<{ status: string; loop?: { projectId: string; name: string }; message?: string }>('forge.executePlan', {
      mode: 'loop',
      model: MOCK_MODEL,
      auditorModel: MOCK_MODEL,
      maxIterations: 6,
      // No sandbox choice: the settings decide, as for a user who accepts the defaults.
    });
    assert.equal(result.status, 'started', `Execute Plan did not start a loop: ${JSON.stringify(result)}`);
    loopName = result.loop!.name;
    projectId = result.loop!.projectId;
    assert.equal(loopName, 'greeting');
    const api = await forgeApi();
    const row = api.engine()!.repos.loops.get(result.loop!.projectId, loopName)!;
    worktreeDir = row.worktreeDir!;
    assert.ok(worktreeDir && existsSync(worktreeDir), 'the loop has a worktree');
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    assert.ok(folders.includes(worktreeDir), `the worktree ${worktreeDir} is a workspace folder (folders: ${folders.join(', ')})`);
    const folder = vscode.workspace.workspaceFolders!.find((f) => f.uri.fsPath === worktreeDir)!;
    assert.equal(folder.name, `Forge: ${loopName}`);
  });

  it('shows the dirty audit\'s finding as an Error diagnostic on the file and line, with the scenario', async () => {
    const file = vscode.Uri.file(join(worktreeDir, 'hello.js'));
    const diagnostic = await waitFor('a Forge diagnostic on hello.js', () =>
      vscode.languages.getDiagnostics(file).find((d) => d.source === 'Forge'),
    );
    assert.equal(diagnostic.severity, vscode.DiagnosticSeverity.Error);
    assert.equal(diagnostic.range.start.line, 0);
    assert.match(diagnostic.message, /Greeting is misspelt/);
    assert.match(diagnostic.relatedInformation?.[0]?.message ?? '', /Scenario: node hello.js prints "helo"/);
    // The scenario's entry opens the finding in full, as a read-only markdown document.
    const findingDoc = await vscode.workspace.openTextDocument(diagnostic.relatedInformation![0]!.location.uri);
    assert.equal(findingDoc.uri.scheme, 'forge-finding');
    assert.match(findingDoc.getText(), /^# Finding \d+: bug/);
    assert.match(findingDoc.getText(), /Greeting is misspelt/);
    assert.match(findingDoc.getText(), /## Scenario\n\nnode hello.js prints "helo"/);
    assert.match(findingDoc.getText(), /- Where: hello\.js:1\n- Status: open/);
    // The code actions on it (the file open in an editor, as a user sees it): show in dashboard, dismiss.
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(file), { preview: false });
    const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', file, diagnostic.range);
    const titles = actions.map((a) => a.title);
    assert.ok(titles.some((t) => /Show finding \d+ in Dashboard/.test(t)), `code actions: ${titles.join(' | ')}`);
    assert.ok(titles.some((t) => /Dismiss finding \d+/.test(t)), `code actions: ${titles.join(' | ')}`);
    if (harnessInfo().host === 'code-server') {
      // The finding as a user meets it in the editor (the README's picture, docs/images/finding-in-editor.png).
      const editor = vscode.window.activeTextEditor!;
      editor.selection = new vscode.Selection(0, 0, 0, 0);
      await vscode.commands.executeCommand('workbench.actions.view.problems');
      await vscode.window.showTextDocument(editor.document, { preview: false });
      await vscode.commands.executeCommand('editor.action.marker.next');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(readFileSync(await requestScreenshot('finding-in-editor')).subarray(0, 8), PNG_SIGNATURE);
      await vscode.commands.executeCommand('closeMarkersNavigation');
      await vscode.commands.executeCommand('workbench.action.closePanel');
    }
    // The Loop Explorer shows the open bug on the loop.
    await vscode.commands.executeCommand('forge.refreshLoops');
    const found = findLoop((await forgeApi()).treeSnapshot(), loopName);
    assert.match(found?.node.description ?? '', /1 bug/);
    releaseFix();
  });

  it('runs the loop to completion; the Loop Explorer showed its phases and now lists it as completed', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    await waitFor('the loop to end', () => {
      const row = engine.repos.loops.get(projectId, loopName);
      return row && row.status !== 'running' && row.status !== 'starting' ? row : undefined;
    }, 540_000, 500);
    const row = engine.repos.loops.get(projectId, loopName)!;
    assert.equal(row.status, 'completed', `the loop ended ${row.status} (${row.terminationReason})`);
    await vscode.commands.executeCommand('forge.refreshLoops');
    const found = findLoop(api.treeSnapshot(), loopName);
    assert.equal(found?.group, 'Recent');
    assert.equal(found?.node.contextValue, 'forge.loop.completed');
    assert.equal(found?.node.icon, 'pass-filled');
    const details = found!.node.children.map((c) => `${c.label}: ${c.description}`);
    assert.ok(details.some((d) => /^Sessions: [1-9]/.test(d)), details.join('\n'));
    // Default settings, bwrap installed by the prerequisites: the loop was sandboxed with no choice made.
    assert.ok(details.includes('Confinement: sandboxed (bwrap)'), details.join('\n'));
    // Phases in the order the explorer showed them (coalesced refreshes may merge a repeat, never reorder).
    const order = ['coding', 'auditing', 'final audit', 'completed'];
    const positions = order.map((p) => phasesSeen.indexOf(p));
    assert.ok(positions.every((p) => p >= 0), `phases seen: ${phasesSeen.join(' → ')}`);
    assert.deepEqual([...positions].sort((a, b) => a - b), positions, `phases seen: ${phasesSeen.join(' → ')}`);
    assert.ok(phasesSeen.filter((p) => p === 'coding').length >= 2, `the fix pass shows as a second coding phase: ${phasesSeen.join(' → ')}`);
    assert.equal(readFileSync(join(worktreeDir, 'hello.js'), 'utf8'), "console.log('hello');\n");
    if (harnessInfo().host === 'code-server') {
      await vscode.commands.executeCommand('forge.loopExplorer.focus');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(readFileSync(await requestScreenshot('loop-explorer')).subarray(0, 8), PNG_SIGNATURE);
    }
  });

  it('removes the diagnostic once the finding is resolved', async () => {
    const file = vscode.Uri.file(join(worktreeDir, 'hello.js'));
    await waitFor('the Forge diagnostic on hello.js to go', () => !vscode.languages.getDiagnostics(file).some((d) => d.source === 'Forge'), 30_000);
    assert.equal((await forgeApi()).diagnosticFileCount(), 0);
  });

  it('opens the dashboard on the loop: state diagram with transition counts, the finding with its file link; screenshot saved', async () => {
    const api = await forgeApi();
    await vscode.commands.executeCommand('forge.openDashboard', { projectId, name: loopName });
    const probe = await waitFor('the dashboard to render the loop', async () => {
      const p = await api.dashboard().probe();
      return p.selectedLoop === loopName && p.findingRows > 0 ? p : undefined;
    }, 60_000, 500);
    for (const node of ['start', 'coding', 'auditing', 'final_auditing', 'final_audit_fix', 'post_action', 'end']) {
      assert.ok(probe.diagramNodes.includes(node), `diagram node ${node} (nodes: ${probe.diagramNodes.join(', ')})`);
    }
    assert.ok(probe.diagramEdgeLabels.includes('coding->auditing ×2'), `edges: ${probe.diagramEdgeLabels.join(' | ')}`);
    assert.ok(probe.diagramEdgeLabels.includes('auditing->coding ×1'), `edges: ${probe.diagramEdgeLabels.join(' | ')}`);
    assert.ok(probe.diagramEdgeLabels.some((e) => e.startsWith('final_auditing->end')), `edges: ${probe.diagramEdgeLabels.join(' | ')}`);
    assert.equal(probe.currentNode, null, 'a completed loop has no current phase');
    assert.deepEqual(probe.findingFiles, ['hello.js']);
    assert.equal(probe.sectionRows, 1);
    assert.ok(probe.usageRows >= 2, 'usage by model and by role');
    if (harnessInfo().host === 'code-server') {
      await new Promise((r) => setTimeout(r, 1000));
      const png = readFileSync(await requestScreenshot('dashboard'));
      assert.deepEqual(png.subarray(0, 8), PNG_SIGNATURE);
    }
  });

  it('Show Loop Diff compares the base commit with the loop\'s work; the base side is served read-only', async () => {
    const result = await vscode.commands.executeCommand<{ status: string; detail?: unknown }>('forge.showLoopDiff', { projectId, name: loopName });
    assert.equal(result.status, 'done');
    assert.equal(result.detail, 1, 'one file changed: hello.js');
    const row = (await forgeApi()).engine()!.repos.loops.get(projectId, loopName)!;
    const base = await vscode.workspace.openTextDocument(
      vscode.Uri.from({ scheme: 'forge-base', path: '/README.md', query: JSON.stringify({ projectId, loop: loopName, ref: row.baseCommit }) }),
    );
    assert.equal(base.getText(), readFileSync(join(harnessInfo().workspaceFolder, 'README.md'), 'utf8'));
  });

  it('Dismiss Finding (code action) records the dismissal, keeps the finding and removes its diagnostic; its hostile text shows inert', async () => {
    const api = await forgeApi();
    const engine = api.engine()!;
    // An auditor's late warning on the completed loop's worktree, with escape sequences (clear screen, window title, NUL).
    const description = 'The README does not mention hello.js.\u001b[2J\u001b]0;pwned\u0007\u0000';
    const shown = 'The README does not mention hello.js.\\u001b[2J\\u001b]0;pwned\\u0007\\u0000';
    const recorded = engine.repos.reviewFindings.record(projectId, { loopName, file: 'README.md', line: 1, severity: 'warning', description });
    const file = vscode.Uri.file(join(worktreeDir, 'README.md'));
    const diagnostic = await waitFor('the warning as a diagnostic', () => vscode.languages.getDiagnostics(file).find((d) => d.source === 'Forge'), 60_000);
    assert.equal(diagnostic.severity, vscode.DiagnosticSeverity.Warning);
    assert.ok(diagnostic.message.startsWith(shown), diagnostic.message);
    // The dashboard on the loop shows the same text, escaped (the diff editor covered it: bring it back).
    await vscode.commands.executeCommand('forge.openDashboard', { projectId, name: loopName });
    const texts = await waitFor('the dashboard to show the warning', async () => {
      const t = (await api.dashboard().probe()).findingTexts;
      return t.some((x) => x.includes('does not mention')) ? t : undefined;
    }, 60_000, 500);
    assert.ok(texts.some((x) => x.includes(shown)), texts.join(' | '));
    assert.ok(texts.every((x) => !/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(x)), JSON.stringify(texts));
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(file), { preview: false });
    const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', file, diagnostic.range);
    const dismiss = actions.find((a) => a.title === `Forge: Dismiss finding ${recorded.id}`);
    assert.ok(dismiss?.command, `code actions: ${actions.map((a) => a.title).join(' | ')}`);
    const result = await vscode.commands.executeCommand<{ status: string }>(dismiss.command.command, ...(dismiss.command.arguments ?? []));
    assert.equal(result.status, 'done');
    assert.equal(engine.repos.reviewFindings.get(projectId, recorded.id)?.status, 'dismissed', 'recorded, not deleted');
    await waitFor('the dismissed finding\'s diagnostic to go', () => !vscode.languages.getDiagnostics(file).some((d) => d.source === 'Forge'), 30_000);
  });

  it('takes the worktree folder out of the workspace once the worktree is removed', async () => {
    assert.ok(vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktreeDir));
    await rm(worktreeDir, { recursive: true, force: true });
    await waitFor('the worktree folder to leave the workspace', () => !vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === worktreeDir), 60_000);
    assert.deepEqual((vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath), [harnessInfo().workspaceFolder]);
  });
});

after(() => disposeForgeTestEnvironment());
