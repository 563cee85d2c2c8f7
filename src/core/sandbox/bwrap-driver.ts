import { promises as fs, lstatSync, readlinkSync, existsSync } from 'node:fs';
import path from 'node:path';
import {
  assertValidSandboxName,
  assertValidSpec,
  SandboxError,
  type SandboxAvailability,
  type SandboxExecOptions,
  type SandboxExecResult,
  type SandboxLimits,
  type SandboxRuntime,
  type SandboxSettings,
  type SandboxSpec,
  type SandboxState,
} from './types';
import { resolveOnPath, runCommand, shellQuote } from './process';
import { SandboxCgroups, errCode } from './cgroup';
import { describeExit, SANDBOX_BASE_ENV } from './sandbox-env';

/**
 * bubblewrap on Linux. A bwrap "sandbox" is a settings record in Forge's state folder
 * plus a cgroup carrying its limits; every command starts a fresh bwrap that joins the
 * cgroup, so all state lives in the worktree (which is the point) and processes do not
 * outlive their command. The root is an empty read-only tmpfs with the host's /usr and a
 * short list of /etc entries bound read-only, the worktree bound read-write, the main
 * repository's .git read-only, a private /tmp, and every capability dropped (as root,
 * bwrap would otherwise keep them and a command could remount a read-only bind writable).
 */

/** /etc entries a shell, git, node, python and TLS need; never the whole /etc (shadow, ssh keys, …). */
export const BWRAP_ETC_ENTRIES = [
  'passwd', 'group', 'hosts', 'hostname', 'resolv.conf', 'nsswitch.conf', 'host.conf', 'gai.conf',
  'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'localtime', 'timezone',
  'ssl', 'ca-certificates', 'ca-certificates.conf', 'gitconfig', 'bash.bashrc', 'profile', 'inputrc',
  'mime.types', 'protocols', 'services', 'os-release', 'debian_version', 'environment', 'npmrc', 'pip.conf',
];

/** Top-level system folders: a symlink into /usr on merged-/usr hosts, a folder elsewhere. */
export const BWRAP_SYSTEM_DIRS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

export type HostPathKind = { kind: 'dir' } | { kind: 'file' } | { kind: 'symlink'; target: string } | { kind: 'missing' };

export function describeHostPath(p: string): HostPathKind {
  try {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return { kind: 'symlink', target: readlinkSync(p) };
    return st.isDirectory() ? { kind: 'dir' } : { kind: 'file' };
  } catch {
    return { kind: 'missing' };
  }
}

export interface BwrapCommandShape {
  /** Working directory inside; a shell expression like "$FORGE_CWD" is kept as is when `cwdIsShellWord`. */
  cwd: string;
  env?: Record<string, string>;
  /** Tells what each host path is (injected so the argument builder stays pure). */
  hostPath: (p: string) => HostPathKind;
}

/** bwrap arguments up to and including `--`; the program and its arguments follow. */
export function buildBwrapArgs(settings: SandboxSpec, shape: BwrapCommandShape): string[] {
  const args: string[] = ['--ro-bind', '/usr', '/usr'];
  for (const dir of BWRAP_SYSTEM_DIRS) {
    const d = shape.hostPath(dir);
    if (d.kind === 'symlink') args.push('--symlink', d.target, dir);
    else if (d.kind === 'dir') args.push('--ro-bind', dir, dir);
  }
  for (const entry of BWRAP_ETC_ENTRIES) {
    const p = `/etc/${entry}`;
    if (shape.hostPath(p).kind !== 'missing') args.push('--ro-bind', p, p);
  }
  args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/var/tmp', '--tmpfs', '/run');
  args.push('--bind', settings.worktreeDir, settings.worktreeDir);
  if (settings.gitCommonDir) args.push('--ro-bind', settings.gitCommonDir, settings.gitCommonDir);
  for (const p of settings.readOnlyPaths ?? []) args.push('--ro-bind', p, p);
  args.push('--remount-ro', '/');
  args.push('--unshare-all');
  if (settings.network) args.push('--share-net');
  args.push('--hostname', 'forge-sandbox', '--cap-drop', 'ALL', '--die-with-parent', '--new-session');
  args.push('--clearenv');
  for (const [k, v] of Object.entries({ ...SANDBOX_BASE_ENV, ...(shape.env ?? {}) })) args.push('--setenv', k, v);
  args.push('--chdir', shape.cwd, '--');
  return args;
}

/**
 * Joins the cgroup(s) named before `--`, then execs the rest. Runs on the host, before
 * bwrap, so bwrap and everything under it are counted from their first instruction.
 */
export const CGROUP_JOIN_SCRIPT =
  'while [ "$1" != -- ]; do echo $$ > "$1" || { echo "forge: cannot join the sandbox cgroup $1; the command was not run" >&2; exit 125; }; shift; done; shift; exec "$@"';

export interface BwrapRuntimeOptions {
  /** Forge-owned folder holding one settings record per sandbox. */
  stateDir: string;
  bwrapPath?: string;
  cgroups?: SandboxCgroups;
  /** Shell used to join the cgroup before bwrap (default /bin/sh). */
  hostShell?: string;
}

