/**
 * The user's review (issue 29), its pure decisions: where a comment points (FILE:LINE[-END]),
 * whether a comment can be stored, and what settling one means for its loop. No I/O.
 */
import { randomUUID } from 'node:crypto';
import { isAbsolute, posix, relative, resolve, sep } from 'node:path';
import type { FindingSeverity } from '../storage/repositories';
import { hasActiveCharacter, inertLine } from '../text/inert-text';
import type { LoopStatus } from '../vocabulary/loop-vocabulary';

/** Longest comment the user may write (it reaches the coder in full). */
export const MAX_COMMENT_CHARS = 20_000;

export const REVIEW_SEVERITIES: readonly FindingSeverity[] = ['bug', 'warning'];

export interface CommentTarget {
  file: string;
  line: number;
  /** Null: the one line. */
  lineEnd: number | null;
}

export type Decision<T> = { ok: true; value: T } | { ok: false; message: string };

/** `src/a.ts:12` or `src/a.ts:12-20` (the CLI's --comment target). */
export function parseCommentTarget(text: string): Decision<CommentTarget> {
  const m = /^(.+):(\d+)(?:-(\d+))?$/.exec(text.trim());
  if (!m) return { ok: false, message: `"${inertLine(text)}" is not FILE:LINE or FILE:LINE-END (for example src/app.ts:12 or src/app.ts:12-20).` };
  const line = Number(m[2]);
  const lineEnd = m[3] === undefined ? null : Number(m[3]);
  if (line < 1) return { ok: false, message: 'Lines are numbered from 1.' };
  if (lineEnd !== null && lineEnd < line) return { ok: false, message: `The range ${line}-${lineEnd} ends before it starts.` };
  return { ok: true, value: { file: m[1]!, line, lineEnd: lineEnd === line ? null : lineEnd } };
}

/**
 * The worktree-relative, '/'-separated path of a comment's file: relative paths are the
 * worktree's, an absolute one must lie inside it. Refuses anything else, and names with
 * control or bidi characters.
 */
export function commentPath(worktreeDir: string, file: string): Decision<string> {
  const trimmed = file.trim();
  if (trimmed === '') return { ok: false, message: 'The comment names no file.' };
  if (hasActiveCharacter(trimmed)) return { ok: false, message: `The file "${inertLine(trimmed)}" contains control, escape or bidi characters.` };
  const root = resolve(worktreeDir);
  const abs = isAbsolute(trimmed) ? resolve(trimmed) : resolve(root, trimmed);
  const rel = relative(root, abs);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return { ok: false, message: `"${inertLine(file)}" is not a file of the loop's worktree (${root}).` };
  return { ok: true, value: posix.normalize(rel.split(sep).join('/')) };
}

/** The comment's text as it is stored and sent: verbatim, but not empty and not unbounded. */
export function commentText(text: string): Decision<string> {
  if (text.trim() === '') return { ok: false, message: 'The comment is empty: say what is wrong.' };
  if (text.length > MAX_COMMENT_CHARS) return { ok: false, message: `The comment is ${text.length} characters long; at most ${MAX_COMMENT_CHARS} reach the coder.` };
  return { ok: true, value: text };
}

export function commentSeverity(severity: string | undefined | null): Decision<FindingSeverity> {
  const s = (severity ?? 'bug').trim().toLowerCase();
  return (REVIEW_SEVERITIES as readonly string[]).includes(s) ? { ok: true, value: s as FindingSeverity } : { ok: false, message: `The severity is bug or warning, not "${inertLine(severity ?? '')}".` };
}

/** A user's comment is its own finding: never merged with another's by fingerprint. */
export function userFindingFingerprint(): string {
  return `user:${randomUUID()}`;
}

/**
 * What settling (resolve, dismiss) a user's finding means for its loop: `complete` — it awaited
 * the review and no comment is open any more (the final gate runs, then it completes); `send` —
 * it awaits the review and comments remain open (the user sends them, or settles them too);
 * `none` — the loop is not waiting on its review.
 */
export function afterSettling(status: LoopStatus | string, openUserFindings: number): 'complete' | 'wait' | 'none' {
  if (status !== 'awaiting_review') return 'none';
  return openUserFindings === 0 ? 'complete' : 'wait';
}

/** Whether the review can be sent: a loop that is not running, with at least one open comment. */
export function sendProblem(loopName: string, status: LoopStatus | string, openUserFindings: number): string | null {
  if (status === 'running' || status === 'starting') return `Loop "${loopName}" is running: its coder receives your comments in its next coding pass; send the review when it has stopped.`;
  if (openUserFindings === 0) return `Loop "${loopName}" has no open comment of your review to send. Add one first: forge review ${loopName} --comment FILE:LINE "TEXT".`;
  return null;
}
