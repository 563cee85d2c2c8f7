/**
 * The user's review of a loop (issue 29 items 2–3), over storage and the loop runtime: comments
 * are findings of source 'user'; only the user resolves or dismisses them; *send* reopens the
 * loop for a coding pass carrying them; once none is open, a loop awaiting its review runs its
 * final gate once more and completes. Host-neutral (the CLI and VS Code call the same service).
 */
import type { FindingSeverity, ForgeRepositories, ReviewFindingRow } from '../storage/repositories';
import { LoopRuntimeError, type LoopRef, type LoopRuntime } from '../loop/runtime-types';
import { afterSettling, commentPath, commentSeverity, commentText, sendProblem, userFindingFingerprint, type Decision } from './review-decisions';

export interface NewComment {
  /** Worktree-relative, or absolute inside the loop's worktree. */
  file: string;
  line: number;
  lineEnd?: number | null;
  severity?: FindingSeverity | string | null;
  text: string;
}

export interface SettleResult {
  finding: ReviewFindingRow;
  /** What the loop needs next: see afterSettling. */
  next: 'complete' | 'wait' | 'none';
}

export interface ReviewService {
  /** Stores a comment as an open finding of source 'user'. */
  comment(ref: LoopRef, comment: NewComment): ReviewFindingRow;
  /** The user's findings of a loop (every status), by file and line. */
  list(ref: LoopRef): ReviewFindingRow[];
  resolve(ref: LoopRef, id: number): SettleResult;
  dismiss(ref: LoopRef, id: number): SettleResult;
  /** Reopens the loop for a coding pass carrying the open comments (this process supervises it). */
  send(ref: LoopRef): Promise<void>;
  /** A loop awaiting its review with no open comment: the final gate once more, then it completes. */
  finish(ref: LoopRef): Promise<void>;
}

function must<T>(d: Decision<T>): T {
  if (!d.ok) throw new LoopRuntimeError('bad_request', d.message);
  return d.value;
}

export function createReviewService(repos: ForgeRepositories, runtime: Pick<LoopRuntime, 'restart'>): ReviewService {
  const loopOf = (ref: LoopRef) => {
    const loop = repos.loops.get(ref.projectId, ref.name);
    if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}" in this repository. "forge status" lists them.`);
    return loop;
  };
  const openUser = (ref: LoopRef) => repos.reviewFindings.listOpen(ref.projectId, ref.name).filter((f) => f.source === 'user');
  const userFinding = (ref: LoopRef, id: number) => {
    loopOf(ref);
    const f = repos.reviewFindings.get(ref.projectId, id);
    if (!f || f.loopName !== ref.name || f.source !== 'user') throw new LoopRuntimeError('not_found', `Loop "${ref.name}" has no comment of your review numbered #${id}. "forge review ${ref.name}" lists them.`);
    return f;
  };
  const settle = (ref: LoopRef, id: number, status: 'resolved' | 'dismissed'): SettleResult => {
    const f = userFinding(ref, id);
    const finding = f.status === 'open' ? repos.reviewFindings.setStatus(ref.projectId, id, status) : f;
    return { finding, next: afterSettling(loopOf(ref).status, openUser(ref).length) };
  };
  return {
    comment(ref, c) {
      const loop = loopOf(ref);
      if (!loop.worktreeDir) throw new LoopRuntimeError('bad_request', `Loop "${ref.name}" has no worktree; there is nothing to comment on.`);
      const file = must(commentPath(loop.worktreeDir, c.file));
      const text = must(commentText(c.text));
      const severity = must(commentSeverity(c.severity));
      if (!Number.isInteger(c.line) || c.line < 1) throw new LoopRuntimeError('bad_request', 'Lines are numbered from 1.');
      const lineEnd = c.lineEnd && c.lineEnd > c.line ? c.lineEnd : null;
      return repos.reviewFindings.record(ref.projectId, {
        loopName: ref.name,
        file,
        line: c.line,
        lineEnd,
        severity,
        description: text,
        sectionIndex: null,
        fingerprint: userFindingFingerprint(),
        source: 'user',
      });
    },
    list(ref) {
      loopOf(ref);
      return repos.reviewFindings
        .listByLoop(ref.projectId, ref.name)
        .filter((f) => f.source === 'user')
        .sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.id - b.id);
    },
    resolve: (ref, id) => settle(ref, id, 'resolved'),
    dismiss: (ref, id) => settle(ref, id, 'dismissed'),
    async send(ref) {
      const loop = loopOf(ref);
      const problem = sendProblem(ref.name, loop.status, openUser(ref).length);
      if (problem) throw new LoopRuntimeError('bad_request', problem);
      await runtime.restart(ref, { review: 'send' });
    },
    async finish(ref) {
      await runtime.restart(ref, { review: 'final' });
    },
  };
}
