#!/usr/bin/env node
// Bundles Forge's extension tests for the VS Code extension host:
//   test/vscode/suite/index.ts      -> out/vscode-suite/index.cjs     (mocha bundled in)
//   test/vscode/suite/**/*.test.ts  -> out/vscode-suite/**/*.test.cjs (one self-contained bundle each)
// CommonJS with `vscode` external, so the extension host's `require` loads them
// (both code-server's Node 24 and an Electron's older Node).
// `node test/vscode/build-suite.mjs`
import * as esbuild from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const suiteSourceDir = join(repoRoot, 'test/vscode/suite');
export const suiteOutDir = join(repoRoot, 'out/vscode-suite');
export const suiteEntry = join(suiteOutDir, 'index.cjs');

export async function buildSuite() {
  const testFiles = readdirSync(suiteSourceDir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => join(suiteSourceDir, name));
  // Stale bundles of deleted tests would still be found and run.
  rmSync(suiteOutDir, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: [join(suiteSourceDir, 'index.ts'), ...testFiles],
    outbase: suiteSourceDir,
    outdir: suiteOutDir,
    outExtension: { '.js': '.cjs' },
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    external: ['vscode'],
    sourcemap: 'linked',
    // ESM-only dependencies read import.meta.url; in a CommonJS bundle it must be derived from __filename.
    define: { 'import.meta.url': '__forgeImportMetaUrl' },
    banner: { js: "const __forgeImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
    // mocha's parallel mode resolves worker files by path; the suite never uses it.
    logOverride: { 'require-resolve-not-external': 'silent' },
  });
  return { entry: suiteEntry, testFiles: testFiles.map((f) => relative(repoRoot, f)) };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { entry, testFiles } = await buildSuite();
  console.log(`[build-suite] ${relative(repoRoot, entry)} + ${testFiles.length} test file(s)`);
}
