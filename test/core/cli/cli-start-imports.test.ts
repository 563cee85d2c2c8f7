/**
 * What a `forge` start evaluates at once (issue 14: a loop handed to the data folder's engine
 * costs a Node process and little more). The CLI's entry imports the engine, its database and
 * the opencode, MCP and git libraries only where a command opens them (`await import(...)`), so
 * a `forge run` that hands its loop over never loads them. esbuild bundles those lazily either
 * way; this test bundles the real entry with the dynamic imports split off and reads which
 * sources the start pulls in statically, so a new static import of the engine fails here.
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as esbuild from 'esbuild';
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
    const entryOutput = Object.keys(outputs).find((k) => outputs[k]!.entryPoint);
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

  it('a start loads the engine endpoint, settings and plan checks, not the engine, database, opencode SDK, MCP or git libraries', async () => {
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
    for (const pkg of ['node_modules/@opencode-ai/sdk/', 'node_modules/@modelcontextprotocol/sdk/', 'node_modules/simple-git/', 'node_modules/sql.js/']) {
      assert.ok([...all].some((f) => f.startsWith(pkg)), `${pkg} is part of the CLI bundle`);
      const loaded = [...eager].filter((f) => f.startsWith(pkg));
      assert.deepEqual(loaded, [], `${pkg} must not be loaded at start`);
    }
  });
});
