/**
 * Plan validation before launch: what is wrong or doubtful in a plan file, with the line
 * it is on, for `forge check`, `forge run` and the editor's diagnostics. Pure: the only
 * knowledge of the disk comes through `pathExists`, which the caller answers.
 *
 * Errors stop a start (a plan Forge cannot run as written: unreadable, more sections than
 * it runs, checks it cannot run); warnings are shown and do not stop anything.
 */
import { parseSectionChecks, parseVerificationChecks } from '../checks/parse';
import type { CheckSpec } from '../checks/types';
import { loopNameFromPlan } from '../workspace/loop-name';
import { MAX_SECTIONS, parsePlan, PlanError, SECTION_MARKER, type ParsedPlan } from './plan';

export type PlanProblemSeverity = 'error' | 'warning';

export type PlanProblemCode =
  | 'unreadable'
  | 'too-many-sections'
  | 'empty-section'
  | 'duplicate-section-title'
  | 'no-verification'
  | 'empty-verification'
  | 'no-runnable-check'
  | 'unrun-block'
  | 'loop-name-changed'
  | 'check-problem'
  | 'missing-file';

export interface PlanProblem {
  severity: PlanProblemSeverity;
  code: PlanProblemCode;
  message: string;
  /** 0-based line of the plan text the problem is about. */
  line: number;
}

export interface PlanValidationOptions {
  /** Names the plan in messages ("plan.md"). */
  source?: string;
  /**
   * Whether a path relative to the repository root exists now. Without it, file names in
   * checks are not looked up.
   */
  pathExists?: (relativePath: string) => boolean;
}

export interface PlanValidation {
  problems: PlanProblem[];
  /** The plan as Forge would run it; null when it cannot be read as one. */
  plan: ParsedPlan | null;
}

const IMMUTABLE_TITLE = /^(objective|goal|verification|acceptance criteria)[:.]?$/i;
const VERIFICATION_TITLE = /^(verification|acceptance criteria)[:.]?$/i;
/** Extensions that make a bare word in a command a file name worth looking up. */
const FILE_EXTENSIONS = /\.(c|cc|cjs|cpp|cs|css|go|h|html|java|js|json|jsx|kt|md|mjs|mts|cts|php|py|rb|rs|sh|sql|swift|toml|ts|tsx|txt|yaml|yml)$/i;

