import { promises as fs, lstatSync, readlinkSync, existsSync, readFileSync, statSync } from 'node:fs';
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
import { resolveOnPath, runCommand, type RunResult } from './process';
import { collectProcess, startProcess, type StartedProcess } from '../process/process-runner';
import { SandboxCgroups, errCode, type CgroupJoinStrategy } from './cgroup';
import { stopSandboxProcesses } from './process-freeze';
import { describeExit } from './sandbox-env';
import {
  buildBwrapArgs,
  BWRAP_CWD_FROM_SHELL,
  readBwrapHostLayout,
  renderBwrapLaunch,
  bwrapAheadRequest,
  type BwrapHostLayout,
  type HostPathKind,
} from './bwrap-args';

export { buildBwrapArgs, BWRAP_ETC_ENTRIES, BWRAP_SYSTEM_DIRS, renderBwrapLaunch, type HostPathKind } from './bwrap-args';

/**
 * bubblewrap on Linux. A bwrap "sandbox" is a settings record in Forge's state folder
 * plus a cgroup carrying its limits; every command starts a fresh bwrap whose processes
 * join the cgroup before the command starts, so all state lives in the worktree (which is
 * the point) and processes do not outlive their command. The root is an empty read-only
 * tmpfs with the host's /usr, a short list of /etc entries (files copied in, folders bound
 * read-only), the worktree bound read-write, the main repository's .git read-only, a
 * private /tmp, and every capability dropped (as root, bwrap would otherwise keep them and
 * a command could remount a read-only bind writable).
 *
 * Exec and the opencode shims run the same bash launcher (bwrap-args.ts). Per command,
 * Forge's side is a stat of the record (cached by its identity, with the host layout
 * read once per record) and of the cgroup files; see `usableRecord`.
 */

export function describeHostPath(p: string): HostPathKind {
  try {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return { kind: 'symlink', target: readlinkSync(p) };
    return st.isDirectory() ? { kind: 'dir' } : { kind: 'file' };
  } catch {
    return { kind: 'missing' };
  }
}

/** bwrap 0.5 brought `--perms`, which the launcher uses for the /etc files it copies in. */
export const BWRAP_MIN_VERSION = [0, 5] as const;

export function bwrapVersionTooOld(version: string): boolean {
  const m = /(\d+)\.(\d+)/.exec(version);
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major < BWRAP_MIN_VERSION[0] || (major === BWRAP_MIN_VERSION[0] && minor < BWRAP_MIN_VERSION[1]);
}

export interface BwrapRuntimeOptions {
  /** Forge-owned folder holding one settings record per sandbox. */
  stateDir: string;
  bwrapPath?: string;
  cgroups?: SandboxCgroups;
  /** Bash on the host, which runs the launcher (default /bin/bash). */
  hostShell?: string;
  /** How commands join the sandbox's cgroup (default: what suits this host, see cgroupJoinStrategy). */
  cgroupJoin?: CgroupJoinStrategy;
  /**
   * Start each sandbox's next exec launch ahead of its command (default true): see `exec`.
   * Off, every command starts its own bwrap when it is asked for.
   */
  launchAhead?: boolean;
}

/** A launch started before its command: the sandbox is set up and waits on stdin for the command. */
interface AheadLaunch {
  /** The identity of the record it was started from (a changed record makes it stale). */
  identity: string;
  started: StartedProcess;
}

interface BwrapRecord extends SandboxSettings {
  procsFiles: string[];
}

/** A record as last read, with the identity of its file and the host layout read with it. */
interface CachedRecord {
  identity: string;
  record: BwrapRecord;
  layout: BwrapHostLayout;
  /** The launcher without extra environment, rendered on first use. */
  launch?: string;
  /** The launcher reading its command from stdin, rendered on first use. */
  aheadLaunch?: string;
}

