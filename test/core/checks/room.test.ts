import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const CHECKS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'core', 'checks');

describe('checks: a room of its own', () => {
  it('imports nothing of the loop, the CLI, VS Code or the storage (they depend on it, never the reverse)', () => {
    const files = readdirSync(CHECKS_DIR).filter((f) => f.endsWith('.ts'));
    assert.ok(files.length >= 7, files.join(', '));
    for (const file of files) {
      const source = readFileSync(path.join(CHECKS_DIR, file), 'utf8');
      const imports = [...source.matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
      for (const spec of imports) {
        assert.ok(!/(^|\/)(loop|cli|vscode|storage)(\/|$)/.test(spec) && spec !== 'vscode', `${file} imports ${spec}`);
      }
    }
  });
});
