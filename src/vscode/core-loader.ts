import { existsSync } from 'node:fs';
import { join } from 'node:path';

export type CoreModule = typeof import('./core-module');

/**
 * Loads the engine side of Forge on first use. A separate bundle (`dist/core.cjs`) when the
 * build made one, so the extension's own bundle stays small; otherwise the copy esbuild
 * inlined into the extension bundle (evaluated only now, never at activation).
 */
export function createCoreLoader(distDir: string): () => Promise<CoreModule> {
  let loading: Promise<CoreModule> | undefined;
  return () =>
    (loading ??= (async () => {
      const separate = join(distDir, 'core.cjs');
      if (existsSync(separate)) return require(separate) as CoreModule;
      return import('./core-module');
    })().catch((error: unknown) => {
      loading = undefined; // a later use may try again (e.g. after a rebuild)
      throw error;
    }));
}