interface BwrapRecord extends SandboxSettings {
  procsFiles: string[];
}

export class BwrapRuntime implements SandboxRuntime {
  readonly driver = 'bwrap' as const;
  private readonly stateDir: string;
  private readonly bwrap: string;
  private readonly cgroups: SandboxCgroups;
  private readonly hostShell: string;
  private readonly oomKillsSeen = new Map<string, number>();

  constructor(options: BwrapRuntimeOptions) {
    this.stateDir = options.stateDir;
    this.bwrap = options.bwrapPath ?? 'bwrap';
    this.cgroups = options.cgroups ?? new SandboxCgroups();
    this.hostShell = options.hostShell ?? '/bin/sh';
  }

  private recordPath(name: string): string {
    return path.join(this.stateDir, `${name}.json`);
  }

  async checkAvailable(): Promise<SandboxAvailability> {
    if (process.platform !== 'linux') return { available: false, reason: 'bubblewrap sandboxes need Linux.' };
    try {
      const v = await runCommand(this.bwrap, ['--version'], { timeoutMs: 10_000 });
      if (v.exitCode !== 0) throw new Error(v.stderr);
      const probe = await runCommand(
        this.bwrap,
        ['--ro-bind', '/usr', '/usr', ...systemDirArgs(), '--proc', '/proc', '--dev', '/dev', '--unshare-all', '--cap-drop', 'ALL', '--die-with-parent', '--', 'true'],
        { timeoutMs: 15_000 },
      );
      if (probe.exitCode !== 0) {
        return {
          available: false,
          reason: `bubblewrap is installed but cannot start a sandbox here: ${probe.stderr.trim()} (user or mount namespaces may be disabled).`,
        };
      }
      return { available: true, version: v.stdout.trim().replace(/^bubblewrap\s*/, '') };
    } catch {
      return { available: false, reason: 'bubblewrap (bwrap) is not installed: install the "bubblewrap" package or pick another sandbox driver.' };
    }
  }

  private async readRecord(name: string): Promise<BwrapRecord | null> {
    let text: string;
    try {
      text = await fs.readFile(this.recordPath(name), 'utf8');
    } catch (e) {
      if (errCode(e) === 'ENOENT') return null;
      throw new SandboxError(`Could not read the state of sandbox "${name}": ${errCode(e)} on ${this.recordPath(name)}`, 'state-unknown');
    }
    try {
      return JSON.parse(text) as BwrapRecord;
    } catch {
      throw new SandboxError(`The state record of sandbox "${name}" (${this.recordPath(name)}) is corrupt.`, 'state-unknown');
    }
  }

  async create(spec: SandboxSpec): Promise<void> {
    assertValidSpec(spec);
    if ((await this.state(spec.name)) !== 'missing') throw new SandboxError(`Sandbox "${spec.name}" already exists.`, 'already-exists');
    if (!existsSync(spec.worktreeDir)) throw new SandboxError(`The worktree ${spec.worktreeDir} does not exist.`, 'invalid-spec');
    const cg = await this.cgroups.create(spec.name, spec.limits);
    const record: BwrapRecord = { ...spec, driver: 'bwrap', unenforcedLimits: cg.unenforced, procsFiles: cg.procsFiles };
    await fs.mkdir(this.stateDir, { recursive: true });
    const tmp = `${this.recordPath(spec.name)}.${process.pid}.tmp`;
    await fs.writeFile(tmp, JSON.stringify(record, null, 2));
    await fs.rename(tmp, this.recordPath(spec.name));
  }

  async start(name: string): Promise<void> {
    assertValidSandboxName(name);
    const record = await this.readRecord(name);
    if (!record) throw new SandboxError(`Sandbox "${name}" does not exist.`, 'not-usable');
    const cg = await this.cgroups.create(name, record.limits);
    const next: BwrapRecord = { ...record, unenforcedLimits: cg.unenforced, procsFiles: cg.procsFiles };
    await fs.writeFile(this.recordPath(name), JSON.stringify(next, null, 2));
  }

  async stop(name: string): Promise<void> {
    assertValidSandboxName(name);
    // Stopping ends every running command and drops the cgroup; the record stays, so
    // the sandbox is `stopped` and `start` brings it back.
    await this.cgroups.remove(name);
  }

  async state(name: string): Promise<SandboxState> {
    assertValidSandboxName(name);
    let record: BwrapRecord | null;
    try {
      record = await this.readRecord(name);
    } catch {
      return 'unknown';
    }
    if (!record) return 'missing';
    if (record.procsFiles.length > 0 && !(await this.cgroups.exists(name))) return 'stopped';
    return 'running';
  }

