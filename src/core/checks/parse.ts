/**
 * Check specs from what the user wrote: a plan's `## Verification` part, a section's `Verify:`
 * lines, a goal's options. Pure (no I/O); the loop parses once at start and stores the specs,
 * which are immutable like the objective.
 *
 * ## Syntax (docs/plans.md's "Checks" part says the same)
 *
 * In a plan's `## Verification` part:
 * - a fenced block marked `sh`, `bash` or `shell` is one check; its text is the script, run with
 *   `bash -c` in the worktree; it passes when it exits 0. Blocks in other languages are prose
 *   for the agents and never run (a block with no language is noted, in case it was meant to).
 * - a list line holding only a code span is one check: ``- `npm test` ``. A description may
 *   follow after a dash or colon: ``- `npm test` — the unit tests``.
 * - file assertions, as list lines (paths relative to the repository root, never leaving it):
 *   - `- exists: PATH` — the file or folder exists;
 *   - `- contains: PATH: TEXT` — the file contains TEXT (exact, case-sensitive);
 *   - `- matches: PATH: /REGEX/FLAGS` — the file's content matches (flags among `i m s u`).
 *   The path ends at the first `:`; write it as a code span (`` `a:b.txt` ``) when it holds one.
 *   TEXT and REGEX are trimmed; write them as a code span to keep spaces at their ends.
 * - `Verify: COMMAND` lines (or ``Verify: `COMMAND` ``, or `Verify: exists: PATH` …) count too.
 * In a section's body: only `Verify:` lines are checks (run at that section's audit); code in a
 * section is instructions for the agent.
 * For a goal: `--check "COMMAND"` (repeatable), `--exists PATH`, `--contains "PATH:TEXT"`,
 * `--matches "PATH:/REGEX/FLAGS"`.
 *
 * A check written twice in one place runs once (noted). An empty command, a bad expression or
 * a path that is absolute or leaves the worktree is a problem: the caller refuses the plan or
 * goal and shows the problems.
 */
import { createHash } from 'node:crypto';
import type { CheckScope, CheckSpec, CheckSpecProblem, ParsedChecks } from './types';
import { normaliseWorktreePath } from './worktree-path';

/** Fence languages whose blocks are run as checks. */
export const RUNNABLE_FENCE_LANGUAGES: readonly string[] = ['sh', 'bash', 'shell'];
/** Regular-expression flags a `matches` assertion may use (`g` and `y` carry state between tests: refused). */
export const ALLOWED_REGEX_FLAGS = 'imsu';

type Draft =
  | { kind: 'command'; command: string; origin: string }
  | { kind: 'exists'; path: string; origin: string }
  | { kind: 'contains'; path: string; text: string; origin: string }
  | { kind: 'matches'; path: string; pattern: string; flags: string; origin: string };

