/**
 * Finding an installed opencode on PATH and in the global install folders (the VSIX does not
 * carry the binary): real folders and executable scripts in a temporary directory, a PATH
 * built from them.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { findOpencodeOnPath, globalBinFolders, opencodeNotFoundMessage } from '../../../src/core/opencode/binary-discovery';
import { OpencodeStartError, resolveOpencodeBinary } from '../../../src/core/opencode/server-process';

describe('opencode binary discovery', () => {
  let root: string;
  const folder = (name: string) => {
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  const script = (dir: string, mode: number) => {
    const file = join(dir, 'opencode');
    writeFileSync(file, `#!/bin/sh\necho "opencode from ${dir}"\n`);
    chmodSync(file, mode);
    return file;
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'forge-opencode-lookup-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('finds the first executable opencode on PATH, skipping folders without one, a non-executable file and a folder of that name', () => {
    const empty = folder('empty');
    const notExecutable = folder('not-executable');
    script(notExecutable, 0o644);
    const aDirectory = folder('a-directory');
    mkdirSync(join(aDirectory, 'opencode'));
    const installed = folder('installed');
    const expected = script(installed, 0o755);
    const later = folder('later');
    script(later, 0o755);

    const found = findOpencodeOnPath({ env: { PATH: [empty, join(root, 'missing'), notExecutable, aDirectory, installed, later].join(delimiter) }, extraFolders: [] });
    assert.equal(found, expected);
    assert.equal(execFileSync(found!, [], { encoding: 'utf8' }).trim(), `opencode from ${installed}`);
  });

  it('looks in the extra folders after PATH', () => {
    const npmGlobal = folder('npm-global/bin');
    const expected = script(npmGlobal, 0o755);
    assert.equal(findOpencodeOnPath({ env: { PATH: folder('elsewhere') }, extraFolders: [npmGlobal] }), expected);
    assert.equal(findOpencodeOnPath({ env: {}, extraFolders: [folder('nothing-here'), npmGlobal] }), expected);
  });

  it('finds none when there is none, and says how to install one', () => {
    assert.equal(findOpencodeOnPath({ env: { PATH: folder('a') }, extraFolders: [folder('b')] }), undefined);
    const message = opencodeNotFoundMessage(['/ext/dist']);
    assert.match(message, /npm i -g opencode-ai/);
    assert.match(message, /forge\.opencode\.binaryPath/);
    assert.match(message, /\/ext\/dist/);
  });

  it("searches npm's global prefix, nvm's bin, pnpm's home and opencode's install folder of the user's environment", () => {
    const folders = globalBinFolders({ HOME: '/home/u', npm_config_prefix: '/opt/npm', NVM_BIN: '/home/u/.nvm/versions/node/v22/bin', PNPM_HOME: '/home/u/.pnpm' }, 'linux');
    for (const expected of ['/opt/npm/bin', '/home/u/.npm-global/bin', '/home/u/.nvm/versions/node/v22/bin', '/home/u/.pnpm', '/home/u/.opencode/bin', '/usr/local/bin']) {
      assert.ok(folders.includes(expected), `${expected} in ${folders.join(', ')}`);
    }
  });

  it('resolveOpencodeBinary falls back to an installed opencode when no opencode-ai package is reachable (an installed VSIX)', () => {
    const installed = script(folder('global/bin'), 0o755);
    const nowhere = folder('extension');
    const saved = { PATH: process.env.PATH, HOME: process.env.HOME, NPM_CONFIG_PREFIX: process.env.NPM_CONFIG_PREFIX };
    try {
      process.env.PATH = join(root, 'global/bin');
      assert.equal(resolveOpencodeBinary({ searchFrom: [nowhere] }), installed);
      process.env.PATH = folder('empty');
      process.env.HOME = folder('home');
      process.env.NPM_CONFIG_PREFIX = folder('prefix');
      // The folder of the Node running the tests may hold a global opencode: only assert the message when it does not.
      if (!findOpencodeOnPath()) {
        assert.throws(() => resolveOpencodeBinary({ searchFrom: [nowhere] }), (e: unknown) => e instanceof OpencodeStartError && /npm i -g opencode-ai/.test(e.message) && /forge\.opencode\.binaryPath/.test(e.message));
      }
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
