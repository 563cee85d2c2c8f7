/**
 * The hardened invocation of Forge's git on a loop worktree (issue 26), pure: the repository
 * is named explicitly, every command-running setting is off, drivers the trusted configuration
 * defines are emptied, diff commands run no external program, and the environment names no
 * other repository, configuration or program.
 */
import assert from 'node:assert/strict';
import {
  HARDENING_CONFIG,
  driverOverrides,
  gitFileContent,
  hardenedGitArgv,
  hardenedGitEnv,
  parseDriverNames,
  parseGitFile,
  type HardenedGitTarget,
} from '../../../src/core/workspace/git-hardening';

const target: HardenedGitTarget = { gitDir: '/repo/.git/worktrees/loop', workTree: '/data/worktrees/loop', drivers: { filters: ['lfs'], merges: ['ours'] } };

/** The `-c` settings of an argv, in order. */
function configOf(argv: string[]): string[] {
  const out: string[] = [];
  argv.forEach((a, i) => {
    if (a === '-c') out.push(argv[i + 1]!);
  });
  return out;
}

describe('workspace: hardened git for loop worktrees', () => {
  it('names the git dir and work tree first, before any -c and the command', () => {
    const argv = hardenedGitArgv(target, ['status', '--porcelain']);
    assert.deepEqual(argv.slice(0, 2), ['--git-dir=/repo/.git/worktrees/loop', '--work-tree=/data/worktrees/loop']);
    assert.deepEqual(argv.slice(-2), ['status', '--porcelain']);
    assert.ok(!argv.includes('--no-textconv'), 'status takes no diff options');
  });

  it('switches off hooks, fsmonitor, transports, submodule recursion, signing and the global attributes file', () => {
    const config = configOf(hardenedGitArgv(target, ['commit', '-m', 'x']));
    for (const required of ['core.hooksPath=/dev/null', 'core.fsmonitor=false', 'protocol.allow=never', 'submodule.recurse=false', 'diff.ignoreSubmodules=all', 'core.attributesFile=/dev/null', 'commit.gpgSign=false', 'credential.helper=']) {
      assert.ok(config.includes(required), `${required} missing from ${config.join(' ')}`);
    }
    assert.deepEqual(config.slice(0, HARDENING_CONFIG.length), [...HARDENING_CONFIG]);
  });

  it('empties every filter and merge driver of the trusted configuration, and lets the caller add settings after them', () => {
    const config = configOf(hardenedGitArgv(target, ['add', '-A'], ['user.name=Forge']));
    for (const s of ['filter.lfs.clean=', 'filter.lfs.smudge=', 'filter.lfs.process=', 'filter.lfs.required=false', 'merge.ours.driver=false']) assert.ok(config.includes(s), s);
    assert.equal(config[config.length - 1], 'user.name=Forge');
    assert.deepEqual(driverOverrides({ filters: [], merges: [] }), []);
  });

  it('gives diff, log and show --no-ext-diff and --no-textconv right after the command', () => {
    for (const command of ['diff', 'log', 'show']) {
      const argv = hardenedGitArgv(target, [command, '--name-only', 'HEAD']);
      const at = argv.indexOf(command);
      assert.deepEqual(argv.slice(at), [command, '--no-ext-diff', '--no-textconv', '--name-only', 'HEAD']);
    }
  });

  it('drops variables that name another repository, configuration or program, and reads no system attributes', () => {
    const env = hardenedGitEnv({
      PATH: '/usr/bin',
      HOME: '/home/u',
      GIT_DIR: '/evil',
      GIT_WORK_TREE: '/evil',
      GIT_CONFIG_PARAMETERS: "'core.fsmonitor'='touch /tmp/x'",
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'core.fsmonitor',
      GIT_CONFIG_VALUE_0: 'touch /tmp/x',
      GIT_EXTERNAL_DIFF: 'touch /tmp/x',
      GIT_SSH_COMMAND: 'touch /tmp/x',
      GIT_EXEC_PATH: '/evil',
    });
    assert.deepEqual(env, { PATH: '/usr/bin', HOME: '/home/u', GIT_ATTR_NOSYSTEM: '1' });
  });

  it('reads driver names, dotted ones included, from git config --name-only output', () => {
    const names = parseDriverNames(['filter.lfs.clean', 'filter.lfs.smudge', 'filter.a.b.process', 'merge.ours.driver', 'merge.union.name', 'filterx.y.clean', 'diff.x.textconv', ''].join('\n'));
    assert.deepEqual(names, { filters: ['a.b', 'lfs'], merges: ['ours', 'union'] });
  });

  it('reads and writes the .git file of a linked worktree', () => {
    assert.equal(parseGitFile(gitFileContent('/r/.git/worktrees/a')), '/r/.git/worktrees/a');
    assert.equal(parseGitFile('gitdir: /x\r\n'), '/x');
    assert.equal(parseGitFile('[core]\n\tfsmonitor = x\n'), null);
    assert.equal(parseGitFile(''), null);
  });
});
