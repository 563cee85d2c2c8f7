/**
 * Loop identity: a loop's name is a slug (`[a-z0-9-]`, at most 48 characters,
 * no leading, trailing or doubled dashes). It names the branch `forge/<name>`
 * and the folder `<dataDir>/worktrees/<name>`, so it must never be able to
 * reach outside that folder. Everything here is pure.
 */

export const LOOP_NAME_MAX_LENGTH = 48;
export const FALLBACK_LOOP_NAME = 'loop';

const LOOP_NAME_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** True when `name` is already a valid loop name (what `slugifyLoopName` produces). */
export function isLoopName(name: string): boolean {
  return name.length <= LOOP_NAME_MAX_LENGTH && LOOP_NAME_PATTERN.test(name);
}

/** Lower-cases, folds accents, joins words with single dashes; without a length cap. */
function slugWithoutCap(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

function capSlug(slug: string, maxLength: number): string {
  return slug.slice(0, maxLength).replace(/-+$/, '');
}

/**
 * Turns any text into a loop name. Never fails and never returns an empty
 * string (falls back to `loop`). Sanitises silently: use `validateLoopName`
 * for names a user typed, so that `../x` is an error rather than `x`.
 */
export function slugifyLoopName(text: string): string {
  const slug = capSlug(slugWithoutCap(text), LOOP_NAME_MAX_LENGTH);
  return slug === '' ? FALLBACK_LOOP_NAME : slug;
}

/**
 * `base` if it is free, else `base-2`, `base-3`, … (the base is shortened when
 * the suffix would push the name past 48 characters).
 */
export function uniqueLoopName(base: string, existing: Iterable<string>): string {
  const taken = new Set(existing);
  const slug = slugifyLoopName(base);
  if (!taken.has(slug)) return slug;
  for (let n = 2; ; n++) {
    const suffix = `-${n}`;
    const stem = capSlug(slug, LOOP_NAME_MAX_LENGTH - suffix.length) || FALLBACK_LOOP_NAME;
    const candidate = `${stem}${suffix}`;
    if (!taken.has(candidate)) return candidate;
  }
}

const LOOP_NAME_LINE = /^[ \t>*_-]*loop[ \t]+name[ \t]*[*_]*[ \t]*:[ \t]*(.*)$/i;
const TITLE_LINE = /^#[ \t]+(.+?)[ \t#]*$/;
const FENCE_LINE = /^[ \t]{0,3}(`{3,}|~{3,})/;
const PLAN_PREFIX = /^plan[ \t]*[:\-–—][ \t]*/i;
const FIRST_WORDS = 6;

function stripInlineMarkdown(text: string): string {
  return text.replace(/[`*_~[\]()<>]/g, ' ').trim();
}

/**
 * The lines of a markdown document outside fenced code blocks, so that a
 * `# comment` in a shell snippet is never taken for the plan's title.
 */
function proseLines(markdown: string): string[] {
  const lines: string[] = [];
  let fence: string | null = null;
  for (const line of markdown.split(/\r?\n/)) {
    const match = FENCE_LINE.exec(line);
    if (match?.[1]) {
      const marker = match[1];
      if (fence === null) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = null;
      continue;
    }
    if (fence === null) lines.push(line);
  }
  return lines;
}

/**
 * Derives a loop name from a plan: an explicit `Loop Name: <name>` line wins,
 * else the first `# ` title (without a leading `Plan:`), else the first words
 * of the text, else `loop`.
 */