interface Collected {
  drafts: Draft[];
  problems: CheckSpecProblem[];
  notes: string[];
}

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})\s*([^\s`{]*)/;
const LIST_ITEM = /^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?(.*)$/;
const VERIFY_LINE = /^\s*(?:(?:[-*+]|\d{1,9}[.)])\s+)?verify\s*:(.*)$/i;
const FILE_ASSERTION = /^(exists|contains|matches)\s*:(.*)$/i;
/** What may follow a check's code span on its list line: a description after a dash, colon or parenthesis. */
const DESCRIPTION_AFTER = /^(?:—|–|--?|:|\()/;

/** Checks of a plan's `## Verification` part (the text `parsePlan` gives as `verification`). */
export function parseVerificationChecks(verification: string | null): ParsedChecks {
  const collected: Collected = { drafts: [], problems: [], notes: [] };
  if (verification !== null) scanText(verification, 'the Verification part', true, collected);
  return finalise(collected, { kind: 'plan' });
}

/** A section's `Verify:` lines; `index` is the section's 0-based index. */
export function parseSectionChecks(section: { index: number; body: string }): ParsedChecks {
  const collected: Collected = { drafts: [], problems: [], notes: [] };
  scanText(section.body, `section ${section.index + 1}`, false, collected);
  return finalise(collected, { kind: 'section', index: section.index });
}

export interface GoalCheckOptions {
  /** `--check` values, in order. */
  check?: readonly string[];
  /** `--exists` values. */
  exists?: readonly string[];
  /** `--contains` values, `PATH:TEXT`. */
  contains?: readonly string[];
  /** `--matches` values, `PATH:/REGEX/FLAGS`. */
  matches?: readonly string[];
}

/** A goal's contract from its options. Commands first, then file assertions, each in the order given. */
export function parseGoalCheckOptions(options: GoalCheckOptions): ParsedChecks {
  const collected: Collected = { drafts: [], problems: [], notes: [] };
  (options.check ?? []).forEach((command, i) => {
    const origin = `--check option ${i + 1}`;
    addCommand(command, origin, collected, 'give --check the command to run, e.g. --check "npm test"');
  });
  for (const [keyword, values] of [
    ['exists', options.exists],
    ['contains', options.contains],
    ['matches', options.matches],
  ] as const) {
    (values ?? []).forEach((value) => addFileAssertion(keyword, value, `--${keyword} "${value}"`, collected));
  }
  return finalise(collected, { kind: 'goal' });
}

/** One message listing every problem (what is wrong, how to fix it), or null when there is none. */
export function describeCheckProblems(parsed: ParsedChecks, what: string): string | null {
  if (parsed.problems.length === 0) return null;
  const lines = parsed.problems.map((p) => `- ${p.origin}: ${p.message}`);
  return `${what} has ${parsed.problems.length === 1 ? 'a check' : `${parsed.problems.length} checks`} Forge cannot run:\n${lines.join('\n')}`;
}

function scanText(text: string, where: string, isVerificationPart: boolean, collected: Collected): void {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  let fence: { marker: string; language: string; line: number; body: string[] } | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const lineNo = i + 1;
    if (fence) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (close && close[1]![0] === fence.marker[0] && close[1]!.length >= fence.marker.length) {
        if (isVerificationPart && RUNNABLE_FENCE_LANGUAGES.includes(fence.language)) {
          addCommand(
            fence.body.join('\n'),
            `the \`\`\`${fence.language} block at line ${fence.line} of ${where}`,
            collected,
            'write the command to run in it, or remove the block',
          );
        }
        fence = null;
      } else {
        fence.body.push(line);
      }
      continue;
    }
    const open = FENCE_OPEN.exec(line);
    if (open) {
      const language = open[2]!.toLowerCase();
      fence = { marker: open[1]!, language, line: lineNo, body: [] };
      if (isVerificationPart && language === '') {
        collected.notes.push(
          `The fenced block at line ${lineNo} of ${where} has no language, so Forge does not run it; mark it \`\`\`sh to make it a check.`,
        );
      }
      continue;
    }
    const origin = `line ${lineNo} of ${where}`;
    const verify = VERIFY_LINE.exec(line);
    if (verify) {
      addVerifyValue(verify[1]!, origin, collected);
      continue;
    }
    if (!isVerificationPart) continue;
    const item = LIST_ITEM.exec(line);
    if (!item) continue;
    const rest = item[1]!.trim();
    const file = FILE_ASSERTION.exec(rest);
    if (file) {
      addFileAssertion(file[1]!.toLowerCase() as 'exists' | 'contains' | 'matches', file[2]!, origin, collected);
      continue;
    }
    if (!rest.startsWith('`')) continue;
    addCodeSpanCommand(rest, origin, collected);
  }
  if (fence && isVerificationPart && RUNNABLE_FENCE_LANGUAGES.includes(fence.language)) {
    collected.problems.push({
      origin: `the \`\`\`${fence.language} block at line ${fence.line} of ${where}`,
      message: `the block is never closed: end it with a line holding only ${fence.marker}`,
    });
  }
}

/** The value of a `Verify:` line: a code span (a command), a file assertion, or a plain command. */
function addVerifyValue(value: string, origin: string, collected: Collected): void {
  const text = value.trim();
  const file = FILE_ASSERTION.exec(text);
  if (file) {
    addFileAssertion(file[1]!.toLowerCase() as 'exists' | 'contains' | 'matches', file[2]!, origin, collected);
  } else if (text.startsWith('`')) {
    addCodeSpanCommand(text, origin, collected);
  } else {
    addCommand(text, origin, collected, 'write the command after "Verify:", e.g. Verify: npm test');
  }
}

