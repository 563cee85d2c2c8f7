// Run "untrusted": the harness opens the workspace without trusting it (workspace
// trust enabled, no startup prompt), as a user who picked "Don't Trust" would.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { harnessInfo } from '../../support/harness';

describe('untrusted workspace run', () => {
  const info = harnessInfo();

  it('opens the workspace folder in restricted mode', () => {
    assert.equal(info.trusted, false);
    assert.deepEqual(
      (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
      [info.workspaceFolder],
    );
    assert.equal(vscode.workspace.isTrusted, false);
  });
});
