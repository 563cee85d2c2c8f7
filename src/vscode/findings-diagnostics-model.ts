/**
 * Open findings as diagnostics, as plain data: a pure function so it can be tested and
 * benchmarked without VS Code. `findings-diagnostics.ts` publishes the result.
 */
import * as path from 'node:path';
import type { ReviewFindingRow } from '../core/storage/repositories/review-findings-repository';
import { isLoopLevelFindingPath } from './loop-tree-model';
import { inertText } from '../core/text/inert-text';

export type DiagnosticFinding = Pick<
  ReviewFindingRow,
  'id' | 'projectId' | 'loopName' | 'file' | 'line' | 'severity' | 'description' | 'scenario' | 'status' | 'recurrenceCount' | 'sectionIndex'
>;

export interface DiagnosticSpec {
  readonly findingId: number;
  readonly projectId: string;
  readonly loopName: string;
  /** 0-based line (a finding's line is 1-based; 0 means the whole file and maps to the first line). */
  readonly line: number;
  readonly severity: 'error' | 'warning';
  readonly message: string;
  /** Shown as related information, which opens the finding in full (`findingDocumentPath`). */
  readonly scenario: string | null;
  /** `finding <id>`: lets a code action find the finding back. */
  readonly code: string;
}

export interface LoopDiagnostics {
  /** Absolute file path -> diagnostics on it. */
  readonly byFile: Map<string, DiagnosticSpec[]>;
  /** Findings that are not about a file in the worktree (GOAL, PLAN, or no file: a check whose output names none); shown on the loop's item. */
  readonly pseudo: DiagnosticFinding[];
}

export const FINDING_CODE_PREFIX = 'finding ';

export function findingIdFromCode(code: string | number | { value: string | number } | undefined): number | undefined {
  const value = typeof code === 'object' && code !== null ? code.value : code;
  if (typeof value !== 'string' || !value.startsWith(FINDING_CODE_PREFIX)) return undefined;
  const id = Number(value.slice(FINDING_CODE_PREFIX.length));
  return Number.isInteger(id) && id > 0 ? id : undefined;
}

export function diagnosticMessage(f: Pick<DiagnosticFinding, 'description' | 'loopName' | 'recurrenceCount' | 'sectionIndex'>): string {
  const where = f.sectionIndex === null ? '' : `, section ${f.sectionIndex + 1}`;
  const recurring = f.recurrenceCount >= 3 ? ` (recurring: ${f.recurrenceCount} times)` : '';
  return inertText(`${f.description} [loop ${f.loopName}${where}]${recurring}`);
}

/** Diagnostics of one loop's open findings, on files under its worktree. */
export function buildLoopDiagnostics(worktreeDir: string, findings: readonly DiagnosticFinding[]): LoopDiagnostics {
  const byFile = new Map<string, DiagnosticSpec[]>();
  const pseudo: DiagnosticFinding[] = [];
  const inside = worktreeDir.endsWith(path.sep) ? worktreeDir : worktreeDir + path.sep;
  // Many findings share a file: resolve each path once. null: outside the worktree.
  const lists = new Map<string, DiagnosticSpec[] | null>();
  for (const f of findings) {
    if (f.status !== 'open') continue;
    let list = lists.get(f.file);
    if (list === undefined) {
      if (isLoopLevelFindingPath(f.file)) {
        list = null;
      } else {
        const file = path.join(worktreeDir, f.file);
        // The tool backend refuses paths outside the worktree; a row that still points outside is not shown as if it were inside.
        list = file.startsWith(inside) ? (byFile.get(file) ?? []) : null;
        if (list) byFile.set(file, list);
      }
      lists.set(f.file, list);
    }
    if (list === null) {
      if (isLoopLevelFindingPath(f.file)) pseudo.push(f);
      continue;
    }
    list.push({
      findingId: f.id,
      projectId: f.projectId,
      loopName: f.loopName,
      line: f.line > 0 ? f.line - 1 : 0,
      severity: f.severity === 'bug' ? 'error' : 'warning',
      message: diagnosticMessage(f),
      scenario: f.scenario && f.scenario.trim() !== '' ? inertText(f.scenario) : null,
      code: FINDING_CODE_PREFIX + f.id,
    });
  }
  return { byFile, pseudo };
}

/**
 * Path of the read-only document that shows one finding in full (scheme `forge-finding`):
 * what a diagnostic's related information opens. Short on purpose: VS Code serialises it with
 * every diagnostic that carries a scenario.
 */
export function findingDocumentPath(projectId: string, findingId: number): string {
  return `/${projectId}/finding-${findingId}.md`;
}

export function parseFindingDocumentPath(documentPath: string): { projectId: string; findingId: number } | undefined {
  const match = /^\/([^/]+)\/finding-(\d+)\.md$/.exec(documentPath);
  if (!match) return undefined;
  const findingId = Number(match[2]);
  return Number.isSafeInteger(findingId) && findingId > 0 ? { projectId: match[1]!, findingId } : undefined;
}

/** The finding in full, as markdown: what the auditor reported and where it stands now (inert: model text). */
export function findingDocumentText(
  f: Pick<ReviewFindingRow, 'id' | 'loopName' | 'file' | 'line' | 'severity' | 'description' | 'scenario' | 'status' | 'recurrenceCount' | 'sectionIndex'>,
): string {
  const where = f.line > 0 ? `${f.file}:${f.line}` : f.file;
  const facts = [
    `- Loop: ${f.loopName}${f.sectionIndex === null ? '' : `, section ${f.sectionIndex + 1}`}`,
    `- Where: ${where}`,
    `- Status: ${f.status}`,
    ...(f.recurrenceCount > 1 ? [`- Reported ${f.recurrenceCount} times by the auditor`] : []),
  ];
  const scenario = f.scenario && f.scenario.trim() !== '' ? f.scenario : null;
  const lines = [
    `# Finding ${f.id}: ${f.severity}`,
    '',
    ...facts,
    '',
    '## Description',
    '',
    f.description,
    '',
    ...(scenario ? ['## Scenario', '', scenario, ''] : []),
  ];
  return inertText(lines.join('\n'));
}

/** What the finding document says when the finding is no longer in the database. */
export function missingFindingDocumentText(findingId: number): string {
  return `# Finding ${findingId}\n\nThis finding is no longer in Forge's database (its loop was deleted).\n`;
}