/** A line starting with a code span: the span is the command when nothing but a description follows it. */
function addCodeSpanCommand(text: string, origin: string, collected: Collected): void {
  if (/^(``)\s*$/.test(text)) {
    collected.problems.push({ origin, message: 'the command is empty: write the command to run between the backticks, e.g. `npm test`' });
    return;
  }
  const span = readCodeSpan(text);
  if (!span) {
    collected.problems.push({ origin, message: 'the code span is never closed: end the command with a backtick' });
    return;
  }
  const after = span.after.trim();
  if (after !== '' && !DESCRIPTION_AFTER.test(after)) {
    collected.notes.push(
      `${capitalise(origin)}: \`${span.content}\` is followed by text, so Forge does not run it as a check; to run it, put the command alone on its line (a description may follow after " — ").`,
    );
    return;
  }
  addCommand(span.content, origin, collected, 'write the command to run between the backticks, e.g. `npm test`');
}

function addCommand(command: string, origin: string, collected: Collected, fix: string): void {
  const script = command.replace(/\r\n?/g, '\n');
  const meaningful = script.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('#'));
  if (!meaningful) {
    collected.problems.push({ origin, message: `the command is empty: ${fix}` });
    return;
  }
  if (script.includes('\0')) {
    collected.problems.push({ origin, message: 'the command contains a NUL character, which a shell cannot run: remove it' });
    return;
  }
  collected.drafts.push({ kind: 'command', command: trimScript(script), origin });
}

function addFileAssertion(keyword: 'exists' | 'contains' | 'matches', value: string, origin: string, collected: Collected): void {
  const fail = (message: string) => collected.problems.push({ origin, message });
  const split = splitPathAndRest(value);
  if ('error' in split) return void fail(split.error);
  if (keyword === 'exists') {
    if (split.rest !== null && split.rest.trim() !== '') {
      return void fail(`"exists" takes only a path, but "${value.trim()}" has more after a ":"; write the path as a code span if it holds a ":"`);
    }
    const path = normaliseWorktreePath(split.path);
    if ('error' in path) return void fail(path.error);
    collected.drafts.push({ kind: 'exists', path: path.path, origin });
    return;
  }
  const example = keyword === 'contains' ? 'contains: README.md: ## Usage' : 'matches: README.md: /^## Usage$/m';
  if (split.rest === null) return void fail(`"${keyword}" needs a path and ${keyword === 'contains' ? 'a text' : 'a /regex/'} separated by ":", e.g. ${example}`);
  const path = normaliseWorktreePath(split.path);
  if ('error' in path) return void fail(path.error);
  const operand = unwrapCodeSpan(split.rest.trim());
  if (keyword === 'contains') {
    if (operand === '') return void fail(`the text to look for is empty: write it after the path, e.g. ${example}`);
    collected.drafts.push({ kind: 'contains', path: path.path, text: operand, origin });
    return;
  }
  const regex = /^\/([\s\S]+)\/([A-Za-z]*)$/.exec(operand);
  if (!regex) return void fail(`"${operand}" is not a regular expression written /REGEX/FLAGS, e.g. ${example}`);
  const [, pattern, flags] = regex as unknown as [string, string, string];
  const refused = [...flags].filter((f) => !ALLOWED_REGEX_FLAGS.includes(f));
  if (refused.length > 0 || new Set(flags).size !== flags.length) {
    return void fail(`the flags "${flags}" of /${pattern}/${flags} are not allowed: use each of ${[...ALLOWED_REGEX_FLAGS].join(', ')} at most once`);
  }
  try {
    new RegExp(pattern, flags);
  } catch (error) {
    return void fail(`/${pattern}/${flags} is not a valid regular expression (${(error as Error).message.replace(/^Invalid regular expression: /, '')}): fix the expression`);
  }
  collected.drafts.push({ kind: 'matches', path: path.path, pattern, flags, origin });
}