export function loopNameFromPlan(markdown: string): string {
  const lines = proseLines(markdown);

  for (const line of lines) {
    const match = LOOP_NAME_LINE.exec(line);
    if (!match) continue;
    const slug = slugWithoutCap(stripInlineMarkdown(match[1] ?? ''));
    if (slug !== '') return slugifyLoopName(slug);
  }

  for (const line of lines) {
    const match = TITLE_LINE.exec(line);
    if (!match) continue;
    const slug = slugWithoutCap(stripInlineMarkdown(match[1] ?? '').replace(PLAN_PREFIX, ''));
    if (slug !== '') return slugifyLoopName(slug);
  }

  for (const line of lines) {
    if (/^[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*$/.test(line)) continue;
    const words = stripInlineMarkdown(line.replace(/^[ \t#>*+-]+/, '')).split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w));
    const slug = slugWithoutCap(words.slice(0, FIRST_WORDS).join(' '));
    if (slug !== '') return slugifyLoopName(slug);
  }

  return FALLBACK_LOOP_NAME;
}

export type LoopNameValidation =
  | { ok: true; name: string; changed: boolean }
  | { ok: false; message: string };

/** Where a user-chosen name came from: `--name` / an input box, or a plan's `Loop Name:` line. */
export type LoopNameSource = 'option' | 'plan';

const NAME_RULE = 'loop names use lower-case letters a-z, digits 0-9 and single dashes, at most 48 characters, because a name is the branch forge/<name> and the folder of its worktree';

/**
 * Checks a name a user chose. Anything that could make the name a path — separators, `.`/`..`,
 * a drive letter, NUL or control characters — is rejected with a message, never sanitised away.
 * Other text is normalised to a slug (`My Feature` → `my-feature`, reported as `changed`).
 */
export function validateLoopName(input: string, source: LoopNameSource = 'option'): LoopNameValidation {
  const shown = `${JSON.stringify(input)}${source === 'plan' ? ` (the plan's "Loop Name:" line)` : ''}`;
  const fix = source === 'plan'
    ? 'Change the Loop Name line to letters, digits and dashes, e.g. "Loop Name: add-login-form".'
    : 'Use letters, digits and dashes, e.g. "add-login-form".';
  const name = input.trim();

  if (name === '') return { ok: false, message: `The loop name is empty. ${fix}` };
  if (/[\u0000-\u001f\u007f]/.test(input)) {
    return { ok: false, message: `The loop name ${shown} contains a NUL or control character. ${fix}` };
  }
  if (/[/\\]/.test(name)) {
    return {
      ok: false,
      message: `The loop name ${shown} contains a path separator ("/" or "\\"); a loop name names a folder inside Forge's data folder and cannot be a path. ${fix}`,
    };
  }
  if (/^[a-zA-Z]:/.test(name)) {
    return { ok: false, message: `The loop name ${shown} looks like a drive path; a loop name cannot be a path. ${fix}` };
  }
  if (name.startsWith('.')) {
    return {
      ok: false,
      message: `The loop name ${shown} starts with "."; names like "." and ".." would point outside the loop's folder, and dot-names are reserved for Forge. ${fix}`,
    };
  }
  const slug = slugWithoutCap(name);
  if (slug === '') {
    return { ok: false, message: `The loop name ${shown} has no letters or digits. ${fix}` };
  }
  if (slug.length > LOOP_NAME_MAX_LENGTH) {
    return {
      ok: false,
      message: `The loop name ${shown} is ${slug.length} characters long once normalised; the limit is ${LOOP_NAME_MAX_LENGTH}. ${source === 'plan' ? 'Shorten the Loop Name line.' : 'Choose a shorter name.'}`,
    };
  }
  return { ok: true, name: slug, changed: slug !== input };
}

/**
 * The text of a plan's first `Loop Name:` line outside code fences (the same lines
 * `loopNameFromPlan` reads, decorations such as `**Loop Name:**` or `- Loop Name:` allowed),
 * without the markdown emphasis or backticks around the name; null when there is none.
 */
export function explicitLoopName(markdown: string): string | null {
  for (const line of proseLines(markdown)) {
    const match = LOOP_NAME_LINE.exec(line);
    if (!match) continue;
    const text = (match[1] ?? '').replace(/^[\s`*_]+|[\s`*_]+$/g, '');
    if (text !== '') return text;
  }
  return null;
}

export type ChosenLoopName = { ok: true; name: string; notice: string | null } | { ok: false; message: string };

/**
 * One rule for a name the user chose, whether with `--name` (or VS Code's input) or in the plan:
 * a path-like or unusable name is refused with a message saying how to fix it (a path is never
 * what the user means, and sanitising `../../evil` into `evil` would hide that); any other text
 * is turned into a valid name and the user is told (`notice`) what it became and why.
 */
export function chooseLoopName(input: string, source: LoopNameSource): ChosenLoopName {
  const v = validateLoopName(input, source);
  if (!v.ok) return v;
  const written = input.trim();
  if (v.name === written) return { ok: true, name: v.name, notice: null };
  const from = source === 'plan' ? ' from the plan' : '';
  return { ok: true, name: v.name, notice: `Loop name ${JSON.stringify(written)}${from} was changed to "${v.name}": ${NAME_RULE}.` };
}
