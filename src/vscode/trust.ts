import * as vscode from 'vscode';
import type { Notifier } from './notifier';

export function untrustedMessage(action: string): string {
  return vscode.l10n.t('Forge will not {0} in an untrusted workspace: loops run coding agents that execute commands and edit files. Trust this workspace (Manage Workspace Trust) to run loops.', action);
}

/**
 * Guards the commands that run agents. The manifest's `when` clauses hide them in an
 * untrusted workspace; this refuses them when invoked anyway (keybinding, API, another
 * extension) and says why. Returns the refusal message, or undefined when trusted.
 */
export function refuseIfUntrusted(notifier: Notifier, action: string): string | undefined {
  if (vscode.workspace.isTrusted) return undefined;
  const message = untrustedMessage(action);
  void notifier.warn(message, vscode.l10n.t('Manage Workspace Trust')).then((choice) => {
    if (choice) void vscode.commands.executeCommand('workbench.trust.manage');
  });
  return message;
}