export class BwrapRuntime implements SandboxRuntime {
  readonly driver = 'bwrap' as const;
  private readonly stateDir: string;
  private readonly bwrap: string;
  private readonly cgroups: SandboxCgroups;
  private readonly hostShell: string;
  private readonly cgroupJoin: CgroupJoinStrategy | undefined;
  private readonly oomKillsSeen = new Map<string, number>();
  private readonly records = new Map<string, CachedRecord>();
  private readonly launchAhead: boolean;
  private readonly ahead = new Map<string, AheadLaunch>();
  private available: Promise<SandboxAvailability> | undefined;

  constructor(options: BwrapRuntimeOptions) {
    this.stateDir = options.stateDir;
    this.bwrap = options.bwrapPath ?? 'bwrap';
    this.cgroups = options.cgroups ?? new SandboxCgroups();
    this.hostShell = options.hostShell ?? '/bin/bash';
    this.cgroupJoin = options.cgroupJoin;
    this.launchAhead = options.launchAhead ?? true;
  }

  private recordPath(name: string): string {
    return path.join(this.stateDir, `${name}.json`);
  }

  /** A positive answer is kept for the life of this runtime; a negative one is asked again next time. */
  checkAvailable(): Promise<SandboxAvailability> {
    if (!this.available) {
      this.available = this.probeAvailability();
      void this.available.then((a) => {
        if (!a.available) this.available = undefined;
      });
    }
    return this.available;
  }

