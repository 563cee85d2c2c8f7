/**
 * *Forge: Accept Loop* (issue 29 item 4): the loop's branch merged into the branch it started
 * from, as `forge accept` does it (src/core/accept/accept-loop.ts) — fast-forward when possible,
 * else a merge commit or a squash (picked here, the setting first) — refused with the reason
 * when the base's checkout is dirty or the merge conflicts; then it offers to remove the
 * worktree and branch.
 */
import * as vscode from 'vscode';
import type { ForgeContext } from '../forge-context';
import { acceptLoop, osUser, removeAcceptedLoop } from '../../core/accept/accept-loop';
import { ACCEPT_STRATEGIES, type AcceptStrategy } from '../../core/accept/accept-decisions';
import { refuseIfUntrusted } from '../trust';
import { engineWithProgress, noWorkspace, refused, registerForgeCommand, resolveLoop, type CommandResult } from './command-support';

/** What a caller (a test, another command) may decide instead of asking: the strategy, and whether to remove. */
export interface AcceptLoopOptions {
  strategy?: AcceptStrategy;
  remove?: boolean;
}

function optionsFrom(arg: unknown): AcceptLoopOptions {
  if (arg === null || typeof arg !== 'object') return {};
  const o = arg as Record<string, unknown>;
  return {
    ...(ACCEPT_STRATEGIES.includes(o.strategy as AcceptStrategy) ? { strategy: o.strategy as AcceptStrategy } : {}),
    ...(typeof o.remove === 'boolean' ? { remove: o.remove } : {}),
  };
}

export function registerAcceptCommand(ctx: ForgeContext): void {
  registerForgeCommand(ctx, 'forge.acceptLoop', vscode.l10n.t('Accept Loop'), async (arg, optionsArg): Promise<CommandResult> => {
    // git merges in the user's checkout, where the repository's own hooks run: not in an untrusted workspace.
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('accept a loop'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('accept a loop'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.status === 'completed' && s.loop.branch !== null, vscode.l10n.t('Which loop should Forge accept into its base branch?'));
    if (summary === 'none') return refused(ctx, 'no-loop', vscode.l10n.t('Forge: no loop to accept (only a completed loop with a branch can be accepted).'));
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    const row = engine.repos.loops.get(summary.loop.projectId, summary.loop.name);
    if (!row) return refused(ctx, 'no-loop', vscode.l10n.t('Forge: loop "{0}" is gone.', summary.loop.name));
    const options = optionsFrom(optionsArg);

    let strategy = options.strategy;
    if (!strategy) {
      const setting = ctx.settings.get()['forge.accept.strategy'];
      const items = [
        { label: vscode.l10n.t('Merge Commit'), detail: vscode.l10n.t('Fast-forward when possible, else a merge commit.'), strategy: 'merge-commit' as const },
        { label: vscode.l10n.t('Squash'), detail: vscode.l10n.t('Fast-forward when possible, else one squashed commit.'), strategy: 'squash' as const },
      ].sort((a, b) => (a.strategy === setting ? -1 : b.strategy === setting ? 1 : 0));
      const picked = await vscode.window.showQuickPick(items, { placeHolder: vscode.l10n.t('Accept loop "{0}" into {1}: how, when {1} cannot be fast-forwarded?', row.name, row.baseBranch ?? '?') });
      if (!picked) return { status: 'cancelled' };
      strategy = picked.strategy;
    }

    const outcome = await acceptLoop({ repos: engine.repos, worktrees: engine.worktrees, user: osUser() }, row, strategy);
    ctx.loops.refresh();
    if (outcome.kind === 'refused') {
      void vscode.window.showErrorMessage(outcome.message);
      return { status: 'refused', reason: 'not-accepted', message: outcome.message };
    }
    const removeLabel = vscode.l10n.t('Remove Worktree and Branch');
    const shown = ctx.notifier.info(vscode.l10n.t('Forge: {0}', outcome.message), ...(options.remove === undefined ? [removeLabel] : []));
    const remove = options.remove ?? (await shown) === removeLabel;
    if (remove) {
      await removeAcceptedLoop(engine, row);
      ctx.loops.refresh();
      void ctx.notifier.info(vscode.l10n.t('Forge: removed the worktree and the branch {0} of loop "{1}".', row.branch ?? '', row.name));
    }
    return { status: 'done', detail: { kind: outcome.kind, how: outcome.kind === 'accepted' ? outcome.record.how : null, commit: outcome.kind === 'accepted' ? outcome.record.commit : null, removed: remove } };
  });
}
