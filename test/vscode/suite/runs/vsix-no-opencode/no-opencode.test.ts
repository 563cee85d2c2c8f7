// The packaged forge.vsix installed with no opencode anywhere (run `vsix-no-opencode`,
// test/vscode/installed-extension.mjs): not on PATH, not in the global folders, not in the
// VSIX. Execute Plan from the palette says what to install and how, and its button opens the
// setting of the opencode binary in the Settings editor.
import * as assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import * as vscode from 'vscode';
import { findOpencodeOnPath } from '../../../../../src/core/opencode/binary-discovery';
import { forgeApi, reportFailuresEarly, waitFor } from '../../forge-test-kit';
import { GREETING_PLAN } from '../../support/greeting-loop';
import { harnessInfo, requestScreenshot, requestWorkbench } from '../../support/harness';

describe('the installed forge.vsix without opencode', function () {
  this.timeout(180_000);
  this.bail(true);
  reportFailuresEarly();
  const info = harnessInfo();

  it('has no opencode to find: not on PATH, not in the global folders, not in the installed extension', async () => {
    const forge = vscode.extensions.getExtension(info.extensionId);
    assert.ok(forge && forge.extensionPath.startsWith(info.installed!.extensionsDir + sep), `Forge is the installed copy (${forge?.extensionPath})`);
    assert.equal(info.installed!.opencodeBin, null);
    assert.equal(findOpencodeOnPath(), undefined, 'this machine must have no opencode where Forge looks (PATH, global npm folders, ~/.opencode/bin)');
    assert.ok(!existsSync(join(forge.extensionPath, 'node_modules')), 'the VSIX bundles no dependency folder');
    await forgeApi();
  });

  it('Execute Plan says what to install and how; its button opens the opencode binary setting', async () => {
    await writeFile(join(info.workspaceFolder, 'greeting-plan.md'), GREETING_PLAN);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(join(info.workspaceFolder, 'greeting-plan.md')));
    const ran = await requestWorkbench<{ ran: string }>('command', { title: 'Forge: Execute Plan' });
    const api = await forgeApi();
    await waitFor(`Forge's refusal (palette ran "${ran.ran}")`, () => api.notifications().find((n) => /npm install -g opencode-ai/.test(n.message)), 60_000, 250);
    const shown = await requestWorkbench<{ message: string; buttons: string[] }>('notification', { contains: 'npm install -g opencode-ai' });
    assert.match(shown.message, /Forge needs opencode/);
    assert.match(shown.message, /Binary Path/);
    assert.deepEqual(shown.buttons, ['Open Setting']);
    await requestScreenshot('vsix-no-opencode-message');

    await requestWorkbench('notification', { contains: 'npm install -g opencode-ai', button: 'Open Setting' });
    const settings = await waitFor('the Settings editor on forge.opencode.binaryPath', async () => {
      const { texts } = await requestWorkbench<{ texts: string[] }>('texts', { selector: '.settings-editor' });
      return texts.find((t) => /Binary Path/.test(t) && /Path of the opencode binary/.test(t));
    }, 60_000, 500);
    assert.match(settings, /Opencode/);
    const tab = vscode.window.tabGroups.activeTabGroup.activeTab;
    assert.match(tab?.label ?? '', /Settings/, `the active editor is the Settings editor (${tab?.label})`);
    await requestScreenshot('vsix-no-opencode-settings');
  });
});
