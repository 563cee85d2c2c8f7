import { createHash } from 'node:crypto';
import path from 'node:path';
import {
  SandboxError,
  type SandboxLimits,
  type SandboxRuntime,
  type SandboxSettings,
  type SandboxSpec,
  type SandboxState,
} from './types';

/**
 * The sandbox-name prefix of one Forge data folder: `forge-<6 hex>-`. Container names and
 * bwrap cgroups are global to a host, so two data folders (two users on one Docker
 * daemon, a CLI and an editor with different folders, parallel test runs) must never
 * share names: with a shared prefix one would replace the other's live sandbox of a
 * same-named loop, and its orphan cleanup would remove the other's sandboxes.
 * `forge-` + 6 + `-` + a loop name (at most 48 characters) stays within 63 characters.
 */
export function sandboxPrefixForDataDir(dataDir: string): string {
  return `forge-${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 6)}-`;
}

/** What the loop runtime asks for; the sandbox name derives from the loop name. */
export interface LoopSandboxRequest {
  loopName: string;
  worktreeDir: string;
  /** The main repository's `.git` (mounted read-only so git status/diff/log work inside). */
  gitCommonDir?: string;
  readOnlyPaths?: string[];
  /** Host folders read-only at another path (see SandboxSpec). */
  readOnlyBinds?: ReadonlyArray<{ source: string; target: string }>;
  /** Extra paths read-write at the same path (see SandboxSpec). */
  writablePaths?: string[];
  /** Host folders read-write at another path (see SandboxSpec). */
  writableBinds?: ReadonlyArray<{ source: string; target: string }>;
  network: boolean;
  limits: SandboxLimits;
  image?: string;
}

/** A usable sandbox of one loop: what the opencode shim and the runtime need. */
export interface SandboxHandle {
  loopName: string;
  name: string;
  driver: SandboxRuntime['driver'];
  settings: SandboxSettings;
  runtime: SandboxRuntime;
}

export type ApplyLimitsOutcome = 'unchanged' | 'resized' | 'recreated';

export interface SandboxManagerOptions {
  runtime: SandboxRuntime;
  /** Prefix of every sandbox this manager owns (default "forge-"). */
  prefix?: string;
  /** Whether a loop still runs; orphan cleanup never removes the sandbox of a running loop. */
  isLoopRunning: (loopName: string) => boolean | Promise<boolean>;
  /** Warnings the user should see (e.g. limits the host cannot enforce). */
  onWarning?: (message: string) => void;
  /** How long `transient` may last before an operation gives up (default 30 s). */
  transientWaitMs?: number;
}

/**
 * Lifecycle of loop sandboxes over one SandboxRuntime: created at loop start, reused
 * across phases, resumed on restart, removed at loop end, orphans of finished loops
 * removed on teardown. It acts only on what `state` confirms: `unknown` never leads to
 * a create or a remove, and only `missing` leads to a create.
 */
export class SandboxManager {
  readonly runtime: SandboxRuntime;
  readonly prefix: string;
  private readonly isLoopRunning: SandboxManagerOptions['isLoopRunning'];
  private readonly onWarning: (message: string) => void;
  private readonly transientWaitMs: number;
  private readonly active = new Map<string, SandboxHandle>();
  /** One operation at a time per loop. */
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(options: SandboxManagerOptions) {
    this.runtime = options.runtime;
    this.prefix = options.prefix ?? 'forge-';
    this.isLoopRunning = options.isLoopRunning;
    this.onWarning = options.onWarning ?? (() => undefined);
    this.transientWaitMs = options.transientWaitMs ?? 30_000;
  }

  sandboxName(loopName: string): string {
    return `${this.prefix}${loopName}`;
  }

  private withLock<T>(loopName: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(loopName) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const settled = next.catch(() => undefined);
    this.locks.set(loopName, settled);
    void settled.then(() => {
      if (this.locks.get(loopName) === settled) this.locks.delete(loopName);
    });
    return next;
  }