  private async probeAvailability(): Promise<SandboxAvailability> {
    if (process.platform !== 'linux') return { available: false, reason: 'bubblewrap sandboxes need Linux.' };
    try {
      // Both at once: each is a process start, and they are independent.
      const [v, probe] = await Promise.all([
        runCommand(this.bwrap, ['--version'], { timeoutMs: 10_000 }),
        runCommand(
          this.bwrap,
          ['--ro-bind', '/usr', '/usr', ...readBwrapHostLayout(describeHostPath).systemDirArgs, '--proc', '/proc', '--dev', '/dev', '--unshare-all', '--cap-drop', 'ALL', '--die-with-parent', '--', 'true'],
          { timeoutMs: 15_000 },
        ),
      ]);
      if (v.exitCode !== 0) throw new Error(v.stderr);
      const version = v.stdout.trim().replace(/^bubblewrap\s*/, '');
      if (bwrapVersionTooOld(version)) {
        return {
          available: false,
          reason: `bubblewrap ${version} is too old: Forge needs ${BWRAP_MIN_VERSION.join('.')} or newer. Update the "bubblewrap" package or pick another sandbox driver.`,
        };
      }
      if (probe.exitCode !== 0) {
        return {
          available: false,
          reason: `bubblewrap is installed but cannot start a sandbox here: ${probe.stderr.trim()} (user or mount namespaces may be disabled).`,
        };
      }
      return { available: true, version };
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
    this.records.delete(spec.name);
  }

  async start(name: string): Promise<void> {
    assertValidSandboxName(name);
    const record = await this.readRecord(name);
    if (!record) throw new SandboxError(`Sandbox "${name}" does not exist.`, 'not-usable');
    const cg = await this.cgroups.create(name, record.limits);
    const next: BwrapRecord = { ...record, unenforcedLimits: cg.unenforced, procsFiles: cg.procsFiles };
    await fs.writeFile(this.recordPath(name), JSON.stringify(next, null, 2));
    this.records.delete(name);
  }

  async freeze(name: string): Promise<(() => Promise<void>) | null> {
    const record = await this.readRecord(name);
    if (!record) return null;
    // Every command joins each of the record's cgroups; freezing one it does not join holds nothing.
    const v1WithoutFreezer = (await this.cgroups.layout()) === 'v1' && !record.procsFiles.some((f) => f.includes(`${path.sep}freezer${path.sep}`));
    const thaw = record.procsFiles.length > 0 && !v1WithoutFreezer ? await this.cgroups.freeze(name) : null;
    // No freezable cgroup (no delegated cgroup for this user): stop the sandbox's process tree instead.
    return thaw ?? stopSandboxProcesses(record.worktreeDir);
  }

  async stop(name: string): Promise<void> {
    assertValidSandboxName(name);
    // Stopping ends every running command and drops the cgroup; the record stays, so
    // the sandbox is `stopped` and `start` brings it back.
    this.endAhead(name);
    await this.cgroups.remove(name);
    this.records.delete(name);
  }

  async state(name: string): Promise<SandboxState> {
    assertValidSandboxName(name);
    return this.usableRecord(name).state;
  }

  /**
   * The sandbox's record as last read, re-read only when its file changed identity (device,
   * inode, size, modification time: another Forge process may rewrite it), with the host
   * layout read alongside. One stat per call; synchronous, as it is microseconds on a local
   * file and saves the event-loop round trips of the asynchronous calls on every command.
   */
  private cachedRecord(name: string): CachedRecord | 'missing' | 'unknown' {
    const file = this.recordPath(name);
    let identity: string;
    try {
      const st = statSync(file);
      if (!st.isFile()) return 'unknown';
      identity = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (e) {
      return errCode(e) === 'ENOENT' ? 'missing' : 'unknown';
    }
    const known = this.records.get(name);
    if (known && known.identity === identity) return known;
    let record: BwrapRecord;
    try {
      record = JSON.parse(readFileSync(file, 'utf8')) as BwrapRecord;
    } catch (e) {
      return errCode(e) === 'ENOENT' ? 'missing' : 'unknown';
    }
    const cached: CachedRecord = { identity, record, layout: readBwrapHostLayout(describeHostPath) };
    this.records.set(name, cached);
    return cached;
  }

  /** The record when the sandbox can run a command now (its record is readable and its cgroup exists), else its state. */
  private usableRecord(name: string): { state: 'running'; cached: CachedRecord } | { state: Exclude<SandboxState, 'running'> } {
    const cached = this.cachedRecord(name);
    if (cached === 'missing' || cached === 'unknown') return { state: cached };
    if (cached.record.procsFiles.some((f) => !existsSync(f))) return { state: 'stopped' };
    return { state: 'running', cached };
  }

  private launchScript(name: string, cached: CachedRecord, env?: Record<string, string>, commandFrom?: 'stdin'): string {
    const { record, layout } = cached;
    return renderBwrapLaunch({
      ...(commandFrom ? { commandFrom } : {}),
      sandboxName: name,
      bwrapPath: resolveOnPath(this.bwrap, process.env.PATH),
      args: buildBwrapArgs(record, { cwd: BWRAP_CWD_FROM_SHELL, layout, ...(env ? { env } : {}) }),
      etcFiles: layout.etcFiles,
      procsFiles: record.procsFiles,
      joinStrategy: this.cgroupJoin ?? this.cgroups.joinStrategy(),
      recordFile: this.recordPath(name),
    });
  }

  async exec(name: string, command: string, options: SandboxExecOptions = {}): Promise<SandboxExecResult> {
    assertValidSandboxName(name);
    const usable = this.usableRecord(name);
    if (usable.state !== 'running') {
      const state = usable.state;
      throw new SandboxError(
        `Sandbox "${name}" is ${state}, so the command was not run (it never runs on the host).` +
          (state === 'missing' ? ' It was removed; restart the loop to create a new one.' : ''),
        state === 'unknown' ? 'state-unknown' : 'not-usable',
      );
    }
    const { record } = usable.cached;
    const r = await this.runInSandbox(name, usable.cached, command, options);
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

  /**
   * Runs one command. Without extra environment it goes to the launch started ahead for this
   * sandbox when there is one from the same record: bwrap's start (namespaces, mounts, the cgroup
   * join) was made while nothing waited, so the command pays about what a host spawn costs
   * (bench/sandbox.mjs, "`true`, exec API"). Either way the next launch is started ahead once
   * this command has ended. The launch is the same launcher as the shims', reading its command
   * from stdin instead of its environment.
   */
  private async runInSandbox(name: string, cached: CachedRecord, command: string, options: SandboxExecOptions): Promise<RunResult> {
    const cwd = options.cwd ?? cached.record.worktreeDir;
    const waiting = options.env ? undefined : this.takeAhead(name, cached.identity);
    try {
      if (waiting) {
        const { child } = waiting.started;
        for (const handle of [child, child.stdin, child.stdout, child.stderr]) (handle as { ref?: () => void } | null)?.ref?.();
        child.stdin!.write(bwrapAheadRequest(cwd, command));
        const r = await collectProcess(waiting.started, {
          ...(options.onOutput ? { onOutput: options.onOutput } : {}),
          ...(options.stdin !== undefined ? { input: options.stdin } : {}),
          ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
        });
        return { exitCode: r.exitCode, signal: r.signal, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
      }
      // The same launcher as the opencode shims, so both paths confine alike.
      const launch = options.env ? this.launchScript(name, cached, options.env) : (cached.launch ??= this.launchScript(name, cached));
      // --norc: bash would read ~/.bashrc when its stdin is a socket (as node's pipes are).
      return await runCommand(this.hostShell, ['--norc', '--noprofile', '-c', launch, 'forge-exec'], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', FORGE_CWD: cwd, FORGE_COMMAND: command },
        ...(options.onOutput ? { onOutput: options.onOutput } : {}),
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
        ...(options.stdin !== undefined ? { input: options.stdin } : {}),
      });
    } finally {
      this.startAhead(name);
    }
  }

  /** The launch started ahead for this record, if it is still waiting; a stale one is ended. */
  private takeAhead(name: string, identity: string): AheadLaunch | undefined {
    const waiting = this.ahead.get(name);
    if (!waiting) return undefined;
    this.ahead.delete(name);
    const { child } = waiting.started;
    if (waiting.identity === identity && child.exitCode === null && child.signalCode === null) return waiting;
    waiting.started.kill('SIGKILL');
    return undefined;
  }

  /**
   * Starts the sandbox's next launch, which sets the sandbox up and then waits for its command.
   * It holds no reference on this process's event loop (a CLI still exits when its work is done;
   * bwrap's --die-with-parent then ends it), and `stop`, `remove` and a changed record end it.
   */
  private startAhead(name: string): void {
    if (!this.launchAhead || this.ahead.has(name)) return;
    const usable = this.usableRecord(name);
    if (usable.state !== 'running') return;
    const cached = usable.cached;
    const launch = (cached.aheadLaunch ??= this.launchScript(name, cached, undefined, 'stdin'));
    const started = startProcess(this.hostShell, ['--norc', '--noprofile', '-c', launch, 'forge-exec'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', FORGE_CWD: cached.record.worktreeDir },
      stdin: 'pipe',
      processGroup: true,
    });
    const { child } = started;
    if (!child) return;
    child.stdin?.on('error', () => undefined);
    for (const handle of [child, child.stdin, child.stdout, child.stderr]) (handle as { unref?: () => void } | null)?.unref?.();
    const entry: AheadLaunch = { identity: cached.identity, started };
    this.ahead.set(name, entry);
    // A launch that ended before its command came (its sandbox stopped, bwrap failed) is dropped.
    void started.exited.then(() => {
      if (this.ahead.get(name) === entry) this.ahead.delete(name);
    });
  }

  private endAhead(name: string): void {
    const waiting = this.ahead.get(name);
    if (!waiting) return;
    this.ahead.delete(name);
    waiting.started.kill('SIGKILL');
  }

  async remove(name: string): Promise<void> {
    assertValidSandboxName(name);
    this.endAhead(name);
    await this.cgroups.remove(name);
    this.oomKillsSeen.delete(name);
    this.records.delete(name);
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
    this.records.delete(name);
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
    assertValidSandboxName(settings.name);
    const cached = this.cachedRecord(settings.name);
    if (cached === 'unknown') throw new SandboxError(`Could not read the state of sandbox "${settings.name}" (${this.recordPath(settings.name)}).`, 'state-unknown');
    if (cached === 'missing') throw new SandboxError(`Sandbox "${settings.name}" does not exist.`, 'not-usable');
    return this.launchScript(settings.name, cached);
  }
}
