import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import { findingDocumentUri } from './finding-document';
import { buildLoopDiagnostics, findingIdFromCode, type DiagnosticSpec, type LoopDiagnostics } from './findings-diagnostics-model';
import type { ForgeLog } from './log';
import { loopKey, type LoopsModel } from './loops-model';

export const DIAGNOSTIC_SOURCE = 'Forge';
const LINE_END = 10_000;
/**
 * Diagnostics per `DiagnosticCollection.set` call. VS Code forwards at most 1.1 × 1 000
 * diagnostics of one call to the workbench and silently drops the files after that (its
 * extension host's `_maxDiagnosticsTotal`), so one large batch would leave most findings out
 * of the Problems view, and stale ones in it. Below that, smaller calls are also cheaper: the
 * extension host serialises each call as one message, and large messages cost it more per
 * diagnostic (bench/ui-scale.mjs). A file holds at most 1 000 diagnostics there
 * (`_maxDiagnosticsPerFile`, plus one "N more" entry), so it always fits in one call.
 */
export const DIAGNOSTICS_PER_SET = 100;
const SHOWN_PER_FILE = 1001;

export interface FindingRef {
  readonly projectId: string;
  readonly loopName: string;
  readonly findingId: number;
}

// vscode.Range is immutable: the ranges of the first lines are made once and shared by every
// diagnostic on that line (thousands of findings sit on a few hundred distinct lines).
const SHARED_RANGE_LINES = 4096;
const sharedRanges: vscode.Range[] = [];

/** The whole line: the editor clamps the end to the line's length (a finding does not know it). */
function lineRange(line: number): vscode.Range {
  if (line >= SHARED_RANGE_LINES) return new vscode.Range(line, 0, line, LINE_END);
  return (sharedRanges[line] ??= new vscode.Range(line, 0, line, LINE_END));
}

const DOCUMENT_START = new vscode.Range(0, 0, 0, 0);

export function toDiagnostic(spec: DiagnosticSpec): vscode.Diagnostic {
  const range = lineRange(spec.line);
  const diagnostic = new vscode.Diagnostic(
    range,
    spec.message,
    spec.severity === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning,
  );
  diagnostic.source = DIAGNOSTIC_SOURCE;
  diagnostic.code = spec.code;
  if (spec.scenario) {
    // The scenario's entry opens the finding in full, not the line the diagnostic already marks.
    const finding = new vscode.Location(findingDocumentUri(spec.projectId, spec.findingId), DOCUMENT_START);
    diagnostic.relatedInformation = [new vscode.DiagnosticRelatedInformation(finding, `Scenario: ${spec.scenario}`)];
  }
  return diagnostic;
}

/**
 * Open findings of every loop as diagnostics on `<worktreeDir>/<file>` (bug → Error,
 * warning → Warning). Each loop's diagnostics are its own scope: re-published as a whole
 * when its findings change, and removed when none is left open or the loop goes away.
 */
