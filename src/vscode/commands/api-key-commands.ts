import * as vscode from 'vscode';
import { ENV_NAME_PATTERN, KNOWN_PROVIDER_KEYS } from '../api-keys';
import type { ForgeContext } from '../forge-context';
import { registerForgeCommand } from './command-support';

export function registerApiKeyCommands(ctx: ForgeContext): void {
  registerForgeCommand(ctx, 'forge.setApiKey', vscode.l10n.t('Set Provider API Key'), async (arg) => {
    const given = arg as { env?: string; value?: string } | undefined;
    let envName = given?.env;
    if (!envName) {
      const stored = new Set(ctx.apiKeys.names());
      type Item = vscode.QuickPickItem & { env?: string; remove?: string };
      const items: Item[] = KNOWN_PROVIDER_KEYS.map((k) => ({ label: k.provider, description: k.env, detail: stored.has(k.env) ? vscode.l10n.t('stored — enter a new key to replace it') : undefined, env: k.env }));
      items.push({ label: vscode.l10n.t('$(edit) Another provider…'), description: vscode.l10n.t('name the environment variable opencode reads') });
      for (const name of stored) items.push({ label: vscode.l10n.t('$(trash) Remove {0}', name), remove: name });
      const picked = await vscode.window.showQuickPick(items, { title: vscode.l10n.t('Forge: Set Provider API Key'), placeHolder: vscode.l10n.t('Keys are kept in VS Code\'s secret storage and given to opencode only') });
      if (!picked) return { status: 'cancelled' };
      if (picked.remove) {
        await ctx.apiKeys.delete(picked.remove);
        ctx.engine.setOpencodeVariable(picked.remove, undefined);
        void ctx.notifier.info(vscode.l10n.t('Forge: {0} removed from the secret storage.', picked.remove));
        return { status: 'done' };
      }
      envName =
        picked.env ??
        (await vscode.window.showInputBox({
          title: vscode.l10n.t('Forge: Set Provider API Key'),
          prompt: vscode.l10n.t('Environment variable opencode reads the key from'),
          placeHolder: vscode.l10n.t('e.g. TOGETHER_API_KEY'),
          validateInput: (v) => (ENV_NAME_PATTERN.test(v) ? undefined : vscode.l10n.t('Use capital letters, digits and _ (e.g. MY_PROVIDER_API_KEY)')),
        }));
      if (!envName) return { status: 'cancelled' };
    }
    const value =
      given?.value ??
      (await vscode.window.showInputBox({
        title: vscode.l10n.t('Forge: {0}', envName),
        prompt: vscode.l10n.t('API key for {0} (stored in VS Code\'s secret storage; never written to settings, the database or the log)', envName),
        password: true,
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() === '' ? vscode.l10n.t('The key is empty.') : undefined),
      }));
    if (!value) return { status: 'cancelled' };
    await ctx.apiKeys.set(envName, value.trim());
    ctx.engine.setOpencodeVariable(envName, value.trim());
    ctx.log.info(`API key ${envName} stored (value not logged); used by opencode processes started from now on`);
    void ctx.notifier.info(vscode.l10n.t('Forge: {0} stored. Loops started from now on use it.', envName));
    return { status: 'done' };
  });
}
