/**
 * The engine's sandboxes: one runtime and one manager per driver, the loop runtime's sandbox
 * port (a loop's sandbox or its unconfined agent shell, its checks, its release) and the merge
 * queue's confined checks. Wiring, like engine.ts, whose composition it is part of: kept apart
 * because it is the one seam of the engine that is about confinement alone.
 */
import { join } from 'node:path';
import type { ForgeSettings } from './config/settings';
import type { LoopSandboxPort } from './loop/runtime';
import { readExtras, type EngineLog, type StoredLoopExtras } from './loop/loop-supervisor';
import {
  AUTO_DRIVER_ORDER,
  createSandboxRuntime,
  prepareOpencodeSandbox,
  removeOpencodeSandboxShims,
  SANDBOX_DRIVER_NAMES,
  SandboxManager,
  sandboxPrefixForDataDir,
  selectDriver,
  type LoopSandboxRequest,
  type SandboxAvailability,
  type SandboxDriverName,
  type SandboxLimits,
  type SandboxState,
  type SandboxRuntime,
} from './sandbox';
import { prepareAgentHostShell, removeAgentHostShell } from './sandbox/host-shell';
import { hostCheckExecutor, sandboxCheckExecutor } from './checks';
import type { ForgeDatabase } from './storage';
import type { ForgeRepositories, LoopRow } from './storage/repositories';
import type { MergeCheckExecutorPort } from './groups/merge-queue';

export interface EngineSandboxDeps {
  dataDir: string;
  log: EngineLog;
  /** The engine's environment (DOCKER_HOST, CONTAINER_HOST reach the user's engine). */
  baseEnv: () => NodeJS.ProcessEnv;
  settings: () => ForgeSettings;
  db: Pick<ForgeDatabase, 'query'>;
  repos: ForgeRepositories;
}

export type DriverResolution = { driver: SandboxDriverName | null; reason: string | null };

export interface EngineSandboxes {
  sandboxPort: LoopSandboxPort;
  mergeCheckExecutor: MergeCheckExecutorPort;
  gateCheckExecutor: MergeCheckExecutorPort;
  /** The driver `forge.sandbox.driver` picks now (null: none, with the reason). */
  resolveSandboxDriver(): Promise<DriverResolution>;
}

