// The packaged forge.vsix as a user installs it (run `vsix`, test/vscode/installed-extension.mjs):
// installed with code-server --install-extension into an empty extensions folder, code-server
// under bubblewrap with the checkout hidden, opencode only on PATH (a global npm install of
// opencode-ai). A plan runs to completion through the palette, quick picks answered in the
// workbench; the auditor's finding shows in the Problems view and goes with the fix.
import * as assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import * as vscode from 'vscode';
import { findOpencodeOnPath } from '../../../../../src/core/opencode/binary-discovery';
import { disposeForgeTestEnvironment, forgeApi, forgeTestEnvironment, reportFailuresEarly, MOCK_MODEL, waitFor } from '../../forge-test-kit';
import { findLoop, GREETING_FINDING, GREETING_PLAN, scriptGreetingLoop } from '../../support/greeting-loop';
import { harnessInfo, requestScreenshot, requestWorkbench, requestWorkbenchProblems } from '../../support/harness';

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort();
}

/**
 * Executables of the opencode processes running in this code-server's mount namespace (the
 * harness's bubblewrap sandbox: everything in it was started by this code-server; other users'
 * opencode processes on the machine are in other namespaces).
 */
function sandboxedOpencodeExecutables(): string[] {
  const ours = readlinkSync('/proc/self/ns/mnt');
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readlinkSync(`/proc/${pid}/ns/mnt`) !== ours) continue;
      const exe = readlinkSync(`/proc/${pid}/exe`);
      if (/opencode/.test(exe)) found.push(exe);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return [...new Set(found)];
}