  /** The state, waiting out `transient` for a while. */
  private async settledState(name: string): Promise<SandboxState> {
    const deadline = Date.now() + this.transientWaitMs;
    for (;;) {
      const state = await this.runtime.state(name);
      if (state !== 'transient' || Date.now() >= deadline) return state;
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private specFor(req: LoopSandboxRequest): SandboxSpec {
    return {
      name: this.sandboxName(req.loopName),
      worktreeDir: req.worktreeDir,
      ...(req.gitCommonDir ? { gitCommonDir: req.gitCommonDir } : {}),
      ...(req.readOnlyPaths?.length ? { readOnlyPaths: req.readOnlyPaths } : {}),
      ...(req.readOnlyBinds?.length ? { readOnlyBinds: req.readOnlyBinds } : {}),
      ...(req.writablePaths?.length ? { writablePaths: req.writablePaths } : {}),
      ...(req.writableBinds?.length ? { writableBinds: req.writableBinds } : {}),
      network: req.network,
      limits: req.limits,
      ...(req.image ? { image: req.image } : {}),
      labels: { loop: req.loopName },
    };
  }

  /**
   * Creates (or adopts) the loop's sandbox and proves it runs a command. A failure
   * throws a SandboxError saying what is wrong, so the loop start can roll back; nothing
   * ever falls back to the host.
   */
  start(req: LoopSandboxRequest): Promise<SandboxHandle> {
    return this.withLock(req.loopName, () => this.converge(req, 'start'));
  }

  /** Same as start, for a loop that is resumed after a restart of Forge or of the loop. */
  restore(req: LoopSandboxRequest): Promise<SandboxHandle> {
    return this.withLock(req.loopName, () => this.converge(req, 'restore'));
  }

  /** Before each phase (or command batch): the sandbox is running, starting or recreating it if needed. */
  ensureRunning(req: LoopSandboxRequest): Promise<SandboxHandle> {
    return this.withLock(req.loopName, async () => {
      const known = this.active.get(req.loopName);
      if (known && (await this.runtime.state(known.name)) === 'running') return known;
      return this.converge(req, 'ensure');
    });
  }

  private async converge(req: LoopSandboxRequest, why: 'start' | 'restore' | 'ensure'): Promise<SandboxHandle> {
    const spec = this.specFor(req);
    const name = spec.name;
    let state = await this.settledState(name);
    if (state === 'unknown') {
      throw new SandboxError(
        `Cannot tell whether the sandbox "${name}" exists (the ${this.runtime.driver} engine did not answer), so Forge neither creates nor removes it. Check the engine and try again.`,
        'state-unknown',
      );
    }
    if (state === 'transient') {
      throw new SandboxError(`The sandbox "${name}" is still changing state after ${this.transientWaitMs} ms; try again.`, 'not-usable');
    }
    if (state !== 'missing') {
      const current = await this.runtime.readSettings(name);
      if (!current || !sameMounts(current, spec)) {
        // A leftover of another loop of the same name, or of another worktree: replace it.
        await this.runtime.remove(name);
        state = 'missing';
      } else if (current.network !== spec.network) {
        await this.runtime.remove(name);
        state = 'missing';
      }
    }
    if (state === 'missing') {
      const availability = await this.runtime.checkAvailable();
      if (!availability.available) {
        throw new SandboxError(`Cannot ${why} the sandbox of loop "${req.loopName}": ${availability.reason}`, 'unavailable');
      }
      try {
        await this.runtime.create(spec);
      } catch (e) {
        throw new SandboxError(
          `Could not create the sandbox of loop "${req.loopName}" (${this.runtime.driver}): ${(e as Error).message}`,
          e instanceof SandboxError ? e.code : 'engine-failed',
        );
      }
    } else if (state === 'stopped') {
      await this.runtime.start(name);
    }
    let settings = await this.runtime.readSettings(name);
    if (settings && !sameLimits(settings.limits, spec.limits)) {
      await this.resize(spec);
      settings = await this.runtime.readSettings(name);
    }
    if (!settings) throw new SandboxError(`The sandbox "${name}" vanished right after it was set up.`, 'not-usable');
    const probe = await this.runtime.exec(name, 'true', { timeoutMs: 60_000 }).catch((e: Error) => ({ exitCode: -1, stderr: e.message }));
    if (probe.exitCode !== 0) {
      throw new SandboxError(
        `The sandbox of loop "${req.loopName}" (${this.runtime.driver}) was set up but cannot run a command: ${probe.stderr.trim() || `exit ${probe.exitCode}`}`,
        'not-usable',
      );
    }
    for (const w of settings.unenforcedLimits) this.onWarning(`Sandbox "${name}": ${w}. The loop runs without that limit.`);
    const handle: SandboxHandle = { loopName: req.loopName, name, driver: this.runtime.driver, settings, runtime: this.runtime };
    this.active.set(req.loopName, handle);
    return handle;
  }

  /** Removes the loop's sandbox (loop end). Refuses when its state cannot be read. */
  stop(loopName: string): Promise<void> {
    return this.withLock(loopName, async () => {
      const name = this.sandboxName(loopName);
      const state = await this.runtime.state(name);
      if (state === 'unknown') {
        throw new SandboxError(`Cannot tell whether the sandbox "${name}" exists, so it was not removed; it will be cleaned up later.`, 'state-unknown');
      }
      if (state !== 'missing') await this.runtime.remove(name);
      this.active.delete(loopName);
    });
  }

  getActive(loopName: string): SandboxHandle | null {
    return this.active.get(loopName) ?? null;
  }

  /** True only when the engine confirms the sandbox is running now. */
  async isLive(loopName: string): Promise<boolean> {
    return (await this.runtime.state(this.sandboxName(loopName))) === 'running';
  }

  /**
   * Brings an existing sandbox to the requested limits and network: limits change in
   * place (`resized`), a network change recreates it (`recreated`). Rejects when the
   * current settings cannot be read, so a restriction is never assumed to hold.
   */
  applyLimits(req: LoopSandboxRequest): Promise<ApplyLimitsOutcome> {
    return this.withLock(req.loopName, async () => {
      const spec = this.specFor(req);
      const state = await this.settledState(spec.name);
      if (state === 'unknown' || state === 'transient' || state === 'missing') {
        throw new SandboxError(`Cannot change the limits of sandbox "${spec.name}": it is ${state}.`, state === 'unknown' ? 'state-unknown' : 'not-usable');
      }
      const current = await this.runtime.readSettings(spec.name);
      if (!current) throw new SandboxError(`Cannot read the settings of sandbox "${spec.name}".`, 'state-unknown');
      if (current.network !== spec.network || !sameMounts(current, spec)) {
        await this.runtime.remove(spec.name);
        await this.runtime.create(spec);
        const settings = await this.runtime.readSettings(spec.name);
        if (settings) this.active.set(req.loopName, { loopName: req.loopName, name: spec.name, driver: this.runtime.driver, settings, runtime: this.runtime });
        return 'recreated';
      }
      if (sameLimits(current.limits, spec.limits)) return 'unchanged';
      const outcome = await this.resize(spec);
      const settings = await this.runtime.readSettings(spec.name);
      if (settings) this.active.set(req.loopName, { loopName: req.loopName, name: spec.name, driver: this.runtime.driver, settings, runtime: this.runtime });
      return outcome;
    });
  }

  /**
   * Limits in place where the engine can change them; otherwise (e.g. Podman 4's `update`
   * has no process limit) a fresh sandbox, which loses nothing since state lives in the worktree.
   */
  private async resize(spec: SandboxSpec): Promise<'resized' | 'recreated'> {
    try {
      await this.runtime.updateLimits(spec.name, spec.limits);
      const after = await this.runtime.readSettings(spec.name);
      if (after && sameLimits(after.limits, spec.limits)) return 'resized';
    } catch (e) {
      this.onWarning(`Sandbox "${spec.name}": limits could not be changed in place (${(e as Error).message}); recreating it.`);
    }
    await this.runtime.remove(spec.name);
    await this.runtime.create(spec);
    return 'recreated';
  }

  /**
   * Removes sandboxes under this manager's prefix whose loop is not running (a killed
   * Forge leaves them behind). Never touches one whose loop runs, nor one whose state
   * cannot be read. Returns the names removed.
   */
  async cleanupOrphans(): Promise<string[]> {
    const names = await this.runtime.listByPrefix(this.prefix);
    const removed: string[] = [];
    for (const name of names) {
      const loopName = name.slice(this.prefix.length);
      if (await this.isLoopRunning(loopName)) continue;
      await this.withLock(loopName, async () => {
        const state = await this.runtime.state(name);
        if (state === 'unknown' || state === 'missing') return;
        if (await this.isLoopRunning(loopName)) return;
        await this.runtime.remove(name);
        this.active.delete(loopName);
        removed.push(name);
      });
    }
    return removed;
  }
}

function sameMounts(a: SandboxSpec, b: SandboxSpec): boolean {
  return (
    a.worktreeDir === b.worktreeDir &&
    (a.gitCommonDir ?? '') === (b.gitCommonDir ?? '') &&
    JSON.stringify(a.readOnlyPaths ?? []) === JSON.stringify(b.readOnlyPaths ?? []) &&
    JSON.stringify(a.readOnlyBinds ?? []) === JSON.stringify(b.readOnlyBinds ?? []) &&
    JSON.stringify(a.writablePaths ?? []) === JSON.stringify(b.writablePaths ?? []) &&
    JSON.stringify(a.writableBinds ?? []) === JSON.stringify(b.writableBinds ?? []) &&
    (a.image ?? '') === (b.image ?? '')
  );
}

function sameLimits(a: SandboxLimits, b: SandboxLimits): boolean {
  return Math.abs(a.cpus - b.cpus) < 1e-6 && a.memoryMb === b.memoryMb && a.pids === b.pids;
}