export function validatePlan(text: string, options: PlanValidationOptions = {}): PlanValidation {
  const source = options.source ?? 'the plan';
  let plan: ParsedPlan;
  try {
    plan = parsePlan(text, source);
  } catch (error) {
    if (error instanceof PlanError) return { problems: [{ severity: 'error', code: 'unreadable', message: error.message, line: 0 }], plan: null };
    throw error;
  }
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const headings = level2Headings(lines);
  const problems: PlanProblem[] = [];

  // Each parsed section (and each dropped one) belongs to the next heading line with its title.
  const sectionTitles = [...plan.sections.map((s) => s.title), ...plan.droppedSectionTitles];
  const sectionLines: number[] = [];
  let from = 0;
  for (const title of sectionTitles) {
    const found = headings.findIndex((h, i) => i >= from && h.title === title && !IMMUTABLE_TITLE.test(h.title));
    sectionLines.push(found >= 0 ? headings[found]!.line : 0);
    if (found >= 0) from = found + 1;
  }

  if (plan.droppedSectionTitles.length > 0) {
    const first = MAX_SECTIONS + 1;
    const last = sectionTitles.length;
    problems.push({
      severity: 'error',
      code: 'too-many-sections',
      message: `The plan has ${last} sections; Forge runs at most ${MAX_SECTIONS}. Section${last > first ? `s ${first}–${last}` : ` ${first}`} (${plan.droppedSectionTitles
        .map((t) => `"${t}"`)
        .join(', ')}) would not run: merge sections or move them to a follow-up plan.`,
      line: sectionLines[MAX_SECTIONS] ?? 0,
    });
  }

  plan.sections.forEach((section, i) => {
    if (section.body.trim() === '') {
      problems.push({
        severity: 'warning',
        code: 'empty-section',
        message: `Section ${i + 1} "${section.title}" has no body: the coder gets only its title. Say what to change and how to tell it is done.`,
        line: sectionLines[i] ?? 0,
      });
    }
  });

  const seen = new Map<string, number>();
  sectionTitles.forEach((title, i) => {
    const key = title.trim().toLowerCase();
    const earlier = seen.get(key);
    if (earlier === undefined) {
      seen.set(key, i);
      return;
    }
    problems.push({
      severity: 'warning',
      code: 'duplicate-section-title',
      message: `Section ${i + 1} has the same title as section ${earlier + 1} ("${title}"): findings, checkpoints and the Loop Explorer name sections by title. Give each its own.`,
      line: sectionLines[i] ?? 0,
    });
  });

  const verificationHeading = headings.find((h) => VERIFICATION_TITLE.test(h.title));
  if (plan.verification === null) {
    problems.push({
      severity: 'warning',
      code: 'no-verification',
      message:
        'The plan has no "## Verification" part, so Forge has no check of its own to run: the loop completes when the auditor finds nothing. Add one with the commands that prove the work, e.g. "- `npm test`".',
      line: 0,
    });
  } else if (plan.verification.trim() === '') {
    problems.push({
      severity: 'warning',
      code: 'empty-verification',
      message: 'The "## Verification" part is empty: Forge has no check of its own to run. List the commands or files that prove the work, e.g. "- `npm test`".',
      line: verificationHeading?.line ?? 0,
    });
  }

  if (plan.loopName !== null) {
    // The name Forge derives (loop-name.ts) is the truth; a taken name still gets "-2" at start.
    const derived = loopNameFromPlan(text);
    const nameLine = Math.max(lines.findIndex((l) => /^\s*Loop Name:/i.test(l)), 0);
    if (!/[\p{L}\p{N}]/u.test(plan.loopName)) {
      problems.push({
        severity: 'warning',
        code: 'loop-name-changed',
        message: `"Loop Name: ${plan.loopName}" has nothing Forge can use in a branch name; the loop will be named "${derived}" instead. Use letters, digits and dashes.`,
        line: nameLine,
      });
    } else if (derived !== plan.loopName) {
      problems.push({
        severity: 'warning',
        code: 'loop-name-changed',
        message: `"Loop Name: ${plan.loopName}" will be used as "${derived}" (branch forge/${derived}): loop names are lower-case letters, digits and dashes. Write "Loop Name: ${derived}" to keep it as written.`,
        line: nameLine,
      });
    }
  }

  // Checks: problems Forge would refuse at start, and files they name that are not there.
  const verificationChecks = parseVerificationChecks(plan.verification);
  const partLine = verificationHeading?.line ?? 0;
  for (const p of verificationChecks.problems) {
    problems.push({ severity: 'error', code: 'check-problem', message: `${p.origin}: ${p.message}`, line: lineInPart(p.origin, partLine, lines) });
  }
  const sectionChecks = plan.sections.map((section, i) => ({ line: sectionLines[i] ?? 0, parsed: parseSectionChecks(section) }));
  for (const { line, parsed } of sectionChecks) {
    for (const p of parsed.problems) problems.push({ severity: 'error', code: 'check-problem', message: `${p.origin}: ${p.message}`, line: lineInPart(p.origin, line, lines) });
  }

  // A Verification part that runs nothing (prose only, a fence without a language) is said so:
  // the loop would complete on the auditor's word alone (issue 28).
  for (const note of verificationChecks.notes.filter((n) => /has no language/.test(n))) {
    problems.push({ severity: 'warning', code: 'unrun-block', message: note, line: lineInPart(note, partLine, lines) });
  }
  const runnable = verificationChecks.checks.length + sectionChecks.reduce((n, { parsed }) => n + parsed.checks.length, 0);
  const unrunnable = verificationChecks.problems.length + sectionChecks.reduce((n, { parsed }) => n + parsed.problems.length, 0);
  if (plan.verification !== null && plan.verification.trim() !== '' && runnable === 0 && unrunnable === 0) {
    problems.push({
      severity: 'warning',
      code: 'no-runnable-check',
      message:
        'The "## Verification" part names no check Forge can run (prose is for the agents), so the loop completes when the auditor finds nothing. Write each check as a list item: "- `npm test`", "- exists: FILE", "- contains: FILE: TEXT", or a ```sh block.',
      line: partLine,
    });
  }

  if (options.pathExists) {
    const mentioned = [plan.objective ?? '', ...plan.sections.map((s) => s.body)].join('\n');
    const reported = new Set<string>();
    const look = (checks: CheckSpec[], partLineOf: number) => {
      for (const check of checks) {
        for (const file of filesNamedBy(check)) {
          if (reported.has(file) || options.pathExists!(file)) continue;
          const base = file.split('/').pop()!;
          if (mentioned.includes(file) || (base.length > 3 && mentioned.includes(base))) continue;
          reported.add(file);
          problems.push({
            severity: 'warning',
            code: 'missing-file',
            message: `${check.label} names "${file}", which is not in the repository and no section mentions creating it: the check will fail unless the agent happens to create it. Fix the path, or say in a section that the file is to be created.`,
            line: lineInPart(check.origin, partLineOf, lines),
          });
        }
      }
    };
    look(verificationChecks.checks, partLine);
    sectionChecks.forEach(({ line, parsed }) => look(parsed.checks, line));
  }

  problems.sort((a, b) => a.line - b.line || (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1));
  return { problems, plan };
}