export class FindingsDiagnostics implements vscode.Disposable {
  private readonly collection: vscode.DiagnosticCollection;
  /** loop key -> absolute path -> URI of the files it published diagnostics on. */
  private readonly published = new Map<string, Map<string, vscode.Uri>>();
  /**
   * file URI (string) -> the loop whose diagnostics are on it (each diagnostic's code names its
   * finding). Not the specs themselves: 20 000 of them kept alive slow every garbage collection.
   */
  private readonly owners = new Map<string, { readonly projectId: string; readonly loopName: string }>();
  /** absolute path -> its file URI, for the files diagnostics are published on (parsed once). */
  private readonly uris = new Map<string, vscode.Uri>();
  /** loop key -> what was last published for it (ids and update times of its open findings). */
  private readonly signatures = new Map<string, string>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly model: LoopsModel,
    private readonly engine: () => ForgeEngine | undefined,
    private readonly log: ForgeLog,
    collectionName = 'forge',
  ) {
    this.collection = vscode.languages.createDiagnosticCollection(collectionName);
    this.subscriptions.push(model.onDidChange(() => this.sync()));
  }

  /** Re-publishes every loop whose open findings changed, and clears the ones that have none left: one update of the collection. */
  sync(): void {
    const engine = this.engine();
    if (!engine) return;
    const seen = new Set<string>();
    const updates: [string, LoopDiagnostics][] = [];
    for (const summary of this.model.summaries()) {
      const { loop } = summary;
      const key = loopKey(loop);
      const open = summary.openFindings.bug + summary.openFindings.warning;
      if (!loop.worktreeDir || open === 0) continue;
      seen.add(key);
      const rows = engine.repos.reviewFindings.listOpen(loop.projectId, loop.name);
      // Most refreshes (usage, phase changes) leave the findings as they were: publish only on change.
      let signature = loop.worktreeDir;
      for (const r of rows) signature += `|${r.id}:${r.updatedAt}`;
      if (this.signatures.get(key) === signature) continue;
      this.signatures.set(key, signature);
      updates.push([key, buildLoopDiagnostics(loop.worktreeDir, rows)]);
    }
    for (const key of [...this.signatures.keys()]) if (!seen.has(key)) this.signatures.delete(key);
    this.update(updates, [...this.published.keys()].filter((key) => !seen.has(key)));
  }

  /**
   * Replaces the diagnostics of the loops in `publish` (each loop's scope as a whole) and
   * removes those of the loops in `clear`, in updates of the collection of up to
   * DIAGNOSTICS_PER_SET diagnostics each (removals count none; a file is never split).
   */
  update(publish: Iterable<readonly [string, LoopDiagnostics]>, clear: Iterable<string> = []): void {
    const entries: [vscode.Uri, vscode.Diagnostic[] | undefined][] = [];
    for (const [key, diagnostics] of publish) {
      const previous = this.published.get(key);
      const next = new Map<string, vscode.Uri>();
      for (const [file, specs] of diagnostics.byFile) {
        let uri = this.uris.get(file);
        if (!uri) this.uris.set(file, (uri = vscode.Uri.file(file)));
        next.set(file, uri);
        const list = new Array<vscode.Diagnostic>(specs.length);
        for (let i = 0; i < specs.length; i++) list[i] = toDiagnostic(specs[i]!);
        entries.push([uri, list]);
        const { projectId, loopName } = specs[0]!;
        this.owners.set(uri.toString(), { projectId, loopName });
      }
      if (previous) {
        for (const [file, uri] of previous) {
          if (next.has(file)) continue;
          // `undefined` in a batch removes what the collection had for that file.
          entries.push([uri, undefined]);
          this.forget(file, uri);
        }
      }
      if (next.size > 0) this.published.set(key, next);
      else this.published.delete(key);
    }
    for (const key of clear) {
      const previous = this.published.get(key);
      if (!previous) continue;
      for (const [file, uri] of previous) {
        entries.push([uri, undefined]);
        this.forget(file, uri);
      }
      this.published.delete(key);
      this.log.debug(`diagnostics of loop ${key} cleared`);
    }
    this.setInBatches(entries);
  }

  private setInBatches(entries: readonly [vscode.Uri, vscode.Diagnostic[] | undefined][]): void {
    let start = 0;
    let count = 0;
    for (let i = 0; i < entries.length; i++) {
      const n = Math.min(entries[i]![1]?.length ?? 0, SHOWN_PER_FILE);
      if (count + n > DIAGNOSTICS_PER_SET && i > start) {
        this.collection.set(entries.slice(start, i));
        start = i;
        count = 0;
      }
      count += n;
    }
    if (start === 0 && entries.length > 0) this.collection.set(entries);
    else if (start < entries.length) this.collection.set(entries.slice(start));
  }

  private forget(file: string, uri: vscode.Uri): void {
    this.uris.delete(file);
    this.owners.delete(uri.toString());
  }

  /** Which finding a Forge diagnostic stands for. */
  findingFor(uri: vscode.Uri, diagnostic: Pick<vscode.Diagnostic, 'code' | 'source'>): FindingRef | undefined {
    if (diagnostic.source !== DIAGNOSTIC_SOURCE) return undefined;
    const id = findingIdFromCode(diagnostic.code as string | number | { value: string | number } | undefined);
    if (id === undefined) return undefined;
    const owner = this.owners.get(uri.toString());
    return owner && { projectId: owner.projectId, loopName: owner.loopName, findingId: id };
  }

  /** Number of files with Forge diagnostics (for the API and tests). */
  fileCount(): number {
    let n = 0;
    for (const files of this.published.values()) n += files.size;
    return n;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.collection.dispose();
    this.published.clear();
    this.owners.clear();
    this.uris.clear();
  }
}

/** "Show in Dashboard" and "Dismiss Finding" on Forge's diagnostics. */
export class FindingCodeActions implements vscode.CodeActionProvider {
  static readonly metadata: vscode.CodeActionProviderMetadata = { providedCodeActionKinds: [vscode.CodeActionKind.QuickFix] };

  constructor(private readonly diagnostics: FindingsDiagnostics) {}

  provideCodeActions(document: vscode.TextDocument, _range: vscode.Range, context: vscode.CodeActionContext): vscode.CodeAction[] {
    const actions: vscode.CodeAction[] = [];
    for (const diagnostic of context.diagnostics) {
      const ref = this.diagnostics.findingFor(document.uri, diagnostic);
      if (!ref) continue;
      const show = new vscode.CodeAction(`Forge: Show finding ${ref.findingId} in Dashboard`, vscode.CodeActionKind.QuickFix);
      show.diagnostics = [diagnostic];
      show.command = { command: 'forge.showFindingInDashboard', title: vscode.l10n.t('Show in Dashboard'), arguments: [ref] };
      const dismiss = new vscode.CodeAction(`Forge: Dismiss finding ${ref.findingId}`, vscode.CodeActionKind.QuickFix);
      dismiss.diagnostics = [diagnostic];
      dismiss.command = { command: 'forge.dismissFinding', title: vscode.l10n.t('Dismiss Finding'), arguments: [ref] };
      actions.push(show, dismiss);
    }
    return actions;
  }
}
