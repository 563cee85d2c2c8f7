/**
 * Clean-up after a crash (issue 26), at the `forge` CLI (built `dist/cli.mjs`, real processes,
 * real opencode, real git, real bubblewrap; the embedded scripted model writes the plan's files).
 * A `forge group … --launch --sandbox` is killed with SIGKILL (its main process only, as a crash
 * leaves the rest) while a sandboxed loop's check runs, and while the merge queue checks a merged
 * tree; the next `forge` command removes what the dead process left — the loop's bwrap sandbox
 * (record and cgroup), the throw-away merge worktree registered in the
 * repository, the merge-check sandbox — and says what it removed. `group resume` after the kill
 * mid-merge completes the group and leaves no merge worktree registered.
 *
 * The feature's check sleeps (a unique duration, to find its process) only where a mode file in
 * the repository's git folder, which the sandbox sees read-only, says so: `loop` in the loop's
 * worktree, `merge` in the merge queue's scratch worktree.
 */
import { strict as assert } from 'node:assert';
import { randomInt } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import { bwrapPrereqs } from '../../support/sandbox-fixtures';
import { sandboxPrefixForDataDir } from '../../../src/core/sandbox/manager';
import { processesWithArgument } from '../../support/processes';

const fence = '```';

const processesWith = processesWithArgument;

