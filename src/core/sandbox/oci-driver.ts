import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync } from 'node:fs';
import os from 'node:os';
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
import { resolveOnPath, runCommand, shellQuote, type RunResult } from './process';
import { describeExit, SANDBOX_BASE_ENV } from './sandbox-env';

/**
 * One driver for both OCI command-line engines: Docker and Podman take the same flags
 * for everything Forge does. Where an engine refuses on a given host, the create is
 * retried once per recognised error with the matching work-around (see
 * `adjustmentForCreateError`).
 */
export type OciEngine = 'docker' | 'podman';

export const LABEL_SANDBOX = 'dev.forge.sandbox';
export const LABEL_SETTINGS = 'dev.forge.sandbox.settings';

export interface OciAdjustments {
  /** Podman: crun refuses cgroup v1 hybrid hosts; runc works. */
  runtimeRunc?: boolean;
  /** Podman rootful without CAP_SYS_RESOURCE cannot raise the default rlimits: set them explicitly. */
  explicitUlimits?: boolean;
}

export interface OciCreateContext {
  engine: OciEngine;
  /** The invoking user; files written in the worktree belong to them. */
  uid: number;
  gid: number;
  /** Podman rootless: map the invoking user with keep-id instead of --user. */
  rootless: boolean;
  adjustments: OciAdjustments;
  /**
   * Whether the worktree's `.git` is a regular file (a linked worktree's): mounted read-only when it
   * is. A worktree without one (a test's plain folder) or with a link there gets no mount, as
   * bwrap's `--ro-bind-try` gets none for a missing file: Forge's git never reads that entry and
   * puts it back before a commit, and a link's host target is never mounted.
   */
  worktreeGitEntry?: boolean;
}

export function buildOciCreateArgs(spec: SandboxSpec, ctx: OciCreateContext): string[] {
  assertValidSpec(spec);
  if (!spec.image) throw new SandboxError(`Sandbox "${spec.name}" needs an image for the ${ctx.engine} driver.`, 'invalid-spec');
  const settings: SandboxSettings = { ...spec, driver: ctx.engine, unenforcedLimits: [] };
  const args = [
    'run', '-d',
    '--name', spec.name,
    '--label', `${LABEL_SANDBOX}=1`,
    '--label', `${LABEL_SETTINGS}=${JSON.stringify(settings)}`,
    '--init',
    '--hostname', 'forge-sandbox',
    '--network', spec.network ? 'host' : 'none',
    '--cpus', String(spec.limits.cpus),
    '--memory', `${spec.limits.memoryMb}m`,
    '--memory-swap', `${spec.limits.memoryMb}m`,
    '--pids-limit', String(spec.limits.pids),
    '--read-only',
    '--tmpfs', '/tmp:rw,exec,nosuid,nodev,mode=1777',
    '--cap-drop', 'ALL',
    '--security-opt', 'no-new-privileges',
    '-v', `${spec.worktreeDir}:${spec.worktreeDir}:rw`,
  ];
  for (const [k, v] of Object.entries(SANDBOX_BASE_ENV)) args.push('-e', `${k}=${v}`);
  if (spec.gitCommonDir) {
    args.push('-v', `${spec.gitCommonDir}:${spec.gitCommonDir}:ro`);
    // The worktree's .git file, read-only (issue 26); --mount fails instead of making a folder when it is missing.
    const gitFile = `${spec.worktreeDir.replace(/\/+$/, '')}/.git`;
    if (ctx.worktreeGitEntry !== false) args.push('--mount', `type=bind,source=${gitFile},target=${gitFile},readonly`);
  }
  for (const p of spec.readOnlyPaths ?? []) args.push('-v', `${p}:${p}:ro`);
  for (const p of spec.writablePaths ?? []) args.push('-v', `${p}:${p}:rw`);
  // --mount fails rather than making a (root-owned) folder when the source is missing.
  for (const b of spec.writableBinds ?? []) args.push('--mount', `type=bind,source=${b.source},target=${b.target}`);
  for (const b of spec.readOnlyBinds ?? []) args.push('--mount', `type=bind,source=${b.source},target=${b.target},readonly`);
  for (const [k, v] of Object.entries(spec.labels ?? {})) args.push('--label', `${LABEL_SANDBOX}.${k}=${v}`);
  if (ctx.engine === 'podman' && ctx.rootless) args.push('--userns=keep-id');
  else args.push('--user', `${ctx.uid}:${ctx.gid}`);
  if (ctx.adjustments.runtimeRunc) args.push('--runtime', 'runc');
  if (ctx.adjustments.explicitUlimits) args.push('--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096');
  args.push('-w', spec.worktreeDir, spec.image, 'sleep', 'infinity');
  return args;
}

