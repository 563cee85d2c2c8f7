import * as vscode from 'vscode';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export type CoreModule = typeof import('./core-module');

/**
 * Loads the engine side of Forge on first use. The build (esbuild.mjs) makes it a separate
 * bundle, `dist/core.cjs`, so that loading the extension's own bundle at activation stays
 * cheap; run from source (tsx), the module is imported directly.
 */
export function createCoreLoader(distDir: string): () => Promise<CoreModule> {
  let loading: Promise<CoreModule> | undefined;
  return () =>
    (loading ??= (async () => {
      const separate = join(distDir, 'core.cjs');
      if (existsSync(separate)) return require(separate) as CoreModule;
      try {
        return await import('./core-module');
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
        throw new Error(vscode.l10n.t('Forge could not load its engine: {0} is missing. Reinstall the extension (in a checkout: npm run build).', separate), { cause: error });
      }
    })().catch((error: unknown) => {
      loading = undefined; // a later use may try again (e.g. after a rebuild)
      throw error;
    }));
}
