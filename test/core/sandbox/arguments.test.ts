/**
 * Pure parts of the sandbox module: driver selection, each driver's command-line
 * arguments, status mapping, spec validation and the shim's shape. msb cannot boot on
 * the development machines (no hardware virtualisation), so these argument tests are all
 * the coverage its driver has.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildBwrapArgs, BwrapRuntime, type HostPathKind } from '../../../src/core/sandbox/bwrap-driver';
import type { SandboxHandle } from '../../../src/core/sandbox/manager';
import { buildMsbCreateArgs, buildMsbExecArgs, mapMsbStatus } from '../../../src/core/sandbox/msb-driver';
import {
  adjustmentForCreateError,
  buildOciCreateArgs,
  buildOciExecArgs,
  mapOciStatus,
  type OciCreateContext,
} from '../../../src/core/sandbox/oci-driver';
import { selectDriver } from '../../../src/core/sandbox/select-driver';
import { prepareOpencodeSandbox, renderShellShim } from '../../../src/core/sandbox/shell-shim';
import { assertValidSpec, SandboxError, type SandboxSettings, type SandboxSpec } from '../../../src/core/sandbox/types';

const spec: SandboxSpec = {
  name: 'forge-demo',
  worktreeDir: '/data/worktrees/demo',
  gitCommonDir: '/home/u/repo/.git',
  network: false,
  limits: { cpus: 1.5, memoryMb: 512, pids: 256 },
  image: 'forge-sandbox:latest',
};

/** The value following `flag` each time it occurs. */
function values(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag && i + 1 < args.length ? [args[i + 1]!] : []));
}

describe('selectDriver', () => {
  const up = { available: true };
  const down = (reason: string) => ({ available: false, reason });

  it('auto takes the first available of bwrap, docker, podman (no daemon, no image first)', () => {
    assert.deepEqual(selectDriver('auto', { docker: up, podman: up, bwrap: up }), { ok: true, driver: 'bwrap' });
    assert.deepEqual(selectDriver('auto', { bwrap: down('no userns'), docker: up, podman: up }), { ok: true, driver: 'docker' });
    assert.deepEqual(selectDriver('auto', { bwrap: down('x'), docker: down('y'), podman: up }), { ok: true, driver: 'podman' });
  });

  it('auto never picks msb, and explains when nothing is available', () => {
    const r = selectDriver('auto', { docker: down('no daemon'), podman: down('not installed'), bwrap: down('no userns'), msb: up });
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.reason : '', /bwrap: no userns; docker: no daemon; podman: not installed/);
  });

  it('a named driver is used only when available, with its reason otherwise', () => {
    assert.deepEqual(selectDriver('bwrap', { bwrap: up, docker: up }), { ok: true, driver: 'bwrap' });
    assert.deepEqual(selectDriver('msb', { msb: up }), { ok: true, driver: 'msb' });
    const r = selectDriver('podman', { podman: down('podman is not installed'), docker: up });
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.reason : '', /"podman".*podman is not installed/);
  });

  it('rejects an unknown driver name', () => {
    const r = selectDriver('lxc', { docker: up });
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.reason : '', /Unknown sandbox driver "lxc".*auto, docker, podman, bwrap, msb/);
  });
});

