/**
 * Plan decomposition: markdown in, sections out. Pure, deterministic, run once at loop
 * start; the runtime stores the result as section rows and never re-parses the plan.
 */

import { MAX_SECTIONS } from '../vocabulary/loop-vocabulary';
export { MAX_SECTIONS };
export const SECTION_MARKER = '<!-- forge-section -->';

export interface PlanSection {
  index: number;
  title: string;
  body: string;
}

export interface ParsedPlan {
  /** The plan's `# ` title, or its first words. */
  title: string;
  /** From a `Loop Name: <name>` line, verbatim (slugified later). */
  loopName: string | null;
  /** `## Objective` part: immutable, never a section. */
  objective: string | null;
  /** `## Verification` part: immutable, never a section. */
  verification: string | null;
  sections: PlanSection[];
  /** Sections past MAX_SECTIONS that were dropped. */
  droppedSectionTitles: string[];
  /** Human-readable notes for the user (e.g. dropped sections). */
  notices: string[];
  text: string;
}

export class PlanError extends Error {
  constructor(
    readonly code: 'empty' | 'binary' | 'too_large',
    message: string,
  ) {
    super(message);
    this.name = 'PlanError';
  }
}

const MAX_PLAN_BYTES = 1_000_000;
const IMMUTABLE_HEADINGS: Record<string, 'objective' | 'verification'> = {
  objective: 'objective',
  goal: 'objective',
  verification: 'verification',
  'acceptance criteria': 'verification',
};

/** Rejects what cannot be a plan, with the reason and the fix. `source` names it in messages. */
export function validatePlanText(text: string, source = 'the plan'): void {
  if (text.includes('\u0000')) {
    throw new PlanError('binary', `${source} looks like a binary file (it contains NUL bytes). Give Forge a markdown plan.`);
  }
  const replacement = (text.match(/\uFFFD/g) ?? []).length;
  if (replacement > 0 && replacement / Math.max(text.length, 1) > 0.01) {
    throw new PlanError('binary', `${source} is not valid UTF-8 text. Give Forge a markdown plan.`);
  }
  if (Buffer.byteLength(text, 'utf8') > MAX_PLAN_BYTES) {
    throw new PlanError('too_large', `${source} is larger than 1 MB. Split it into smaller plans.`);
  }
  if (text.replace(/<!--[\s\S]*?-->/g, '').trim().length === 0) {
    throw new PlanError('empty', `${source} is empty. Write what the agent should build, ideally with "## " sections.`);
  }
}

interface Heading {
  line: number;
  title: string;
  marked: boolean;
}

export function parsePlan(text: string, source?: string): ParsedPlan {
  validatePlanText(text, source);
  const lines = text.replace(/\r\n?/g, '\n').split('\n');

  let loopName: string | null = null;
  let title: string | null = null;
  const headings: Heading[] = [];
  let inFence = false;
  let pendingMarker = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    if (inFence) continue;
    const nameMatch = /^\s*Loop Name:\s*(.+?)\s*$/i.exec(line);
    if (nameMatch && loopName === null) loopName = nameMatch[1]!;
    if (line.trim() === SECTION_MARKER) {
      pendingMarker = true;
      continue;
    }
    const h1 = /^#\s+(.+?)\s*#*\s*$/.exec(line);
    if (h1 && title === null) title = h1[1]!;
    const h2 = /^##\s+(.+?)\s*#*\s*$/.exec(line);
    if (h2) headings.push({ line: i, title: h2[1]!, marked: pendingMarker });
    if (line.trim() !== '') pendingMarker = false;
  }

  // When the author marked sections explicitly, only marked headings split the plan.
  const anyMarked = headings.some((h) => h.marked);
  let objective: string | null = null;
  let verification: string | null = null;
  const candidates: Heading[] = [];
  const bodyOf = (h: Heading) => {
    const next = headings.find((o) => o.line > h.line);
    return trimBlock(lines.slice(h.line + 1, next ? next.line : lines.length).filter((l) => l.trim() !== SECTION_MARKER));
  };
  for (const h of headings) {
    const special = IMMUTABLE_HEADINGS[h.title.toLowerCase().replace(/[:.]$/, '')];
    if (special === 'objective' && objective === null) objective = bodyOf(h);
    else if (special === 'verification' && verification === null) verification = bodyOf(h);
    else if (!anyMarked || h.marked) candidates.push(h);
  }

  // A section's body runs to the next section heading (unmarked sub-parts stay inside it),
  // but never swallows the immutable objective/verification parts.
  const specialLines = new Set(
    headings.filter((h) => IMMUTABLE_HEADINGS[h.title.toLowerCase().replace(/[:.]$/, '')]).map((h) => h.line),
  );
  const all: PlanSection[] = candidates.map((h, idx) => {
    const nextCandidate = candidates[idx + 1]?.line ?? lines.length;
    const nextSpecial = [...specialLines].filter((l) => l > h.line && l < nextCandidate).sort((a, b) => a - b)[0];
    const end = nextSpecial ?? nextCandidate;
    return {
      index: idx,
      title: h.title,
      body: trimBlock(lines.slice(h.line + 1, end).filter((l) => l.trim() !== SECTION_MARKER)),
    };
  });

  const sections = all.slice(0, MAX_SECTIONS);
  const dropped = all.slice(MAX_SECTIONS).map((s) => s.title);
  const notices: string[] = [];
  if (dropped.length > 0) {
    notices.push(
      `The plan has ${all.length} sections; Forge runs at most ${MAX_SECTIONS}. The last ${dropped.length} were dropped: ${dropped
        .map((t) => `"${t}"`)
        .join(', ')}. Run them as a follow-up plan.`,
    );
  }

  return {
    title: title ?? firstWords(text),
    loopName,
    objective,
    verification,
    sections,
    droppedSectionTitles: dropped,
    notices,
    text,
  };
}

function trimBlock(lines: string[]): string {
  return lines.join('\n').replace(/^\s*\n/, '').trimEnd();
}

function firstWords(text: string): string {
  const words = text
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/[#*_`>\-[\]()]/g, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 8);
  return words.join(' ') || 'plan';
}
