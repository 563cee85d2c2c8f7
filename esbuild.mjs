// Bundles Forge: the extension host entry, the engine it loads on first use, the headless CLI
// and the dashboard webview, and copies the runtime assets they load by path (sql.js wasm,
// agent prompts). `--outdir DIR` writes them somewhere else than dist/ (bench/ui-scale.mjs).
// `node esbuild.mjs [--watch] [--production] [--outdir DIR]`
import * as esbuild from 'esbuild';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const watch = process.argv.includes('--watch');
const production = process.argv.includes('--production');
const outdirArg = process.argv.indexOf('--outdir');
if (outdirArg !== -1 && !process.argv[outdirArg + 1]) throw new Error('esbuild.mjs: --outdir needs a folder');
const dist = outdirArg === -1 ? join(root, 'dist') : resolve(process.argv[outdirArg + 1]);

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

/**
 * `import * as vscode from 'vscode'` bundled to CommonJS wraps the API object in a fresh copy
 * of all its properties per importing file (esbuild's __toESM): some twenty copies, nearly half
 * of loading the extension's bundle at activation. Instead every import of 'vscode' goes to one
 * ES module that reads the names Forge uses (found in src/) from the API object once.
 */
const vscodeFacade = {
  name: 'vscode-facade',
  setup(build) {
    build.onResolve({ filter: /^vscode$/ }, (args) => (args.namespace === 'vscode-facade' ? { path: 'vscode', external: true } : { path: 'vscode', namespace: 'vscode-facade' }));
    build.onLoad({ filter: /.*/, namespace: 'vscode-facade' }, () => {
      const names = new Set();
      const scan = (dir) => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const path = join(dir, entry.name);
          if (entry.isDirectory()) scan(path);
          else if (entry.name.endsWith('.ts')) for (const m of readFileSync(path, 'utf8').matchAll(/\bvscode\.([A-Za-z_$][\w$]*)/g)) names.add(m[1]);
        }
      };
      scan(join(root, 'src'));
      return { contents: `const api = require('vscode');\nexport const { ${[...names].sort().join(', ')} } = api;\n`, loader: 'js', resolveDir: root };
    });
  },
};

/**
 * Writes the CLI's files so that a `forge` process already running keeps working across a
 * rebuild: it imports chunks (`dist/cli-*.mjs`) while it runs, some only at its end. Each file
 * is replaced by a rename (never seen half-written) and only when its content changed (a chunk's
 * name carries its content hash, so an unchanged chunk is never touched); a chunk the new build
 * no longer has stays a day for the processes that may still import it, then goes. The CommonJS
 * CLI of builds before the split (`cli.cjs`) goes at once.
 */
const STALE_CLI_CHUNK_MS = 24 * 60 * 60 * 1000;
const cliOutput = {
  name: 'cli-output',
  setup(build) {
    build.onEnd((result) => {
      if (!result.outputFiles) return;
      mkdirSync(dist, { recursive: true });
      const written = new Set();
      for (const file of result.outputFiles) {
        written.add(file.path);
        if (existsSync(file.path) && Buffer.compare(readFileSync(file.path), file.contents) === 0) continue;
        const temporary = `${file.path}.${process.pid}.tmp`;
        writeFileSync(temporary, file.contents, { mode: file.path.endsWith('cli.mjs') ? 0o755 : 0o644 });
        renameSync(temporary, file.path);
      }
      const now = Date.now();
      for (const name of readdirSync(dist)) {
        const path = join(dist, name);
        try {
          if (/^cli\.cjs(\.map)?$/.test(name)) rmSync(path, { force: true });
          else if (/^cli-.*\.mjs(\.map)?$/.test(name) && !written.has(path) && now - statSync(path).mtimeMs > STALE_CLI_CHUNK_MS) rmSync(path, { force: true });
        } catch {
          // Gone meanwhile (another build): nothing to remove.
        }
      }
    });
  },
};

/** @type {esbuild.BuildOptions[]} */
const builds = [
  // The extension entry leaves the engine side out (src/vscode/core-module.ts: sql.js, zod, the
  // opencode and MCP SDKs) so that activation loads only the surfaces; the engine is its own
  // bundle, dist/core.cjs, which src/vscode/core-loader.ts loads on first use.
  { ...nodeBundle, entryPoints: { extension: 'src/extension.ts' }, outdir: dist, outExtension: { '.js': '.cjs' }, external: ['vscode', './core-module'], plugins: [vscodeFacade] },
  { ...nodeBundle, entryPoints: { core: 'src/vscode/core-module.ts' }, outdir: dist, outExtension: { '.js': '.cjs' }, external: ['vscode'] },
  // The CLI is ES modules split into chunks: `dist/cli.mjs` holds what every command needs
  // (arguments, settings, plan checks, the engine endpoint) and imports the rest where a command
  // opens it (`await import`: the engine, its database, the opencode and MCP SDKs, git). A
  // `forge run` that hands its loop to the data folder's engine thus never loads the engine's
  // 1.5 MB; as one CommonJS file, V8 held all 2.6 MB of source (two-byte) and its heap the rest:
  // 22.5 MB against 13 MB of private memory per handed-over run. Chunks sit beside cli.mjs
  // (dist/cli-*.mjs) so that __dirname is dist/ in each, as the assets are found from there.
  {
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    splitting: true,
    sourcemap: production ? false : 'linked',
    minify: production,
    logLevel: 'info',
    entryPoints: { cli: 'src/cli/main.ts' },
    outdir: dist,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'cli-[name]-[hash]',
    write: false,
    plugins: [cliOutput],
    // CommonJS dependencies call require() and read __filename/__dirname: each output file
    // defines them for itself from import.meta.url.
    banner: {
      js: [
        '#!/usr/bin/env node',
        "import { createRequire as __forgeCreateRequire } from 'node:module';",
        "import { fileURLToPath as __forgeFileURLToPath } from 'node:url';",
        "import { dirname as __forgeDirname } from 'node:path';",
        'const require = __forgeCreateRequire(import.meta.url);',
        'const __filename = __forgeFileURLToPath(import.meta.url);',
        'const __dirname = __forgeDirname(__filename);',
      ].join('\n'),
    },
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
