// Forge in a VS Code build without the chat API (run "nochat": the extension's `vscode` module
// has no `chat`): it activates, registers every command, skips the @forge participant and works.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { forgeApi } from '../../forge-test-kit';
import { harnessInfo } from '../../support/harness';

describe('Forge without the chat API', () => {
  it('loads the build whose vscode API has no chat (the run is what it claims)', () => {
    const bundle = readFileSync(join(harnessInfo().extensionPath, 'dist', 'extension.cjs'), 'utf8');
    assert.ok(bundle.startsWith('/* forge-test: vscode.chat hidden */'), `extension under test at ${harnessInfo().extensionPath} is not the chat-less build`);
  });

  it('activates, registers every contributed command and no chat participant', async () => {
    const api = await forgeApi();
    assert.equal(api.chatParticipantRegistered, false);
    const manifest = JSON.parse(readFileSync(join(harnessInfo().extensionPath, 'package.json'), 'utf8')) as { contributes: { commands: { command: string }[] } };
    const registered = new Set(await vscode.commands.getCommands(true));
    const missing = manifest.contributes.commands.map((c) => c.command).filter((c) => !registered.has(c));
    assert.deepEqual(missing, []);
    // The log is written asynchronously.
    const file = join(api.logUri.fsPath, 'Forge.log');
    let log = '';
    for (let i = 0; i < 40 && !/no chat API/.test(log); i++) {
      await new Promise((r) => setTimeout(r, 250));
      log = existsSync(file) ? readFileSync(file, 'utf8') : '';
    }
    assert.match(log, /no chat API: the @forge chat participant is not registered/);
  });

  it('still works: the engine starts, the Loop Explorer and the dashboard answer', async function () {
    this.timeout(120_000);
    const api = await forgeApi();
    const engine = await api.startEngine();
    assert.ok(engine, 'the engine starts');
    assert.deepEqual(api.treeSnapshot(), [], 'a fresh repository has no loops');
    const opened = await vscode.commands.executeCommand<{ status: string }>('forge.openDashboard');
    assert.equal(opened?.status, 'done');
    assert.equal(api.dashboard().open, true);
  });
});
