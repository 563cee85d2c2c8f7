// Proves the extension-test harness itself: the extension host runs the
// extension under development, in the workspace and configuration the harness
// asked for, and a test can get a screenshot of the workbench.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { harnessInfo, requestScreenshot } from './support/harness';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('extension-test harness', () => {
  const info = harnessInfo();

  it('opens the folder the harness prepared, a git repository, as the only workspace folder', () => {
    const folders = vscode.workspace.workspaceFolders ?? [];
    assert.deepEqual(
      folders.map((f) => f.uri.fsPath),
      [info.workspaceFolder],
    );
    assert.ok(existsSync(join(info.workspaceFolder, '.git', 'HEAD')), `${info.workspaceFolder} is not a git repository`);
  });

  it('trusts the workspace in the main run', () => {
    assert.equal(info.trusted, true);
    assert.equal(vscode.workspace.isTrusted, true);
  });

  it('loads and activates the extension under development', async () => {
    const extension = vscode.extensions.getExtension(info.extensionId);
    assert.ok(extension, `extension ${info.extensionId} is not loaded`);
    assert.equal(extension.extensionUri.fsPath, info.extensionPath);
    await extension.activate();
    assert.equal(extension.isActive, true);
  });

  it('runs in the host kind the harness names (code-server: web UI, remote extension host)', () => {
    if (info.host === 'code-server') {
      assert.equal(vscode.env.uiKind, vscode.UIKind.Web);
      assert.ok(vscode.env.remoteName, 'remoteName should be set under code-server');
    } else {
      assert.equal(vscode.env.uiKind, vscode.UIKind.Desktop);
      assert.equal(vscode.env.remoteName, undefined);
    }
  });

  it('passes the extra environment of the run to the extension host', () => {
    assert.ok(info.extraEnv.includes('FORGE_VSCODE_ENV_PROBE'), `the main run should pass FORGE_VSCODE_ENV_PROBE (got ${info.extraEnv.join(', ')})`);
    assert.equal(process.env.FORGE_VSCODE_ENV_PROBE, 'reaches-the-extension-host');
  });

  it('saves a screenshot of the workbench on request', async function () {
    if (info.host !== 'code-server') this.skip();
    const path = await requestScreenshot('harness-workbench');
    const png = readFileSync(path);
    assert.deepEqual(png.subarray(0, 8), PNG_SIGNATURE);
    // IHDR: width and height of the page as the browser renders it.
    assert.ok(png.readUInt32BE(16) >= 800 && png.readUInt32BE(20) >= 600, `unexpected size ${png.readUInt32BE(16)}x${png.readUInt32BE(20)}`);
  });
});
