/**
 * The user's review in VS Code (issue 29 items 1–3): *Forge: Review Loop* opens the loop's
 * multi-file diff (loop-diff.ts); a CommentController on the worktree's files (the diff's right
 * side) turns a comment on a line or range into a finding of source 'user' (bug, or warning);
 * its thread shows the coder's answer and offers Resolve / Dismiss; *Send Review to Forge*
 * reopens the loop for a coding pass carrying the open comments. The engine's review service
 * (src/core/review/) does the work, as for `forge review`.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ReviewFindingRow } from '../core/storage/repositories/review-findings-repository';
import { inertText } from '../core/text/inert-text';
import type { ForgeContext } from './forge-context';
import type { LoopSummary } from './loop-tree-model';
import { showLoopDiff } from './loop-diff';
import { engineWithProgress, noWorkspace, refused, registerForgeCommand, resolveLoop, type CommandResult } from './commands/command-support';

const CONTROLLER_ID = 'forge.review';
type LoopRef = { projectId: string; name: string };

interface ThreadOf {
  ref: LoopRef;
  id: number;
}

/** `{ projectId, name, id }` (a caller other than the thread's title bar: a test, the dashboard). */
function findingRef(arg: unknown): ThreadOf | undefined {
  const o = arg as Record<string, unknown>;
  return typeof o.projectId === 'string' && typeof o.name === 'string' && typeof o.id === 'number' ? { ref: { projectId: o.projectId, name: o.name }, id: o.id } : undefined;
}

