import * as path from 'node:path';
import * as vscode from 'vscode';

export interface PlanInput {
  readonly text: string;
  /** Where it came from, for messages ("plan.md", "the selection in plan.md", "the clipboard"). */
  readonly source: string;
  /** The file it came from, when it came from one (picks the repository to run in). */
  readonly uri?: vscode.Uri;
}

const isMarkdown = (document: vscode.TextDocument) =>
  document.languageId === 'markdown' || /\.(md|markdown|mdx)$/i.test(document.fileName);

async function readPlanFile(uri: vscode.Uri): Promise<PlanInput> {
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  const text = open ? open.getText() : new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
  return { text, source: path.basename(uri.path), uri };
}

/** The plan from the active markdown editor: its selection when there is one, else the whole file. */
export function planFromActiveEditor(): PlanInput | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor || !isMarkdown(editor.document)) return undefined;
  const name = path.basename(editor.document.uri.path);
  const selected = editor.selections
    .filter((s) => !s.isEmpty)
    .map((s) => editor.document.getText(s))
    .join('\n');
  if (selected.trim() !== '') return { text: selected, source: `the selection in ${name}`, uri: editor.document.uri };
  return { text: editor.document.getText(), source: name, uri: editor.document.uri };
}

/**
 * Finds the plan to execute: an explicit file or text, else the active markdown editor
 * (selection first), else asks: the clipboard (when it holds text) or a markdown file.
 * Returns undefined when the user cancelled; `interactive: false` never asks.
 */
export async function resolvePlanInput(
  explicit: { uri?: vscode.Uri; text?: string } | undefined,
  interactive: boolean,
  /** The picker's words (Execute PRD asks for a PRD, not a plan). */
  labels: { readonly title: string; readonly clipboard: string; readonly openLabel: string } = {
    title: vscode.l10n.t('Forge: Execute Plan — which plan?'),
    clipboard: vscode.l10n.t('$(clippy) Plan from the clipboard'),
    openLabel: vscode.l10n.t('Execute Plan'),
  },
): Promise<PlanInput | undefined> {
  if (explicit?.text !== undefined) return { text: explicit.text, source: 'the given plan text' };
  if (explicit?.uri) return readPlanFile(explicit.uri);
  const fromEditor = planFromActiveEditor();
  if (fromEditor) return fromEditor;
  if (!interactive) return undefined;

  const clipboard = (await vscode.env.clipboard.readText()).trim();
  type Choice = vscode.QuickPickItem & { pick: 'clipboard' | 'file' };
  const choices: Choice[] = [];
  if (clipboard !== '') {
    const lines = clipboard.split(/\r?\n/);
    choices.push({ pick: 'clipboard', label: labels.clipboard, description: lines.length === 1 ? vscode.l10n.t('1 line') : vscode.l10n.t('{0} lines', lines.length), detail: lines[0]?.slice(0, 120) });
  }
  choices.push({ pick: 'file', label: vscode.l10n.t('$(markdown) Pick a markdown file…') });
  const choice = choices.length === 1 ? choices[0] : await vscode.window.showQuickPick(choices, { title: labels.title, placeHolder: vscode.l10n.t('No markdown editor is active') });
  if (!choice) return undefined;
  if (choice.pick === 'clipboard') return { text: clipboard, source: 'the clipboard' };
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    openLabel: labels.openLabel,
    filters: { Markdown: ['md', 'markdown', 'mdx'] },
    ...(vscode.workspace.workspaceFolders?.[0] ? { defaultUri: vscode.workspace.workspaceFolders[0].uri } : {}),
  });
  return picked?.[0] ? readPlanFile(picked[0]) : undefined;
}
