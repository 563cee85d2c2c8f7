/**
 * The built CLI is ES module chunks (dist/cli.mjs and dist/cli-*.mjs) that a running `forge`
 * imports while it runs, some at a command's end. A rebuild under a running command must not take
 * them away: esbuild.mjs replaces a file only when its content changed (by a rename, never
 * half-written), keeps chunks the new build no longer has for a day, and removes the CommonJS CLI
 * of builds before the split. Real build (`node esbuild.mjs --outdir`), real files.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../support/loop-harness';

describe('the CLI build: chunks a running forge imports survive a rebuild', function () {
  this.timeout(180_000);
  let out: string;
  before(async () => {
    out = await mkdtemp(join(tmpdir(), 'forge-cli-build-'));
  });
  after(async () => {
    if (out) await rm(out, { recursive: true, force: true });
  });

  const build = () => execFileSync(process.execPath, [join(REPO_ROOT, 'esbuild.mjs'), '--outdir', out], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const chunks = () => readdirSync(out).filter((f) => /^cli-.*\.mjs$/.test(f)).sort();

  it('an unchanged rebuild touches no chunk; a chunk of an earlier build stays a day, then goes; cli.cjs goes', () => {
    build();
    const first = chunks();
    assert.ok(first.some((f) => f.startsWith('cli-engine-')), `the engine is a chunk of its own (${first.join(', ')})`);
    const mtimes = new Map(first.map((f) => [f, statSync(join(out, f)).mtimeMs]));
    const dayAgo = (Date.now() - 25 * 60 * 60 * 1000) / 1000;
    writeFileSync(join(out, 'cli-chunk-EARLIER1.mjs'), 'export const a = 1;\n');
    writeFileSync(join(out, 'cli-chunk-EARLIER2.mjs'), 'export const b = 2;\n');
    utimesSync(join(out, 'cli-chunk-EARLIER2.mjs'), dayAgo, dayAgo);
    writeFileSync(join(out, 'cli.cjs'), '// the CommonJS CLI before the split\n');

    build();
    for (const f of first) {
      assert.ok(existsSync(join(out, f)), `${f} is still there`);
      assert.equal(statSync(join(out, f)).mtimeMs, mtimes.get(f), `${f} was not rewritten (same content)`);
    }
    assert.ok(existsSync(join(out, 'cli-chunk-EARLIER1.mjs')), "a chunk of an earlier build stays for processes that may still import it");
    assert.ok(!existsSync(join(out, 'cli-chunk-EARLIER2.mjs')), 'a chunk of an earlier build older than a day is removed');
    assert.ok(!existsSync(join(out, 'cli.cjs')), 'the CommonJS CLI of builds before the split is removed');
    assert.deepEqual(readdirSync(out).filter((f) => f.endsWith('.tmp')), [], 'no temporary file is left');
    assert.match(execFileSync(process.execPath, [join(out, 'cli.mjs'), '--help'], { encoding: 'utf8' }), /forge run PLAN\.md/);
  });
});
