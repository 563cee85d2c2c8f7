/**
 * What a `forge` start evaluates at once (issue 14: a loop handed to the data folder's engine
 * costs a Node process and little more). The CLI's entry imports the engine, its database, the
 * opencode and MCP libraries and the worktree service only where a command opens them
 * (`await import(...)`), so a `forge run` that hands its loop over never loads them. The build
 * (esbuild.mjs) splits the CLI into ES module chunks along those imports; this test bundles the
 * real entry the same way and reads which sources the start pulls in statically, and reads the
 * built dist/cli.mjs's static imports, so a new static import of the engine fails here.
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as esbuild from 'esbuild';
import { ensureCliBuilt } from '../../support/cli-runner';
import { REPO_ROOT } from '../../support/loop-harness';

/** Every source the entry's chunk and the chunks it imports statically hold (paths as esbuild names them). */
async function eagerSources(entry: string): Promise<{ eager: Set<string>; all: Set<string> }> {
  const outdir = await mkdtemp(join(tmpdir(), 'forge-cli-imports-'));
  try {
    const result = await esbuild.build({
      entryPoints: [join(REPO_ROOT, entry)],
      absWorkingDir: REPO_ROOT,
      bundle: true,
      platform: 'node',
      format: 'esm',
      splitting: true,
      outdir,
      metafile: true,
      write: false,
      logLevel: 'silent',
    });
    const outputs = result.metafile.outputs;
    // The entry's own output: a command loaded on demand (import()) is an entry point of its own too.
    const entryOutput = Object.keys(outputs).find((k) => outputs[k]!.entryPoint === entry);
    assert.ok(entryOutput, 'esbuild names the entry output');
    const reached = new Set<string>();
    const queue = [entryOutput];
    while (queue.length > 0) {
      const name = queue.pop()!;
      if (reached.has(name)) continue;
      reached.add(name);
      for (const i of outputs[name]!.imports) if (i.kind === 'import-statement' && outputs[i.path]) queue.push(i.path);
    }
    const eager = new Set<string>();
    const all = new Set<string>();
    for (const [name, output] of Object.entries(outputs)) {
      for (const input of Object.keys(output.inputs)) {
        all.add(input);
        if (reached.has(name)) eager.add(input);
      }
    }
    return { eager, all };
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}

describe('forge start: what the CLI loads at once', function () {
  this.timeout(120_000);

  it('a start loads the engine endpoint, settings and plan checks, not the engine, database, opencode SDK, MCP library or worktree service', async () => {
    const { eager, all } = await eagerSources('src/cli/main.ts');
    // What a handed-over run needs is there.
    for (const needed of ['src/cli/run-loop.ts', 'src/cli/handover.ts', 'src/core/engine-host/engine-client.ts', 'src/core/config/settings.ts', 'src/core/loop/plan-validation.ts']) {
      assert.ok(eager.has(needed), `${needed} is loaded at start`);
    }
    // What only a supervising process needs is bundled, but loaded where a command opens it.
    const heavy = [
      'src/core/engine.ts',
      'src/core/loop/runtime.ts',
      'src/core/storage/database.ts',
      'src/core/opencode/embedded-model.ts',
      'src/core/workspace/worktree-service.ts',
      'src/cli/group-command.ts',
    ];
    for (const file of heavy) {
      assert.ok(all.has(file), `${file} is part of the CLI bundle (else this check checks nothing)`);
      assert.ok(!eager.has(file), `${file} must not be loaded at start: import it where the command needs it (await import)`);
    }
    for (const pkg of ['node_modules/@opencode-ai/sdk/', 'node_modules/@modelcontextprotocol/sdk/', 'node_modules/sql.js/']) {
      assert.ok([...all].some((f) => f.startsWith(pkg)), `${pkg} is part of the CLI bundle`);
      const loaded = [...eager].filter((f) => f.startsWith(pkg));
      assert.deepEqual(loaded, [], `${pkg} must not be loaded at start`);
    }
  });

  it('the built CLI (dist/cli.mjs) imports the engine chunk only where a command opens it', async () => {
    const cli = ensureCliBuilt(REPO_ROOT);
    const dist = dirname(cli);
    // The files Node loads when it starts dist/cli.mjs: the static `import … from "./…"` closure
    // (also of a minified build, whose imports share a line).
    const staticImports = (file: string) => [...readFileSync(join(dist, file), 'utf8').matchAll(/(?:^|[;}])\s*import\s*(?:[\w$*{},\s]+from\s*)?"\.\/([^"]+)"/g)].map((m) => m[1]!);
    const loaded = new Set<string>();
    const queue = ['cli.mjs'];
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (loaded.has(file)) continue;
      loaded.add(file);
      queue.push(...staticImports(file));
    }
    // The engine chunk this build's cli.mjs imports (an earlier build's may still be beside it).
    const engineChunk = /import\("\.\/(cli-engine-[^"]+\.mjs)"\)/.exec(readFileSync(cli, 'utf8'))?.[1];
    assert.ok(engineChunk, 'cli.mjs imports an engine chunk lazily (else this check checks nothing)');
    assert.ok(readdirSync(dist).includes(engineChunk), `${engineChunk} is beside cli.mjs`);
    assert.ok(!loaded.has(engineChunk), `${engineChunk} is loaded at start (static closure: ${[...loaded].join(', ')})`);
    const startBytes = [...loaded].reduce((sum, f) => sum + statSync(join(dist, f)).size, 0);
    const engineBytes = statSync(join(dist, engineChunk)).size;
    assert.ok(startBytes < engineBytes, `a start loads ${startBytes} bytes, more than the engine chunk's ${engineBytes}`);
  });
});
