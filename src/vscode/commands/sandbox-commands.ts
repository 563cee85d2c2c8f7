import * as vscode from 'vscode';
import type { ForgeContext } from '../forge-context';
import { refuseIfUntrusted } from '../trust';
import { engineWithProgress, refused, registerForgeCommand } from './command-support';

export function registerSandboxCommands(ctx: ForgeContext): void {
  registerForgeCommand(ctx, 'forge.toggleSandbox', vscode.l10n.t('Toggle Sandbox'), async () => {
    await ctx.settings.load();
    const enabled = ctx.settings.get()['forge.sandbox.enabled'];
    if (!enabled) {
      // Turning it on: only when this machine can sandbox; say why not otherwise.
      const engine = await engineWithProgress(ctx);
      const availability = await ctx.statusBar.probe(engine);
      if (!availability.available) {
        return refused(ctx, 'unavailable', vscode.l10n.t('Forge cannot sandbox loops on this machine: {0}.', availability.reason ?? vscode.l10n.t('no sandbox driver is available')));
      }
    }
    await ctx.settings.update('forge.sandbox.enabled', !enabled);
    ctx.statusBar.render();
    ctx.log.info(`sandbox for new loops turned ${enabled ? 'off' : 'on'}`);
    return { status: 'done', detail: !enabled };
  });

  registerForgeCommand(ctx, 'forge.buildSandboxImage', vscode.l10n.t('Build Sandbox Image'), async () => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('build the sandbox image'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const engine = await engineWithProgress(ctx);
    const tag = ctx.settings.get()['forge.sandbox.image'];
    const log = ctx.log.child('sandbox-image');
    const outcome = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: building the sandbox image {0}', tag), cancellable: true },
      async (progress, token) => {
        const abort = new AbortController();
        const sub = token.onCancellationRequested(() => abort.abort());
        try {
          await engine.buildSandboxImage((line) => {
            log.info(line);
            const step = /^(?:#\d+ )?(?:STEP|Step) [^:]*:?\s*(.*)$/.exec(line);
            if (step) progress.report({ message: step[1]?.slice(0, 80) ?? '' });
          }, abort.signal);
          return 'built' as const;
        } catch (error) {
          if (abort.signal.aborted) return 'cancelled' as const;
          throw error;
        } finally {
          sub.dispose();
        }
      },
    );
    if (outcome === 'cancelled') {
      void ctx.notifier.info(vscode.l10n.t('Forge: building the sandbox image was cancelled.'));
      return { status: 'cancelled' };
    }
    void ctx.notifier.info(vscode.l10n.t('Forge: sandbox image {0} built.', tag));
    return { status: 'done' };
  });
}