describe('OCI driver arguments', () => {
  const docker: OciCreateContext = { engine: 'docker', uid: 1000, gid: 1001, rootless: false, adjustments: {} };

  it('confines the container: read-only root, no capabilities, no new privileges, limits, the invoking user', () => {
    const args = buildOciCreateArgs(spec, docker);
    assert.deepEqual(args.slice(0, 2), ['run', '-d']);
    assert.deepEqual(values(args, '--cap-drop'), ['ALL']);
    assert.ok(args.includes('--read-only'));
    assert.deepEqual(values(args, '--security-opt'), ['no-new-privileges']);
    assert.deepEqual(values(args, '--network'), ['none']);
    assert.deepEqual(values(args, '--cpus'), ['1.5']);
    assert.deepEqual(values(args, '--memory'), ['512m']);
    assert.deepEqual(values(args, '--memory-swap'), ['512m']);
    assert.deepEqual(values(args, '--pids-limit'), ['256']);
    assert.deepEqual(values(args, '--user'), ['1000:1001']);
    assert.deepEqual(values(args, '-v'), ['/data/worktrees/demo:/data/worktrees/demo:rw', '/home/u/repo/.git:/home/u/repo/.git:ro']);
    assert.deepEqual(values(args, '-w'), ['/data/worktrees/demo']);
    assert.deepEqual(args.slice(-3), ['forge-sandbox:latest', 'sleep', 'infinity']);
    assert.ok(values(args, '-e').includes('HOME=/tmp'));
  });

  it('network on shares the host network (its loopback included)', () => {
    assert.deepEqual(values(buildOciCreateArgs({ ...spec, network: true }, docker), '--network'), ['host']);
  });

  it('keeps the settings in a label that parses back', () => {
    const label = values(buildOciCreateArgs(spec, docker), '--label').find((l) => l.startsWith('dev.forge.sandbox.settings='));
    const settings = JSON.parse(label!.slice('dev.forge.sandbox.settings='.length)) as SandboxSettings;
    assert.equal(settings.driver, 'docker');
    assert.equal(settings.worktreeDir, spec.worktreeDir);
    assert.deepEqual(settings.limits, spec.limits);
  });

  it('podman: keep-id when rootless, runc and explicit ulimits once their errors appeared', () => {
    const rootless = buildOciCreateArgs(spec, { ...docker, engine: 'podman', rootless: true });
    assert.ok(rootless.includes('--userns=keep-id'));
    assert.deepEqual(values(rootless, '--user'), []);
    const adjusted = buildOciCreateArgs(spec, { ...docker, engine: 'podman', adjustments: { runtimeRunc: true, explicitUlimits: true } });
    assert.deepEqual(values(adjusted, '--runtime'), ['runc']);
    assert.deepEqual(values(adjusted, '--ulimit'), ['nofile=20000:20000', 'nproc=4096:4096']);
  });

  it('maps create errors to podman work-arounds, each at most once, and none for docker', () => {
    const crun = 'Error: crun: cgroups v1 hybrid mode is not supported';
    const rlimit = 'Error: OCI runtime error: runc: setrlimit `RLIMIT_NOFILE`: operation not permitted';
    assert.equal(adjustmentForCreateError('docker', crun, {}), null);
    assert.deepEqual(adjustmentForCreateError('podman', crun, {}), { runtimeRunc: true });
    assert.deepEqual(adjustmentForCreateError('podman', rlimit, { runtimeRunc: true }), { runtimeRunc: true, explicitUlimits: true });
    assert.equal(adjustmentForCreateError('podman', rlimit, { explicitUlimits: true }), null);
    assert.equal(adjustmentForCreateError('podman', 'Error: image not known', {}), null);
  });

  it('execs through the keep-alive wrapper unless input is given', () => {
    const args = buildOciExecArgs('forge-demo', 'make test', { cwd: '/data/worktrees/demo/sub', env: { CI: '1' } });
    assert.deepEqual(args.slice(0, 7), ['exec', '-i', '-w', '/data/worktrees/demo/sub', '-e', 'CI=1', 'forge-demo']);
    assert.deepEqual(args.slice(7, 9), ['sh', '-c']);
    assert.deepEqual(args.slice(-2), ['forge-exec', 'make test']);
    assert.deepEqual(buildOciExecArgs('forge-demo', 'cat', { cwd: '/w', withInput: true }).slice(-3), ['bash', '-c', 'cat']);
  });

  it('maps docker and podman statuses to the five states', () => {
    assert.equal(mapOciStatus('running'), 'running');
    assert.equal(mapOciStatus('running', true), 'transient');
    assert.equal(mapOciStatus('exited'), 'stopped');
    assert.equal(mapOciStatus('stopped'), 'stopped');
    for (const s of ['created', 'restarting', 'paused', 'removing', 'dead', 'configured', 'initialized', 'stopping']) {
      assert.equal(mapOciStatus(s), 'transient', s);
    }
  });
});

