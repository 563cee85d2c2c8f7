import { existsSync } from 'node:fs';
import * as vscode from 'vscode';
import type { ForgeContext } from '../forge-context';
import { showLoopDiff } from '../loop-diff';
import { addingFolderRestartsExtensions } from '../worktree-folders';
import type { LoopSummary } from '../loop-tree-model';
import { refuseIfUntrusted } from '../trust';
import { askRestartOptions } from '../restart-flow';
import { engineWithProgress, loopRefFrom, noWorkspace, refused, registerForgeCommand, resolveLoop, type CommandResult } from './command-support';

const isLive = (s: LoopSummary) => s.loop.status === 'running' || s.loop.status === 'starting';
/** Cancel Loop also ends a loop paused on its budget. */
const isCancellable = (s: LoopSummary) => isLive(s) || s.loop.status === 'paused';

export function registerLoopCommands(ctx: ForgeContext): void {
  const noLoop = (what: string): CommandResult => refused(ctx, 'no-loop', `Forge: no loop to ${what}.`);

  registerForgeCommand(ctx, 'forge.cancelLoop', 'Cancel Loop', async (arg) => {
    const missing = noWorkspace(ctx, 'cancel a loop');
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, isCancellable, 'Which loop should Forge cancel?');
    if (summary === 'none') return noLoop('cancel (none is running)');
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    await engine.runtime.cancel(summary.loop);
    ctx.loops.refresh();
    void ctx.notifier.info(`Forge: loop "${summary.loop.name}" cancelled.`);
    return { status: 'done' };
  });

  const restart = (force: boolean) => async (arg: unknown): Promise<CommandResult> => {
    const untrusted = refuseIfUntrusted(ctx.notifier, force ? 'force-restart a loop' : 'restart a loop');
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, 'restart a loop');
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(
      ctx,
      arg,
      (s) => (force ? isLive(s) : !isLive(s) && s.loop.status !== 'completed'),
      force ? 'Which running loop should Forge take over and restart?' : 'Which loop should Forge restart?',
    );
    if (summary === 'none') return noLoop(force ? 'force-restart (none is running)' : 'restart (only cancelled, errored or stalled loops can restart)');
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    // Restart Loop walks the model, auditor, variant and budget steps, the loop's current choice first.
    const options = force ? {} : await askRestartOptions(ctx, engine, summary.loop, arg);
    if (!options) return { status: 'cancelled' };
    await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `Forge: restarting ${summary.loop.name}…` }, () =>
      engine.runtime.restart(summary.loop, { ...options, force }),
    );
    ctx.loops.refresh();
    void ctx.notifier.info(`Forge: loop "${summary.loop.name}" restarted.`);
    return { status: 'done' };
  };
  registerForgeCommand(ctx, 'forge.restartLoop', 'Restart Loop', restart(false));
  registerForgeCommand(ctx, 'forge.forceRestartLoop', 'Force Restart Loop', restart(true));

  registerForgeCommand(ctx, 'forge.openDashboard', 'Open Dashboard', async (arg) => {
    const ref = loopRefFrom(arg);
    await ctx.dashboard.show(ref ? { loop: ref } : {});
    return { status: 'done' };
  });

  registerForgeCommand(ctx, 'forge.openWorktree', 'Open Worktree', async (arg) => {
    const missing = noWorkspace(ctx, 'open a loop worktree');
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.worktreeDir !== null && existsSync(s.loop.worktreeDir), 'Which loop\'s worktree should Forge open?');
    if (summary === 'none') return noLoop('open (no loop has a worktree)');
    if (!summary) return { status: 'cancelled' };
    const dir = summary.loop.worktreeDir;
    if (!dir || !existsSync(dir)) return refused(ctx, 'no-loop', `The worktree of loop "${summary.loop.name}" is gone (it was cleaned up); its branch ${summary.loop.branch ?? ''} is kept.`);
    let mode = ctx.settings.get()['forge.openWorktree'];
    if (mode === 'never') mode = 'add-folder';
    const driven = ctx.worktreeFolders.drivenHere();
    if (mode === 'add-folder' && addingFolderRestartsExtensions() && driven > 0 && !vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === dir)) {
      const choice = await vscode.window.showWarningMessage(
        `Adding the worktree turns this window into a multi-root workspace, which restarts the extensions: the ${driven} loop${driven === 1 ? '' : 's'} this window drives would stop (restart them afterwards).`,
        { modal: true },
        'Open in New Window',
        'Add Anyway',
      );
      if (!choice) return { status: 'cancelled' };
      if (choice === 'Open in New Window') mode = 'new-window';
    }
    const done = await ctx.worktreeFolders.open(summary.loop, dir, mode);
    if (done !== 'new-window') await vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(dir));
    return { status: 'done', detail: done };
  });

  registerForgeCommand(ctx, 'forge.showLoopDiff', 'Show Loop Diff', async (arg) => {
    const missing = noWorkspace(ctx, 'compare a loop with its base');
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.branch !== null, 'Which loop\'s changes should Forge show?');
    if (summary === 'none') return noLoop('compare (no loop has a branch yet)');
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    const row = engine.repos.loops.get(summary.loop.projectId, summary.loop.name);
    if (!row) return noLoop('compare');
    const files = await showLoopDiff(engine, row);
    if (files === 0) void ctx.notifier.info(`Forge: loop "${row.name}" has not changed anything yet.`);
    return { status: 'done', detail: files };
  });

  registerForgeCommand(ctx, 'forge.refreshLoops', 'Refresh Loop Explorer', async () => {
    if (!vscode.workspace.workspaceFolders?.length) return { status: 'done' };
    await ctx.loops.start();
    await ctx.loops.refreshNow();
    return { status: 'done' };
  });

  registerForgeCommand(ctx, 'forge.showLog', 'Show Log', async () => {
    ctx.channel.show(true);
    return { status: 'done' };
  });
}
