import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOOP_KINDS, LOOP_STATUSES, MAX_SECTIONS, PHASES, ROLES, roleOfPhase } from '../../../src/core/vocabulary/loop-vocabulary';
import { MAX_SECTIONS as PLAN_MAX_SECTIONS } from '../../../src/core/loop/plan';
import { PHASES as STATE_PHASES, roleOfPhase as stateRoleOfPhase } from '../../../src/core/loop/state';

const CORE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'src', 'core');

function tsFilesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return tsFilesUnder(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  return [...source.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1]!);
}

describe('vocabulary: the words the rooms share have a home of their own', () => {
  it('the vocabulary imports nothing', () => {
    const files = tsFilesUnder(path.join(CORE, 'vocabulary'));
    assert.ok(files.length >= 1);
    for (const file of files) assert.deepEqual(importsOf(file), [], `${path.relative(CORE, file)} imports something`);
  });

  it('storage imports nothing of the loop room (it reads the shared words from the vocabulary)', () => {
    const files = tsFilesUnder(path.join(CORE, 'storage'));
    assert.ok(files.length >= 10, `only ${files.length} storage files found`);
    const offenders = files.flatMap((file) =>
      importsOf(file)
        .filter((spec) => /(^|\/)loop(\/|$)/.test(spec) || spec === 'vscode')
        .map((spec) => `${path.relative(CORE, file)} imports ${spec}`),
    );
    assert.deepEqual(offenders, []);
  });

  it('the loop room re-exports the same words, not copies of them', () => {
    assert.equal(STATE_PHASES, PHASES);
    assert.equal(stateRoleOfPhase, roleOfPhase);
    assert.equal(PLAN_MAX_SECTIONS, MAX_SECTIONS);
  });

  it('every phase has exactly one role, and the lists hold no duplicates', () => {
    for (const list of [PHASES, ROLES, LOOP_KINDS, LOOP_STATUSES] as readonly (readonly string[])[]) {
      assert.equal(new Set(list).size, list.length);
    }
    assert.deepEqual(
      PHASES.map((p) => [p, roleOfPhase(p)]),
      [['coding', 'code'], ['auditing', 'auditor'], ['final_auditing', 'auditor'], ['final_audit_fix', 'code'], ['post_action', 'code']],
    );
  });
});
