import * as vscode from 'vscode';
import type { ProviderCatalog } from '../../core/opencode/agent-client';
import type { ForgeEngine } from '../engine-contract';
import type { ForgeContext } from '../forge-context';
import { errorMessage } from '../log';
import type { CommandResult } from './command-support';

/**
 * What the commands that start agents share (Execute Plan / Goal, Execute PRD): opencode's
 * model catalog, asked once per repository for a while, and the missing-opencode refusal.
 */

const CATALOG_TTL_MS = 10 * 60_000;
/** The setting the missing-opencode message's button opens. */
const OPENCODE_BINARY_SETTING = 'forge.opencode.binaryPath';

type CatalogCache = Map<string, { at: number; catalog: Promise<ProviderCatalog | undefined> }>;
const caches = new WeakMap<ForgeContext, CatalogCache>();

/** opencode's providers for `repoPath`, under a progress notification; cached for ten minutes (a failure is not kept). */
export function modelCatalog(ctx: ForgeContext, engine: ForgeEngine, repoPath: string): Promise<ProviderCatalog | undefined> {
  let catalogs = caches.get(ctx);
  if (!catalogs) caches.set(ctx, (catalogs = new Map()));
  const cache = catalogs;
  const cached = cache.get(repoPath);
  if (cached && Date.now() - cached.at < CATALOG_TTL_MS) return cached.catalog;
  const catalog = Promise.resolve(
    vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('Forge: asking opencode for its models…') }, () => engine.providers(repoPath)),
  ).then(
    (c) => c,
    (error: unknown) => {
      cache.delete(repoPath);
      ctx.log.warn(`could not list opencode's models: ${errorMessage(error)}`);
      void ctx.notifier.warn(vscode.l10n.t('Forge could not list opencode\'s models ({0}); pick the default or type a model in the settings.', errorMessage(error)));
      return undefined;
    },
  );
  cache.set(repoPath, { at: Date.now(), catalog });
  return catalog;
}

/**
 * Refuses with what to install and how when no opencode can be found (an installed VSIX carries
 * none), before any question is asked; the message's button opens the binary-path setting.
 * Nothing to check when Forge attaches to a running opencode server instead.
 */
export async function refuseWithoutOpencode(ctx: ForgeContext): Promise<CommandResult | undefined> {
  // Before the engine starts (which loads them) the settings' validator may not be loaded yet.
  const settings = await ctx.settings.load();
  if (settings['forge.opencode.serverUrl']) return undefined;
  const configuredPath = settings['forge.opencode.binaryPath'] || undefined;
  const core = await ctx.loadCore();
  try {
    core.resolveOpencodeBinary({ configuredPath });
    return undefined;
  } catch (error) {
    ctx.log.warn(`no opencode binary: ${errorMessage(error)}`);
    const message = configuredPath
      ? vscode.l10n.t('Forge: {0}', errorMessage(error))
      : vscode.l10n.t(
          'Forge needs opencode, the coding agent it runs, and found none on PATH or in the global npm folders. Install it with `npm install -g opencode-ai` (needs Node.js), or set Forge › Opencode: Binary Path to an opencode binary; Forge looks again at the next Execute Plan.',
        );
    const openSetting = vscode.l10n.t('Open Setting');
    void ctx.notifier.warn(message, openSetting).then((choice) => {
      if (choice === openSetting) void vscode.commands.executeCommand('workbench.action.openSettings', OPENCODE_BINARY_SETTING);
    });
    return { status: 'refused', reason: 'no-opencode', message };
  }
}
