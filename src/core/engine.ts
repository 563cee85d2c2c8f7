/**
 * The Forge engine, wired: database, worktrees, Forge's tool servers, the loop runtime and the
 * sandbox port. The VS Code extension and the CLI each create one (their composition roots
 * add only host concerns: settings source, logging sink, API keys).
 */
import { randomUUID } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ForgeSettings } from './config/settings';
import { createLoopToolBackend } from './loop/tool-backend';
import { LoopJobRegistry } from './jobs/job-registry';
import { createLoopRuntime } from './loop/runtime';
import { createReviewService, type ReviewService } from './review/review-service';
import type { EngineLog } from './loop/loop-supervisor';
import type { LoopRuntime, LoopTimingMark } from './loop/runtime-types';
import { EMBEDDED_MODEL, EMBEDDED_PROVIDER_ID } from './opencode/embedded-model';
import { estimateLoopCost, type CostEstimate, type ModelPrice, type PlanSize } from './loop/budget';
import { loadAgentPrompts, type AgentPrompts } from './opencode/forge-config';
import { startForgeToolServer, type ForgeToolServer } from './opencode/forge-tool-server';
import { startFileGuardServer, type FileGuardServer } from './opencode/file-guard-server';
import type { ProviderCatalog } from './opencode/agent-client';
import { createSdkAgentClient } from './opencode/sdk-agent-client';
import { deepMerge, parseJsonObject, resolveOpencodeBinary } from './opencode/server-process';
import { startSupervisedOpencode } from './opencode/server-supervisor';
import { prepareProbeDir } from './opencode/config-probe';
import { NO_PROJECT_CONFIG_ENVIRONMENT } from './opencode/project-config';
import { unknownModelsProblem, type NamedModel } from './opencode/model-check';
import { createSharedOpencodePool, type SharedServerInfo } from './opencode/shared-opencode';
import { buildImage } from './sandbox';
import { createEngineSandboxes } from './engine-sandboxes';
import { cleanUpAfterCrash, describeCrashCleanup, type CrashCleanupReport } from './crash-cleanup';
import { openForgeDatabase, type ForgeDatabase } from './storage';
import { createForgeRepositories, type ForgeRepositories } from './storage/repositories';
import { createGitRunner, createWorktreeService, ensureDataDir, type WorktreeService } from './workspace';
import { createPlanDrafter, type PlanDrafter } from './plan-draft/plan-drafter';
import { PlanDraftError } from './plan-draft/architect-prompt';
import type { PermissionRule } from './opencode/agent-client';
import { createLiveFeed, type LiveFeed } from './live/live-feed';
import { createFeatureGroupService, type FeatureGroupServiceHandle } from './groups/feature-group-service';
import { GroupError, type FeatureGroupService } from './groups/group-types';

export type { EngineLog };

export interface EmbeddedModel {
  /** Inline opencode configuration adding the embedded provider. */
  config: Record<string, unknown>;
  /** "provider/model" of the embedded model. */
  model: string;
  close(): Promise<void>;
}

export interface ForgeEngineOptions {
  dataDir: string;
  settings: () => ForgeSettings;
  log: EngineLog;
  /** Folder holding sql-wasm.wasm and agents/*.md (dist/ in a build, the sources in tests). */
  assetsDir: string;
  /** Agent prompt folder, when not `<assetsDir>/agents`. */
  agentsDir?: string;
  /** Path of sql-wasm.wasm, when not `<assetsDir>/sql-wasm.wasm`. */
  wasmPath?: string;
  /** Folder holding the sandbox Dockerfile (`container/`). */
  containerDir?: string;
  /** Base environment for opencode (the user's, plus API keys). Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Set over everything in opencode's environment (tests isolate HOME/XDG here). */
  opencodeExtraEnv?: Record<string, string>;
  /**
   * Started when no model is configured anywhere (flag, setting, FORGE_MODEL, the user's
   * opencode configuration): Forge's embedded scripted model, so a loop always runs.
   */
  embeddedModel?: () => Promise<EmbeddedModel>;
  leaseTtlMs?: number;
  /**
   * For hosts that only read (forge status, forge findings): the database is
   * opened read-only, so no file of it changes, even a damaged one (see
   * OpenForgeDatabaseOptions.readOnly). Starting or changing loops fails.
   */
  readOnly?: boolean;
  /** Benchmark hook: the loop supervisors' idle / prompt timing marks. */
  onLoopTiming?: (mark: LoopTimingMark) => void;
  /**
   * Which host this is (the CLI, a VS Code window): part of the lease holder's id, so
   * `forge status` can say what kind of process supervises a loop.
   */
  hostKind?: 'cli' | 'vscode';
  /** TEST ONLY: lowers the shell-hang watchdog's 60 s floor (no user setting can). */
  shellWatchdogFloorMs?: number;
  /** TEST ONLY: the tool server's bearer secret (default: random per tool server), so a test can hunt for it. */
  toolServerSecret?: string;
}

