/**
 * The shared server's shell router, run for real with bash: a command runs through the shell of
 * the loop whose worktree it runs in, marked with that loop's FORGE_LOOP_INSTANCE; a directory of
 * no loop (beside a worktree, a prefix of its name, the server's own folder) runs nothing; a
 * loop that left is routed no more; an unconfined loop's agent shell keeps the marker.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareAgentHostShell } from '../../../src/core/sandbox/host-shell';
import { LOOP_PROCESS_MARKER_VARIABLE, renderShellRouter, ShellRouter } from '../../../src/core/sandbox/shell-router';
import { writeExecutable } from '../../../src/core/sandbox/shell-shim';

describe('shell router of a shared opencode server (real bash)', () => {
  let base: string;
  let router: ShellRouter;
  const wtA = () => join(base, 'worktrees', 'alpha');
  const wtB = () => join(base, 'worktrees', 'beta');

  /** A stand-in for a loop's shell: records who ran what, where, with which marker. */
  async function fakeLoopShell(name: string): Promise<string> {
    const file = join(base, 'shells', name);
    await writeExecutable(file, `#!/bin/bash\necho "${name} ran [$2] in $PWD marker=$${LOOP_PROCESS_MARKER_VARIABLE}" >> ${join(base, 'ran.log')}\n`);
    return file;
  }

  function run(program: string, cwd: string, command = 'echo hi'): { status: number | null; stderr: string } {
    const r = spawnSync(program, ['-c', command], { cwd, encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PWD: '/somewhere/else' } });
    return { status: r.status, stderr: r.stderr };
  }
  const ran = () => {
    try {
      return readFileSync(join(base, 'ran.log'), 'utf8').trim().split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };

  beforeEach(async () => {
    base = mkdtempSync(join(tmpdir(), 'forge-router-'));
    for (const d of [wtA(), join(wtA(), 'src'), wtB(), `${wtA()}-evil`, join(base, 'shells'), join(base, 'outside')]) mkdirSync(d, { recursive: true });
    router = new ShellRouter(join(base, 'router'), true);
    await router.init();
    await router.add('a', { directories: [wtA()], shellPath: await fakeLoopShell('alpha'), ripgrepPath: await fakeLoopShell('alpha-rg'), loopMarker: 'marker-a' });
    await router.add('b', { directories: [wtB()], shellPath: await fakeLoopShell('beta'), loopMarker: 'marker-b' });
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('runs each command through the shell of the loop whose worktree it runs in, with that loop\'s marker', () => {
    assert.equal(run(router.shellPath, wtA()).status, 0);
    assert.equal(run(router.shellPath, join(wtA(), 'src'), 'ls').status, 0);
    assert.equal(run(router.shellPath, wtB()).status, 0);
    assert.deepEqual(ran(), [
      `alpha ran [echo hi] in ${wtA()} marker=marker-a`,
      `alpha ran [ls] in ${join(wtA(), 'src')} marker=marker-a`,
      `beta ran [echo hi] in ${wtB()} marker=marker-b`,
    ]);
  });

  it('runs nothing in a directory of no loop: outside, a name that only starts like a worktree, the parent of the worktrees', () => {
    for (const dir of [join(base, 'outside'), `${wtA()}-evil`, join(base, 'worktrees'), '/']) {
      const r = run(router.shellPath, dir);
      assert.equal(r.status, 126, dir);
      assert.match(r.stderr, /not the worktree of a loop this opencode server serves; it was not run/);
    }
    assert.deepEqual(ran(), []);
  });

  it('routes ripgrep only for loops that have a ripgrep shim, and a loop that left is routed no more', async () => {
    const rg = join(router.binDir, 'rg');
    assert.equal(run(rg, wtA()).status, 0);
    assert.equal(run(rg, wtB()).status, 126, 'beta has no ripgrep shim: nothing runs on the host in its stead');
    await router.remove('a');
    assert.equal(run(router.shellPath, wtA()).status, 126);
    assert.equal(run(rg, wtA()).status, 126);
    assert.deepEqual(ran(), [`alpha-rg ran [echo hi] in ${wtA()} marker=marker-a`]);
  });

  it('matches a worktree reached through a link by its real path', async () => {
    const link = join(base, 'link-to-worktrees');
    symlinkSync(join(base, 'worktrees'), link);
    const viaLink = new ShellRouter(join(base, 'router2'), false);
    await viaLink.init();
    // The loop's worktree as Forge knows it (through the link) and as resolved.
    await viaLink.add('a', { directories: [join(link, 'alpha'), wtA()], shellPath: await fakeLoopShell('alpha'), loopMarker: 'm' });
    assert.equal(run(viaLink.shellPath, join(link, 'alpha')).status, 0);
    assert.equal(ran().length, 1);
  });

  it('quotes worktree paths: a path with spaces and shell characters is matched literally', () => {
    const odd = "/tmp/a b/it's $(x)";
    const script = renderShellRouter([{ directories: [odd], shellPath: '/bin/true', loopMarker: 'm' }], 'shell');
    const r = spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(script.includes(`'/tmp/a b/it'\\''s $(x)'|'/tmp/a b/it'\\''s $(x)'/*`), script);
  });

  it('an unconfined loop\'s agent shell drops secrets but keeps the loop\'s marker (so the loop\'s end can find what it left)', async () => {
    const host = await prepareAgentHostShell({ dir: join(base, 'host-shell'), loopName: 'alpha' });
    const out = join(base, 'env.txt');
    writeFileSync(out, '');
    const r = spawnSync(host.shellPath, ['-c', `env > ${out}`], {
      cwd: wtA(),
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', [LOOP_PROCESS_MARKER_VARIABLE]: 'marker-a', OPENCODE_SERVER_PASSWORD: 'secret', FORGE_OTHER: 'x' },
    });
    assert.equal(r.status, 0, r.stderr);
    const env = readFileSync(out, 'utf8');
    assert.match(env, new RegExp(`^${LOOP_PROCESS_MARKER_VARIABLE}=marker-a$`, 'm'));
    assert.doesNotMatch(env, /OPENCODE_SERVER_PASSWORD|FORGE_OTHER/);
  });
});
