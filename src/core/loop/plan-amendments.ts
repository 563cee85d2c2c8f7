/**
 * What an auditor's `plan_adjust` changed, for people: each stored amendment (the sections
 * before and after, the rationale, when, during which section's audit) turned into per-section
 * changes with a line diff of the section text. Pure; the CLI, the Loop Explorer and the
 * dashboard show the result.
 */

export interface SectionSnapshot {
  index: number;
  title: string;
  body: string;
  status: string;
}

export type DiffLine = { op: ' ' | '-' | '+'; text: string };

export interface SectionChange {
  kind: 'revised' | 'added' | 'removed';
  /** 0-based index of the section (after the amendment for revised/added, before for removed). */
  index: number;
  title: string;
  /** The title before, when a revision renamed the section. */
  previousTitle?: string;
  /** Title and body, before → after, as lines. */
  diff: DiffLine[];
}

export interface AmendmentView {
  id: number;
  at: number;
  /** The section being audited when the auditor amended the plan (0-based), if any. */
  auditedSection: number | null;
  /** The loop's iteration at the time, when known. */
  iteration: number | null;
  rationale: string;
  changes: SectionChange[];
}

export interface StoredAmendment {
  id: number;
  at: number;
  sectionIndex: number | null;
  before: unknown;
  after: unknown;
  rationale: string;
}

/** Transitions in time order, to tell which iteration an amendment happened in. */
export interface IterationMark {
  at: number;
  iteration: number;
}

export function describeAmendment(amendment: StoredAmendment, iterations: readonly IterationMark[] = []): AmendmentView {
  const before = snapshots(amendment.before);
  const after = snapshots(amendment.after);
  const changes: SectionChange[] = [];
  const count = Math.max(before.length, after.length);
  for (let i = 0; i < count; i++) {
    const b = before.find((s) => s.index === i);
    const a = after.find((s) => s.index === i);
    if (b && a) {
      if (b.title === a.title && b.body === a.body) continue;
      changes.push({
        kind: 'revised',
        index: i,
        title: a.title,
        ...(b.title !== a.title ? { previousTitle: b.title } : {}),
        diff: lineDiff(sectionText(b), sectionText(a)),
      });
    } else if (a) {
      changes.push({ kind: 'added', index: i, title: a.title, diff: lineDiff('', sectionText(a)) });
    } else if (b) {
      changes.push({ kind: 'removed', index: i, title: b.title, diff: lineDiff(sectionText(b), '') });
    }
  }
  let iteration: number | null = null;
  for (const mark of iterations) if (mark.at <= amendment.at) iteration = mark.iteration;
  return { id: amendment.id, at: amendment.at, auditedSection: amendment.sectionIndex, iteration, rationale: amendment.rationale, changes };
}

/** Sections (0-based indexes) an amendment revised or added, to badge them as amended. */
export function amendedSectionIndexes(views: readonly AmendmentView[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const view of views) for (const c of view.changes) if (c.kind !== 'removed') counts.set(c.index, (counts.get(c.index) ?? 0) + 1);
  return counts;
}

/** One line per change: `section 3 "Tests" revised (+2 −1 lines)`. */
export function summariseChange(change: SectionChange): string {
  const added = change.diff.filter((d) => d.op === '+').length;
  const removed = change.diff.filter((d) => d.op === '-').length;
  const renamed = change.previousTitle !== undefined ? ` (was "${change.previousTitle}")` : '';
  return `section ${change.index + 1} "${change.title}"${renamed} ${change.kind} (+${added} −${removed} lines)`;
}

function sectionText(s: SectionSnapshot): string {
  return s.body === '' ? `## ${s.title}` : `## ${s.title}\n${s.body}`;
}

function snapshots(value: unknown): SectionSnapshot[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (s): s is SectionSnapshot =>
      typeof s === 'object' && s !== null && typeof (s as SectionSnapshot).index === 'number' && typeof (s as SectionSnapshot).title === 'string' && typeof (s as SectionSnapshot).body === 'string',
  );
}

/**
 * Line diff by longest common subsequence: common lines once, removed lines before the added
 * ones at each change. Section texts are short (a plan is at most 1 MB over ≤ 24 sections);
 * past 2 000 lines a side, the whole text is shown as replaced rather than diffed.
 */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before === '' ? [] : before.split('\n');
  const b = after === '' ? [] : after.split('\n');
  if (a.length > 2000 || b.length > 2000) return [...a.map((text) => ({ op: '-' as const, text })), ...b.map((text) => ({ op: '+' as const, text }))];
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) {
      out.push({ op: '-', text: a[i++]! });
    } else {
      out.push({ op: '+', text: b[j++]! });
    }
  }
  while (i < a.length) out.push({ op: '-', text: a[i++]! });
  while (j < b.length) out.push({ op: '+', text: b[j++]! });
  return out;
}