describe('the installed forge.vsix: a plan through the palette, opencode only on PATH', function () {
  this.timeout(300_000);
  this.bail(true);
  reportFailuresEarly();
  const info = harnessInfo();
  const installed = info.installed!;
  let releaseFix: () => void = () => {};
  let worktreeDir: string | undefined;

  before(async () => {
    assert.ok(installed, 'the harness says which VSIX install this is (runs.mjs installedVsix)');
    const env = await forgeTestEnvironment();
    ({ releaseFix } = scriptGreetingLoop(env.model));
    await writeFile(join(info.workspaceFolder, 'greeting-plan.md'), GREETING_PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(join(info.workspaceFolder, 'greeting-plan.md')));
  });

  after(() => disposeForgeTestEnvironment());

  it('is the copy installed into the fresh extensions folder; nothing of the checkout is reachable or loaded', async () => {
    const forge = vscode.extensions.getExtension(info.extensionId);
    assert.ok(forge, `${info.extensionId} is installed`);
    assert.ok(forge.extensionPath.startsWith(installed.extensionsDir + sep), `Forge runs from ${forge.extensionPath}, inside the extensions folder ${installed.extensionsDir}`);
    assert.equal(vscode.extensions.all.filter((e) => e.id.toLowerCase() === info.extensionId.toLowerCase()).length, 1, 'one Forge only');
    assert.ok(installed.hiddenPaths.length > 0);
    for (const hidden of installed.hiddenPaths) {
      assert.ok(!existsSync(hidden) || readdirSync(hidden).length === 0, `the checkout's ${hidden} is an empty folder to code-server and everything it starts`);
    }
    // The engine bundle loads from the installed copy (the engine starts with the test environment).
    await (await forgeApi()).startEngine();
    const loaded = Object.keys(require.cache);
    assert.ok(loaded.includes(join(forge.extensionPath, 'dist', 'core.cjs')), 'the engine bundle came from the installed extension');
    const fromCheckout = loaded.filter((p) => installed.hiddenPaths.some((h) => p.startsWith(h + sep)));
    assert.deepEqual(fromCheckout, [], 'no module of the checkout is loaded');
  });

  it('carries every runtime file and no node_modules; the docs it ships list exactly its files', () => {
    const extensionPath = vscode.extensions.getExtension(info.extensionId)!.extensionPath;
    const files = filesUnder(extensionPath);
    for (const needed of ['dist/extension.cjs', 'dist/core.cjs', 'dist/webview.js', 'dist/sql-wasm.wasm', 'dist/agents/forge-code.md', 'dist/agents/forge-auditor.md', 'dist/agents/forge-architect.md', 'media/dashboard.css']) {
      assert.ok(files.includes(needed), `${needed} is in the installed extension (files: ${files.join(', ')})`);
    }
    assert.deepEqual(files.filter((f) => /(^|\/)node_modules\/|(^|\/)opencode(\.exe)?$/.test(f)), [], 'no dependency folder, no opencode binary');
    const readme = readFileSync(join(extensionPath, 'docs', 'vscode.md'), 'utf8');
    const listed = [...readme.matchAll(/^\| `([^`]+)` \| [\d.]+ KiB \|$/gm)].map((m) => m[1]!).sort();
    assert.ok(listed.length > 0, 'docs/vscode.md has the generated file list (node scripts/package-vsix.mjs --readme)');
    // The installer adds its own manifest; everything else is what the VSIX carries.
    assert.deepEqual(files.filter((f) => f !== '.vsixmanifest'), listed, 'docs/vscode.md "Installing the VSIX" lists the VSIX\'s files: run node scripts/package-vsix.mjs --readme');
  });

  it('finds opencode on PATH only: the global install of opencode-ai', () => {
    assert.ok(installed.opencodeBin, 'this run puts a global opencode on PATH');
    assert.equal(findOpencodeOnPath(), join(installed.opencodeBin, 'opencode'));
    assert.deepEqual([...new Set(process.env.PATH?.split(':').filter((p) => existsSync(join(p, 'opencode'))))], [installed.opencodeBin]);
  });

  it('Execute Plan through the palette, quick picks answered, starts the loop; the finding shows in the Problems view', async () => {
    await requestWorkbench('command', { title: 'Forge: Execute Plan' });
    await requestWorkbench('quick-input', { expect: 'How should Forge execute the plan?', pick: 'Loop' });
    await requestWorkbench('quick-input', { expect: 'Model for coding sessions', pick: MOCK_MODEL });
    await requestWorkbench('quick-input', { expect: 'Model for audit sessions', pick: MOCK_MODEL });
    // The budget step (its prompt carries the estimate): none, left empty.
    await requestWorkbench('quick-input', { expect: 'Budget in money', value: '' });
    await requestWorkbench('quick-input', { expect: 'Maximum iterations', value: '6' });
    // The checkout's sandbox image is out of reach here: run unconfined, as offered.
    await requestWorkbench('quick-input', { expect: 'Confine the agents in a sandbox?', pick: 'Unconfined' });
    const api = await forgeApi();
    await waitFor('the loop "greeting" in the Loop Explorer', async () => {
      await vscode.commands.executeCommand('forge.refreshLoops');
      return findLoop(api.treeSnapshot(), 'greeting');
    }, 120_000, 500);
    const opencodes = await waitFor('an opencode process of this loop', () => {
      const running = sandboxedOpencodeExecutables();
      return running.length > 0 ? running : undefined;
    }, 120_000, 250);
    // The harness binds the global prefix at <run folder>/tools/opencode-global; bin/opencode links into it.
    const globalPrefix = join(installed.opencodeBin!, '..');
    for (const exe of opencodes) assert.ok(exe.startsWith(globalPrefix + sep), `opencode ran from the global install ${globalPrefix}: ${exe}`);

    const diagnostic = await waitFor('the auditor\'s finding as a diagnostic', () => {
      for (const [uri, diagnostics] of vscode.languages.getDiagnostics()) {
        const found = diagnostics.find((d) => d.source === 'Forge' && d.message.includes('Greeting is misspelt'));
        if (found) return { uri, found };
      }
      return undefined;
    }, 180_000, 500);
    worktreeDir = join(diagnostic.uri.fsPath, '..');
    assert.equal(diagnostic.found.severity, vscode.DiagnosticSeverity.Error);
    const counts = await waitFor('the Problems status bar to count the error', async () => {
      const c = await requestWorkbenchProblems();
      return c.errors >= 1 ? c : undefined;
    }, 30_000, 500);
    assert.ok(counts.errors >= 1, counts.label);
    await vscode.commands.executeCommand('workbench.actions.view.problems');
    const panel = await waitFor('the Problems view to list the finding', async () => {
      const { texts } = await requestWorkbench<{ texts: string[] }>('texts', { selector: '.markers-panel' });
      return texts.find((t) => t.includes(GREETING_FINDING));
    }, 30_000, 500);
    assert.match(panel, /hello\.js/);
    // Saved by the harness under .test-artifacts/ (the checkout is out of this host's reach).
    await requestScreenshot('vsix-finding-in-problems');
    releaseFix();
  });

  it('runs the loop to completion; the fix clears the finding; screenshot of the completed loop', async () => {
    const api = await forgeApi();
    const done = await waitFor('the loop to complete', async () => {
      await vscode.commands.executeCommand('forge.refreshLoops');
      const found = findLoop(api.treeSnapshot(), 'greeting');
      return found && found.node.contextValue !== 'forge.loop.running' ? found : undefined;
    }, 240_000, 1000);
    assert.equal(done.node.contextValue, 'forge.loop.completed', `the loop ended as ${done.node.contextValue} (${done.node.description})`);
    assert.equal(readFileSync(join(worktreeDir!, 'hello.js'), 'utf8'), "console.log('hello');\n");
    await waitFor('the finding to leave the Problems view', async () => {
      const c = await requestWorkbenchProblems();
      return c.errors === 0 ? c : undefined;
    }, 30_000, 500);
    await vscode.commands.executeCommand('forge.loopExplorer.focus');
    await new Promise((r) => setTimeout(r, 1000));
    // Saved by the harness under .test-artifacts/ (the checkout is out of this host's reach).
    await requestScreenshot('vsix-completed-loop');
  });
});
