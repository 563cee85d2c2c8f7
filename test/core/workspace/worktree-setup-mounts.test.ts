import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sha256 } from '../../../src/core/workspace/worktree-setup/setup-files';
import { isPreparedEntry, makeMountPoints, setupMounts, type WorktreeSetupState } from '../../../src/core/workspace/worktree-setup/worktree-setup';

function state(root: string): WorktreeSetupState {
  return {
    status: 'pending',
    checkoutDir: '/home/u/repo',
    folders: [
      { folder: 'node_modules', source: '/home/u/repo/node_modules', mode: 'reuse' },
      { folder: 'api/.venv', source: '/home/u/repo/api/.venv', mode: 'reuse', alsoAtSource: true },
      { folder: 'web/node_modules', source: path.join(root, 'deps', '0'), mode: 'install' },
    ],
    commands: [],
    includePatterns: '',
    copied: [{ path: '.env', sha256: sha256('A=1\n') }],
    problems: [],
  };
}

describe('worktree setup: mounts and the prepared entries', () => {
  let root: string;
  let wt: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'forge-mounts-'));
    wt = path.join(root, 'wt');
    mkdirSync(wt);
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('setupMounts: read-only for the work; the installed folders writable during setup; a venv also at its own path', () => {
    const s = state(root);
    const work = setupMounts(s, '/w', 'work');
    assert.deepEqual(work.writableBinds, []);
    assert.deepEqual(work.readOnlyBinds, [
      { source: '/home/u/repo/node_modules', target: '/w/node_modules' },
      { source: '/home/u/repo/api/.venv', target: '/w/api/.venv' },
      { source: '/home/u/repo/api/.venv', target: '/home/u/repo/api/.venv' },
      { source: path.join(root, 'deps', '0'), target: '/w/web/node_modules' },
    ]);
    const setup = setupMounts(s, '/w', 'setup');
    assert.deepEqual(setup.writableBinds, [{ source: path.join(root, 'deps', '0'), target: '/w/web/node_modules' }]);
    assert.equal(setup.readOnlyBinds.length, 3);
    assert.deepEqual(setupMounts(undefined, '/w', 'work'), { readOnlyBinds: [], writableBinds: [] });
  });

  it('makeMountPoints: empty folders (and the Forge-owned install folder); a link on the way or a file there is refused', async () => {
    const s = state(root);
    await makeMountPoints(s, wt);
    assert.deepEqual(readdirSync(path.join(wt, 'node_modules')), []);
    assert.deepEqual(readdirSync(path.join(wt, 'web', 'node_modules')), []);
    assert.deepEqual(readdirSync(path.join(root, 'deps', '0')), []);
    const hostile = path.join(root, 'hostile');
    mkdirSync(hostile);
    mkdirSync(path.join(root, 'elsewhere'));
    symlinkSync(path.join(root, 'elsewhere'), path.join(hostile, 'api'));
    await assert.rejects(makeMountPoints(s, hostile), /api in .* is a link/);
    const file = path.join(root, 'file');
    mkdirSync(file);
    writeFileSync(path.join(file, 'node_modules'), 'x');
    await assert.rejects(makeMountPoints(s, file), /node_modules in .* is not a folder/);
  });

  it('isPreparedEntry: an empty mount point and an unchanged copy are Forge\'s; anything else is not', async () => {
    const s = state(root);
    await makeMountPoints(s, wt);
    writeFileSync(path.join(wt, '.env'), 'A=1\n');
    assert.equal(await isPreparedEntry(s, wt, 'node_modules/'), true);
    assert.equal(await isPreparedEntry(s, wt, '.env'), true);
    writeFileSync(path.join(wt, 'node_modules', 'hidden.js'), 'x');
    assert.equal(await isPreparedEntry(s, wt, 'node_modules/'), false);
    writeFileSync(path.join(wt, '.env'), 'A=2\n');
    assert.equal(await isPreparedEntry(s, wt, '.env'), false);
    assert.equal(await isPreparedEntry(s, wt, 'add.js'), false);
    assert.equal(await isPreparedEntry(undefined, wt, '.env'), false);
  });
});

describe('worktree setup: the dashboard line', () => {
  it('says what was prepared and how it went', async () => {
    const { describeSetup } = await import('../../../src/core/loop/loop-setup');
    const s = { ...state('/r'), commands: [{ label: 'setup: make', command: 'make', dir: '' }] };
    assert.equal(describeSetup(s), "Setup pending · node_modules (your checkout's, read-only) · api/.venv (your checkout's, read-only) · web/node_modules (installed) · 1 file of .worktreeinclude · 1 command");
    assert.equal(describeSetup({ ...s, folders: [], copied: [], status: 'done', durationMs: 2100 }), 'Setup done in 2.1 s · 1 command');
    assert.equal(describeSetup({ ...s, folders: [], copied: [], commands: [], status: 'failed', durationMs: 300, message: 'setup: make failed (exit 2):\nboom' }), 'Setup failed in 0.3 s: setup: make failed (exit 2):');
  });
});