/** Forge's cgroups of this data folder, in every hierarchy (v2 or v1). */
function forgeCgroups(prefix: string): string[] {
  const parents = ['/sys/fs/cgroup/forge', ...['pids', 'memory', 'cpu'].map((c) => `/sys/fs/cgroup/${c}/forge`)];
  return parents.flatMap((p) => (existsSync(p) ? readdirSync(p).filter((n) => n.startsWith(prefix)).map((n) => join(p, n)) : []));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually(what: string, check: () => boolean, timeoutMs: number, describe: () => string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for: ${what}\n${describe()}`);
    await sleep(200);
  }
}

describe('forge: clean-up after a SIGKILL (real CLI, real opencode, real bwrap, embedded scripted model)', function () {
  this.timeout(900_000);
  const world = useCliLoopWorld('forge-cli-crash-cleanup-', { 'README.md': '# shop\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });
  const settings = { 'forge.sandbox.enabled': true, 'forge.sandbox.driver': 'bwrap', 'forge.sandbox.network': false };
  const tokens: string[] = [];
  let prefix: string;
  let modeFile: string;
  before(() => {
    bwrapPrereqs();
    prefix = sandboxPrefixForDataDir(join(world.work, 'data')).slice(0, -1);
    modeFile = join(world.repo.dir, '.git', 'forge-test-slow');
  });
  after(() => {
    for (const t of tokens) for (const pid of processesWith(t)) process.kill(pid, 'SIGKILL');
  });

  async function writeGroup(name: string, token: string): Promise<string> {
    tokens.push(token);
    const check = [
      '#!/bin/bash',
      'mode=$(cat "$(git rev-parse --git-common-dir)/forge-test-slow" 2>/dev/null)',
      'case "$PWD" in */.merge-*) where=merge ;; *) where=loop ;; esac',
      `if [ "$mode" = "$where" ]; then sleep ${token}; fi`,
      'grep -qx apples catalog.txt',
    ].join('\n');
    const prd = [
      `# ${name} shop`,
      '',
      'A small shop.',
      '',
      '## Feature catalog: Product catalog',
      '',
      '### Write the catalog and its check',
      `${fence}txt file=catalog.txt`,
      'apples',
      fence,
      `${fence}txt file=check.sh`,
      check,
      fence,
      'Verify: `bash check.sh`',
      '',
    ].join('\n');
    const file = join(world.work, `${name}.md`);
    await writeFile(file, prd);
    return file;
  }

  it('killed during a sandboxed loop: `forge status` removes its sandbox and cgroup and says so', async () => {
    const token = `88${randomInt(100, 999)}.${randomInt(100000, 999999)}`;
    const prd = await writeGroup('crash', token);
    await writeFile(modeFile, 'loop');
    const forge = world.runner.start(['group', prd, '--name', 'crash', '--launch', '--sandbox', '--json'], { settings });
    await eventually("the loop's check runs in its sandbox", () => processesWith(token).length > 0, 600_000, () => forge.describe());
    const loopCgroups = forgeCgroups(`${prefix}-crash-catalog`);
    assert.ok(loopCgroups.length > 0, `the sandboxed loop has a cgroup (${prefix}-crash-catalog)`);
    process.kill(forge.pid, 'SIGKILL');
    await forge.exited;
    await rm(modeFile, { force: true });
    // What the crash left (the check itself dies with its bwrap, which dies with its parent).
    assert.ok(forgeCgroups(`${prefix}-crash-catalog`).length > 0, 'the killed process left its cgroup: else this test tests nothing');
    assert.ok(readdirSync(join(world.work, 'data', 'sandboxes')).some((f) => f.includes('crash-catalog')), 'the killed process left its sandbox record');

    const status = await world.runner.run(['status'], { settings });
    const said = `${status.stdout}\n--- stderr ---\n${status.stderr}`;
    assert.equal(status.code, 0, said);
    assert.match(status.stderr, new RegExp(`cleaned up after a Forge process that was killed or crashed; removed: .*bwrap sandbox ${prefix}-crash-catalog`), said);
    assert.deepEqual(forgeCgroups(`${prefix}-crash-catalog`), [], said);
    assert.deepEqual(processesWith(token), [], `the check the killed process left runs on: ${said}`);
    const records = await readdir(join(world.work, 'data', 'sandboxes')).catch(() => [] as string[]);
    assert.deepEqual(records.filter((f) => f.includes('crash-catalog')), [], said);
    // Said once: the next command has nothing left to remove.
    const again = await world.runner.run(['status'], { settings });
    assert.doesNotMatch(again.stderr, /cleaned up after/, again.stderr);
  });

  it('killed during a group merge: `group resume` removes the merge worktree (unregistered) and the merge-check sandbox, says so, and completes', async () => {
    const token = `89${randomInt(100, 999)}.${randomInt(100000, 999999)}`;
    const prd = await writeGroup('mid', token);
    await writeFile(modeFile, 'merge');
    const forge = world.runner.start(['group', prd, '--name', 'mid', '--launch', '--sandbox', '--json'], { settings });
    await eventually('the merge queue checks the merged tree', () => processesWith(token).length > 0, 600_000, () => forge.describe());
    const worktreesDir = join(world.work, 'data', 'worktrees');
    const scratch = readdirSync(worktreesDir).filter((n) => n.startsWith('.merge-mid-catalog'));
    assert.equal(scratch.length, 1, `one merge worktree while merging: ${readdirSync(worktreesDir).join(', ')}`);
    assert.match(await world.repo.git('worktree', 'list'), /\.merge-mid-catalog/);
    process.kill(forge.pid, 'SIGKILL');
    await forge.exited;
    await rm(modeFile, { force: true });

    const resumed = await world.runner.run(['group', 'resume', 'mid', '--json'], { settings, timeoutMs: 600_000 });
    const said = `${resumed.stdout}\n--- stderr ---\n${resumed.stderr}`;
    assert.equal(resumed.code, 0, said);
    assert.match(resumed.stderr, new RegExp(`removed: .*merge worktree ${join(worktreesDir, scratch[0]!).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(registered in `), said);
    assert.match(resumed.stderr, new RegExp(`bwrap merge-check sandbox ${prefix}m-mid-catalog`), said);
    assert.doesNotMatch(await world.repo.git('worktree', 'list'), /\.merge-/, said);
    assert.deepEqual(readdirSync(worktreesDir).filter((n) => n.startsWith('.merge-')), [], said);
    assert.deepEqual(forgeCgroups(`${prefix}m-`), [], said);
    assert.deepEqual(processesWith(token), [], said);
    assert.equal(await world.repo.git('show', 'forge/group/mid:catalog.txt'), 'apples\n', said);
  });
});
