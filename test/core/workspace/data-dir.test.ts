import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MAX_DATA_DIR_LENGTH, WorkspaceError, ensureDataDir, resolveDataDir } from '../../../src/core/workspace';
import { rejection } from './git-fixture';

describe('workspace: data folder', () => {
  describe('resolveDataDir', () => {
    const home = '/home/user';
    const cases: Array<[what: string, env: Record<string, string | undefined>, expected: string]> = [
      ['FORGE_DATA_DIR wins', { FORGE_DATA_DIR: '/data/forge', XDG_DATA_HOME: '/xdg' }, '/data/forge'],
      ['FORGE_DATA_DIR is normalised', { FORGE_DATA_DIR: '/data/./x/../forge/' }, '/data/forge'],
      ['XDG_DATA_HOME/forge', { XDG_DATA_HOME: '/xdg' }, '/xdg/forge'],
      ['empty FORGE_DATA_DIR counts as unset', { FORGE_DATA_DIR: '', XDG_DATA_HOME: '/xdg' }, '/xdg/forge'],
      ['blank FORGE_DATA_DIR counts as unset', { FORGE_DATA_DIR: '  ' }, '/home/user/.local/share/forge'],
      ['relative XDG_DATA_HOME is ignored (XDG spec)', { XDG_DATA_HOME: 'relative/xdg' }, '/home/user/.local/share/forge'],
      ['home fallback', {}, '/home/user/.local/share/forge'],
    ];
    for (const [what, env, expected] of cases) {
      it(what, () => assert.equal(resolveDataDir(env, { homeDir: home, platform: 'linux' }), expected));
    }

    it('uses %LOCALAPPDATA%\\forge on Windows', () => {
      assert.equal(
        resolveDataDir({ LOCALAPPDATA: 'C:\\Users\\me\\AppData\\Local' }, { homeDir: 'C:\\Users\\me', platform: 'win32' }),
        'C:\\Users\\me\\AppData\\Local\\forge',
      );
    });

    it('rejects a relative FORGE_DATA_DIR with a clear message', () => {
      assert.throws(
        () => resolveDataDir({ FORGE_DATA_DIR: 'forge-data' }, { homeDir: home, platform: 'linux' }),
        (error: unknown) => error instanceof WorkspaceError && error.code === 'data_dir_invalid' && /absolute path/.test(error.message),
      );
    });

    it('rejects a missing home folder when nothing else is set', () => {
      assert.throws(
        () => resolveDataDir({}, { homeDir: '', platform: 'linux' }),
        (error: unknown) => error instanceof WorkspaceError && error.code === 'data_dir_invalid' && /FORGE_DATA_DIR/.test(error.message),
      );
    });

    it('rejects a path too long to hold worktrees', () => {
      const long = `/${'d'.repeat(MAX_DATA_DIR_LENGTH.other)}`;
      assert.throws(
        () => resolveDataDir({ FORGE_DATA_DIR: long }, { platform: 'linux' }),
        (error: unknown) => error instanceof WorkspaceError && error.code === 'data_dir_too_long' && /shorter/.test(error.message),
      );
      assert.equal(resolveDataDir({ FORGE_DATA_DIR: long.slice(0, MAX_DATA_DIR_LENGTH.other) }, { platform: 'linux' }).length, MAX_DATA_DIR_LENGTH.other);
    });

    it('applies the tighter Windows limit', () => {
      const long = `C:\\${'d'.repeat(MAX_DATA_DIR_LENGTH.win32)}`;
      assert.throws(() => resolveDataDir({ FORGE_DATA_DIR: long }, { platform: 'win32' }), (error: unknown) => error instanceof WorkspaceError && error.code === 'data_dir_too_long');
    });
  });

  describe('ensureDataDir', () => {
    let root: string;
    beforeEach(() => {
      root = mkdtempSync(path.join(tmpdir(), 'forge-datadir-'));
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    it('creates <dataDir>/worktrees and leaves no probe file behind', async () => {
      const dataDir = path.join(root, 'nested', 'forge');
      await ensureDataDir(dataDir);
      assert.ok(statSync(path.join(dataDir, 'worktrees')).isDirectory());
      assert.deepEqual(readdirSync(dataDir), ['worktrees']);
      await ensureDataDir(dataDir); // idempotent
    });

    it('reports an unwritable data folder (a file sits where a folder should be)', async () => {
      const blocker = path.join(root, 'blocker');
      writeFileSync(blocker, 'not a folder');
      const error = await rejection(ensureDataDir(path.join(blocker, 'forge')));
      assert.ok(error instanceof WorkspaceError);
      assert.equal(error.code, 'data_dir_unwritable');
      assert.match(error.message, /cannot write to its data folder .*blocker.*FORGE_DATA_DIR/);
    });

    it('reports a read-only data folder', async function () {
      if (process.getuid?.() === 0) {
        // root writes through permission bits; sysfs refuses new folders even to root.
        const error = await rejection(ensureDataDir('/sys/forge-test-data'));
        assert.ok(error instanceof WorkspaceError);
        assert.equal(error.code, 'data_dir_unwritable');
        return;
      }
      const { chmodSync } = await import('node:fs');
      const locked = path.join(root, 'locked');
      await ensureDataDir(locked);
      chmodSync(locked, 0o500);
      try {
        const error = await rejection(ensureDataDir(locked));
        assert.equal((error as WorkspaceError).code, 'data_dir_unwritable');
      } finally {
        chmodSync(locked, 0o700);
      }
    });

    it('fails (rather than hangs) under procfs', async () => {
      const error = await rejection(ensureDataDir('/proc/forge-test-data'));
      assert.ok(error instanceof WorkspaceError);
      assert.equal(error.code, 'data_dir_unwritable');
    });

    it('reports a path component longer than the file system allows', async () => {
      const error = await rejection(ensureDataDir(path.join(root, 'n'.repeat(300))));
      assert.ok(error instanceof WorkspaceError);
      assert.equal(error.code, 'data_dir_too_long');
      assert.ok(!existsSync(path.join(root, 'n'.repeat(10))));
    });
  });
});