describe('bwrap driver arguments', () => {
  const mergedUsr = (p: string): HostPathKind =>
    ({ '/bin': { kind: 'symlink', target: 'usr/bin' }, '/lib': { kind: 'symlink', target: 'usr/lib' }, '/etc/passwd': { kind: 'file' }, '/etc/ssl': { kind: 'dir' } })[p] as HostPathKind ??
    { kind: 'missing' };

  it('always drops every capability, unshares everything, and shares the network only when on', () => {
    const off = buildBwrapArgs(spec, { cwd: spec.worktreeDir, hostPath: mergedUsr });
    assert.deepEqual(values(off, '--cap-drop'), ['ALL']);
    assert.ok(off.includes('--unshare-all'));
    assert.ok(!off.includes('--share-net'));
    assert.ok(off.includes('--die-with-parent'));
    assert.ok(buildBwrapArgs({ ...spec, network: true }, { cwd: '/', hostPath: mergedUsr }).includes('--share-net'));
  });

  it('binds the worktree read-write, the main .git read-only, a short /etc list, and then makes / read-only', () => {
    const args = buildBwrapArgs(spec, { cwd: '/data/worktrees/demo/src', hostPath: mergedUsr });
    assert.deepEqual(values(args, '--bind'), ['/data/worktrees/demo']);
    assert.ok(values(args, '--ro-bind').includes('/home/u/repo/.git'));
    // /etc files are copied in from a descriptor the launcher opens (cheaper than a bind each), folders bound.
    assert.deepEqual(values(args, '--file'), ['20']);
    assert.equal(args[args.indexOf('--file') + 2], '/etc/passwd');
    assert.ok(values(args, '--ro-bind').includes('/etc/ssl'));
    assert.ok(!values(args, '--ro-bind').includes('/etc'), 'never the whole /etc (shadow, ssh host keys)');
    assert.ok(!values(args, '--ro-bind').includes('/etc/shadow'));
    assert.deepEqual(values(args, '--symlink'), ['usr/bin', 'usr/lib']);
    assert.ok(args.indexOf('--remount-ro') > args.indexOf('--bind'));
    assert.deepEqual(values(args, '--chdir'), ['/data/worktrees/demo/src']);
    assert.equal(args.at(-1), '--');
    assert.ok(args.includes('--clearenv'));
  });

  it('binds real top-level system folders on hosts without merged /usr', () => {
    const split = (p: string): HostPathKind => (p === '/bin' || p === '/lib64' ? { kind: 'dir' } : { kind: 'missing' });
    const args = buildBwrapArgs(spec, { cwd: '/', hostPath: split });
    assert.ok(values(args, '--ro-bind').includes('/bin'));
    assert.ok(values(args, '--ro-bind').includes('/lib64'));
    assert.deepEqual(values(args, '--symlink'), []);
  });
});

describe('msb driver arguments (argument-building only: msb cannot boot here)', () => {
  it('creates with limits, mounts at identical paths, the invoking user, and no network when off', () => {
    const args = buildMsbCreateArgs(spec, 1000, 1000);
    assert.deepEqual(args.slice(0, 2), ['create', '--quiet']);
    assert.deepEqual(values(args, '--name'), ['forge-demo']);
    assert.deepEqual(values(args, '--cpus'), ['2']);
    assert.deepEqual(values(args, '--memory'), ['512M']);
    assert.deepEqual(values(args, '--mount-dir'), ['/data/worktrees/demo:/data/worktrees/demo:uid=1000,gid=1000', '/home/u/repo/.git:/home/u/repo/.git:ro']);
    assert.ok(args.includes('--no-net'));
    assert.deepEqual(values(args, '--user'), ['1000:1000']);
    assert.equal(args.at(-1), 'forge-sandbox:latest');
    assert.deepEqual(values(buildMsbCreateArgs({ ...spec, network: true }, 0, 0), '--net'), ['all']);
  });

  it('execs bash in the working directory with the process limit as an rlimit', () => {
    assert.deepEqual(buildMsbExecArgs('forge-demo', 'ls', '/data/worktrees/demo', 256), [
      'exec', '--quiet', '--no-tty', '--workdir', '/data/worktrees/demo', '--rlimit', 'nproc=256', 'forge-demo', '--', 'bash', '-c', 'ls',
    ]);
  });

  it('maps msb statuses: stopped and crashed are reusable, the rest transient', () => {
    assert.equal(mapMsbStatus('Running'), 'running');
    assert.equal(mapMsbStatus('Stopped'), 'stopped');
    assert.equal(mapMsbStatus('Crashed'), 'stopped');
    for (const s of ['Created', 'Starting', 'Draining', 'Paused']) assert.equal(mapMsbStatus(s), 'transient');
  });
});

describe('sandbox spec validation', () => {
  it('rejects bad names, relative or colon paths, and nonsense limits with a clear message', () => {
    assert.throws(() => assertValidSpec({ ...spec, name: 'Forge Demo' }), /Invalid sandbox name/);
    assert.throws(() => assertValidSpec({ ...spec, worktreeDir: 'relative/wt' }), /must be absolute/);
    assert.throws(() => assertValidSpec({ ...spec, gitCommonDir: '/a:b' }), /no ':'/);
    assert.throws(() => assertValidSpec({ ...spec, limits: { cpus: 0, memoryMb: 512, pids: 10 } }), /Invalid sandbox limits/);
    assert.doesNotThrow(() => assertValidSpec(spec));
  });
});