export function createEngineSandboxes(deps: EngineSandboxDeps): EngineSandboxes {
  const { dataDir, log, baseEnv } = deps;
  // ---- Sandbox -------------------------------------------------------------------------
  // One runtime and one manager per driver, made on first use with the engine's environment
  // (DOCKER_HOST, CONTAINER_HOST reach the user's engine). A loop keeps the driver, network,
  // limits and image it started with (stored in its state): a setting changed later applies
  // to new loops only, and never makes Forge look for a running loop's sandbox in another engine.
  const shimRoot = join(dataDir, 'sandbox-shims');
  const sandboxPrefix = sandboxPrefixForDataDir(dataDir);
  const sandboxRuntimes = new Map<SandboxDriverName, SandboxRuntime>();
  const sandboxManagers = new Map<SandboxDriverName, SandboxManager>();
  function sandboxRuntimeFor(driver: SandboxDriverName): SandboxRuntime {
    let rt = sandboxRuntimes.get(driver);
    if (!rt) {
      rt = createSandboxRuntime(driver, { dataDir, env: baseEnv() });
      sandboxRuntimes.set(driver, rt);
    }
    return rt;
  }
  /** The manager of `driver` in `cache`, made on first use over the driver's one runtime. */
  function managerIn(cache: Map<SandboxDriverName, SandboxManager>, driver: SandboxDriverName, prefix: string, isLoopRunning: (name: string) => boolean): SandboxManager {
    let m = cache.get(driver);
    if (!m) {
      m = new SandboxManager({ runtime: sandboxRuntimeFor(driver), prefix, isLoopRunning, onWarning: (message) => log.warn(`[sandbox] ${message}`) });
      cache.set(driver, m);
    }
    return m;
  }
  const sandboxManagerFor = (driver: SandboxDriverName) => managerIn(sandboxManagers, driver, sandboxPrefix, isRunningAnywhere);
  let driverResolution: { setting: string; result: Promise<DriverResolution> } | undefined;
  /**
   * The driver `forge.sandbox.driver` picks now. Resolved again whenever the setting
   * changes; a failed resolution is not kept, so an engine started later is found.
   */
  function resolveSandboxDriver(): Promise<DriverResolution> {
    const setting = deps.settings()['forge.sandbox.driver'];
    if (driverResolution?.setting !== setting) {
      const entry = { setting, result: probeSandboxDriver(setting) };
      driverResolution = entry;
      void entry.result.then((r) => {
        if (!r.driver && driverResolution === entry) driverResolution = undefined;
      });
    }
    return driverResolution!.result;
  }
  async function probeSandboxDriver(setting: string): Promise<DriverResolution> {
    const candidates: SandboxDriverName[] =
      setting === 'auto' ? [...AUTO_DRIVER_ORDER] : (SANDBOX_DRIVER_NAMES as readonly string[]).includes(setting) ? [setting as SandboxDriverName] : [];
    const probes: Partial<Record<SandboxDriverName, SandboxAvailability>> = {};
    for (const d of candidates) {
      const probe = await sandboxRuntimeFor(d)
        .checkAvailable()
        .catch((e: Error): SandboxAvailability => ({ available: false, reason: e.message }));
      probes[d] = probe;
      if (probe.available) break;
    }
    const selection = selectDriver(setting, probes);
    return selection.ok ? { driver: selection.driver, reason: null } : { driver: null, reason: selection.reason };
  }
  function isRunningAnywhere(name: string): boolean {
    const rows = deps.db.query('SELECT status FROM loops WHERE name = ?', [name]);
    return rows.some((r) => r.status === 'running' || r.status === 'starting');
  }
  /** The sandbox a loop runs with: stored at its start, or (a loop from before) taken from the settings now. */
  async function loopSandboxConfig(loop: LoopRow): Promise<LoopSandboxConfig> {
    const stored = loop.state[LOOP_SANDBOX_STATE_KEY] as LoopSandboxConfig | undefined;
    if (stored && typeof stored === 'object' && (SANDBOX_DRIVER_NAMES as readonly string[]).includes(stored.driver)) return stored;
    const { driver, reason } = await resolveSandboxDriver();
    if (!driver) throw new Error(reason ?? 'No sandbox driver is available: install docker, podman or bubblewrap.');
    const s = deps.settings();
    const config: LoopSandboxConfig = {
      driver,
      network: s['forge.sandbox.network'],
      limits: { cpus: s['forge.sandbox.cpus'], memoryMb: s['forge.sandbox.memoryMb'], pids: s['forge.sandbox.pidsLimit'] },
      image: s['forge.sandbox.image'],
    };
    deps.repos.loops.mergeState(loop.projectId, loop.name, { [LOOP_SANDBOX_STATE_KEY]: config });
    return config;
  }
  function sandboxRequest(loop: LoopRow, extras: StoredLoopExtras, config: LoopSandboxConfig): LoopSandboxRequest {
    return {
      loopName: loop.name,
      worktreeDir: loop.worktreeDir!,
      gitCommonDir: extras.gitCommonDir,
      network: config.network,
      limits: config.limits,
      image: config.image,
    };
  }
  /** An unconfined loop's agent shell lives beside the sandbox shims, never in the worktree. */
  const hostShellDir = (loop: LoopRow) => join(shimRoot, `${sandboxPrefix}${loop.name}-host`);
  const sandboxPort: LoopSandboxPort = {
    resolveDriver: () => resolveSandboxDriver(),
    async prepareHost(loop) {
      const shell = await prepareAgentHostShell({ dir: hostShellDir(loop), loopName: loop.name, basePath: baseEnv().PATH });
      return { env: shell.env, config: shell.config, callsDir: shell.callsDir, shellPath: shell.shellPath };
    },
    async releaseHost(loop) {
      await removeAgentHostShell(hostShellDir(loop)).catch((e) => log.warn(`[sandbox] removing the agent shell of ${loop.name}: ${String(e)}`));
    },
    async prepare(loop, extras, resume) {
      const config = await loopSandboxConfig(loop);
      const m = sandboxManagerFor(config.driver);
      const request = sandboxRequest(loop, extras, config);
      try {
        const handle = resume ? await m.restore(request) : await m.ensureRunning(request);
        const additions = await prepareOpencodeSandbox(handle, { shimRoot, basePath: baseEnv().PATH });
        return { env: additions.env, config: additions.config, callsDir: additions.callsDir, shellPath: additions.shellShimPath, ripgrepPath: additions.ripgrepShimPath };
      } catch (error) {
        // A new loop's start is rolled back: leave no half-made sandbox (a known state only).
        if (!resume) {
          await m.stop(loop.name).catch(() => undefined);
          await removeOpencodeSandboxShims(shimRoot, m.sandboxName(loop.name)).catch(() => undefined);
        }
        throw error;
      }
    },
    async check(loop) {
      const config = await loopSandboxConfig(loop);
      const m = sandboxManagerFor(config.driver);
      const name = m.sandboxName(loop.name);
      const state = await m.runtime.state(name);
      if (state === 'running') return;
      if (state === 'stopped') {
        // Stopped is reusable (an engine restart stops containers): start it again in place.
        log.info(`[sandbox] ${name} was stopped; starting it again for loop ${loop.name}`);
        try {
          await m.ensureRunning(sandboxRequest(loop, readExtras(loop), config));
        } catch (error) {
          throw new Error(`${describeSandboxLoss(loop.name, config.driver, name, state)} (Starting it again failed: ${(error as Error).message})`);
        }
        return;
      }
      throw new Error(describeSandboxLoss(loop.name, config.driver, name, state));
    },
    async checkExecutor(loop) {
      const config = await loopSandboxConfig(loop);
      const m = sandboxManagerFor(config.driver);
      return sandboxCheckExecutor(m.runtime, m.sandboxName(loop.name));
    },
    async release(loop, ended) {
      // Another process took the loop over (ended = false): its sandbox stays for it.
      if (!ended) return;
      const config = await loopSandboxConfig(loop);
      const m = sandboxManagerFor(config.driver);
      let stopError: unknown;
      try {
        await m.stop(loop.name);
      } catch (error) {
        stopError = error;
      }
      // The loop's opencode server is gone by now; its shims only ever failed without the sandbox.
      await removeOpencodeSandboxShims(shimRoot, m.sandboxName(loop.name)).catch((e) => log.warn(`[sandbox] removing shims: ${String(e)}`));
      try {
        const removed = await m.cleanupOrphans();
        for (const name of removed) await removeOpencodeSandboxShims(shimRoot, name).catch(() => undefined);
        if (removed.length > 0) log.info(`[sandbox] removed sandboxes of finished loops: ${removed.join(', ')}`);
      } catch (error) {
        log.warn(`[sandbox] orphan cleanup: ${String(error)}`);
      }
      if (stopError) throw stopError;
    },
  };

  // ---- The merge queue's checks ----------------------------------------------------------
  // A merged tree's checks run code the agents wrote: for a sandboxed loop, in a sandbox of its
  // own (the loop's driver, network, limits and image) whose writable worktree is the scratch
  // merge worktree, started for the checks and removed after them. Its names have a prefix of
  // their own (`forge-<6 hex>m-<loop>`, at most 62 characters): the loops' orphan cleanup, which
  // lists `forge-<6 hex>-`, never takes a merge sandbox for a finished loop's and removes it
  // mid-check; a leftover (a killed Forge) is replaced at the loop's next merge attempt.
  const mergeSandboxManagers = new Map<SandboxDriverName, SandboxManager>();
  const mergeSandboxManagerFor = (driver: SandboxDriverName) => managerIn(mergeSandboxManagers, driver, `${sandboxPrefix.slice(0, -1)}m-`, () => true);
  // The gate's checks of a clean checkout of a loop's work (issue 27): the same kind of
  // short-lived sandbox, with a prefix of its own (`forge-<6 hex>g-<loop>`).
  const gateSandboxManagers = new Map<SandboxDriverName, SandboxManager>();
  const gateSandboxManagerFor = (driver: SandboxDriverName) => managerIn(gateSandboxManagers, driver, `${sandboxPrefix.slice(0, -1)}g-`, () => true);
  const scratchCheckExecutor =
    (managerFor: (driver: SandboxDriverName) => SandboxManager, purpose: string): MergeCheckExecutorPort =>
    async (loop, dir) => {
      if (!loop.sandbox) return { exec: hostCheckExecutor(), where: 'on the host (the loop ran unconfined)', release: async () => undefined };
      const config = await loopSandboxConfig(loop);
      const m = managerFor(config.driver);
      const request: LoopSandboxRequest = {
        loopName: loop.name,
        worktreeDir: dir,
        gitCommonDir: readExtras(loop).gitCommonDir,
        network: config.network,
        limits: config.limits,
        image: config.image,
      };
      try {
        await m.start(request);
      } catch (error) {
        await m.stop(loop.name).catch(() => undefined);
        throw error;
      }
      const name = m.sandboxName(loop.name);
      log.info(`[sandbox] ${name}: ${purpose} of loop ${loop.name} run in it (${config.driver}, over ${dir})`);
      return {
        exec: sandboxCheckExecutor(m.runtime, name),
        where: `in a ${config.driver} sandbox of their own`,
        release: () => m.stop(loop.name),
      };
    };
  const mergeCheckExecutor = scratchCheckExecutor(mergeSandboxManagerFor, "the merge queue's checks");
  const gateCheckExecutor = scratchCheckExecutor(gateSandboxManagerFor, "the gate's checks of a clean checkout");

  return { sandboxPort, mergeCheckExecutor, gateCheckExecutor, resolveSandboxDriver };
}

/** Where a loop keeps the sandbox it started with, in its stored state. */
const LOOP_SANDBOX_STATE_KEY = 'sandboxConfig';

interface LoopSandboxConfig {
  driver: SandboxDriverName;
  network: boolean;
  limits: SandboxLimits;
  image: string;
}

/** Why a loop cannot go on sandboxed, for the loop's end reason: what happened, that nothing ran on the host, what to do. */
function describeSandboxLoss(loopName: string, driver: SandboxDriverName, name: string, state: SandboxState): string {
  const what =
    state === 'missing'
      ? `is gone: the ${driver} sandbox "${name}" no longer exists (it was removed outside Forge)`
      : state === 'unknown'
        ? `cannot be checked: the ${driver} engine did not answer about "${name}"`
        : `is not usable: the ${driver} sandbox "${name}" is ${state}`;
  return `The sandbox of loop "${loopName}" ${what}. Forge stopped the loop instead of running the agent's commands on the host; nothing ran on the host. Restart the loop to create a new sandbox${state === 'unknown' ? ' once the engine answers' : ''}.`;
}