/**
 * The work-around for a create error this driver knows, or `null` (then the error is
 * final). Only Podman needs any on the hosts seen so far.
 */
export function adjustmentForCreateError(engine: OciEngine, stderr: string, current: OciAdjustments): OciAdjustments | null {
  if (engine !== 'podman') return null;
  if (!current.runtimeRunc && /crun|cgroup.*(hybrid|v1)|hybrid.*cgroup/i.test(stderr)) {
    return { ...current, runtimeRunc: true };
  }
  if (!current.explicitUlimits && /rlimit|ulimit|RLIMIT_/i.test(stderr)) {
    return { ...current, explicitUlimits: true };
  }
  return null;
}

/**
 * The in-sandbox wrapper of every exec: the command runs in its own session; a watcher
 * kills that whole process group when the exec's stdin closes, which happens when the
 * client that started it (Forge, or the shell shim) exits or is killed. Without it an
 * aborted `docker exec` leaves its command running inside the container. When the
 * command ends, whatever it left running in its process group is killed too.
 */
export const OCI_EXEC_WRAPPER =
  'exec 3<&0; setsid bash -c "$1" </dev/null 3<&- & p=$!; ' +
  // A background job's stdin defaults to /dev/null; the explicit <&3 keeps the exec's stdin.
  'setsid sh -c \'cat >/dev/null; kill -KILL -"$0" 2>/dev/null\' "$p" <&3 3<&- & w=$!; exec 3<&-; ' +
  // Like a bwrap sandbox, nothing the command left in the background outlives it.
  'wait "$p"; rc=$?; kill -KILL -"$p" 2>/dev/null; kill -KILL -"$w" 2>/dev/null; exit "$rc"';

/** Environment variable naming one exec, inherited by everything it starts. */
export const OCI_EXEC_ID_VARIABLE = 'FORGE_EXEC_ID';

/** Kills every process in the container whose environment holds `$1` (`FORGE_EXEC_ID=<id>`). */
export const OCI_KILL_EXEC_SCRIPT =
  'for sweep in 1 2; do for d in /proc/[0-9]*; do if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$1"; then kill -KILL "${d#/proc/}" 2>/dev/null; fi; done; done; exit 0';

export interface OciExecShape {
  cwd: string;
  env?: Record<string, string>;
  /** With stdin input the keep-alive watcher cannot be used: run bash directly. */
  withInput?: boolean;
}

export function buildOciExecArgs(name: string, command: string, shape: OciExecShape): string[] {
  const args = ['exec', '-i', '-w', shape.cwd];
  for (const [k, v] of Object.entries(shape.env ?? {})) args.push('-e', `${k}=${v}`);
  args.push(name);
  if (shape.withInput) args.push('bash', '-c', command);
  else args.push('sh', '-c', OCI_EXEC_WRAPPER, 'forge-exec', command);
  return args;
}

/** Maps an engine's container status (Docker's or Podman's vocabulary) to Forge's states. */
export function mapOciStatus(status: string, paused = false): SandboxState {
  const s = status.toLowerCase();
  if (s === 'running') return paused ? 'transient' : 'running';
  if (s === 'exited' || s === 'stopped') return 'stopped';
  // created/configured/initialized never ran or are mid-start; restarting, paused,
  // removing, stopping and dead are in flux or broken: none is usable, none is absent.
  return 'transient';
}

