// The checks scripts/package-vsix.mjs runs on forge.vsix (pure: a zip's central directory,
// the runtime files that must be inside, the README block), without packaging anything.
import * as assert from 'node:assert/strict';
// @ts-expect-error: a plain ES module script without type declarations
import { readmeBlock, requiredRuntimeFiles, vsixContentProblems, zipEntries } from '../../../scripts/package-vsix.mjs';

type VsixFile = { path: string; size: number };

/** A zip archive's central directory and end record (all zipEntries reads), entries of the given sizes. */
function zipDirectory(entries: VsixFile[]): Buffer {
  const records = entries.map(({ path, size }) => {
    const name = Buffer.from(path, 'utf8');
    const record = Buffer.alloc(46);
    record.writeUInt32LE(0x02014b50, 0);
    record.writeUInt32LE(size, 24);
    record.writeUInt16LE(name.length, 28);
    return Buffer.concat([record, name]);
  });
  const directory = Buffer.concat(records);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(0, 16);
  return Buffer.concat([directory, end]);
}

describe('package-vsix checks', () => {
  const complete: VsixFile[] = (requiredRuntimeFiles() as string[]).map((path) => ({ path, size: 100 }));

  it('requires the bundles, the webview, the sql.js wasm, every agent prompt and the media', () => {
    const required = requiredRuntimeFiles() as string[];
    for (const path of ['dist/extension.cjs', 'dist/core.cjs', 'dist/webview.js', 'dist/sql-wasm.wasm', 'dist/agents/forge-code.md', 'dist/agents/forge-auditor.md', 'dist/agents/forge-architect.md', 'media/dashboard.css']) {
      assert.ok(required.includes(path), path);
    }
  });

  it('finds nothing wrong with a complete VSIX', () => {
    assert.deepEqual(vsixContentProblems(complete), []);
  });

  it('names each missing runtime file and anything of node_modules or an opencode binary', () => {
    const problems = vsixContentProblems([
      ...complete.filter((f) => f.path !== 'dist/sql-wasm.wasm' && f.path !== 'dist/agents/forge-code.md'),
      { path: 'node_modules/sql.js/package.json', size: 1 },
      { path: 'bin/opencode', size: 1 },
    ]) as string[];
    assert.equal(problems.length, 4, problems.join('\n'));
    assert.match(problems[0]!, /^dist\/sql-wasm\.wasm is missing/);
    assert.match(problems[1]!, /^dist\/agents\/forge-code\.md is missing/);
    assert.match(problems[2]!, /^node_modules\/sql\.js\/package\.json must not be packaged/);
    assert.match(problems[3]!, /^bin\/opencode must not be packaged/);
  });

  it('reads names and uncompressed sizes from the zip central directory', () => {
    const entries = [
      { path: 'extension.vsixmanifest', size: 2703 },
      { path: 'extension/dist/core.cjs', size: 1_168_467 },
      { path: 'extension/media/forge.svg', size: 264 },
    ];
    assert.deepEqual(zipEntries(zipDirectory(entries)), entries.map(({ path, size }) => ({ name: path, size })));
    assert.throws(() => zipEntries(Buffer.from('not a zip')), /not a zip archive/);
  });

  it('writes the README block: size, count and one row per file', () => {
    const block = readmeBlock(722_000, [
      { path: 'dist/core.cjs', size: 1_168_467 },
      { path: 'media/forge.svg', size: 264 },
    ]) as string;
    assert.match(block, /^<!-- vsix-contents:start/);
    assert.match(block, /<!-- vsix-contents:end -->$/);
    assert.match(block, /forge\.vsix is about 0\.7 MB \(2 files, 1\.1 MB unpacked\)/);
    assert.deepEqual([...block.matchAll(/^\| `([^`]+)` \| ([\d.]+) KiB \|$/gm)].map((m) => [m[1], m[2]]), [['dist/core.cjs', '1141'], ['media/forge.svg', '0.3']]);
  });
});
