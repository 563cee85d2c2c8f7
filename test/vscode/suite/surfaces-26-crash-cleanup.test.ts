// Clean-up after a crash in VS Code (issue 26): a Forge process killed mid-merge left a throw-away
// merge worktree registered in the workspace repository, its owner record naming a process that
// no longer runs. The window's engine removes it when it starts (registration and folder), logs
// what it removed in the Forge output channel and shows one notification; the next start has
// nothing to remove and shows nothing. The CLI side (real SIGKILLs): test/core/cli/cli-crash-cleanup.test.ts.
import * as assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, join } from 'node:path';
import { forgeApi, forgeTestEnvironment, reportFailuresEarly, waitFor } from './forge-test-kit';
import { harnessInfo } from './support/harness';

const CLEANED = /Forge cleaned up after a Forge process that was killed or crashed: it removed 1 leftover/;

describe('clean-up after a crash: the window\'s engine removes a killed process\'s merge worktree, logs it and says so', function () {
  this.timeout(300_000);
  reportFailuresEarly();

  it('removes the leftover at engine start, logs it, shows one notification; a later start shows nothing', async () => {
    const env = await forgeTestEnvironment();
    const api = await forgeApi();
    const repo = harnessInfo().workspaceFolder;
    const worktrees = join(env.dataDir, 'worktrees');
    mkdirSync(worktrees, { recursive: true });
    const scratch = join(realpathSync(worktrees), `.merge-crashed-${randomBytes(3).toString('hex')}`);
    // The owner: a process that has exited.
    const dead = Number(String(spawnSync('sh', ['-c', 'echo $$']).stdout).trim());
    const owners = join(env.dataDir, 'owners', 'merge-worktrees');
    mkdirSync(owners, { recursive: true });
    writeFileSync(join(owners, `${basename(scratch)}.json`), JSON.stringify({ pid: dead, startTime: '1', host: hostname(), token: 't', acquiredAt: 0 }));
    execFileSync('git', ['-C', repo, 'worktree', 'add', '--detach', scratch, 'HEAD']);
    assert.match(execFileSync('git', ['-C', repo, 'worktree', 'list'], { encoding: 'utf8' }), new RegExp(basename(scratch)));

    const shownBefore = api.notifications().filter((n) => CLEANED.test(n.message)).length;
    // A fresh engine on the same data folder (closes the one earlier tests started).
    await api.setTestEnvironment({ ...env.opencode.env, FORGE_DATA_DIR: env.dataDir });
    await api.startEngine();
    assert.equal(api.notifications().filter((n) => CLEANED.test(n.message)).length, shownBefore + 1, JSON.stringify(api.notifications()));
    assert.doesNotMatch(execFileSync('git', ['-C', repo, 'worktree', 'list'], { encoding: 'utf8' }), new RegExp(basename(scratch)));
    assert.equal(existsSync(scratch), false);
    await waitFor('the log to name what was removed', () => {
      const file = join(api.logUri.fsPath, 'Forge.log');
      return existsSync(file) && readFileSync(file, 'utf8').includes(`removed merge worktree ${scratch}`);
    }, 30_000);

    await api.setTestEnvironment({ ...env.opencode.env, FORGE_DATA_DIR: env.dataDir });
    await api.startEngine();
    assert.equal(api.notifications().filter((n) => CLEANED.test(n.message)).length, shownBefore + 1, 'nothing left, nothing shown again');
  });
});
