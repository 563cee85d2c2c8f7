/**
 * The bwrap launcher: which host paths a sandbox shows and how (pure), and the bash
 * launcher's cgroup join, run for real against a stand-in for bwrap and a cgroup tree in a
 * temporary folder, so the timing between bwrap's report and the join can be forced.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  buildBwrapArgs,
  BWRAP_CWD_FROM_SHELL,
  BWRAP_ETC_FIRST_FD,
  readBwrapHostLayout,
  renderBwrapLaunch,
  type HostPathKind,
} from '../../../src/core/sandbox/bwrap-args';
import { bwrapVersionTooOld, BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { cgroupJoinStrategy, cgroupMountOptionsOf, ownCgroupV2Path, readCgroupJoinFacts, SandboxCgroups, type CgroupJoinStrategy } from '../../../src/core/sandbox/cgroup';
import type { SandboxSpec } from '../../../src/core/sandbox/types';

const spec: SandboxSpec = { name: 'forge-demo', worktreeDir: '/data/wt', gitCommonDir: '/data/repo/.git', network: false, limits: { cpus: 1, memoryMb: 256, pids: 64 } };

function host(paths: Record<string, HostPathKind>): (p: string) => HostPathKind {
  return (p) => paths[p] ?? { kind: 'missing' };
}

describe('bwrap host layout', () => {
  it('copies /etc files in, binds /etc folders, follows symlinks to decide, and drops dangling or looping links', () => {
    const layout = readBwrapHostLayout(
      host({
        '/bin': { kind: 'symlink', target: 'usr/bin' },
        '/lib64': { kind: 'dir' },
        '/etc/passwd': { kind: 'file' },
        '/etc/ssl': { kind: 'dir' },
        '/etc/localtime': { kind: 'symlink', target: '/usr/share/zoneinfo/Etc/UTC' },
        '/usr/share/zoneinfo/Etc/UTC': { kind: 'file' },
        '/etc/os-release': { kind: 'symlink', target: '../usr/lib/os-release' },
        '/usr/lib/os-release': { kind: 'file' },
        '/etc/alternatives': { kind: 'symlink', target: 'alt-real' },
        '/etc/alt-real': { kind: 'dir' },
        '/etc/resolv.conf': { kind: 'symlink', target: '/run/gone' },
        '/etc/hosts': { kind: 'symlink', target: 'hosts' },
      }),
    );
    assert.deepEqual(layout.systemDirArgs, ['--symlink', 'usr/bin', '/bin', '--ro-bind', '/lib64', '/lib64']);
    assert.deepEqual(layout.etcFiles, ['/etc/passwd', '/etc/localtime', '/etc/os-release']);
    assert.deepEqual(layout.etcDirs, ['/etc/alternatives', '/etc/ssl']);
  });

  it('numbers the copied files from BWRAP_ETC_FIRST_FD in layout order, read-only mode, all before the root turns read-only', () => {
    const layout = { systemDirArgs: [], etcFiles: ['/etc/passwd', '/etc/group'], etcDirs: ['/etc/ssl'] };
    const args = buildBwrapArgs(spec, { cwd: '/data/wt', layout });
    const files = args.flatMap((a, i) => (a === '--file' ? [[args[i - 2], args[i - 1], args[i + 1], args[i + 2]]] : []));
    assert.deepEqual(files, [
      ['--perms', '0644', String(BWRAP_ETC_FIRST_FD), '/etc/passwd'],
      ['--perms', '0644', String(BWRAP_ETC_FIRST_FD + 1), '/etc/group'],
    ]);
    assert.ok(args.lastIndexOf('--file') < args.indexOf('--remount-ro'));
    assert.ok(!args.includes('/etc'));
  });
});

describe('bwrap launcher text', () => {
  const plan = {
    sandboxName: 'forge-demo',
    bwrapPath: '/usr/bin/bwrap',
    args: buildBwrapArgs(spec, { cwd: BWRAP_CWD_FROM_SHELL, layout: { systemDirArgs: [], etcFiles: ['/etc/passwd'], etcDirs: [] } }),
    etcFiles: ['/etc/passwd'],
    recordFile: '/state/forge-demo.json',
  };

  it('checks the record first, opens each /etc file on its descriptor, and execs bwrap with the working directory from the shell', () => {
    const text = renderBwrapLaunch({ ...plan, procsFiles: [] });
    const lines = text.split('\n');
    assert.match(lines[0]!, /^if \[ ! -f \/state\/forge-demo\.json \]; then .*never runs on the host.*exit 125; fi$/);
    assert.ok(lines.includes(`[ -r /etc/passwd ] && exec ${BWRAP_ETC_FIRST_FD}</etc/passwd || exec ${BWRAP_ETC_FIRST_FD}</dev/null`));
    assert.match(lines.at(-1)!, /^exec -c \/usr\/bin\/bwrap \$\{FORGE_JOB_MARK:\+--setenv FORGE_JOB_MARK "\$FORGE_JOB_MARK"\} \$\{FORGE_WATCHDOG_MARK:\+--setenv FORGE_WATCHDOG_MARK "\$FORGE_WATCHDOG_MARK"\} --ro-bind .* --chdir "\$FORGE_CWD" -- bash -c "\$FORGE_COMMAND"$/);
    assert.ok(!text.includes('--block-fd'), 'no cgroup, nothing to wait for');
  });

  it('overlapped join: makes the sandbox wait for the join of its first process (never bwrap itself)', () => {
    const text = renderBwrapLaunch({ ...plan, procsFiles: ['/cg/memory/forge/x/cgroup.procs', '/cg/pids/forge/x/cgroup.procs'], joinStrategy: 'overlapped' });
    assert.match(text.split('\n').at(-1)!, /^exec -c \/usr\/bin\/bwrap \$\{FORGE_JOB_MARK:\+--setenv FORGE_JOB_MARK "\$FORGE_JOB_MARK"\} \$\{FORGE_WATCHDOG_MARK:\+--setenv FORGE_WATCHDOG_MARK "\$FORGE_WATCHDOG_MARK"\} --info-fd "\$forge_info_w" --block-fd "\$forge_block" /);
    assert.ok(text.includes('echo "$forge_child" > /cg/memory/forge/x/cgroup.procs && echo "$forge_child" > /cg/pids/forge/x/cgroup.procs'));
    assert.ok(!/echo "\$forge_bwrap" >/.test(text));
    // The helper joins itself first (the grace period starts while bwrap sets up), before it reads bwrap's report.
    const lines = text.split('\n');
    const prime = lines.findIndex((l) => l.includes('{ echo "$BASHPID" > /cg/memory/forge/x/cgroup.procs && echo "$BASHPID" > /cg/pids/forge/x/cgroup.procs; } 2>/dev/null'));
    assert.ok(prime > 0 && prime < lines.findIndex((l) => l.includes('read -r -u "$forge_info_r"')), text);
  });

  it('before-exec join: the shell writes its own pid into every hierarchy, then becomes bwrap; no helper, no pipes', () => {
    const text = renderBwrapLaunch({ ...plan, procsFiles: ['/cg/memory/forge/x/cgroup.procs', '/cg/pids/forge/x/cgroup.procs'], joinStrategy: 'before-exec' });
    const lines = text.split('\n');
    const join = lines.findIndex((l) => l.includes('echo $$ > /cg/memory/forge/x/cgroup.procs && echo $$ > /cg/pids/forge/x/cgroup.procs'));
    assert.ok(join > 0, text);
    assert.match(lines[join]!, /then echo "forge: cannot join the sandbox cgroup \(sandbox forge-demo stopped\?\); the command was not run" >&2; exit 125; fi$/);
    assert.match(lines.at(-1)!, /^exec -c \/usr\/bin\/bwrap \$\{FORGE_JOB_MARK:\+--setenv FORGE_JOB_MARK "\$FORGE_JOB_MARK"\} \$\{FORGE_WATCHDOG_MARK:\+--setenv FORGE_WATCHDOG_MARK "\$FORGE_WATCHDOG_MARK"\} --ro-bind /);
    for (const forbidden of ['--info-fd', '--block-fd', '<(', '} &']) assert.ok(!text.includes(forbidden), forbidden);
  });
});

describe('cgroup join strategy (pure)', () => {
  it('joins before exec where a join is cheap: expedited grace periods, or favordynmods on every hierarchy', () => {
    assert.equal(cgroupJoinStrategy({ rcuExpedited: true, cgroupMountOptions: [['rw', 'memory']] }), 'before-exec');
    assert.equal(cgroupJoinStrategy({ rcuExpedited: true, cgroupMountOptions: [] }), 'before-exec');
    assert.equal(cgroupJoinStrategy({ rcuExpedited: false, cgroupMountOptions: [['rw', 'favordynmods']] }), 'before-exec');
    assert.equal(cgroupJoinStrategy({ rcuExpedited: false, cgroupMountOptions: [['rw', 'memory', 'favordynmods'], ['rw', 'pids', 'favordynmods']] }), 'before-exec');
  });

  it('overlaps the join with bwrap\'s set-up otherwise', () => {
    assert.equal(cgroupJoinStrategy({ rcuExpedited: false, cgroupMountOptions: [] }), 'overlapped');
    assert.equal(cgroupJoinStrategy({ rcuExpedited: false, cgroupMountOptions: [['rw', 'memory', 'favordynmods'], ['rw', 'pids']] }), 'overlapped');
  });

  it('reads the cgroup mounts at and under the root from /proc/self/mounts, and nothing else', () => {
    const mounts = [
      'tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0',
      'cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0',
      'cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime,favordynmods 0 0',
      'cgroup /elsewhere/pids cgroup rw,pids 0 0',
      'cgroup /sys/fs/cgroupx cgroup rw,cpu 0 0',
      'proc /proc proc rw 0 0',
      '',
    ].join('\n');
    assert.deepEqual(cgroupMountOptionsOf(mounts, '/sys/fs/cgroup'), [
      ['rw', 'relatime', 'memory'],
      ['rw', 'relatime', 'favordynmods'],
    ]);
    assert.deepEqual(cgroupMountOptionsOf('cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0', '/sys/fs/cgroup'), [['rw', 'nsdelegate']]);
  });

  it('reads this process\'s own cgroup v2 (where an unconfined loop\'s cgroup can be delegated) from /proc/self/cgroup', () => {
    assert.equal(ownCgroupV2Path('0::/user.slice/user-1000.slice/user@1000.service/app.slice/code.scope\n'), '/user.slice/user-1000.slice/user@1000.service/app.slice/code.scope');
    assert.equal(ownCgroupV2Path('9:name=systemd:/\n4:memory:/x\n0::/\n'), '/');
    assert.equal(ownCgroupV2Path('4:memory:/x\n'), null);
  });

  it('reads the host\'s facts from files, and takes unreadable ones as "not cheap"', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'forge-cgjoin-'));
    try {
      writeFileSync(path.join(dir, 'rcu'), '1\n');
      writeFileSync(path.join(dir, 'mounts'), 'cgroup2 /cg cgroup2 rw,favordynmods 0 0\n');
      assert.deepEqual(readCgroupJoinFacts('/cg', { rcuExpedited: path.join(dir, 'rcu'), mounts: path.join(dir, 'mounts') }), {
        rcuExpedited: true,
        cgroupMountOptions: [['rw', 'favordynmods']],
      });
      assert.deepEqual(readCgroupJoinFacts('/cg', { rcuExpedited: path.join(dir, 'none'), mounts: path.join(dir, 'none') }), {
        rcuExpedited: false,
        cgroupMountOptions: [],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bwrap launcher against a stand-in bwrap', function () {
  this.timeout(60_000);
  let base: string;
  let worktreeDir: string;
  let cgroupRoot: string;

  beforeEach(() => {
    base = mkdtempSync(path.join(os.tmpdir(), 'forge-bwrap-launch-'));
    worktreeDir = path.join(base, 'wt');
    mkdirSync(worktreeDir);
    // A cgroup v2 tree as plain files: Forge creates, writes and joins it like the real one.
    cgroupRoot = path.join(base, 'cgroup');
    mkdirSync(cgroupRoot);
    writeFileSync(path.join(cgroupRoot, 'cgroup.controllers'), 'cpu memory pids\n');
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  /**
   * Reports its own pid as the sandbox's first process in writes like real bwrap's, the last
   * one `reportGapS` later, waits for the go byte, then runs the command.
   * A failed write kills it with SIGPIPE, as it ends real bwrap.
   */
  function standInBwrap(reportGapS: number): string {
    const file = path.join(base, 'fake-bwrap');
    writeFileSync(
      file,
      [
        '#!/bin/bash',
        'info= block=',
        'while [ $# -gt 0 ]; do case $1 in --info-fd) info=$2; shift 2;; --block-fd) block=$2; shift 2;; --) shift; break;; *) shift;; esac; done',
        'if [ -n "$info" ]; then',
        // bwrap 0.8's order: the pid, each namespace (which ends the pid's line), the end.
        `  printf '{\\n    "child-pid": %s' $$ >&$info`,
        `  printf ',\\n    "cgroup-namespace": 4026531835' >&$info`,
        `  sleep ${reportGapS}`,
        `  printf '\\n}\\n' >&$info`,
        '  exec {info}>&-',
        '  read -r -n 1 -u $block _',
        'fi',
        'exec "$@"',
        '',
      ].join('\n'),
    );
    chmodSync(file, 0o755);
    return file;
  }

  async function runtimeWith(bwrapPath: string, cgroupJoin: CgroupJoinStrategy = 'overlapped'): Promise<BwrapRuntime> {
    // No launch ahead: these cases time the launcher itself, and a launch waiting after the test
    // would keep writing into the plain-file cgroup tree while it is removed.
    const runtime = new BwrapRuntime({ stateDir: path.join(base, 'state'), bwrapPath, cgroups: new SandboxCgroups({ root: cgroupRoot }), cgroupJoin, launchAhead: false });
    await runtime.create({ ...spec, name: 'forge-launch', worktreeDir, gitCommonDir: undefined });
    writeFileSync(path.join(cgroupRoot, 'forge', 'forge-launch', 'cgroup.procs'), ''); // the kernel's file
    return runtime;
  }

  for (const strategy of ['overlapped', 'before-exec'] as const) {
    it(`${strategy}: joins the sandbox's processes to the cgroup before the command runs`, async () => {
      const runtime = await runtimeWith(standInBwrap(0.3), strategy);
      const procs = path.join(cgroupRoot, 'forge', 'forge-launch', 'cgroup.procs');
      // The command runs as the stand-in's own process (it execs), and the stand-in is what the
      // launcher exec'd, so $$ is the pid that joined either way.
      const r = await runtime.exec('forge-launch', `grep -qx "$$" ${procs} && echo joined-before-start`, { timeoutMs: 20_000 });
      assert.equal(r.timedOut, false);
      assert.equal(r.exitCode, 0, `exit ${r.exitCode}: ${r.stderr}`);
      assert.equal(r.stdout, 'joined-before-start\n');
    });

    it(`${strategy}: runs nothing and says why when the cgroup cannot be joined`, async () => {
      const runtime = await runtimeWith(standInBwrap(0), strategy);
      const procs = path.join(cgroupRoot, 'forge', 'forge-launch', 'cgroup.procs');
      rmSync(procs);
      mkdirSync(procs); // still there, but a write to it fails
      const marker = path.join(worktreeDir, 'ran.txt');
      const r = await runtime.exec('forge-launch', `touch ${marker}`, { timeoutMs: 20_000 });
      assert.notEqual(r.exitCode, 0);
      assert.match(r.stderr, /forge: cannot join the sandbox cgroup \(sandbox forge-launch stopped\?\); the command was not run/);
      assert.equal(existsSync(marker), false);
    });
  }

  it('sees a record rewritten by another Forge process at the next command', async () => {
    const runtime = await runtimeWith(standInBwrap(0));
    assert.equal((await runtime.exec('forge-launch', 'echo ok')).stdout, 'ok\n');
    const record = path.join(base, 'state', 'forge-launch.json');
    const text = readFileSync(record, 'utf8');
    // Another Forge process changes the record: the next command sees the change.
    writeFileSync(record, text.replace(/"network": false/, '"network": true'));
    assert.equal((await runtime.readSettings('forge-launch'))?.network, true);
    const launch = await runtime.renderShimLaunch((await runtime.readSettings('forge-launch'))!);
    assert.ok(launch.includes('--share-net'));
  });
});

describe('bwrap version check', () => {
  it('refuses bubblewrap older than 0.5 (no --perms)', () => {
    assert.equal(bwrapVersionTooOld('0.4.1'), true);
    assert.equal(bwrapVersionTooOld('0.5.0'), false);
    assert.equal(bwrapVersionTooOld('0.8.0'), false);
    assert.equal(bwrapVersionTooOld('1.0'), false);
    assert.equal(bwrapVersionTooOld('unknown'), false);
  });
});
