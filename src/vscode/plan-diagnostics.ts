/**
 * Plans checked as the user types: the same validation as `forge check` and `forge run`
 * (src/core/loop/plan-validation.ts) as diagnostics on markdown files that look like plans,
 * and an *Execute Plan* lens at the top of each.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { looksLikePlanFile, validatePlan, type PlanProblem } from '../core/loop/plan-validation';
import type { ForgeLog } from './log';
import { inertText } from '../core/text/inert-text';

export const PLAN_DIAGNOSTIC_SOURCE = 'Forge plan';
const MARKDOWN: vscode.DocumentSelector = [
  { language: 'markdown', scheme: 'file' },
  { language: 'markdown', scheme: 'untitled' },
];
/** Typing pauses this long before a plan is validated again. */
const REVALIDATE_AFTER_MS = 250;

function isPlanDocument(document: vscode.TextDocument): boolean {
  if (document.languageId !== 'markdown' || (document.uri.scheme !== 'file' && document.uri.scheme !== 'untitled')) return false;
  return looksLikePlanFile(document.uri.scheme === 'file' ? document.uri.fsPath : `${document.uri.path}.md`, document.getText());
}

/** Where the plan's paths are relative to: the workspace folder holding it, else its own folder. */
function rootOf(document: vscode.TextDocument): string | undefined {
  if (document.uri.scheme !== 'file') return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  return vscode.workspace.getWorkspaceFolder(document.uri)?.uri.fsPath ?? path.dirname(document.uri.fsPath);
}

/** A plan text's problems (plan-validation.ts), with the files its checks name looked up under `root`. */
export function planProblemsIn(text: string, source: string, root: string | undefined): PlanProblem[] {
  return validatePlan(text, {
    source,
    ...(root ? { pathExists: (relative: string) => existsSync(path.join(root, relative)) } : {}),
  }).problems;
}

/** The plan's problems in a document, with files looked up in its workspace folder. */
export function planProblemsOf(document: vscode.TextDocument): PlanProblem[] {
  return planProblemsIn(document.getText(), path.basename(document.uri.fsPath || document.uri.path), rootOf(document));
}

export class PlanDiagnostics implements vscode.Disposable {
  private readonly collection = vscode.languages.createDiagnosticCollection('forge-plan');
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly log: ForgeLog) {
    // Deleted on disk (another program, a terminal, workspace.fs): only a watcher hears that.
    const watcher = vscode.workspace.createFileSystemWatcher('**/*.{md,markdown}', true, true, false);
    this.subscriptions.push(
      watcher,
      watcher.onDidDelete((uri) => this.clearUnder(uri)),
      vscode.workspace.onDidOpenTextDocument((d) => this.update(d)),
      vscode.workspace.onDidChangeTextDocument((e) => this.schedule(e.document)),
      vscode.workspace.onDidCloseTextDocument((d) => this.clear(d.uri)),
      // A plan deleted or renamed while open: its diagnostics go with it (the editor may stay open).
      vscode.workspace.onDidDeleteFiles((e) => e.files.forEach((uri) => this.clearUnder(uri))),
      vscode.workspace.onDidRenameFiles((e) => e.files.forEach(({ oldUri }) => this.clearUnder(oldUri))),
    );
    for (const document of vscode.workspace.textDocuments) this.update(document);
  }

  private schedule(document: vscode.TextDocument): void {
    const key = document.uri.toString();
    clearTimeout(this.pending.get(key));
    this.pending.set(
      key,
      setTimeout(() => {
        this.pending.delete(key);
        this.update(document);
      }, REVALIDATE_AFTER_MS),
    );
  }

  private update(document: vscode.TextDocument): void {
    if (document.isClosed || !isPlanDocument(document)) {
      this.clear(document.uri);
      return;
    }
    try {
      this.collection.set(document.uri, planProblemsOf(document).map((p) => toDiagnostic(document, p)));
    } catch (error) {
      this.log.warn(`could not check the plan ${document.uri.fsPath}: ${String(error)}`);
    }
  }

  private clear(uri: vscode.Uri): void {
    clearTimeout(this.pending.get(uri.toString()));
    this.pending.delete(uri.toString());
    this.collection.delete(uri);
  }

  private clearUnder(uri: vscode.Uri): void {
    const prefix = uri.toString();
    this.collection.forEach((u) => {
      if (u.toString() === prefix || u.toString().startsWith(`${prefix}/`)) this.clear(u);
    });
  }

  dispose(): void {
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
    this.subscriptions.forEach((s) => s.dispose());
    this.collection.dispose();
  }
}

function toDiagnostic(document: vscode.TextDocument, problem: PlanProblem): vscode.Diagnostic {
  const line = Math.min(problem.line, Math.max(document.lineCount - 1, 0));
  const range = document.lineAt(line).range;
  const diagnostic = new vscode.Diagnostic(
    range,
    // A message may quote the plan, which an architect model may have drafted.
    inertText(problem.message),
    problem.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
  );
  diagnostic.source = PLAN_DIAGNOSTIC_SOURCE;
  diagnostic.code = problem.code;
  return diagnostic;
}

/** *Execute Plan* (and, when there are problems, how many) at the top of a plan file. */
export class PlanCodeLenses implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.languages.registerCodeLensProvider(MARKDOWN, this);
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    if (!isPlanDocument(document)) return [];
    const top = new vscode.Range(0, 0, 0, 0);
    const lenses = [
      new vscode.CodeLens(top, {
        title: vscode.l10n.t('$(play) Execute Plan'),
        tooltip: vscode.l10n.t('Run this plan as a Forge loop (coding, auditing, verified by its checks)'),
        command: 'forge.executePlan',
        arguments: [document.uri],
      }),
    ];
    const problems = planProblemsOf(document);
    const errors = problems.filter((p) => p.severity === 'error').length;
    if (problems.length > 0) {
      lenses.push(
        new vscode.CodeLens(top, {
          title:
            errors > 0
              ? vscode.l10n.t('{0} error(s), {1} warning(s): Execute Plan refuses it until the errors are fixed', errors, problems.length - errors)
              : vscode.l10n.t('{0} warning(s)', problems.length),
          command: 'workbench.actions.view.problems',
        }),
      );
    }
    return lenses;
  }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
  }
}
