// Bundles Forge: the extension host entry, the headless CLI and the dashboard webview,
// and copies the runtime assets they load by path (sql.js wasm, agent prompts).
// `node esbuild.mjs [--watch] [--production]`
import * as esbuild from 'esbuild';
import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');
const dist = join(root, 'dist');

// ESM-only dependencies read import.meta.url; in a CommonJS bundle it must be derived from __filename.
const cjsImportMeta = {
  define: { 'import.meta.url': '__forgeImportMetaUrl' },
  banner: { js: "const __forgeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
};

const nodeBundle = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: production ? false : 'linked',
  minify: production,
  logLevel: 'info',
  ...cjsImportMeta,
};

/** @type {esbuild.BuildOptions[]} */
const builds = [
  { ...nodeBundle, entryPoints: { extension: 'src/extension.ts' }, outdir: dist, outExtension: { '.js': '.cjs' }, external: ['vscode'] },
  {
    ...nodeBundle,
    entryPoints: { cli: 'src/cli/main.ts' },
    outdir: dist,
    outExtension: { '.js': '.cjs' },
    banner: { js: '#!/usr/bin/env node\n' + cjsImportMeta.banner.js },
  },
  {
    bundle: true,
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    entryPoints: { webview: 'webview/main.ts' },
    outdir: dist,
    sourcemap: production ? false : 'linked',
    minify: production,
    logLevel: 'info',
  },
];

function copyAssets() {
  mkdirSync(dist, { recursive: true });
  cpSync(join(root, 'node_modules/sql.js/dist/sql-wasm.wasm'), join(dist, 'sql-wasm.wasm'));
  const agents = join(root, 'src/core/opencode/agents');
  if (existsSync(agents)) {
    mkdirSync(join(dist, 'agents'), { recursive: true });
    for (const f of readdirSync(agents)) if (f.endsWith('.md')) cpSync(join(agents, f), join(dist, 'agents', f));
  }
}

copyAssets();
if (watch) {
  const contexts = await Promise.all(builds.map((b) => esbuild.context(b)));
  await Promise.all(contexts.map((c) => c.watch()));
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
}