describe('opencode shell shim', () => {
  const handle = (worktreeDir: string, root: string): SandboxHandle => ({
    loopName: 'demo',
    name: 'forge-demo',
    driver: 'bwrap',
    settings: { ...spec, worktreeDir, driver: 'bwrap', unenforcedLimits: [] },
    runtime: new BwrapRuntime({ stateDir: path.join(root, 'state') }),
  });

  it('passes `-c COMMAND` through verbatim and quotes any other argument list for bash', () => {
    const shim = renderShellShim(handle('/w', '/tmp'), 'LAUNCH');
    assert.match(shim, /^#!\/bin\/bash\n/);
    assert.match(shim, /if \[ "\$#" -eq 2 \] && \[ "\$1" = "-c" \]; then\n {2}FORGE_COMMAND=\$2\n/);
    assert.match(shim, /printf -v FORGE_QUOTED ' %q' "\$@"/);
    assert.match(shim, /\nLAUNCH\n$/);
  });

  it('refuses to write the shims inside the worktree', async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'forge-shim-'));
    try {
      await assert.rejects(prepareOpencodeSandbox(handle(root, root), { shimRoot: path.join(root, 'shims') }), (e: unknown) => {
        assert.ok(e instanceof SandboxError);
        assert.match(e.message, /must not be inside/);
        return true;
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('the worktree\'s .git file is read-only in every sandbox (issue 26)', () => {
  const gitFile = '/data/worktrees/demo/.git';
  it('bwrap: ro-binds it after the writable worktree bind (a later mount wins)', () => {
    const args = buildBwrapArgs(spec, { cwd: spec.worktreeDir, hostPath: () => ({ kind: 'missing' }) });
    const at = args.findIndex((a, i) => a === '--ro-bind-try' && args[i + 1] === gitFile && args[i + 2] === gitFile);
    assert.ok(at > args.indexOf(spec.worktreeDir), args.join(' '));
  });
  it('docker/podman: mounts it read-only, and fails rather than making a folder when it is missing', () => {
    const args = buildOciCreateArgs(spec, { engine: 'docker', uid: 1000, gid: 1001, rootless: false, adjustments: {} } satisfies OciCreateContext);
    assert.ok(args.includes(`type=bind,source=${gitFile},target=${gitFile},readonly`), args.join(' '));
    // No regular .git file there (missing, or a link): no mount, so no host target of a link is mounted.
    const without = buildOciCreateArgs(spec, { engine: 'docker', uid: 1000, gid: 1001, rootless: false, adjustments: {}, worktreeGitEntry: false } satisfies OciCreateContext);
    assert.ok(!without.some((a) => a.includes(`source=${gitFile}`)), without.join(' '));
  });
});

describe('read-only binds at another path and writable extra paths (issue 27)', () => {
  const withBinds: SandboxSpec = {
    ...spec,
    readOnlyBinds: [{ source: '/home/u/repo/node_modules', target: '/data/worktrees/demo/node_modules' }],
    writablePaths: ['/data/package-cache'],
  };
  it('bwrap: the dependency folder is ro-bound after the writable worktree (it covers it), the cache bound read-write', () => {
    const args = buildBwrapArgs(withBinds, { cwd: spec.worktreeDir, hostPath: () => ({ kind: 'missing' }) });
    const at = args.findIndex((a, i) => a === '--ro-bind' && args[i + 1] === '/home/u/repo/node_modules' && args[i + 2] === '/data/worktrees/demo/node_modules');
    assert.ok(at > args.indexOf(spec.worktreeDir), args.join(' '));
    assert.ok(args.some((a, i) => a === '--bind' && args[i + 1] === '/data/package-cache' && args[i + 2] === '/data/package-cache'), args.join(' '));
    assert.ok(at < args.indexOf('--remount-ro'));
  });
  it('docker/podman: a read-only --mount (no folder made for a missing source) and a rw volume', () => {
    const args = buildOciCreateArgs(withBinds, { engine: 'docker', uid: 1000, gid: 1001, rootless: false, adjustments: {} } satisfies OciCreateContext);
    assert.ok(args.includes('type=bind,source=/home/u/repo/node_modules,target=/data/worktrees/demo/node_modules,readonly'), args.join(' '));
    assert.ok(args.includes('/data/package-cache:/data/package-cache:rw'), args.join(' '));
    assert.ok(args.indexOf('type=bind,source=/home/u/repo/node_modules,target=/data/worktrees/demo/node_modules,readonly') > args.indexOf(`${spec.worktreeDir}:${spec.worktreeDir}:rw`));
  });
  it('msb: read-only mount at the target', () => {
    const args = buildMsbCreateArgs(withBinds, 1000, 1000);
    assert.ok(args.includes('/home/u/repo/node_modules:/data/worktrees/demo/node_modules:ro'), args.join(' '));
  });
  it('the spec check refuses a relative or colon bind path', () => {
    assert.throws(() => assertValidSpec({ ...spec, readOnlyBinds: [{ source: 'rel', target: '/x' }] }), /must be absolute/);
    assert.throws(() => assertValidSpec({ ...spec, writablePaths: ['/a:b'] }), /must be absolute/);
  });
});