/** The engine (not the command) refused the exec: no such container, not running, or the runtime failed to enter it. */
function isEngineRefusal(stderr: string): boolean {
  return /^Error(: | response from daemon: )|^OCI runtime exec failed|can only create exec sessions on running containers/m.test(stderr) &&
    /no such container|no container with name|is not running|is paused|is restarting|OCI runtime exec failed|exec sessions on running containers/i.test(stderr);
}

function isNoSuchContainer(stderr: string): boolean {
  return /no such (object|container)|no container with name or id/i.test(stderr);
}

export interface OciRuntimeOptions {
  engine: OciEngine;
  /** The engine binary; defaults to the engine name on PATH. */
  binary?: string;
  /** Environment for the engine CLI (e.g. DOCKER_HOST). Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  uid?: number;
  gid?: number;
  /**
   * Folder the engine CLI runs in (created when missing). Podman leaves an `oom` marker file
   * in its working folder when a command is killed over the memory limit: without this it
   * landed in Forge's own working folder (a user's repository, for the CLI). Default: a
   * folder under the system's temporary folder.
   */
  workDir?: string;
}

export class OciRuntime implements SandboxRuntime {
  readonly driver: OciEngine;
  private readonly binary: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly uid: number;
  private readonly gid: number;
  private readonly workDir: string;
  /** Out-of-memory kill counts last read per sandbox, to tell a new OOM kill from an old one. */
  private readonly oomKillsSeen = new Map<string, number>();
  private readonly worktrees = new Map<string, string>();

  constructor(options: OciRuntimeOptions) {
    this.driver = options.engine;
    this.binary = options.binary ?? options.engine;
    this.env = options.env ?? process.env;
    this.uid = options.uid ?? process.getuid?.() ?? 0;
    this.gid = options.gid ?? process.getgid?.() ?? 0;
    this.workDir = options.workDir ?? path.join(os.tmpdir(), 'forge-sandbox-engine');
  }

  private cli(args: string[], extra: { timeoutMs?: number; input?: string; keepStdinOpen?: boolean; onOutput?: (text: string) => void } = {}): Promise<RunResult> {
    // Every time: a folder removed meanwhile would make the spawn fail with an ENOENT that reads
    // as a missing engine binary.
    mkdirSync(this.workDir, { recursive: true });
    return runCommand(this.binary, args, { env: this.env, cwd: this.workDir, ...extra });
  }

  async checkAvailable(): Promise<SandboxAvailability> {
    let r: RunResult;
    try {
      r = await this.cli(['version', '--format', '{{.Server.Version}}'], { timeoutMs: 15_000 });
    } catch {
      return {
        available: false,
        reason: `The ${this.driver} command was not found. Install ${this.driver === 'docker' ? 'Docker' : 'Podman'} or pick another sandbox driver (setting forge.sandbox.driver).`,
      };
    }
    if (r.exitCode !== 0) {
      return {
        available: false,
        reason: `${this.driver} is installed but its engine does not answer: ${firstLine(r.stderr) || 'no output'}. Start the ${this.driver} daemon (or set DOCKER_HOST) or pick another sandbox driver.`,
      };
    }
    return { available: true, version: r.stdout.trim() };
  }

  private async isRootlessPodman(): Promise<boolean> {
    if (this.driver !== 'podman') return false;
    const r = await this.cli(['info', '--format', '{{.Host.Security.Rootless}}'], { timeoutMs: 15_000 });
    return r.exitCode === 0 && r.stdout.trim() === 'true';
  }

