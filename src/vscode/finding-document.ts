import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import { findingDocumentPath, findingDocumentText, missingFindingDocumentText, parseFindingDocumentPath } from './findings-diagnostics-model';

export const FINDING_SCHEME = 'forge-finding';

/** A fresh URI each time: one whose string form was never computed serialises smaller. */
export function findingDocumentUri(projectId: string, findingId: number): vscode.Uri {
  return vscode.Uri.from({ scheme: FINDING_SCHEME, path: findingDocumentPath(projectId, findingId) });
}

/**
 * Read-only documents showing one finding in full (description, scenario, status), opened
 * from a Forge diagnostic's related information. Open ones follow the finding's status.
 */
export class FindingDocumentProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly subscription: vscode.Disposable;

  constructor(
    private readonly engine: () => Promise<ForgeEngine>,
    storeChanged: vscode.Event<void>,
  ) {
    this.subscription = storeChanged(() => {
      for (const document of vscode.workspace.textDocuments) {
        if (document.uri.scheme === FINDING_SCHEME) this.changed.fire(document.uri);
      }
    });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const ref = parseFindingDocumentPath(uri.path);
    if (!ref) return `# Not a Forge finding\n\n${uri.toString()} does not name a finding.\n`;
    const row = (await this.engine()).repos.reviewFindings.get(ref.projectId, ref.findingId);
    return row ? findingDocumentText(row) : missingFindingDocumentText(ref.findingId);
  }

  dispose(): void {
    this.subscription.dispose();
    this.changed.dispose();
  }
}
