/**
 * Commit messages Forge writes on a loop branch (SPEC §2 Checkpoints), written as a person
 * would: the subject says what the commit does (the section's title; the plan's objective for
 * a completed loop's last commit), the body which files changed and which loop made it. Pure:
 * the worktree service hands in what the commit holds (stagedFromNameStatus).
 */
import type { ChangedFile } from './worktree-types';

/** The paths one commit holds, as `git diff --cached` names them. */
export interface StagedChanges {
  /** Added or modified. */
  readonly changed: readonly string[];
  readonly removed: readonly string[];
}

export const NO_CHANGES: StagedChanges = Object.freeze({ changed: [], removed: [] });

/** A commit subject's length a `git log --oneline` line still shows whole. */
export const SUBJECT_MAX = 72;
/** Paths named in a body before "and N more files". */
export const PATHS_NAMED = 8;

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * A title or an objective as a subject line: its first paragraph on one line, markdown and list
 * marks and a leading number ("2.", "Section 2:") dropped, the first sentence, no final period,
 * first letter upper case, cut at SUBJECT_MAX characters on a word.
 */
export function subjectOf(text: string): string {
  const paragraph = text.trim().split(/\n\s*\n/)[0] ?? '';
  let s = oneLine(
    paragraph
      .replace(/^(?:[-*+]\s+|>\s*|#+\s*)+/, '')
      .replace(/[*_`]+/g, '')
      .replace(/^(?:section\s+)?\d+\s*[.):-]\s*/i, ''),
  );
  const sentenceEnd = /[.!?](?=\s+[A-Z])/.exec(s);
  if (sentenceEnd) s = s.slice(0, sentenceEnd.index + 1);
  s = s.replace(/[.;:,]+$/, '').trim();
  if (s.length > SUBJECT_MAX) {
    const cut = s.slice(0, SUBJECT_MAX - 1);
    const space = cut.lastIndexOf(' ');
    s = `${(space > SUBJECT_MAX / 2 ? cut.slice(0, space) : cut).replace(/[.;:,\s]+$/, '')}…`;
  }
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function list(paths: readonly string[], limit: number): string {
  const named = paths.slice(0, limit);
  const more = paths.length - named.length;
  const items = more > 0 ? [...named, `${more} more file${more === 1 ? '' : 's'}`] : named;
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** "Changes a.ts and b.ts; removes c.ts." (null: nothing named). */
export function describeChanges(changes: StagedChanges): string | null {
  const parts: string[] = [];
  if (changes.changed.length > 0) parts.push(`changes ${list(changes.changed, PATHS_NAMED)}`);
  if (changes.removed.length > 0) parts.push(`removes ${list(changes.removed, Math.max(1, PATHS_NAMED - Math.min(changes.changed.length, PATHS_NAMED)))}`);
  if (parts.length === 0) return null;
  const text = parts.join('; ');
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

function message(subject: string, paragraphs: Array<string | null>): string {
  const body = paragraphs.filter((p): p is string => p !== null && p.trim() !== '');
  return body.length > 0 ? `${subject}\n\n${body.join('\n\n')}\n` : subject;
}

const iterations = (n: number) => `${n} iteration${n === 1 ? '' : 's'}`;

export interface SectionCommit {
  /** 1-based. */
  number: number;
  title: string;
  loopName: string;
  changes: StagedChanges;
}

/** The commit of a section its auditor approved: its title, the files, the loop. */
export function sectionCheckpointMessage(c: SectionCommit): string {
  const subject = subjectOf(c.title) || `Section ${c.number} of ${c.loopName}`;
  return message(subject, [describeChanges(c.changes), `Section ${c.number} of Forge loop ${c.loopName}, approved by its auditor.`]);
}

export interface TeardownCommit {
  loopName: string;
  /** How the loop ended (terminationReasonToString): "completed", "cancelled", "max_iterations: …". */
  reason: string;
  iterations: number;
  /** The plan's objective (a goal loop: its goal); null when the plan has none. */
  objective: string | null;
  /** The section being worked on when an unfinished loop stopped (null: none or unknown). */
  sectionTitle: string | null;
  changes: StagedChanges;
}

/**
 * The last commit of a loop, of what its sections' commits left over. A completed loop's says
 * what the plan set out to do; an unfinished one's says it keeps work in progress, and on what.
 */
export function loopTeardownMessage(c: TeardownCommit): string {
  const reason = oneLine(c.reason);
  const objective = c.objective === null ? '' : subjectOf(c.objective);
  if (reason === 'completed') {
    return message(objective || `Complete ${c.loopName}`, [describeChanges(c.changes), `Forge loop ${c.loopName} completed after ${iterations(c.iterations)}.`]);
  }
  const on = (c.sectionTitle === null ? '' : subjectOf(c.sectionTitle)) || objective;
  const subject = subjectOf(`Work in progress${on ? `: ${on.charAt(0).toLowerCase()}${on.slice(1)}` : ` of ${c.loopName}`}`);
  return message(subject, [describeChanges(c.changes), `Forge loop ${c.loopName} stopped (${reason}) after ${iterations(c.iterations)}; this commit keeps its unfinished work.`]);
}

/** What `git diff --cached --name-status` lists (the agent staged it itself), as staged changes. */
export function stagedFromNameStatus(files: readonly ChangedFile[]): StagedChanges {
  const changed: string[] = [];
  const removed: string[] = [];
  for (const f of files) {
    if (f.status === 'D') removed.push(f.path);
    else {
      if (f.status === 'R' && f.oldPath) removed.push(f.oldPath);
      changed.push(f.path);
    }
  }
  return { changed, removed };
}