/** `forge check` and `forge run` output: `plan.md:12: warning: …`, 1-based lines as editors show them. */
export function formatPlanProblem(file: string, problem: PlanProblem): string {
  return `${file}:${problem.line + 1}: ${problem.severity}: ${problem.message}`;
}

export function planProblemCounts(problems: readonly PlanProblem[]): { errors: number; warnings: number } {
  const errors = problems.filter((p) => p.severity === 'error').length;
  return { errors, warnings: problems.length - errors };
}

/**
 * A check's origin says "line N of …", counted in its part's text, which starts at the first
 * non-blank line after the heading (parsePlan trims the blank lines before it).
 */
function lineInPart(origin: string, headingLine: number, lines: readonly string[]): number {
  const m = /\bline (\d+)\b/.exec(origin);
  if (!m) return headingLine;
  let first = headingLine + 1;
  while (first < lines.length && lines[first]!.trim() === '') first++;
  return Math.min(first + Number(m[1]) - 1, lines.length - 1);
}

function level2Headings(lines: string[]): { line: number; title: string }[] {
  const result: { line: number; title: string }[] = [];
  let inFence = false;
  lines.forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    if (inFence || line.trim() === SECTION_MARKER) return;
    const m = /^##\s+(.+?)\s*#*\s*$/.exec(line);
    if (m) result.push({ line: i, title: m[1]! });
  });
  return result;
}

/**
 * Repository-relative files a check names: the path of a file assertion, and in a command the
 * words that look like relative file paths (with a folder or a known extension). Globs,
 * variables, options, URLs and absolute paths are not looked up.
 */
export function filesNamedBy(check: CheckSpec): string[] {
  if (check.kind !== 'command') return check.kind === 'exists' ? [] : [check.path];
  const words = check.command.split(/[\s;|&()<>]+/).map((w) => w.replace(/^['"]|['"]$/g, '').replace(/^\.\//, ''));
  return [
    ...new Set(
      words.filter(
        (w) =>
          w !== '' &&
          !w.startsWith('-') &&
          !w.startsWith('/') &&
          !w.startsWith('~') &&
          !/[$*?{}[\]=`'"\\]/.test(w) &&
          !w.includes('://') &&
          !w.startsWith('..') &&
          (FILE_EXTENSIONS.test(w) || (w.includes('/') && !w.endsWith('/') && /\.[a-z0-9]+$/i.test(w))),
      ),
    ),
  ];
}

/**
 * Whether the editor should treat a markdown file as a plan (diagnostics, the Execute Plan
 * lens): its name says plan, or it has what only plans have (a `Loop Name:` line, Forge's
 * section marker, an Objective or Verification part). A README is not a plan unless it says so.
 */
export function looksLikePlanFile(filePath: string, text: string): boolean {
  const segments = filePath.split(/[\\/]/);
  const base = (segments.pop() ?? '').toLowerCase();
  if (!/\.(md|markdown)$/.test(base)) return false;
  if (/^\s*(?:[>*_-]\s*)*loop\s+name\s*[*_]*\s*:/im.test(text) || text.includes(SECTION_MARKER)) return true;
  if (/^(readme|changelog|contributing|license|code_of_conduct|security)\b/.test(base)) return false;
  if (/(^|[^a-z])plans?([^a-z]|$)/.test(base) || segments.some((d) => /^(\.?plans?|\.forge)$/i.test(d))) return true;
  return /^##\s+(objective|verification|acceptance criteria)\s*[:.]?\s*$/im.test(text);
}