/** `PATH: REST` (the path ends at the first ':', or is a code span); rest is null without a ':'. */
function splitPathAndRest(value: string): { path: string; rest: string | null } | { error: string } {
  const text = value.trim();
  if (text.startsWith('`')) {
    const span = readCodeSpan(text);
    if (!span) return { error: 'the path\'s code span is never closed: end it with a backtick' };
    const after = span.after.trim();
    if (after === '') return { path: span.content, rest: null };
    if (!after.startsWith(':')) return { error: `after the path \`${span.content}\` comes "${after}"; separate the path from what follows with ":"` };
    return { path: span.content, rest: after.slice(1) };
  }
  const colon = text.indexOf(':');
  if (colon < 0) return { path: text, rest: null };
  return { path: text.slice(0, colon), rest: text.slice(colon + 1) };
}

/** A CommonMark code span at the start of `text`: its content and what follows; null when unclosed. */
export function readCodeSpan(text: string): { content: string; after: string } | null {
  const opening = /^`+/.exec(text)?.[0];
  if (!opening) return null;
  const n = opening.length;
  for (let i = n; i < text.length; i++) {
    if (text[i] !== '`') continue;
    let j = i;
    while (j < text.length && text[j] === '`') j++;
    if (j - i === n) {
      let content = text.slice(n, i).replace(/\n/g, ' ');
      if (content.length >= 2 && content.startsWith(' ') && content.endsWith(' ') && content.trim() !== '') content = content.slice(1, -1);
      return { content, after: text.slice(j) };
    }
    i = j - 1;
  }
  return null;
}

/** The content of `text` when it is exactly one code span; `text` otherwise. */
function unwrapCodeSpan(text: string): string {
  if (!text.startsWith('`')) return text;
  const span = readCodeSpan(text);
  return span && span.after.trim() === '' ? span.content : text;
}

function finalise(collected: Collected, scope: CheckScope): ParsedChecks {
  const checks: CheckSpec[] = [];
  const notes = [...collected.notes];
  const byKey = new Map<string, CheckSpec>();
  for (const draft of collected.drafts) {
    const key = checkKey(draft);
    const kept = byKey.get(key);
    if (kept) {
      notes.push(`${capitalise(draft.origin)} repeats ${kept.label} (${kept.origin}); Forge runs it once.`);
      continue;
    }
    const number = checks.length + 1;
    const prefix = scope.kind === 'section' ? `section ${scope.index + 1} check ${number}` : `check ${number}`;
    const id = scope.kind === 'section' ? `section-${scope.index + 1}-${number}` : `${scope.kind}-${number}`;
    const spec = { ...draft, id, label: `${prefix}: ${describeDraft(draft)}`, scope, number, key } as CheckSpec;
    checks.push(spec);
    byKey.set(key, spec);
  }
  return { checks, problems: collected.problems, notes };
}

/** Identity of what a check asserts; whitespace at the ends of a script's lines does not count. */
function checkKey(draft: Draft): string {
  const body =
    draft.kind === 'command'
      ? draft.command
          .split('\n')
          .map((l) => l.trim())
          .join('\n')
      : draft.kind === 'exists'
        ? draft.path
        : draft.kind === 'contains'
          ? `${draft.path}\0${draft.text}`
          : `${draft.path}\0${draft.pattern}\0${draft.flags}`;
  return `${draft.kind}:${createHash('sha1').update(`${draft.kind}\0${body}`).digest('hex').slice(0, 16)}`;
}

const LABEL_PREVIEW_CHARS = 60;

/** A short readable text of a check: a command's first line, or the assertion as written. */
function describeDraft(draft: Draft): string {
  switch (draft.kind) {
    case 'command': {
      const lines = draft.command.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
      const first = shorten(lines[0]!.trim());
      return lines.length > 1 ? `${first} …` : first;
    }
    case 'exists':
      return `exists: ${shorten(draft.path)}`;
    case 'contains':
      return `contains: ${shorten(draft.path)}: ${JSON.stringify(shorten(draft.text))}`;
    case 'matches':
      return `matches: ${shorten(draft.path)}: /${shorten(draft.pattern)}/${draft.flags}`;
  }
}

function shorten(text: string): string {
  const oneLine = text.replace(/\s*\n\s*/g, ' ');
  return oneLine.length > LABEL_PREVIEW_CHARS ? `${oneLine.slice(0, LABEL_PREVIEW_CHARS - 1)}…` : oneLine;
}

/** Drops blank lines at both ends and trailing spaces on each line; the script is otherwise as written. */
function trimScript(script: string): string {
  return script
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .replace(/^\n+/, '')
    .replace(/\n+$/, '');
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