  async exec(name: string, command: string, options: SandboxExecOptions = {}): Promise<SandboxExecResult> {
    assertValidSandboxName(name);
    const state = await this.state(name);
    if (state !== 'running') {
      throw new SandboxError(
        `Sandbox "${name}" is ${state}, so the command was not run (it never runs on the host).` +
          (state === 'missing' ? ' It was removed; restart the loop to create a new one.' : ''),
        state === 'unknown' ? 'state-unknown' : 'not-usable',
      );
    }
    const record = (await this.readRecord(name))!;
    const bwrapArgs = buildBwrapArgs(record, { cwd: options.cwd ?? record.worktreeDir, env: options.env, hostPath: describeHostPath });
    const argv = [this.hostShell, '-c', CGROUP_JOIN_SCRIPT, 'forge-cgroup-join', ...record.procsFiles, '--', this.bwrap, ...bwrapArgs, 'bash', '-c', command];
    const r = await runCommand(argv[0]!, argv.slice(1), {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.stdin !== undefined ? { input: options.stdin } : {}),
    });
    const base = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
    if (r.timedOut) return { ...base, killed: 'timeout', note: 'The command timed out and was killed with its whole sandbox.' };
    if (r.exitCode === 137 || r.signal === 'SIGKILL') {
      const kills = await this.cgroups.oomKills(name);
      const before = this.oomKillsSeen.get(name) ?? 0;
      if (kills !== undefined) this.oomKillsSeen.set(name, kills);
      const kind = kills !== undefined && kills > before ? 'memory-limit' : 'signal';
      return { ...base, killed: kind, note: describeExit(kind, record.limits.memoryMb) };
    }
    return base;
  }

  async remove(name: string): Promise<void> {
    assertValidSandboxName(name);
    await this.cgroups.remove(name);
    this.oomKillsSeen.delete(name);
    try {
      await fs.unlink(this.recordPath(name));
    } catch (e) {
      if (errCode(e) !== 'ENOENT') throw new SandboxError(`Could not remove sandbox "${name}": ${errCode(e)}`, 'engine-failed');
    }
  }

  async updateLimits(name: string, limits: SandboxLimits): Promise<void> {
    assertValidSandboxName(name);
    const record = await this.readRecord(name);
    if (!record) throw new SandboxError(`Sandbox "${name}" does not exist.`, 'not-usable');
    // Creating the cgroup again rewrites the limit files of the existing one.
    const cg = await this.cgroups.create(name, limits);
    const next: BwrapRecord = { ...record, limits, unenforcedLimits: cg.unenforced, procsFiles: cg.procsFiles };
    await fs.writeFile(this.recordPath(name), JSON.stringify(next, null, 2));
  }

  async listByPrefix(prefix: string): Promise<string[]> {
    let entries: string[];
    try {
      entries = await fs.readdir(this.stateDir);
    } catch (e) {
      if (errCode(e) === 'ENOENT') return [];
      throw new SandboxError(`Could not list bwrap sandboxes in ${this.stateDir}: ${errCode(e)}`, 'state-unknown');
    }
    return entries
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.slice(0, -'.json'.length))
      .filter((n) => n.startsWith(prefix))
      .sort();
  }

  async readSettings(name: string): Promise<SandboxSettings | null> {
    assertValidSandboxName(name);
    const record = await this.readRecord(name);
    if (!record) return null;
    const { procsFiles: _procs, ...settings } = record;
    return settings;
  }

  async renderShimLaunch(settings: SandboxSettings): Promise<string> {
    const record = await this.readRecord(settings.name);
    if (!record) throw new SandboxError(`Sandbox "${settings.name}" does not exist.`, 'not-usable');
    const recordFile = this.recordPath(settings.name);
    const bwrapArgs = buildBwrapArgs(record, { cwd: '@@CWD@@', hostPath: describeHostPath })
      .map((a) => (a === '@@CWD@@' ? '"$FORGE_CWD"' : shellQuote(a)))
      .join(' ');
    return [
      // The record is the sandbox: once it is gone (stopped loop, removal out of band), fail.
      `if [ ! -f ${shellQuote(recordFile)} ]; then echo "forge: sandbox ${settings.name} is gone; the command was not run (it never runs on the host)" >&2; exit 125; fi`,
      // Cgroup paths are fixed per sandbox; a stopped sandbox has none, so joining fails.
      ...record.procsFiles.map(
        (f) =>
          `echo $$ > ${shellQuote(f)} || { echo "forge: cannot join the sandbox cgroup (sandbox ${settings.name} stopped?); the command was not run" >&2; exit 125; }`,
      ),
      `exec /usr/bin/env -i PATH=${shellQuote(process.env.PATH ?? '/usr/bin:/bin')} ${shellQuote(resolveOnPath(this.bwrap, process.env.PATH))} ${bwrapArgs} bash -c "$FORGE_COMMAND"`,
    ].join('\n');
  }
}

function systemDirArgs(): string[] {
  const out: string[] = [];
  for (const dir of BWRAP_SYSTEM_DIRS) {
    const d = describeHostPath(dir);
    if (d.kind === 'symlink') out.push('--symlink', d.target, dir);
    else if (d.kind === 'dir') out.push('--ro-bind', dir, dir);
  }
  return out;
}
