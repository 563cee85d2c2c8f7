import { existsSync } from 'node:fs';
import * as vscode from 'vscode';
import type { ForgeContext } from '../forge-context';
import { showLoopDiff } from '../loop-diff';
import { addingFolderRestartsExtensions } from '../worktree-folders';
import type { LoopSummary } from '../loop-tree-model';
import { refuseIfUntrusted } from '../trust';
import { askRestartOptions } from '../restart-flow';
import { registerAcceptCommand } from './accept-command';
import { registerReviewComments } from '../review-comments';
import { engineWithProgress, groupRefFrom, loopRefFrom, noWorkspace, refused, registerForgeCommand, resolveLoop, type CommandResult } from './command-support';

const isLive = (s: LoopSummary) => s.loop.status === 'running' || s.loop.status === 'starting';
/** Cancel Loop also ends a loop paused on its budget or waiting for the user's review. */
const isCancellable = (s: LoopSummary) => isLive(s) || s.loop.status === 'paused' || s.loop.status === 'awaiting_review';

export function registerLoopCommands(ctx: ForgeContext): void {
  const noLoop = (what: string): CommandResult => refused(ctx, 'no-loop', vscode.l10n.t('Forge: no loop to {0}.', what));

  registerForgeCommand(ctx, 'forge.cancelLoop', vscode.l10n.t('Cancel Loop'), async (arg) => {
    const missing = noWorkspace(ctx, vscode.l10n.t('cancel a loop'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, isCancellable, vscode.l10n.t('Which loop should Forge cancel?'));
    if (summary === 'none') return noLoop(vscode.l10n.t('cancel (none is running)'));
    if (!summary) return { status: 'cancelled' };
    const [engine, core] = await Promise.all([ctx.engine.get(), ctx.loadCore()]);
    // Another process's loop: its engine ends it at once (or its supervisor at its next lease tick).
    const outcome = await core.cancelLoop(engine.runtime, engine.dataDir, summary.loop);
    ctx.loops.refresh();
    void ctx.notifier.info(
      outcome === 'cancelled'
        ? vscode.l10n.t('Forge: loop "{0}" cancelled.', summary.loop.name)
        : vscode.l10n.t('Forge: cancel of loop "{0}" requested from the process that supervises it; it ends at that process\'s next check (within seconds).', summary.loop.name),
    );
    return { status: 'done' };
  });

  // Message the Agent (issue 29): the user's words go into the loop's running session, or into
  // its next session's prompt; the process that supervises the loop (this window or another
  // Forge process) delivers them. `arg.text` (API, tests) skips the input box.
  registerForgeCommand(ctx, 'forge.messageAgent', vscode.l10n.t('Message the Agent'), async (arg) => {
    const missing = noWorkspace(ctx, vscode.l10n.t('message a loop\'s agent'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, isLive, vscode.l10n.t('Which running loop\'s agent should get the message?'));
    if (summary === 'none') return noLoop(vscode.l10n.t('message (none is running)'));
    if (!summary) return { status: 'cancelled' };
    const given = arg && typeof arg === 'object' ? (arg as { text?: unknown }).text : undefined;
    const text =
      typeof given === 'string'
        ? given
        : await vscode.window.showInputBox({
            title: vscode.l10n.t('Message the agent of loop "{0}"', summary.loop.name),
            prompt: vscode.l10n.t('Sent into the running session at once, or into the next session\'s prompt when the loop is between sessions.'),
            validateInput: (v) => (v.trim() === '' ? vscode.l10n.t('Say what the agent should know.') : undefined),
          });
    if (text === undefined || text.trim() === '') return { status: 'cancelled' };
    const [engine, core] = await Promise.all([ctx.engine.get(), ctx.loadCore()]);
    try {
      const told = await core.tellLoop(engine.runtime, engine.dataDir, summary.loop, text);
      ctx.loops.refresh();
      void ctx.notifier.info(
        told.delivery === 'session'
          ? vscode.l10n.t('Forge: message sent to the agent of loop "{0}" (its running session).', summary.loop.name)
          : vscode.l10n.t('Forge: message kept for the next session of loop "{0}" (it is between sessions).', summary.loop.name),
      );
      return { status: 'done', detail: told.delivery };
    } catch (error) {
      if (error instanceof core.LoopRuntimeError) return refused(ctx, 'no-loop', vscode.l10n.t('Forge: {0}', error.message));
      throw error;
    }
  });

  const restart = (force: boolean) => async (arg: unknown): Promise<CommandResult> => {
    const untrusted = refuseIfUntrusted(ctx.notifier, force ? vscode.l10n.t('force-restart a loop') : vscode.l10n.t('restart a loop'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('restart a loop'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(
      ctx,
      arg,
      (s) => (force ? isLive(s) : !isLive(s) && s.loop.status !== 'completed'),
      force ? vscode.l10n.t('Which running loop should Forge take over and restart?') : vscode.l10n.t('Which loop should Forge restart?'),
    );
    if (summary === 'none') return noLoop(force ? vscode.l10n.t('force-restart (none is running)') : vscode.l10n.t('restart (only cancelled, errored or stalled loops can restart)'));
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    // Restart Loop walks the model, auditor, variant and budget steps, the loop's current choice first.
    const options = force ? {} : await askRestartOptions(ctx, engine, summary.loop, arg);
    if (!options) return { status: 'cancelled' };
    const ref = { projectId: summary.loop.projectId, name: summary.loop.name };
    const handed = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: restarting {0}…', summary.loop.name) }, async () => {
      // One engine per data folder: another live process that is the engine supervises the restarted loop; else this window does.
      const outcome = await ctx.engine.handOver({ type: 'restart', ref, options: { ...options, force } });
      if (outcome.action === 'handed') return outcome.engine;
      await engine.runtime.restart(ref, { ...options, force });
      return undefined;
    });
    ctx.loops.refresh();
    if (handed) {
      ctx.log.info(`loop ${ref.name} restarted in the data folder's engine, process ${handed.pid} (${handed.kind}); that process supervises it`);
      void ctx.notifier.info(vscode.l10n.t('Forge: loop "{0}" restarted in the Forge engine of process {1} ({2}), which supervises it; this window shows it.', ref.name, handed.pid, handed.kind));
      return { status: 'done', detail: { supervisorPid: handed.pid } };
    }
    void ctx.notifier.info(vscode.l10n.t('Forge: loop "{0}" restarted.', summary.loop.name));
    return { status: 'done' };
  };
  registerForgeCommand(ctx, 'forge.restartLoop', vscode.l10n.t('Restart Loop'), restart(false));
  registerForgeCommand(ctx, 'forge.forceRestartLoop', vscode.l10n.t('Force Restart Loop'), restart(true));

  registerForgeCommand(ctx, 'forge.openDashboard', vscode.l10n.t('Open Dashboard'), async (arg) => {
    const ref = loopRefFrom(arg);
    // A Loop Explorer group node (or { projectId, groupId }) opens the dashboard on its group.
    const group = ref ? undefined : groupRefFrom(arg);
    await ctx.dashboard.show(ref ? { loop: ref } : group ? { group } : {});
    return { status: 'done' };
  });

  registerForgeCommand(ctx, 'forge.openWorktree', vscode.l10n.t('Open Worktree'), async (arg) => {
    const missing = noWorkspace(ctx, vscode.l10n.t('open a loop worktree'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.worktreeDir !== null && existsSync(s.loop.worktreeDir), vscode.l10n.t('Which loop\'s worktree should Forge open?'));
    if (summary === 'none') return noLoop(vscode.l10n.t('open (no loop has a worktree)'));
    if (!summary) return { status: 'cancelled' };
    const dir = summary.loop.worktreeDir;
    if (!dir || !existsSync(dir)) return refused(ctx, 'no-loop', vscode.l10n.t('The worktree of loop "{0}" is gone (it was cleaned up); its branch {1} is kept.', summary.loop.name, summary.loop.branch ?? ''));
    let mode = ctx.settings.get()['forge.openWorktree'];
    if (mode === 'never') mode = 'add-folder';
    const driven = ctx.worktreeFolders.drivenHere();
    if (mode === 'add-folder' && addingFolderRestartsExtensions() && driven > 0 && !vscode.workspace.workspaceFolders?.some((f) => f.uri.fsPath === dir)) {
      const choice = await vscode.window.showWarningMessage(
        vscode.l10n.t('Adding the worktree turns this window into a multi-root workspace, which restarts the extensions: the {0} loop{1} this window drives would stop (restart them afterwards).', driven, driven === 1 ? '' : 's'),
        { modal: true },
        vscode.l10n.t('Open in New Window'),
        vscode.l10n.t('Add Anyway'),
      );
      if (!choice) return { status: 'cancelled' };
      if (choice === vscode.l10n.t('Open in New Window')) mode = 'new-window';
    }
    const done = await ctx.worktreeFolders.open(summary.loop, dir, mode);
    if (done !== 'new-window') await vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(dir));
    return { status: 'done', detail: done };
  });

  registerForgeCommand(ctx, 'forge.showLoopDiff', vscode.l10n.t('Show Loop Diff'), async (arg) => {
    const missing = noWorkspace(ctx, vscode.l10n.t('compare a loop with its base'));
    if (missing) return missing;
    await engineWithProgress(ctx);
    const summary = await resolveLoop(ctx, arg, (s) => s.loop.branch !== null, vscode.l10n.t('Which loop\'s changes should Forge show?'));
    if (summary === 'none') return noLoop(vscode.l10n.t('compare (no loop has a branch yet)'));
    if (!summary) return { status: 'cancelled' };
    const engine = await ctx.engine.get();
    const row = engine.repos.loops.get(summary.loop.projectId, summary.loop.name);
    if (!row) return noLoop(vscode.l10n.t('compare'));
    const files = await showLoopDiff(engine, row);
    if (files === 0) void ctx.notifier.info(vscode.l10n.t('Forge: loop "{0}" has not changed anything yet.', row.name));
    return { status: 'done', detail: files };
  });

  registerAcceptCommand(ctx);
  registerReviewComments(ctx);

  registerForgeCommand(ctx, 'forge.refreshLoops', vscode.l10n.t('Refresh Loop Explorer'), async () => {
    if (!vscode.workspace.workspaceFolders?.length) return { status: 'done' };
    await ctx.loops.start();
    await ctx.loops.refreshNow();
    return { status: 'done' };
  });

  registerForgeCommand(ctx, 'forge.showLog', vscode.l10n.t('Show Log'), async () => {
    ctx.channel.show(true);
    return { status: 'done' };
  });
}