  async create(spec: SandboxSpec): Promise<void> {
    assertValidSpec(spec);
    const ctx: OciCreateContext = {
      engine: this.driver,
      uid: this.uid,
      gid: this.gid,
      rootless: await this.isRootlessPodman(),
      adjustments: {},
      // lstat: a `.git` link (the agent's, from an earlier session) would mount its host target.
      worktreeGitEntry: lstatSync(path.join(spec.worktreeDir, '.git'), { throwIfNoEntry: false })?.isFile() ?? false,
    };
    for (;;) {
      const r = await this.cli(buildOciCreateArgs(spec, ctx), { timeoutMs: 120_000 });
      if (r.exitCode === 0) {
        this.worktrees.set(spec.name, spec.worktreeDir);
        return;
      }
      // A failed `run` can leave a created-but-not-started container behind.
      await this.cli(['rm', '-f', spec.name], { timeoutMs: 60_000 }).catch(() => undefined);
      const next = adjustmentForCreateError(this.driver, r.stderr, ctx.adjustments);
      if (!next) {
        if (/already in use|already exists/i.test(r.stderr)) {
          throw new SandboxError(`Sandbox "${spec.name}" already exists.`, 'already-exists');
        }
        throw new SandboxError(
          `Could not create sandbox "${spec.name}" with ${this.driver}: ${r.stderr.trim() || `exit ${r.exitCode}`}` +
            (/no such image|unable to find image|image not known/i.test(r.stderr)
              ? ` — build the image first (Forge: Build Sandbox Image) or set forge.sandbox.image.`
              : ''),
          'engine-failed',
        );
      }
      ctx.adjustments = next;
    }
  }

