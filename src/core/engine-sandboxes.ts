/**
 * The engine's sandboxes: one runtime and one manager per driver, the loop runtime's sandbox
 * port (a loop's sandbox or its unconfined agent shell, its checks, its release) and the merge
 * queue's confined checks. Wiring, like engine.ts, whose composition it is part of: kept apart
 * because it is the one seam of the engine that is about confinement alone.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ownerState, removeOwnerRecord, writeOwnerRecord } from './process/owner-records';
import { SandboxCgroups } from './sandbox/cgroup';
import { LOOP_PROCESS_MARKER_VARIABLE } from './sandbox/shell-router';
import { signalMarkedProcesses } from './process/marked-processes';
import type { ForgeSettings } from './config/settings';
import type { LoopSandboxPort } from './loop/runtime';
import { readExtras, type EngineLog, type StoredLoopExtras } from './loop/loop-supervisor';
import {
  AUTO_DRIVER_ORDER,
  createSandboxRuntime,
  LOOP_SANDBOX_STATE_KEY,
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
import { bwrapDevcontainerNotice, devcontainerImageNotice } from './sandbox/devcontainer/config';
import { readDevcontainerAt, resolveDevcontainerImage } from './sandbox/devcontainer/resolve';
import { hostCheckExecutor, sandboxCheckExecutor } from './checks';
import { packageCacheDir, readSetupState } from './loop/loop-setup';
import { copyPreparedFiles } from './workspace/worktree-setup/setup-files';
import { linkFolders, makeMountPoints, setupMounts } from './workspace/worktree-setup/worktree-setup';
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
  /**
   * Start-up cleanup (crash-cleanup.ts): this data folder's sandboxes, cgroups and agent-shell /
   * job folders whose loop no live process owns, and merge-check sandboxes whose owner is dead.
   * Returns what it removed and what it could not check.
   */
  removeUnowned(isLoopOwned: (loopName: string) => boolean, driversInUse: Iterable<string>): Promise<{ removed: string[]; problems: string[] }>;
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
  /**
   * The process that made a sandbox or a process cgroup owns it: a loop's (its sandbox, an
   * unconfined loop's cgroup), a merge's or a gate's checks, a setup. Another process's start-up
   * cleanup reads the loops from a database snapshot that may predate the owner's last write (a
   * loop ended, its lease released, then restarted in a new sandbox of the same name), so it
   * never removes what a live owner recorded, whatever the snapshot says.
   */
  const sandboxOwnersDir = join(dataDir, 'owners', 'sandboxes');
  const sandboxOwnerFile = (sandboxName: string) => join(sandboxOwnersDir, `${sandboxName}.json`);
  const ownedByLiveProcess = (sandboxName: string) => ownerState(sandboxOwnerFile(sandboxName)) === 'alive';
  const sandboxManagerFor = (driver: SandboxDriverName) =>
    managerIn(sandboxManagers, driver, sandboxPrefix, (name) => isRunningAnywhere(name) || ownedByLiveProcess(`${sandboxPrefix}${name}`));
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
  async function loopSandboxConfig(loop: LoopRow, notices?: string[]): Promise<LoopSandboxConfig> {
    const stored = loop.state[LOOP_SANDBOX_STATE_KEY] as LoopSandboxConfig | undefined;
    if (stored && typeof stored === 'object' && (SANDBOX_DRIVER_NAMES as readonly string[]).includes(stored.driver)) return stored;
    const { driver, reason } = await resolveSandboxDriver();
    if (!driver) throw new Error(reason ?? 'No sandbox driver is available: install docker, podman or bubblewrap.');
    const s = deps.settings();
    const config: LoopSandboxConfig = {
      driver,
      network: s['forge.sandbox.network'],
      limits: { cpus: s['forge.sandbox.cpus'], memoryMb: s['forge.sandbox.memoryMb'], pids: s['forge.sandbox.pidsLimit'] },
      image: (await devcontainerImageFor(loop, driver, notices)) ?? s['forge.sandbox.image'],
    };
    deps.repos.loops.mergeState(loop.projectId, loop.name, { [LOOP_SANDBOX_STATE_KEY]: config });
    return config;
  }
  /**
   * A docker/podman loop's image from the repository's Dev Container configuration at its base
   * commit (built once, cached by content); null without one. A refused configuration or a
   * failed build is the start's error.
   */
  async function devcontainerImageFor(loop: LoopRow, driver: SandboxDriverName, notices?: string[]): Promise<string | null> {
    if ((driver !== 'docker' && driver !== 'podman') || !loop.baseCommit) return null;
    const began = Date.now();
    const resolved = await resolveDevcontainerImage({
      gitDir: readExtras(loop).gitCommonDir,
      commit: loop.baseCommit,
      engine: driver,
      env: baseEnv(),
      scratchDir: join(dataDir, 'devcontainer-builds'),
      onLog: (line) => (line.startsWith('[devcontainer]') ? log.info(`[sandbox] ${line}`) : log.debug(`[sandbox] ${line}`)),
    });
    if (resolved.kind === 'none') return null;
    notices?.push(devcontainerImageNotice(resolved, driver, Date.now() - began));
    log.info(
      `[sandbox] loop ${loop.name} uses ${resolved.kind === 'image' ? 'the image' : resolved.cached ? 'the cached image' : 'the newly built image'} ${resolved.image} of ${resolved.configPath} (${driver})`,
    );
    return resolved.image;
  }
  /** The notice of a bwrap loop whose repository has a Dev Container configuration (which bwrap does not use). */
  async function bwrapDevcontainerNoticeFor(loop: LoopRow): Promise<string | null> {
    if (!loop.baseCommit) return null;
    const found = await readDevcontainerAt({ gitDir: readExtras(loop).gitCommonDir, commit: loop.baseCommit }).catch(() => null);
    return found ? bwrapDevcontainerNotice(found.configPath) : null;
  }
  function sandboxRequest(loop: LoopRow, extras: StoredLoopExtras, config: LoopSandboxConfig): LoopSandboxRequest {
    // The prepared dependency folders, read-only at the worktree's paths (issue 27).
    const { readOnlyBinds } = setupMounts(readSetupState(loop), loop.worktreeDir!, 'work');
    return {
      loopName: loop.name,
      worktreeDir: loop.worktreeDir!,
      ...(readOnlyBinds.length > 0 ? { readOnlyBinds } : {}),
      gitCommonDir: extras.gitCommonDir,
      network: config.network,
      limits: config.limits,
      image: config.image,
    };
  }
  /**
   * An unconfined loop's agent shell lives beside the sandbox shims, never in the worktree; its
   * process cgroup and shell folder are named `forge-<6 hex>h-<loop>` (never a sandbox's name).
   */
  const hostName = (loop: Pick<LoopRow, 'name'>) => hostTrackingName(sandboxPrefix, loop.name);
  const hostShellDir = (loop: LoopRow) => join(shimRoot, hostName(loop));
  const hostCgroups = new SandboxCgroups();
  /** Per unconfined loop this process drives: its process marker and cgroup (or why it has none). */
  const hostTracking = new Map<string, { marker: string; tracked: { procsFiles: string[] } | { reason: string } }>();
  async function trackHostLoop(loop: LoopRow) {
    const name = hostName(loop);
    let t = hostTracking.get(name);
    if (!t || !('procsFiles' in t.tracked)) {
      await writeOwnerRecord(sandboxOwnerFile(name));
      t = { marker: t?.marker ?? randomBytes(12).toString('hex'), tracked: await hostCgroups.track(name) };
      hostTracking.set(name, t);
    }
    return t;
  }
  const sandboxPort: LoopSandboxPort = {
    resolveDriver: () => resolveSandboxDriver(),
    async trackHost(loop) {
      const { tracked } = await trackHostLoop(loop);
      if ('procsFiles' in tracked) return null;
      return hostUntrackedNotice(tracked.reason);
    },
    async prepareHost(loop) {
      const { marker, tracked } = await trackHostLoop(loop);
      if (!('procsFiles' in tracked)) log.warn(`[sandbox] loop ${loop.name} runs without a process cgroup: ${tracked.reason}`);
      const shell = await prepareAgentHostShell({
        dir: hostShellDir(loop),
        loopName: loop.name,
        basePath: baseEnv().PATH,
        loopMarker: marker,
        ...('procsFiles' in tracked ? { cgroupProcsFiles: tracked.procsFiles } : {}),
      });
      return { env: shell.env, config: shell.config, callsDir: shell.callsDir, shellPath: shell.shellPath };
    },
    async releaseHost(loop) {
      const name = hostName(loop);
      const t = hostTracking.get(name);
      hostTracking.delete(name);
      // Everything the agent started: its cgroup (whatever the processes did to their session or
      // environment), then, without a cgroup, whatever still carries the loop's marker.
      try {
        await hostCgroups.remove(name);
      } catch (e) {
        log.warn(`[sandbox] ending the processes of loop ${loop.name}: ${String(e)}`);
      }
      if (t) signalMarkedProcesses(LOOP_PROCESS_MARKER_VARIABLE, t.marker, 'SIGKILL');
      await removeAgentHostShell(hostShellDir(loop)).catch((e) => log.warn(`[sandbox] removing the agent shell of ${loop.name}: ${String(e)}`));
      await removeOwnerRecord(sandboxOwnerFile(name));
    },
    async prepare(loop, extras, resume) {
      const notices: string[] = [];
      const config = await loopSandboxConfig(loop, notices);
      const m = sandboxManagerFor(config.driver);
      const request = sandboxRequest(loop, extras, config);
      await writeOwnerRecord(sandboxOwnerFile(m.sandboxName(loop.name)));
      try {
        const handle = resume ? await m.restore(request) : await m.ensureRunning(request);
        const additions = await prepareOpencodeSandbox(handle, { shimRoot, basePath: baseEnv().PATH });
        const freeze = async () => (m.runtime.freeze ? m.runtime.freeze(handle.name) : null);
        // A process killed during a file tool call leaves its sandbox's cgroup frozen: thaw it (freeze, then thaw).
        if (resume && config.driver === 'bwrap') await freeze().then((thaw) => thaw?.(), () => undefined);
        const bwrapNotice = !resume && config.driver === 'bwrap' ? await bwrapDevcontainerNoticeFor(loop) : null;
        if (bwrapNotice) notices.push(bwrapNotice);
        return {
          ...(notices.length > 0 ? { notices } : {}),
          env: additions.env, config: additions.config, callsDir: additions.callsDir, shellPath: additions.shellShimPath, ripgrepPath: additions.ripgrepShimPath, freeze };
      } catch (error) {
        // A new loop's start is rolled back: leave no half-made sandbox (a known state only).
        if (!resume) {
          await m.stop(loop.name).then(() => removeOwnerRecord(sandboxOwnerFile(m.sandboxName(loop.name))), () => undefined);
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
        await removeOwnerRecord(sandboxOwnerFile(m.sandboxName(loop.name)));
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
  const mergePrefix = `${sandboxPrefix.slice(0, -1)}m-`;
  const mergeSandboxManagerFor = (driver: SandboxDriverName) => managerIn(mergeSandboxManagers, driver, mergePrefix, () => true);
  // The gate's checks of a clean checkout of a loop's work (issue 27): the same kind of
  // short-lived sandbox, with a prefix of its own (`forge-<6 hex>g-<loop>`).
  const gateSandboxManagers = new Map<SandboxDriverName, SandboxManager>();
  const gatePrefix = `${sandboxPrefix.slice(0, -1)}g-`;
  const gateSandboxManagerFor = (driver: SandboxDriverName) => managerIn(gateSandboxManagers, driver, gatePrefix, () => true);
  /**
   * The loop's prepared environment (issue 27) over another folder than its worktree (a clean
   * checkout, a merged tree): its dependency folders (mounted, or linked for an unconfined loop)
   * and its copied files, so checks there see what they see in the worktree.
   */
  async function prepareScratch(loop: LoopRow, dir: string): Promise<void> {
    const setup = readSetupState(loop);
    if (!setup || dir === loop.worktreeDir) return;
    if (loop.sandbox) await makeMountPoints(setup, dir);
    else await linkFolders(setup, dir);
    if (loop.worktreeDir) await copyPreparedFiles(loop.worktreeDir, dir, setup.copied);
  }
  const scratchCheckExecutor =
    (managerFor: (driver: SandboxDriverName) => SandboxManager, purpose: string, kind: 'checks' | 'setup' = 'checks'): MergeCheckExecutorPort =>
    async (loop, dir) => {
      if (kind === 'checks') await prepareScratch(loop, dir);
      if (!loop.sandbox) return { exec: hostCheckExecutor(), where: 'on the host (the loop ran unconfined)', release: async () => undefined };
      const config = await loopSandboxConfig(loop);
      const m = managerFor(config.driver);
      const mounts = setupMounts(readSetupState(loop), dir, kind === 'setup' ? 'setup' : 'work');
      const request: LoopSandboxRequest = {
        loopName: loop.name,
        worktreeDir: dir,
        gitCommonDir: readExtras(loop).gitCommonDir,
        // The setup alone has the network (package registries) and writes the package cache.
        network: kind === 'setup' ? true : config.network,
        limits: config.limits,
        image: config.image,
        ...(mounts.readOnlyBinds.length > 0 ? { readOnlyBinds: mounts.readOnlyBinds } : {}),
        ...(mounts.writableBinds.length > 0 ? { writableBinds: mounts.writableBinds } : {}),
        ...(kind === 'setup' ? { writablePaths: [packageCacheDir(dataDir)] } : {}),
      };
      if (kind === 'setup') await mkdir(packageCacheDir(dataDir), { recursive: true });
      const name = m.sandboxName(loop.name);
      await writeOwnerRecord(sandboxOwnerFile(name));
      try {
        await m.start(request);
      } catch (error) {
        await m.stop(loop.name).then(() => removeOwnerRecord(sandboxOwnerFile(name)), () => undefined);
        throw error;
      }
      log.info(`[sandbox] ${name}: ${purpose} of loop ${loop.name} run in it (${config.driver}, over ${dir})`);
      return {
        exec: sandboxCheckExecutor(m.runtime, name),
        where: kind === 'setup' ? `the ${config.driver} setup sandbox` : `in a ${config.driver} sandbox of their own`,
        release: async () => {
          await m.stop(loop.name);
          await removeOwnerRecord(sandboxOwnerFile(name));
        },
      };
    };
  const mergeCheckExecutor = scratchCheckExecutor(mergeSandboxManagerFor, "the merge queue's checks");
  const gateCheckExecutor = scratchCheckExecutor(gateSandboxManagerFor, "the gate's checks of a clean checkout");
  // The setup phase's commands (issue 27): a sandbox of their own over the worktree, network on,
  // the package cache writable, the installed folders writable (`forge-<6 hex>s-<loop>`).
  const setupSandboxManagers = new Map<SandboxDriverName, SandboxManager>();
  const setupPrefix = `${sandboxPrefix.slice(0, -1)}s-`;
  const setupSandboxManagerFor = (driver: SandboxDriverName) => managerIn(setupSandboxManagers, driver, setupPrefix, () => true);
  const setupExecutorOver = scratchCheckExecutor(setupSandboxManagerFor, "the worktree's setup", 'setup');
  sandboxPort.setupExecutor = (loop) => setupExecutorOver(loop, loop.worktreeDir!);

  async function removeUnowned(isLoopOwned: (loopName: string) => boolean, driversInUse: Iterable<string>): Promise<{ removed: string[]; problems: string[] }> {
    const removed: string[] = [];
    const problems: string[] = [];
    // A live process's record owns the sandbox whatever the loop rows (a snapshot) say.
    const loopOwned = (loopName: string) => isLoopOwned(loopName) || ownedByLiveProcess(`${sandboxPrefix}${loopName}`);
    const hostOwned = (loopName: string) => isLoopOwned(loopName) || ownedByLiveProcess(hostName({ name: loopName }));
    const mergeOwned = (loopName: string) => ownedByLiveProcess(`${mergePrefix}${loopName}`);
    const gateOwned = (loopName: string) => ownedByLiveProcess(`${gatePrefix}${loopName}`);
    const setupOwned = (loopName: string) => ownedByLiveProcess(`${setupPrefix}${loopName}`);
    const drivers = new Set<SandboxDriverName>(['bwrap']);
    for (const d of driversInUse) if ((SANDBOX_DRIVER_NAMES as readonly string[]).includes(d)) drivers.add(d as SandboxDriverName);
    for (const driver of drivers) {
      const runtime = sandboxRuntimeFor(driver);
      for (const [prefix, owned, what] of [
        [sandboxPrefix, loopOwned, 'sandbox'],
        [mergePrefix, mergeOwned, 'merge-check sandbox'],
        [gatePrefix, gateOwned, 'gate-check sandbox'],
        [setupPrefix, setupOwned, 'setup sandbox'],
      ] as const) {
        // A manager of its own: owned means "a live process owns it", not "its loop is marked running".
        const m = new SandboxManager({ runtime, prefix, isLoopRunning: owned, onWarning: (message) => log.warn(`[sandbox] ${message}`) });
        try {
          for (const name of await m.cleanupOrphans()) {
            removed.push(`${driver} ${what} ${name}`);
            await removeOwnerRecord(sandboxOwnerFile(name));
          }
        } catch (error) {
          problems.push(`could not check the ${driver} ${what}es (${(error as Error).message.split('\n')[0]})`);
        }
      }
    }
    // Cgroups left without a sandbox record (bwrap's own, an unconfined loop's, a merge check's).
    const ownerOf = (name: string): boolean => {
      const rest = name.slice(sandboxPrefix.length - 1);
      if (rest.startsWith('-')) return loopOwned(rest.slice(1));
      if (rest.startsWith('h-')) return hostOwned(rest.slice(2));
      if (rest.startsWith('m-')) return mergeOwned(rest.slice(2));
      if (rest.startsWith('g-')) return gateOwned(rest.slice(2));
      if (rest.startsWith('s-')) return setupOwned(rest.slice(2));
      return true; // another data folder's prefix that happens to extend ours: not ours
    };
    for (const name of await hostCgroups.listByPrefix(sandboxPrefix.slice(0, -1))) {
      if (ownerOf(name)) continue;
      try {
        await hostCgroups.remove(name);
        removed.push(`cgroup ${name} (its processes killed)`);
      } catch (error) {
        problems.push(`could not remove the cgroup ${name}: ${(error as Error).message}`);
      }
    }
    // Agent shells, sandbox shims and their job records (forge_shell logs, watchdog stamps).
    for (const entry of await readdir(shimRoot, { withFileTypes: true }).catch(() => [])) {
      if (!entry.isDirectory() || !entry.name.startsWith(sandboxPrefix.slice(0, -1)) || ownerOf(entry.name)) continue;
      await rm(join(shimRoot, entry.name), { recursive: true, force: true });
      removed.push(`agent shell and job records ${join(shimRoot, entry.name)}`);
    }
    // Owner records of merge-check sandboxes whose owner died after the sandbox was gone.
    for (const f of await readdir(sandboxOwnersDir).catch(() => [] as string[])) {
      const file = join(sandboxOwnersDir, f);
      if (ownerState(file) !== 'alive') await rm(file, { force: true });
    }
    return { removed, problems };
  }

  return { sandboxPort, mergeCheckExecutor, gateCheckExecutor, resolveSandboxDriver, removeUnowned };
}

/** The process cgroup (and agent-shell folder) of an unconfined loop: `forge-<6 hex>h-<loop>`. */
export function hostTrackingName(sandboxPrefix: string, loopName: string): string {
  return `${sandboxPrefix.slice(0, -1)}h-${loopName}`;
}

/** The start notice of an unconfined loop that cannot have a process cgroup: why, and what Forge does instead. */
export function hostUntrackedNotice(reason: string): string {
  return (
    `This unconfined loop has no process cgroup of its own (${reason.replace(/\.$/, '')}). At its end and on cancel Forge kills the processes its agent ` +
    'started that still carry the loop\'s marker variable (setsid, nohup and double forks keep it), but a process that clears its environment can outlive the loop. ' +
    'Run it sandboxed, or as a user with a delegated cgroup v2, to end everything it started.'
  );
}

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

