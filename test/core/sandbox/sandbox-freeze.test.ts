/**
 * Freezing a bwrap sandbox (issue 26: opencode's file tools run while it is frozen), real bwrap:
 * with its cgroup's freezer, and without a cgroup (a user without a delegated one) by stopping
 * the sandbox's process tree. A command in the sandbox counts into a file in the worktree; while
 * frozen the count does not move, after the thaw it does.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import path from 'node:path';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { isSandboxBwrap, sandboxProcessTree } from '../../../src/core/sandbox/process-freeze';
import { bwrapPrereqs, sandboxTestTempRoot } from '../../support/sandbox-fixtures';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('freezing a sandbox (pure)', () => {
  it('finds the bwrap processes of one worktree and all their descendants, not another sandbox\'s', () => {
    const bwrap = (wt: string) => ['bwrap', '--bind', wt, wt, '--hostname', 'forge-sandbox', '--', 'bash', '-c', 'x'];
    assert.ok(isSandboxBwrap(bwrap('/wt/a'), '/wt/a'));
    assert.ok(!isSandboxBwrap(bwrap('/wt/b'), '/wt/a'));
    assert.ok(!isSandboxBwrap(['bash', '--bind', '/wt/a', '/wt/a', '--hostname', 'forge-sandbox'], '/wt/a'));
    const procs = [
      { pid: 10, ppid: 1, state: 'S', cmdline: bwrap('/wt/a') },
      { pid: 11, ppid: 10, state: 'S', cmdline: ['bwrap'] },
      { pid: 12, ppid: 11, state: 'S', cmdline: ['sh'] },
      { pid: 13, ppid: 12, state: 'S', cmdline: ['sleep'] },
      { pid: 20, ppid: 1, state: 'S', cmdline: bwrap('/wt/b') },
      { pid: 21, ppid: 20, state: 'S', cmdline: ['sh'] },
      { pid: 30, ppid: 1, state: 'S', cmdline: ['opencode'] },
    ];
    assert.deepEqual(sandboxProcessTree(procs, '/wt/a').sort(), [10, 11, 12, 13]);
  });
});

describe('freezing a bwrap sandbox (real bwrap)', function () {
  this.timeout(120_000);
  let base: string;
  before(() => {
    bwrapPrereqs();
    base = realpathSync(mkdtempSync(path.join(sandboxTestTempRoot(), 'freeze-')));
  });
  after(() => rmSync(base, { recursive: true, force: true }));

  for (const [label, cgroups] of [
    ['with its cgroup freezer', () => new SandboxCgroups()],
    ['without a cgroup: by stopping its process tree', () => new SandboxCgroups({ root: path.join(base, 'no-cgroup-fs') })],
  ] as const) {
    it(label, async () => {
      const wt = path.join(base, label.replace(/\W+/g, '-'));
      mkdirSync(wt);
      execFileSync('git', ['init', '-q', wt]);
      const runtime = new BwrapRuntime({ stateDir: path.join(base, 'state'), cgroups: cgroups() });
      const name = `forge-freeze-${process.pid}-${label.length}`;
      await runtime.create({ name, worktreeDir: wt, gitCommonDir: path.join(wt, '.git'), network: false, limits: { cpus: 1, memoryMb: 256, pids: 64 } });
      try {
        const counting = runtime.exec(name, '( n=0; while :; do n=$((n+1)); echo $n > c.tmp; mv c.tmp counter; sleep 0.01; done ) & wait', { timeoutMs: 6_000 });
        const count = () => Number(readFileSync(path.join(wt, 'counter'), 'utf8').trim() || 0);
        for (let i = 0; i < 100; i++) {
          try {
            if (count() > 2) break;
          } catch {
            // not written yet
          }
          await sleep(50);
        }
        assert.ok(count() > 2, 'the counting command runs');
        const thaw = await runtime.freeze(name);
        assert.ok(thaw, 'the sandbox can be frozen');
        const frozenAt = count();
        await sleep(400);
        assert.equal(count(), frozenAt, 'nothing in the sandbox ran while it was frozen');
        await thaw();
        await sleep(400);
        assert.ok(count() > frozenAt + 3, `the sandbox runs again after the thaw (${frozenAt} → ${count()})`);
        await runtime.remove(name);
        await counting.catch(() => undefined);
      } finally {
        await runtime.remove(name).catch(() => undefined);
      }
    });
  }
});