  async start(name: string): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(['start', name], { timeoutMs: 60_000 });
    if (r.exitCode !== 0) throw new SandboxError(`Could not start sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
  }

  async stop(name: string): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(['stop', '-t', '2', name], { timeoutMs: 60_000 });
    if (r.exitCode !== 0 && !isNoSuchContainer(r.stderr)) {
      throw new SandboxError(`Could not stop sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
    }
  }

  /** `pause` freezes the container's cgroup and returns once it is frozen; a command started meanwhile fails (paused container). */
  async freeze(name: string): Promise<(() => Promise<void>) | null> {
    assertValidSandboxName(name);
    const r = await this.cli(['pause', name], { timeoutMs: 30_000 });
    if (r.exitCode !== 0) throw new SandboxError(`Could not freeze sandbox "${name}" for a file tool call: ${r.stderr.trim()}`, 'engine-failed');
    return async () => {
      await this.cli(['unpause', name], { timeoutMs: 30_000 }).catch(() => undefined);
    };
  }

  async exec(name: string, command: string, options: SandboxExecOptions = {}): Promise<SandboxExecResult> {
    assertValidSandboxName(name);
    // One engine call per command: the engine itself refuses a missing or stopped
    // container, and that refusal is turned into a SandboxError below.
    const cwd = options.cwd ?? (await this.worktreeOf(name));
    const withInput = options.stdin !== undefined;
    // Every process of this exec carries its id (setsid'd and disowned ones too), so a timed-out
    // command can be found and killed whole inside the container: killing the engine's client
    // ends neither what left the command's process group nor, always, the group itself.
    const execId = randomBytes(8).toString('hex');
    const args = buildOciExecArgs(name, command, { cwd, env: { ...(options.env ?? {}), [OCI_EXEC_ID_VARIABLE]: execId }, withInput });
    const r = await this.cli(args, {
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.onOutput ? { onOutput: options.onOutput } : {}),
      ...(withInput ? { input: options.stdin } : { keepStdinOpen: true }),
    });
    if (r.exitCode !== null && r.exitCode !== 0 && isEngineRefusal(r.stderr)) {
      const state = await this.state(name);
      throw new SandboxError(
        `Sandbox "${name}" is ${state === 'running' ? 'not usable' : state}, so the command was not run (it never runs on the host): ${firstLine(r.stderr)}` +
          (state === 'missing' ? ' — it was removed; restart the loop to create a new one.' : ''),
        state === 'unknown' ? 'state-unknown' : 'not-usable',
      );
    }
    if (r.timedOut) await this.killExec(name, execId);
    return this.classify(name, r);
  }

  /** Kills, inside the container, every process carrying the exec's id (two sweeps: one may fork meanwhile). */
  private async killExec(name: string, execId: string): Promise<void> {
    await this.cli(['exec', name, 'sh', '-c', OCI_KILL_EXEC_SCRIPT, 'forge-kill-exec', `${OCI_EXEC_ID_VARIABLE}=${execId}`], { timeoutMs: 30_000 }).catch(() => undefined);
  }

  /** The worktree of a sandbox (the default working directory), remembered per name. */
  private async worktreeOf(name: string): Promise<string> {
    const known = this.worktrees.get(name);
    if (known) return known;
    const settings = await this.readSettings(name);
    if (!settings) {
      throw new SandboxError(`Sandbox "${name}" does not exist, so the command was not run (it never runs on the host).`, 'not-usable');
    }
    return settings.worktreeDir;
  }

  private async classify(name: string, r: RunResult): Promise<SandboxExecResult> {
    const base = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
    if (r.timedOut) return { ...base, killed: 'timeout', note: 'The command timed out and was killed inside the sandbox.' };
    if (r.exitCode !== 137) return base;
    const kills = await this.readOomKills(name);
    const before = this.oomKillsSeen.get(name) ?? 0;
    if (kills !== undefined) this.oomKillsSeen.set(name, kills);
    const settings = await this.readSettings(name);
    if (kills !== undefined && kills > before) {
      return { ...base, killed: 'memory-limit', note: describeExit('memory-limit', settings?.limits.memoryMb) };
    }
    return { ...base, killed: 'signal', note: describeExit('signal', settings?.limits.memoryMb) };
  }

  /** The sandbox cgroup's out-of-memory kill count (cgroup v2 memory.events or v1 memory.oom_control). */
  private async readOomKills(name: string): Promise<number | undefined> {
    const r = await this.cli(
      ['exec', name, 'sh', '-c', 'cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control'],
      { timeoutMs: 30_000 },
    );
    const m = /^oom_kill (\d+)/m.exec(r.stdout);
    return m ? Number(m[1]) : undefined;
  }

  async remove(name: string): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(['rm', '-f', name], { timeoutMs: 120_000 });
    this.oomKillsSeen.delete(name);
    this.worktrees.delete(name);
    if (r.exitCode !== 0 && !isNoSuchContainer(r.stderr)) {
      throw new SandboxError(`Could not remove sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
    }
  }

  async state(name: string): Promise<SandboxState> {
    assertValidSandboxName(name);
    let r: RunResult;
    try {
      r = await this.cli(['inspect', '--type', 'container', '--format', '{{.State.Status}} {{.State.Paused}}', name], {
        timeoutMs: 30_000,
      });
    } catch {
      return 'unknown';
    }
    if (r.exitCode === 0) {
      const [status = '', paused = 'false'] = r.stdout.trim().split(/\s+/);
      return mapOciStatus(status, paused === 'true');
    }
    return isNoSuchContainer(r.stderr) ? 'missing' : 'unknown';
  }

  async updateLimits(name: string, limits: SandboxLimits): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(
      ['update', '--cpus', String(limits.cpus), '--memory', `${limits.memoryMb}m`, '--memory-swap', `${limits.memoryMb}m`, '--pids-limit', String(limits.pids), name],
      { timeoutMs: 60_000 },
    );
    if (r.exitCode !== 0) throw new SandboxError(`Could not change the limits of sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
  }

  async listByPrefix(prefix: string): Promise<string[]> {
    const r = await this.cli(['ps', '-a', '--filter', `label=${LABEL_SANDBOX}=1`, '--format', '{{.Names}}'], {
      timeoutMs: 30_000,
    });
    if (r.exitCode !== 0) {
      throw new SandboxError(`Could not list ${this.driver} sandboxes: ${r.stderr.trim()}`, 'state-unknown');
    }
    return r.stdout
      .split('\n')
      .map((s) => s.trim())
      .filter((s) => s.length > 0 && s.startsWith(prefix))
      .sort();
  }

  async readSettings(name: string): Promise<SandboxSettings | null> {
    assertValidSandboxName(name);
    // Labels are fixed at create time; the limits are read live so `updateLimits` shows.
    const r = await this.cli(
      ['inspect', '--type', 'container', '--format', `{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} {{index .Config.Labels "${LABEL_SETTINGS}"}}`, name],
      { timeoutMs: 30_000 },
    );
    if (r.exitCode !== 0) {
      if (isNoSuchContainer(r.stderr)) return null;
      throw new SandboxError(`Could not read sandbox "${name}": ${r.stderr.trim()}`, 'state-unknown');
    }
    const m = /^(\d+) (\d+) (-?\d+|<nil>) (.*)$/s.exec(r.stdout.trim());
    if (!m || !m[4] || m[4] === '<no value>') return null;
    const settings = JSON.parse(m[4]) as SandboxSettings;
    this.worktrees.set(name, settings.worktreeDir);
    const nano = Number(m[1]);
    const mem = Number(m[2]);
    const pids = Number(m[3]);
    return {
      ...settings,
      limits: {
        cpus: nano > 0 ? nano / 1e9 : settings.limits.cpus,
        memoryMb: mem > 0 ? Math.round(mem / (1024 * 1024)) : settings.limits.memoryMb,
        pids: pids > 0 ? pids : settings.limits.pids,
      },
    };
  }

  async renderShimLaunch(settings: SandboxSettings): Promise<string> {
    // An absolute engine path: the shim must not depend on the PATH it is started with.
    const cli = [resolveOnPath(this.binary, this.env.PATH), 'exec', '-i', '-w', '"$FORGE_CWD"', settings.name].map((w) =>
      w === '"$FORGE_CWD"' ? w : shellQuote(w),
    );
    const env = Object.entries(this.env)
      .filter(([k]) => /^(DOCKER_HOST|DOCKER_CONFIG|DOCKER_CONTEXT|CONTAINER_HOST|CONTAINER_CONNECTION|XDG_RUNTIME_DIR)$/.test(k))
      .map(([k, v]) => `export ${k}=${shellQuote(v ?? '')}`);
    const inner = `sh -c ${shellQuote(OCI_EXEC_WRAPPER)} forge-exec "$FORGE_COMMAND"`;
    const inspect = [resolveOnPath(this.binary, this.env.PATH), 'inspect', '--type', 'container', '--format', '{{.State.Status}}', settings.name].map(shellQuote).join(' ');
    return [
      ...env,
      // An idle pipe as the client's stdin keeps the in-sandbox watcher waiting until this
      // shim (and so the client) dies: then the command is killed inside the sandbox too.
      'exec 3< <(exec sleep 2147483647)',
      'keeper=$!',
      `${cli.join(' ')} ${inner} <&3 3<&-`,
      'rc=$?',
      'kill "$keeper" 2>/dev/null',
      // The engine's own refusal ("No such container") does not say that nothing ran on the
      // host, and an agent may take it for its command's error: say what happened.
      'if [ "$rc" -ne 0 ]; then',
      `  if ! state=$(${inspect} 2>&1 </dev/null); then`,
      '    case "$state" in *"No such"*|*"no such"*|*"no container"*) state="it no longer exists" ;; *) state="its state cannot be read: ${state##*$\'\\n\'}" ;; esac',
      '  fi',
      '  if [ "$state" != running ]; then',
      `    echo "forge: the sandbox ${settings.name} is not usable (\${state}); the command did not run (commands never run on the host)." >&2`,
      '    exit 125',
      '  fi',
      'fi',
      'exit "$rc"',
    ].join('\n');
  }
}

function firstLine(s: string): string {
  return s.trim().split('\n')[0] ?? '';
}
