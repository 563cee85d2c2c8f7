/**
 * The sandbox contract shared by every driver (SPEC §5).
 *
 * A sandbox is named by Forge (`forge-<data-folder hash>-<loop>`, see `sandboxPrefixForDataDir`), mounts the loop's worktree read-write at
 * its identical absolute path and the main repository's `.git` read-only, and applies
 * CPU, memory and process limits. Drivers differ in what a sandbox *is* (a long-lived
 * container, or a record plus a cgroup that each command's fresh bwrap joins) but all
 * answer the same five states.
 */

/**
 * - `running`: usable now.
 * - `stopped`: exists and is reusable after a start; never recreated.
 * - `transient`: exists but is between states (created, starting, stopping, paused);
 *   neither usable nor absent.
 * - `unknown`: the query failed and says nothing about the sandbox: refuse to create or remove.
 * - `missing`: confirmed absent; the only state in which a sandbox may be created.
 */
export type SandboxState = 'running' | 'stopped' | 'transient' | 'unknown' | 'missing';

export const SANDBOX_STATES: readonly SandboxState[] = ['running', 'stopped', 'transient', 'unknown', 'missing'];

export type SandboxDriverName = 'docker' | 'podman' | 'bwrap' | 'msb';

export const SANDBOX_DRIVER_NAMES: readonly SandboxDriverName[] = ['docker', 'podman', 'bwrap', 'msb'];

