/**
 * A sandboxed feature group's merge queue at the `forge` CLI (built `dist/cli.mjs`, real
 * processes, real opencode, real git, real bubblewrap; only the model is scripted): the checks
 * the queue runs on the merged tree run code the agent wrote, so they run confined, in a
 * short-lived bwrap sandbox over the scratch merge worktree, never on the host.
 *
 * One feature's check is hostile: a script the agent wrote that writes a marker at a host path
 * outside the repository and the data folder, prints `id -u` and the hostname, and passes only
 * where a host file is invisible and the hostname is the sandbox's. Run on the host (the hole
 * this closes), it writes the marker and fails, so the group would not complete.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { useCliLoopWorld } from '../../support/cli-loop-world';
import type { CliRunner } from '../../support/cli-runner';
import type { TestRepository } from '../../support/git-repo';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';

const fence = '```';

interface EventLine {
  type: string;
  featureId?: string;
  status?: string;
  state?: string;
  message?: string | null;
}

describe('forge group: the merge queue’s checks run in a bwrap sandbox for sandboxed loops (real CLI, real opencode, real bwrap, embedded scripted model)', function () {
  this.timeout(900_000);
  const world = useCliLoopWorld('forge-cli-group-merge-sandbox-', { 'README.md': '# shop\n' }, { environment: { extraUserConfig: { model: undefined, small_model: undefined } } });
  let repo: TestRepository;
  let work: string;
  let runner: CliRunner;
  /** On the host, outside the repository, the data folder and /tmp (a sandbox's /tmp is its own). */
  let hostDir: string;
  before(async () => {
    bwrapPrereqs();
    ({ repo, work, runner } = world);
    hostDir = await mkdtemp(join(sandboxTestTempRoot(), 'merge-host-'));
    await writeFile(join(hostDir, 'host-only.txt'), 'only on the host\n');
  });
  after(async () => {
    if (hostDir) await rm(hostDir, { recursive: true, force: true });
  });

  it('a hostile merged-tree check cannot reach the host: no marker, it ran in a bwrap sandbox of its own (removed after), the honest check passes and the integration branch holds the work', async () => {
    const marker = join(hostDir, 'escaped.txt');
    const probe = [
      '#!/bin/bash',
      `echo escaped-from-the-merge-queue > ${marker} 2>/dev/null`,
      'echo "uid=$(id -u) host=$(hostname)"',
      `test ! -e ${join(hostDir, 'host-only.txt')} && test "$(hostname)" = forge-sandbox`,
    ].join('\n');
    const prd = [
      '# Probe shop',
      '',
      'A small shop with a probe.',
      '',
      '## Feature catalog: Product catalog',
      '',
      '### Write catalog.txt',
      `${fence}txt file=catalog.txt`,
      'apples',
      fence,
      'Verify: `grep -qx apples catalog.txt`',
      '',
      '## Feature probe: A probe of where checks run',
      '',
      '### Write probe.sh',
      `${fence}txt file=probe.sh`,
      probe,
      fence,
      'Verify: `bash probe.sh`',
      '',
    ].join('\n');
    const path = join(work, 'probe-shop.md');
    await writeFile(path, prd);
    const settings = { 'forge.sandbox.enabled': true, 'forge.sandbox.driver': 'bwrap', 'forge.sandbox.network': false };
    const r = await runner.run(['group', path, '--name', 'sbx', '--launch', '--sandbox', '--max-concurrent', '2', '--json'], { timeoutMs: 800_000, settings, env: { FORGE_LOG: 'debug' } });
    const said = `${r.stdout}\n--- stderr ---\n${r.stderr}`;

    // Nothing reached the host, whatever else happened.
    assert.equal(existsSync(marker), false, `the hostile check wrote ${marker} on the host:\n${said}`);

    assert.equal(r.code, 0, said);
    const lines = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as EventLine)
      .filter((e) => typeof e.type === 'string' && e.type.startsWith('group.'));
    assert.equal(lines.find((l) => l.type === 'group.ended')?.status, 'completed', said);
    const merged = lines.filter((l) => l.type === 'group.merge' && l.state === 'merged');
    assert.deepEqual(merged.map((m) => m.featureId).sort(), ['catalog', 'probe'], said);
    // The merge state says where the checks ran (the probe passes only inside a sandbox).
    for (const m of merged) assert.match(m.message ?? '', /its checks passed on the merged tree\. They ran in a bwrap sandbox of their own\.$/, said);
    // The engine's own word: a merge sandbox of each loop, named apart from the loops' sandboxes, over a scratch worktree.
    for (const loop of ['sbx-catalog', 'sbx-probe']) {
      assert.match(r.stderr, new RegExp(`\\[sandbox\\] forge-[0-9a-f]{6}m-${loop}: the merge queue's checks of loop ${loop} run in it \\(bwrap, over .*/data/worktrees/\\.merge-${loop}-integration-[0-9a-f]+\\)`), said);
    }
    // Every merge sandbox was removed after its checks (the loops' own are removed at their ends).
    const left = await readdir(join(work, 'data', 'sandboxes')).catch(() => [] as string[]);
    assert.deepEqual(left.filter((f) => f.endsWith('.json')), [], `sandboxes left behind: ${left.join(', ')}`);

    // The integration branch holds both features' work; the user's branch is untouched.
    assert.equal(await repo.git('show', 'forge/group/sbx:catalog.txt'), 'apples\n');
    assert.equal(await repo.git('show', 'forge/group/sbx:probe.sh'), `${probe}\n`);
    assert.equal((await repo.git('ls-tree', '--name-only', 'main')).trim(), 'README.md');
  });

  it('an unconfined group (--no-sandbox): its merged-tree checks run on the host as its loops did, and the merge state says so', async () => {
    const prd = ['# Plain shop', '', 'A plain shop.', '', '## Feature basket: Basket', '', '### Write basket.txt', `${fence}txt file=basket.txt`, 'pears', fence, 'Verify: `grep -qx pears basket.txt`', ''].join('\n');
    const path = join(work, 'plain-shop.md');
    await writeFile(path, prd);
    const r = await runner.run(['group', path, '--name', 'plain', '--launch', '--no-sandbox', '--json'], { timeoutMs: 800_000, env: { FORGE_LOG: 'debug' } });
    const said = `${r.stdout}\n--- stderr ---\n${r.stderr}`;
    assert.equal(r.code, 0, said);
    const merged = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as EventLine)
      .filter((e) => e.type === 'group.merge' && e.state === 'merged');
    assert.equal(merged.length, 1, said);
    assert.match(merged[0]!.message ?? '', /its checks passed on the merged tree\. They ran on the host \(the loop ran unconfined\)\.$/, said);
    assert.doesNotMatch(r.stderr, /the merge queue's checks of loop plain-basket run in it/, said);
    assert.equal(await repo.git('show', 'forge/group/plain:basket.txt'), 'pears\n');
  });
});
