import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync, lstatSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { copyIncludedFiles, copyPreparedFiles, includedPaths, listIncludedFiles, sha256 } from '../../../src/core/workspace/worktree-setup/setup-files';

const git = async (cwd: string, args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' });

describe('worktree setup: .worktreeinclude', () => {
  it('includedPaths: ignored AND matching, safe relative paths only', () => {
    assert.deepEqual(
      includedPaths(['.env', 'a/.env.local', 'b.log', '../x', 'c/.git/config', '/abs'], ['.env', 'a/.env.local', 'untracked-not-ignored', '../x', 'c/.git/config', '/abs']),
      ['.env', 'a/.env.local'],
    );
  });

  describe('with a real checkout', () => {
    let root: string;
    let checkout: string;
    let worktree: string;
    beforeEach(() => {
      root = mkdtempSync(path.join(tmpdir(), 'forge-wti-'));
      checkout = path.join(root, 'checkout');
      worktree = path.join(root, 'worktree');
      mkdirSync(path.join(checkout, 'config'), { recursive: true });
      mkdirSync(worktree);
      git(checkout, ['init', '-q']);
      writeFileSync(path.join(checkout, '.gitignore'), '.env\n*.local.json\nbuild/\nsecret-link\n');
      writeFileSync(path.join(checkout, '.env'), 'TOKEN=abc\n');
      writeFileSync(path.join(checkout, 'config', 'dev.local.json'), '{"x":1}\n');
      mkdirSync(path.join(checkout, 'build'));
      writeFileSync(path.join(checkout, 'build', 'out.js'), 'built\n');
      writeFileSync(path.join(checkout, 'notes.txt'), 'untracked, not ignored\n');
      writeFileSync(path.join(root, 'outside.txt'), 'outside\n');
      symlinkSync(path.join(root, 'outside.txt'), path.join(checkout, 'secret-link'));
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    it('copies only ignored regular files the patterns select, never through a link', async () => {
      const files = await listIncludedFiles({ git }, checkout, '.env\n*.local.json\nnotes.txt\nsecret-link\n');
      assert.deepEqual(files, ['.env', 'config/dev.local.json', 'secret-link']);
      const { copied, skipped } = await copyIncludedFiles(checkout, worktree, files);
      assert.deepEqual(copied.map((c) => c.path), ['.env', 'config/dev.local.json']);
      assert.deepEqual(skipped, ['secret-link']);
      assert.equal(readFileSync(path.join(worktree, '.env'), 'utf8'), 'TOKEN=abc\n');
      assert.equal(copied[0]!.sha256, sha256('TOKEN=abc\n'));
      assert.ok(!existsSync(path.join(worktree, 'notes.txt')));
      assert.ok(!existsSync(path.join(worktree, 'build')));
      assert.ok(!existsSync(path.join(worktree, 'secret-link')));
    });

    it('an empty include list copies nothing', async () => {
      assert.deepEqual(await listIncludedFiles({ git }, checkout, '# nothing\n'), []);
      assert.deepEqual(await listIncludedFiles({ git }, checkout, ''), []);
    });

    it('a link in the worktree refuses the copy (nothing is written outside)', async () => {
      mkdirSync(path.join(root, 'elsewhere'));
      symlinkSync(path.join(root, 'elsewhere'), path.join(worktree, 'config'));
      writeFileSync(path.join(root, 'target'), 'keep\n');
      symlinkSync(path.join(root, 'target'), path.join(worktree, '.env'));
      const { copied, skipped } = await copyIncludedFiles(checkout, worktree, ['.env', 'config/dev.local.json']);
      assert.deepEqual(copied, []);
      assert.deepEqual(skipped.sort(), ['.env', 'config/dev.local.json']);
      assert.equal(readFileSync(path.join(root, 'target'), 'utf8'), 'keep\n');
      assert.ok(!existsSync(path.join(root, 'elsewhere', 'dev.local.json')));
    });

    it('copyPreparedFiles copies the unchanged prepared files only', async () => {
      const { copied } = await copyIncludedFiles(checkout, worktree, ['.env', 'config/dev.local.json']);
      writeFileSync(path.join(worktree, 'config', 'dev.local.json'), 'changed by the agent\n');
      const clean = path.join(root, 'clean');
      mkdirSync(clean);
      await copyPreparedFiles(worktree, clean, copied);
      assert.equal(readFileSync(path.join(clean, '.env'), 'utf8'), 'TOKEN=abc\n');
      assert.ok(!existsSync(path.join(clean, 'config', 'dev.local.json')));
      assert.ok(lstatSync(path.join(clean, '.env')).isFile());
    });
  });
});