export interface SandboxLimits {
  /** CPU share in cores (fractional allowed). */
  cpus: number;
  /** Memory ceiling in MiB; swap is not granted on top of it. */
  memoryMb: number;
  /** Maximum number of processes (tasks) alive at once in the sandbox. */
  pids: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = { cpus: 2, memoryMb: 4096, pids: 1024 };

/** What a sandbox is created from; also what `readSettings` gives back. */
export interface SandboxSpec {
  /** Engine-level name; `[a-z0-9][a-z0-9_.-]*`. */
  name: string;
  /** Absolute path, mounted read-write at the same path. */
  worktreeDir: string;
  /** The main repository's `.git` directory (a worktree's `.git` file points into it), mounted read-only. */
  gitCommonDir?: string;
  /** Extra absolute paths mounted read-only at the same path. */
  readOnlyPaths?: string[];
  /**
   * Host folders mounted read-only at another path (issue 27: the user's installed dependencies at
   * the worktree's `node_modules`), after the worktree, so they cover it; the target is made empty
   * beforehand by Forge.
   */
  readOnlyBinds?: ReadonlyArray<{ source: string; target: string }>;
  /** Extra absolute paths mounted read-write at the same path (the setup phase's package cache). */
  writablePaths?: string[];
  /** Host folders mounted read-write at another path (the setup phase's installs into Forge-owned folders). */
  writableBinds?: ReadonlyArray<{ source: string; target: string }>;
  /** `true`: the host's network (loopback included); `false`: no network at all. */
  network: boolean;
  limits: SandboxLimits;
  /** OCI image reference (docker, podman, msb); bwrap ignores it and uses the host's /usr. */
  image?: string;
  /** Forge-side labels kept with the sandbox (e.g. the loop name). */
  labels?: Record<string, string>;
}

export interface SandboxSettings extends SandboxSpec {
  driver: SandboxDriverName;
  /** Limits that the driver could not enforce on this host, with why (empty when all hold). */
  unenforcedLimits: string[];
}

export interface SandboxExecOptions {
  /** Working directory inside the sandbox; defaults to the worktree. */
  cwd?: string;
  /** Extra environment for the command (the host environment never leaks in). */
  env?: Record<string, string>;
  /** Kill the command (and everything it started) after this long. */
  timeoutMs?: number;
  /** Text written to the command's standard input. */
  stdin?: string;
  /** The command's output (stdout and stderr) as it comes, to show it live; the result still holds it. */
  onOutput?: (text: string) => void;
}

export interface SandboxExecResult {
  /** Exit code, or `null` when the command was ended by a signal. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /**
   * Why the command was killed, when Forge can tell: `memory-limit` when the sandbox's
   * cgroup recorded an out-of-memory kill, `timeout`, or `signal` otherwise.
   */
  killed?: 'memory-limit' | 'timeout' | 'signal';
  /** A one-line human explanation for non-zero outcomes Forge recognises. */
  note?: string;
}

export interface SandboxAvailability {
  available: boolean;
  /** Engine or tool version when available. */
  version?: string;
  /** Why not, phrased for a user (what is wrong and how to fix it). */
  reason?: string;
}

export interface SandboxRuntime {
  readonly driver: SandboxDriverName;
  checkAvailable(): Promise<SandboxAvailability>;
  /** Creates and starts a sandbox. Fails when one of that name exists. */
  create(spec: SandboxSpec): Promise<void>;
  /** Starts a `stopped` sandbox in place. */
  start(name: string): Promise<void>;
  /** Stops without removing (the sandbox stays `stopped` and reusable). */
  stop(name: string): Promise<void>;
  /** Runs `bash -c command` inside. Fails (rejects) when the sandbox is not usable; never runs on the host. */
  exec(name: string, command: string, options?: SandboxExecOptions): Promise<SandboxExecResult>;
  /** Removes the sandbox and everything it holds (not the worktree). Absent is fine. */
  remove(name: string): Promise<void>;
  state(name: string): Promise<SandboxState>;
  /** Changes the limits of an existing sandbox in place (running commands keep running where the engine allows). */
  updateLimits(name: string, limits: SandboxLimits): Promise<void>;
  /** Names of this driver's sandboxes starting with `prefix`. Rejects when the engine cannot be asked. */
  listByPrefix(prefix: string): Promise<string[]>;
  /** The settings a sandbox was created with, or `null` when it has none (absent or not Forge's). */
  readSettings(name: string): Promise<SandboxSettings | null>;
  /**
   * Shell (bash) lines for the opencode shim (shell-shim.ts) that run `bash -c "$FORGE_COMMAND"`
   * inside the sandbox, in the directory `$FORGE_CWD`, and fail without running anything
   * on the host when the sandbox is not usable.
   */
  renderShimLaunch(settings: SandboxSettings): Promise<string>;
  /**
   * Stops every process of the sandbox until the returned thaw runs (opencode's file tools run
   * on the host: nothing in the sandbox may swap a link between Forge's check and their I/O).
   * Null when this sandbox cannot be frozen (no freezable cgroup); absent: the driver cannot.
   */
  freeze?(name: string): Promise<(() => Promise<void>) | null>;
}

export class SandboxError extends Error {
  constructor(
    message: string,
    readonly code:
      | 'unavailable'
      | 'not-usable'
      | 'state-unknown'
      | 'already-exists'
      | 'engine-failed'
      | 'invalid-spec',
  ) {
    super(message);
    this.name = 'SandboxError';
  }
}

const SANDBOX_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

export function assertValidSandboxName(name: string): void {
  if (!SANDBOX_NAME.test(name)) {
    throw new SandboxError(
      `Invalid sandbox name "${name}": use lowercase letters, digits, '.', '_' and '-' (at most 63 characters).`,
      'invalid-spec',
    );
  }
}

export function assertValidSpec(spec: SandboxSpec): void {
  assertValidSandboxName(spec.name);
  const binds = [...(spec.readOnlyBinds ?? []), ...(spec.writableBinds ?? [])].flatMap((b) => [b.source, b.target]);
  for (const p of [spec.worktreeDir, spec.gitCommonDir, ...(spec.readOnlyPaths ?? []), ...binds, ...(spec.writablePaths ?? [])]) {
    if (p !== undefined && (!p.startsWith('/') || p.includes(':') || p.includes('\n'))) {
      throw new SandboxError(`Sandbox mount path "${p}" must be absolute and contain no ':' or newline.`, 'invalid-spec');
    }
  }
  const { cpus, memoryMb, pids } = spec.limits;
  if (!(cpus > 0) || !(memoryMb >= 16) || !Number.isInteger(memoryMb) || !(pids >= 8) || !Number.isInteger(pids)) {
    throw new SandboxError(
      `Invalid sandbox limits ${JSON.stringify(spec.limits)}: cpus > 0, memoryMb an integer ≥ 16, pids an integer ≥ 8.`,
      'invalid-spec',
    );
  }
}

/** The key of a loop's state under which the sandbox it started with is kept (`{ driver, network, limits, image }`). */
export const LOOP_SANDBOX_STATE_KEY = 'sandboxConfig';