export function registerReviewComments(ctx: ForgeContext): void {
  const controller = vscode.comments.createCommentController(CONTROLLER_ID, vscode.l10n.t('Forge Review'));
  controller.options = { prompt: vscode.l10n.t('Comment for the coder (a finding only you close)'), placeHolder: vscode.l10n.t('What is wrong here, and what should it be?') };
  const threads = new Map<number, vscode.CommentThread>();
  const threadOf = new WeakMap<vscode.CommentThread, ThreadOf>();
  ctx.extension.subscriptions.push(controller, { dispose: () => threads.forEach((t) => t.dispose()) });

  /** The loop whose worktree holds this file, if any. */
  const loopOfUri = (uri: vscode.Uri): LoopSummary | undefined => {
    if (uri.scheme !== 'file') return undefined;
    return ctx.loops.summaries().find((s) => s.loop.worktreeDir && uri.fsPath.startsWith(s.loop.worktreeDir + path.sep));
  };

  controller.commentingRangeProvider = {
    provideCommentingRanges: (document) => (loopOfUri(document.uri) ? [new vscode.Range(0, 0, Math.max(0, document.lineCount - 1), 0)] : []),
  };

  const render = (summary: LoopSummary, f: ReviewFindingRow): void => {
    const uri = vscode.Uri.file(path.join(summary.loop.worktreeDir!, f.file));
    const range = new vscode.Range(f.line - 1, 0, (f.lineEnd ?? f.line) - 1, 0);
    const comments: vscode.Comment[] = [
      { author: { name: vscode.l10n.t('You') }, body: new vscode.MarkdownString().appendText(f.description), mode: vscode.CommentMode.Preview, label: f.severity === 'bug' ? vscode.l10n.t('bug') : vscode.l10n.t('warning') },
    ];
    if (f.reply) comments.push({ author: { name: vscode.l10n.t('Forge coder') }, body: new vscode.MarkdownString().appendText(inertText(f.reply)), mode: vscode.CommentMode.Preview });
    let thread = threads.get(f.id);
    if (!thread || thread.uri.toString() !== uri.toString()) {
      thread?.dispose();
      thread = controller.createCommentThread(uri, range, comments);
      threads.set(f.id, thread);
    } else {
      thread.range = range;
      thread.comments = comments;
    }
    thread.label = vscode.l10n.t('Forge review #{0}: {1}', f.id, f.status === 'open' ? vscode.l10n.t('open') : f.status === 'resolved' ? vscode.l10n.t('resolved') : vscode.l10n.t('dismissed'));
    thread.canReply = false;
    thread.contextValue = f.status === 'open' ? 'forge.review.open' : 'forge.review.closed';
    thread.state = f.status === 'open' ? vscode.CommentThreadState.Unresolved : vscode.CommentThreadState.Resolved;
    thread.collapsibleState = f.status === 'open' ? vscode.CommentThreadCollapsibleState.Expanded : vscode.CommentThreadCollapsibleState.Collapsed;
    threadOf.set(thread, { ref: { projectId: summary.loop.projectId, name: summary.loop.name }, id: f.id });
  };

  /** Shows every user finding of the workspace's loops that still have a worktree as a thread. */
  const sync = async (): Promise<void> => {
    const engine = ctx.engine.peek();
    if (!engine) return;
    const seen = new Set<number>();
    for (const s of ctx.loops.summaries()) {
      if (!s.loop.worktreeDir) continue;
      for (const f of engine.review.list({ projectId: s.loop.projectId, name: s.loop.name })) {
        seen.add(f.id);
        render(s, f);
      }
    }
    for (const [id, t] of threads) {
      if (seen.has(id)) continue;
      t.dispose();
      threads.delete(id);
    }
  };
  ctx.extension.subscriptions.push(ctx.loops.onDidChange(() => void sync()));

  const addComment = (severity: 'bug' | 'warning') => async (reply: unknown): Promise<CommandResult> => {
    const r = reply as vscode.CommentReply | undefined;
    if (!r?.thread) return { status: 'cancelled' };
    const summary = loopOfUri(r.thread.uri);
    if (!summary) return refused(ctx, 'no-loop', vscode.l10n.t("Forge: comments of a review go on the files of a loop's worktree."));
    const engine = await ctx.engine.get();
    const start = r.thread.range?.start.line ?? 0;
    const end = r.thread.range?.end.line ?? start;
    const row = engine.review.comment({ projectId: summary.loop.projectId, name: summary.loop.name }, { file: r.thread.uri.fsPath, line: start + 1, lineEnd: end + 1, severity, text: r.text });
    r.thread.dispose();
    ctx.loops.refresh();
    await sync();
    return { status: 'done', detail: { id: row.id, loop: summary.loop.name, file: row.file, line: row.line, lineEnd: row.lineEnd, severity: row.severity } };
  };
  registerForgeCommand(ctx, 'forge.review.comment', vscode.l10n.t('Add Review Comment'), addComment('bug'));
  registerForgeCommand(ctx, 'forge.review.commentWarning', vscode.l10n.t('Add Review Comment as Warning'), addComment('warning'));

  const settle = (how: 'resolve' | 'dismiss') => async (arg: unknown): Promise<CommandResult> => {
    const target = arg instanceof Object ? (threadOf.get(arg as vscode.CommentThread) ?? findingRef(arg)) : undefined;
    if (!target) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    const settled = how === 'resolve' ? engine.review.resolve(target.ref, target.id) : engine.review.dismiss(target.ref, target.id);
    ctx.loops.refresh();
    await sync();
    if (settled.next === 'complete') {
      void ctx.notifier.info(vscode.l10n.t('Forge: no comment of your review is open; loop "{0}" runs its final gate and completes.', target.ref.name));
      await engine.review.finish(target.ref);
    }
    return { status: 'done', detail: { id: settled.finding.id, status: settled.finding.status, next: settled.next } };
  };
  registerForgeCommand(ctx, 'forge.review.resolve', vscode.l10n.t('Resolve Review Comment'), settle('resolve'));
  registerForgeCommand(ctx, 'forge.review.dismiss', vscode.l10n.t('Dismiss Review Comment'), settle('dismiss'));

  registerForgeCommand(ctx, 'forge.review.send', vscode.l10n.t('Send Review to Forge'), async (arg): Promise<CommandResult> => {
    const missing = noWorkspace(ctx, vscode.l10n.t('send a review'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const engine = await ctx.engine.get();
    const fromThread = arg instanceof Object ? threadOf.get(arg as vscode.CommentThread) : undefined;
    let ref = fromThread?.ref;
    if (!ref) {
      const openOf = (s: LoopSummary) => engine.review.list({ projectId: s.loop.projectId, name: s.loop.name }).filter((f) => f.status === 'open').length;
      const summary = await resolveLoop(ctx, arg, (s) => s.loop.status !== 'running' && openOf(s) > 0, vscode.l10n.t('Which loop should get your review?'));
      if (summary === 'none') return refused(ctx, 'no-loop', vscode.l10n.t('Forge: no stopped loop has an open comment of your review to send.'));
      if (!summary) return { status: 'cancelled' };
      ref = { projectId: summary.loop.projectId, name: summary.loop.name };
    }
    await engine.review.send(ref);
    ctx.loops.refresh();
    void ctx.notifier.info(vscode.l10n.t('Forge: your review went back to loop "{0}" for another coding pass.', ref.name));
    return { status: 'done', detail: { loop: ref.name } };
  });

  registerForgeCommand(ctx, 'forge.reviewLoop', vscode.l10n.t('Review Loop'), async (arg): Promise<CommandResult> => {
    const missing = noWorkspace(ctx, vscode.l10n.t('review a loop'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.branch !== null && s.loop.status !== 'running', vscode.l10n.t("Which loop's work should Forge show for review?"));
    if (summary === 'none') return refused(ctx, 'no-loop', vscode.l10n.t('Forge: no stopped loop with a branch to review.'));
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    const row = engine.repos.loops.get(summary.loop.projectId, summary.loop.name);
    if (!row) return refused(ctx, 'no-loop', vscode.l10n.t('Forge: loop "{0}" is gone.', summary.loop.name));
    const files = await showLoopDiff(engine, row);
    await sync();
    return { status: 'done', detail: { files, threads: threads.size } };
  });
}
