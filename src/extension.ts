import * as vscode from 'vscode';

// Composition root (filled in by the VS Code surfaces work). Activation stays cheap:
// no process is started and no database opened until a Forge feature is used.
export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel('Forge', { log: true });
  context.subscriptions.push(log);
}

export function deactivate(): void {}