export interface ForgeEngine {
  readonly dataDir: string;
  /** What this engine's start removed after a crashed or killed Forge process (crash-cleanup.ts). */
  readonly crashCleanup: CrashCleanupReport;
  /** The lease holder id of this process's runtime: `<pid>:<kind>-<uuid>` (supervisorOf reads the pid). */
  readonly supervisorId: string;
  readonly db: ForgeDatabase;
  readonly runtime: LoopRuntime;
  readonly repos: ForgeRepositories;
  /** The user's review of a loop: comments as findings, resolve, dismiss, send back (issue 29). */
  readonly review: ReviewService;
  readonly worktrees: WorktreeService;
  /** Plan authoring: architect sessions drafting plans of record (`forge plan`, *Forge: Draft Plan*). */
  readonly planner: PlanDrafter;
  /** What the agent sessions of the loops this process drives are doing now (not persisted). */
  readonly live: LiveFeed;
  /** The opencode servers this process's loops share now, and which loops each serves. */
  opencodeServers(): SharedServerInfo[];
  /** Feature groups: a PRD split into feature plans, run as loops under a cap and a group budget (`forge group`). */
  readonly groups: FeatureGroupService;
  /** Fires (debounced) when this or another process wrote to the database. */
  onDidChangeStore(listener: () => void): () => void;
  providers(repoPath: string): Promise<ProviderCatalog>;
  /** The named models opencode's catalog for `repoPath` lacks (one line each, with a did-you-mean), or null. */
  checkModels(repoPath: string, named: NamedModel[]): Promise<string | null>;
  /**
   * What a loop of this size would cost on these models (null: the configured default), from
   * opencode's catalog prices: an estimate, shown before launch. Starts no loop, writes nothing.
   */
  estimateCost(request: { repoPath: string; size: PlanSize; model: string | null; auditorModel: string | null }): Promise<CostEstimate & { model: string | null; auditorModel: string | null }>;
  sandboxStatus(): Promise<{ available: boolean; driver: string | null; reason: string | null }>;
  buildSandboxImage(onLog: (line: string) => void, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export async function createForgeEngine(options: ForgeEngineOptions): Promise<ForgeEngine> {
  const { dataDir, log } = options;
  await ensureDataDir(dataDir);
  const db = await openForgeDatabase({
    path: join(dataDir, 'forge.db'),
    wasmPath: options.wasmPath ?? join(options.assetsDir, 'sql-wasm.wasm'),
    onWarning: (m) => log.warn(`[storage] ${m}`),
    ...(options.readOnly ? { readOnly: true } : {}),
  });
  const repos = createForgeRepositories(db);
  const worktrees = createWorktreeService({ dataDir, log });
  const toolServers = new Map<string, Promise<ForgeToolServer>>();
  let prompts: Promise<AgentPrompts> | undefined;
  let embedded: Promise<EmbeddedModel> | undefined;
  // Set once the embedded model runs: every opencode server Forge starts must know its provider.
  let embeddedConfig: Record<string, unknown> | null = null;
  const baseEnv = () => ({ ...(options.env ?? process.env) });
  const { sandboxPort, mergeCheckExecutor, gateCheckExecutor, resolveSandboxDriver, removeUnowned } = createEngineSandboxes({ dataDir, log, baseEnv, settings: options.settings, db, repos });
  // Before any loop of this process exists: what killed processes left, that no live process owns.
  const cleanupStarted = Date.now();
  const crashCleanup = await cleanUpAfterCrash({ db, sandboxes: { removeUnowned }, worktrees });
  log.debug(`[cleanup] leftovers of dead processes checked in ${Date.now() - cleanupStarted} ms`);
  for (const line of describeCrashCleanup(crashCleanup)) log.info(`[cleanup] ${line.trim()}`);

  const live = createLiveFeed(undefined, (m) => log.warn(`[live] ${m}`));
  // One opencode server for the loops of this process (per confinement and configuration).
  const sharedOpencode = createSharedOpencodePool({ root: join(dataDir, 'opencode-shared'), log: (m) => log.info(`[opencode] ${m}`) });
  const loopJobs = new LoopJobRegistry();
  // Every file tool call of the loops' opencode passes this guard (one per process; its plugin file lives in the data folder).
  let fileGuard: Promise<FileGuardServer> | undefined;
  const fileGuardServer = () => (fileGuard ??= startFileGuardServer({ pluginDir: join(dataDir, 'opencode-plugins'), log: (m) => log.warn(m) }));
  /** Forge's MCP tool server of a project: one per project, shared by its loops and its plan drafts. */
  function toolServerFor(projectId: string): Promise<ForgeToolServer> {
    let server = toolServers.get(projectId);
    if (!server) {
      server = startForgeToolServer({
        backend: createLoopToolBackend({ projectId, db, jobs: loopJobs, featureSplits: { write: (scopeKey, args) => groups.inbox.write(scopeKey, args) } }),
        onCall: (entry) => log.info(`[tools] ${entry.loopName ?? '-'} ${entry.role ?? '?'} ${entry.tool}: ${entry.outcome}${entry.message ? ` — ${entry.message}` : ''}`),
        onError: (e) => log.error(`[tools] ${String(e)}`),
        ...(options.toolServerSecret ? { secret: options.toolServerSecret } : {}),
      });
      toolServers.set(projectId, server);
    }
    return server;
  }
  const agentPrompts = () => (prompts ??= loadAgentPrompts(options.agentsDir ?? join(options.assetsDir, 'agents')));
  const opencodeEnv = () => {
    const env = baseEnv();
    if (embeddedConfig) env.OPENCODE_CONFIG_CONTENT = JSON.stringify(deepMerge(parseJsonObject(env.OPENCODE_CONFIG_CONTENT) ?? {}, embeddedConfig));
    return env;
  };

  const supervisorId = `${process.pid}:${options.hostKind ? `${options.hostKind}-` : ''}${randomUUID()}`;
  const runtime = createLoopRuntime({
    db,
    jobs: loopJobs,
    ...(options.shellWatchdogFloorMs !== undefined ? { shellWatchdogFloorMs: options.shellWatchdogFloorMs } : {}),
    live,
    worktrees,
    settings: options.settings,
    log,
    supervisorId,
    leaseTtlMs: options.leaseTtlMs,
    ...(options.onLoopTiming ? { onTiming: options.onLoopTiming } : {}),
    toolServerFor,
    agentPrompts,
    opencodeEnv,
    opencodeExtraEnv: options.opencodeExtraEnv,
    prepareModels: async (models) => {
      if (!options.embeddedModel || !models.some((m) => m.startsWith(`${EMBEDDED_PROVIDER_ID}/`))) return;
      const e = await (embedded ??= options.embeddedModel());
      embeddedConfig = e.config;
    },
    defaultModels: async (repoPath) => {
      const fromEnv = baseEnv().FORGE_MODEL;
      if (fromEnv) return { model: fromEnv, auditorModel: null, notice: null, source: 'FORGE_MODEL' };
      // opencode's own default (user, project or inline configuration), named explicitly so the
      // loop's attempts and `forge status` say which model ran.
      const configured = await configuredModel(repoPath);
      if (configured) return { model: configured, auditorModel: null, notice: null, source: 'your opencode configuration' };
      if (!options.embeddedModel) return { model: null, auditorModel: null, notice: null };
      const e = await (embedded ??= options.embeddedModel());
      embeddedConfig = e.config;
      return {
        model: e.model,
        auditorModel: e.model,
        notice: `No model is configured (setting forge.model, FORGE_MODEL, or a "model" in your opencode configuration), so this loop runs on Forge's embedded scripted model (${e.model}). It implements only plans that spell out their files in fenced blocks; configure a real model for real work.`,
      };
    },
    sandbox: sandboxPort,
    gateCheckExecutor,
    sharedOpencode,
    fileGuard: fileGuardServer,
    checkModels: modelProblem,
  });

  /** What every read-only agent turn (the architect's, the feature splitter's) needs of the engine. */
  const readOnlyTurnDeps = {
    git: createGitRunner(),
    log,
    toolServerFor,
    agentPrompts,
    opencodeEnv,
    ...(options.opencodeExtraEnv ? { opencodeExtraEnv: options.opencodeExtraEnv } : {}),
    binaryPath: () => options.settings()['forge.opencode.binaryPath'] || undefined,
    userDenyRules: () => options.settings()['forge.loop.permissions'] as PermissionRule[],
    busyStallTimeoutMs: () => options.settings()['forge.loop.busyStallTimeoutMs'],
    idleGateTimeoutMs: () => options.settings()['forge.loop.idleGateTimeoutMs'],
  };

  const planner = createPlanDrafter({
    ...readOnlyTurnDeps,
    dataDir,
    repos,
    projectOf: (repoPath) => runtime.projectOf(repoPath),
    // The architect needs a model that can plan: the embedded scripted model only implements
    // plans that spell out their files, so it is never chosen for drafting.
    async resolveModel(requested, repoPath) {
      const model = requested || options.settings()['forge.model'] || baseEnv().FORGE_MODEL || (await configuredModel(repoPath)) || null;
      const problem = model ? await modelProblem(repoPath, [{ role: 'architect model', model }]) : null;
      if (problem) throw new PlanDraftError('bad_request', problem);
      if (model) return model;
      if (options.embeddedModel) {
        throw new PlanDraftError(
          'no_model',
          'Drafting a plan needs a real model, and none is configured. Give --model PROVIDER/MODEL, set forge.model (or FORGE_MODEL), or set a "model" in your opencode configuration.',
        );
      }
      return null;
    },
  });
  // Declared before use by the tool backend's closure (a split's writes arrive while it runs).
  const groups: FeatureGroupServiceHandle = createFeatureGroupService({
    ...readOnlyTurnDeps,
    dataDir,
    repos,
    runtime,
    worktrees,
    mergeCheckExecutor,
    settings: options.settings,
    // Unlike the architect, the splitter may run on the embedded model: it splits PRDs that spell
    // out their features ("## Feature <id>: <title>"), so a group runs without any configured model.
    async resolveSplitterModel(requested, repoPath) {
      const model = requested || options.settings()['forge.model'] || baseEnv().FORGE_MODEL || (await configuredModel(repoPath)) || null;
      const problem = model ? await modelProblem(repoPath, [{ role: 'splitter model', model }]) : null;
      if (problem) throw new GroupError(problem, 'bad_model');
      if (model) return model;
      if (!options.embeddedModel) return null;
      const e = await (embedded ??= options.embeddedModel());
      embeddedConfig = e.config;
      return e.model;
    },
  });
  /**
   * opencode's resolved configuration for `repoPath` (its default model and provider catalog),
   * from a probe server (config-probe.ts); kept a minute per project configuration, so one start
   * (default model, model check, estimate) asks once.
   */
  const probes = new Map<string, { at: number; catalog: Promise<ProviderCatalog> }>();
  async function catalogOf(repoPath: string): Promise<ProviderCatalog> {
    const { dir, key, projectLayer } = await prepareProbeDir(join(dataDir, 'provider-probe'), repoPath);
    const now = Date.now();
    for (const [k, p] of probes) if (now - p.at > 60_000) probes.delete(k);
    const cached = probes.get(key);
    if (cached) return cached.catalog;
    // The probe's server and stream do not hold the process open (a loop's timers do that):
    // a host with nothing else running (forge run --dry-run) would exit in the middle.
    const keepAlive = setInterval(() => {}, 60_000);
    const catalog = listProviders(dir, projectLayer).finally(() => clearInterval(keepAlive));
    probes.set(key, { at: now, catalog });
    catalog.catch(() => probes.delete(key));
    return catalog;
  }
  /**
   * The named models opencode does not know (with a did-you-mean), or null. The embedded model is
   * Forge's own; when opencode cannot be asked, the check is skipped with a warning (the loop's
   * own opencode then says what is wrong).
   */
  async function modelProblem(repoPath: string, named: NamedModel[]): Promise<string | null> {
    const checked = named.filter((n) => !n.model.startsWith(`${EMBEDDED_PROVIDER_ID}/`));
    if (checked.length === 0) return null;
    let catalog: ProviderCatalog;
    try {
      catalog = await catalogOf(repoPath);
    } catch (error) {
      log.warn(`could not check the models against opencode's catalog: ${String(error)}`);
      return null;
    }
    return unknownModelsProblem(checked, catalog);
  }
  /** opencode's own default model for `repoPath`, or null (none, or opencode could not be asked). */
  async function configuredModel(repoPath: string): Promise<string | null> {
    try {
      return (await catalogOf(repoPath)).configuredModel ?? null;
    } catch (error) {
      log.warn(`could not read opencode's configuration: ${String(error)}`);
      return null;
    }
  }

  /** opencode's provider catalog, from a server started for the question in `probeDir` (config-probe.ts). */
  async function listProviders(probeDir: string, projectLayer: Record<string, unknown>): Promise<ProviderCatalog> {
    await mkdir(probeDir, { recursive: true });
    const env = baseEnv();
    const server = await startSupervisedOpencode({
      binaryPath: resolveOpencodeBinary({ configuredPath: options.settings()['forge.opencode.binaryPath'] || undefined }),
      cwd: probeDir,
      baseEnv: env,
      forgeConfig: projectLayer,
      extraEnv: { ...(options.opencodeExtraEnv ?? {}), ...NO_PROJECT_CONFIG_ENVIRONMENT },
      restart: { maxAttempts: 0 },
    });
    try {
      const client = createSdkAgentClient({ server, directory: probeDir });
      try {
        return await client.providers();
      } finally {
        await client.close();
      }
    } finally {
      await server.stop();
    }
  }

  const listeners = new Set<() => void>();
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      for (const l of [...listeners]) l();
    }, 150);
    timer.unref?.();
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dataDir, (_event, file) => {
      if (file && String(file).startsWith('forge.db')) fire();
    });
    watcher.unref?.();
  } catch (error) {
    log.warn(`cannot watch ${dataDir} for other windows' changes: ${String(error)}`);
  }
  const unsubscribeRuntime = runtime.subscribe(() => fire());

  return {
    dataDir,
    crashCleanup,
    supervisorId,
    db,
    runtime,
    repos,
    review: createReviewService(repos, runtime),
    worktrees,
    planner,
    live,
    opencodeServers: () => sharedOpencode.servers(),
    groups,
    onDidChangeStore(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    checkModels: modelProblem,
    providers(repoPath) {
      // opencode writes into its working folder ($schema, .opencode/.gitignore): list models
      // from a folder of Forge's own (with the project's configuration copied), never from the
      // user's repository.
      return catalogOf(repoPath);
    },
    async estimateCost(request) {
      const settings = options.settings();
      // The models the loop would get, as runtime.start picks them (the embedded model only where it would run).
      let model = request.model || settings['forge.model'] || baseEnv().FORGE_MODEL || null;
      if (!model) model = (await configuredModel(request.repoPath)) ?? (options.embeddedModel ? EMBEDDED_MODEL : null);
      const auditorModel = request.auditorModel || settings['forge.auditorModel'] || model;
      const embedded = (m: string | null) => !!m && m.startsWith(`${EMBEDDED_PROVIDER_ID}/`);
      let catalog: ProviderCatalog | undefined;
      const priceOf = async (m: string | null): Promise<ModelPrice | null> => {
        if (!m) return null;
        if (embedded(m)) return { input: 0, output: 0 };
        const known: ProviderCatalog = (catalog ??= await (this as ForgeEngine).providers(request.repoPath).catch((error: unknown) => {
          log.warn(`could not read opencode's model prices: ${String(error)}`);
          return { providers: [], defaults: {} };
        }));
        const slash = m.indexOf('/');
        const info = known.providers.find((p) => p.id === m.slice(0, slash))?.models.find((x) => x.modelId === m.slice(slash + 1));
        return info?.cost ?? null;
      };
      const prices = { code: await priceOf(model), auditor: await priceOf(auditorModel) };
      return { ...estimateLoopCost(request.size, prices), model, auditorModel };
    },
    async sandboxStatus() {
      const { driver, reason } = await resolveSandboxDriver();
      return { available: driver !== null, driver, reason };
    },
    async buildSandboxImage(onLog, signal) {
      const { driver } = await resolveSandboxDriver();
      const engine = driver === 'podman' ? 'podman' : 'docker';
      await buildImage({
        engine,
        contextDir: options.containerDir ?? join(options.assetsDir, '..', 'container'),
        tag: options.settings()['forge.sandbox.image'],
        onLog,
        env: baseEnv(),
        ...(signal ? { signal } : {}),
      });
    },
    async close() {
      unsubscribeRuntime();
      watcher?.close();
      if (timer) clearTimeout(timer);
      // Before the loops stop: a group this process drives is paused (interrupted), not failed.
      groups.dispose();
      await runtime.dispose('shutdown');
      await sharedOpencode.dispose().catch((e) => log.warn(`stopping the shared opencode servers: ${String(e)}`));
      for (const s of toolServers.values()) await (await s).close().catch(() => {});
      if (fileGuard) await (await fileGuard).close().catch(() => {});
      if (embedded) await (await embedded).close().catch(() => {});
      await db.close();
    },
  };
}
