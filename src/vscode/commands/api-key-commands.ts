import * as vscode from 'vscode';
import { ENV_NAME_PATTERN, KNOWN_PROVIDER_KEYS } from '../api-keys';
import type { ForgeContext } from '../forge-context';
import { registerForgeCommand } from './command-support';

export function registerApiKeyCommands(ctx: ForgeContext): void {
  registerForgeCommand(ctx, 'forge.setApiKey', 'Set Provider API Key', async (arg) => {
    const given = arg as { env?: string; value?: string } | undefined;
    let envName = given?.env;
    if (!envName) {
      const stored = new Set(ctx.apiKeys.names());
      type Item = vscode.QuickPickItem & { env?: string; remove?: string };
      const items: Item[] = KNOWN_PROVIDER_KEYS.map((k) => ({ label: k.provider, description: k.env, detail: stored.has(k.env) ? 'stored — enter a new key to replace it' : undefined, env: k.env }));
      items.push({ label: '$(edit) Another provider…', description: 'name the environment variable opencode reads' });
      for (const name of stored) items.push({ label: `$(trash) Remove ${name}`, remove: name });
      const picked = await vscode.window.showQuickPick(items, { title: 'Forge: Set Provider API Key', placeHolder: 'Keys are kept in VS Code\'s secret storage and given to opencode only' });
      if (!picked) return { status: 'cancelled' };
      if (picked.remove) {
        await ctx.apiKeys.delete(picked.remove);
        ctx.engine.setOpencodeVariable(picked.remove, undefined);
        void ctx.notifier.info(`Forge: ${picked.remove} removed from the secret storage.`);
        return { status: 'done' };
      }
      envName =
        picked.env ??
        (await vscode.window.showInputBox({
          title: 'Forge: Set Provider API Key',
          prompt: 'Environment variable opencode reads the key from',
          placeHolder: 'e.g. TOGETHER_API_KEY',
          validateInput: (v) => (ENV_NAME_PATTERN.test(v) ? undefined : 'Use capital letters, digits and _ (e.g. MY_PROVIDER_API_KEY)'),
        }));
      if (!envName) return { status: 'cancelled' };
    }
    const value =
      given?.value ??
      (await vscode.window.showInputBox({
        title: `Forge: ${envName}`,
        prompt: `API key for ${envName} (stored in VS Code's secret storage; never written to settings, the database or the log)`,
        password: true,
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() === '' ? 'The key is empty.' : undefined),
      }));
    if (!value) return { status: 'cancelled' };
    await ctx.apiKeys.set(envName, value.trim());
    ctx.engine.setOpencodeVariable(envName, value.trim());
    ctx.log.info(`API key ${envName} stored (value not logged); used by opencode processes started from now on`);
    void ctx.notifier.info(`Forge: ${envName} stored. Loops started from now on use it.`);
    return { status: 'done' };
  });
}
