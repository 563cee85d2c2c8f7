/**
 * Text a model wrote (findings, plan titles, transcripts, loop names, check output…) made inert
 * for a human surface: every character that a terminal, an editor or a browser would act on
 * instead of showing is replaced by its visible escape `\uXXXX`. Nothing is dropped, so the user
 * still sees exactly what the model wrote, and nothing can clear a terminal, set its title,
 * move the cursor, hide text behind a carriage return or reorder it with a bidi override.
 *
 * The escape is JSON's own: applied to JSON text (`inertJson`) it yields the same JSON value, so
 * `--json` output stays valid and carries the original string unchanged once parsed.
 *
 * Pure and dependency-free: the CLI, the engine log, the VS Code surfaces and the dashboard
 * webview all import it; no surface carries its own pattern.
 */

/**
 * Characters that act instead of showing: C0 controls (NUL, BEL, BS, ESC, …) except TAB and LF,
 * DEL, C1 controls (8-bit CSI/OSC/…), the bidi embedding, override, isolate and mark characters
 * (the "Trojan source" set) and the Unicode line/paragraph separators. CR is handled apart
 * (`CRLF` is an ordinary line end).
 */
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same set plus TAB, LF and CR: for text that must stay on one line. */
const ACTIVE_IN_LINE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const HAS_ACTIVE = new RegExp(ACTIVE.source);
const HAS_ACTIVE_IN_LINE = new RegExp(ACTIVE_IN_LINE.source);

function escapeChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * Multi-line text made inert: line breaks (LF, CRLF) and tabs stay, every other active
 * character is shown as `\uXXXX` (ESC as `\u001b`, a lone CR as `\u000d`).
 */
export function inertText(text: string): string {
  if (!HAS_ACTIVE.test(text)) return text;
  return text.replace(/\r\n/g, '\n').replace(ACTIVE, escapeChar);
}

/** One-line text made inert (a file name, a label, a title): line breaks and tabs are escaped too. */
export function inertLine(text: string): string {
  return text.replace(ACTIVE_IN_LINE, escapeChar);
}

/**
 * A value as one line of JSON whose text holds no active character: JSON.stringify escapes C0
 * controls itself; DEL, C1, bidi and separators are escaped the same way. `JSON.parse` of the
 * result equals the value.
 */
export function inertJson(value: unknown): string {
  return inertText(JSON.stringify(value));
}

/** Whether `text` holds a character `inertLine` would escape (for refusing it where a name is expected). */
export function hasActiveCharacter(text: string, { allowLineBreaks = false } = {}): boolean {
  return allowLineBreaks ? HAS_ACTIVE.test(text) : HAS_ACTIVE_IN_LINE.test(text);
}
