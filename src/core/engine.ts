/**
 * The Forge engine, wired: database, worktrees, Forge's tool servers, the loop runtime and the
 * sandbox port. The VS Code extension and the CLI each create one (their composition roots
 * add only host concerns: settings source, logging sink, API keys).
 */
import { randomUUID } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import type { ForgeSettings } from './config/settings';
import { createLoopToolBackend } from './loop/tool-backend';
import { createLoopRuntime, type LoopSandboxPort } from './loop/runtime';
import type { EngineLog, StoredLoopExtras } from './loop/loop-supervisor';
import type { LoopRuntime } from './loop/runtime-types';
import { loadAgentPrompts, type AgentPrompts } from './opencode/forge-config';
import { startForgeToolServer, type ForgeToolServer } from './opencode/forge-tool-server';
import type { ProviderCatalog } from './opencode/agent-client';
import { createSdkAgentClient } from './opencode/sdk-agent-client';
import { deepMerge, resolveOpencodeBinary } from './opencode/server-process';
import { startSupervisedOpencode } from './opencode/server-supervisor';
import { buildImage, prepareOpencodeSandbox, resolveSandboxRuntime, SandboxManager, type SandboxRuntime } from './sandbox';
import { openForgeDatabase, type ForgeDatabase } from './storage';
import { createForgeRepositories, type ForgeRepositories, type LoopRow } from './storage/repositories';
import { createWorktreeService, ensureDataDir, type WorktreeService } from './workspace';

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
  /** Whether the user's opencode configuration names a default model. */
  userHasDefaultModel?: () => Promise<boolean>;
  leaseTtlMs?: number;
}

export interface ForgeEngine {
  readonly dataDir: string;
  readonly db: ForgeDatabase;
  readonly runtime: LoopRuntime;
  readonly repos: ForgeRepositories;
  readonly worktrees: WorktreeService;
  /** Fires (debounced) when this or another process wrote to the database. */
  onDidChangeStore(listener: () => void): () => void;
  providers(repoPath: string): Promise<ProviderCatalog>;
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
  });
  const repos = createForgeRepositories(db);
  const worktrees = createWorktreeService({ dataDir, log });
  const toolServers = new Map<string, Promise<ForgeToolServer>>();
  let prompts: Promise<AgentPrompts> | undefined;
  let embedded: Promise<EmbeddedModel> | undefined;
  // Set once the embedded model runs: every opencode server Forge starts must know its provider.
  let embeddedConfig: Record<string, unknown> | null = null;
  const baseEnv = () => ({ ...(options.env ?? process.env) });

  const sandboxRuntime = (() => {
    let cached: Promise<{ runtime: SandboxRuntime | null; reason: string | null; driver: string | null }> | undefined;
    return () =>
      (cached ??= resolveSandboxRuntime(options.settings()['forge.sandbox.driver'], { dataDir, env: baseEnv() }).then(({ selection, runtime }) => ({
        runtime,
        driver: runtime?.driver ?? null,
        reason: selection.ok ? null : selection.reason,
      })));
  })();
  let sandboxManager: SandboxManager | undefined;
  async function manager(): Promise<SandboxManager> {
    if (sandboxManager) return sandboxManager;
    const { runtime, reason } = await sandboxRuntime();
    if (!runtime) throw new Error(reason ?? 'No sandbox driver is available: install docker, podman or bubblewrap.');
    sandboxManager = new SandboxManager({
      runtime,
      isLoopRunning: (name) => isRunningAnywhere(name),
      onWarning: (m) => log.warn(`[sandbox] ${m}`),
    });
    return sandboxManager;
  }
  function isRunningAnywhere(name: string): boolean {
    const rows = db.query('SELECT status FROM loops WHERE name = ?', [name]);
    return rows.some((r) => r.status === 'running' || r.status === 'starting');
  }
  function sandboxRequest(loop: LoopRow, extras: StoredLoopExtras) {
    const s = options.settings();
    return {
      loopName: loop.name,
      worktreeDir: loop.worktreeDir!,
      gitCommonDir: extras.gitCommonDir,
      network: s['forge.sandbox.network'],
      limits: { cpus: s['forge.sandbox.cpus'], memoryMb: s['forge.sandbox.memoryMb'], pids: s['forge.sandbox.pidsLimit'] },
      image: s['forge.sandbox.image'],
    };
  }
  const sandboxPort: LoopSandboxPort = {
    async prepare(loop, extras, resume) {
      const m = await manager();
      const handle = resume ? await m.restore(sandboxRequest(loop, extras)) : await m.ensureRunning(sandboxRequest(loop, extras));
      const additions = await prepareOpencodeSandbox(handle, { shimRoot: join(dataDir, 'sandbox-shims'), basePath: baseEnv().PATH });
      return { env: additions.env, config: additions.config };
    },
    async check(loop) {
      const m = await manager();
      if (!(await m.isLive(loop.name))) {
        throw new Error(`The sandbox of loop "${loop.name}" is gone or broken; Forge will not run the agent's commands on the host. Restart the loop to create a new sandbox.`);
      }
    },
    async release(loop, ended) {
      const m = await manager();
      if (ended) {
        await m.stop(loop.name);
        await m.cleanupOrphans().catch((e) => log.warn(`[sandbox] orphan cleanup: ${String(e)}`));
      }
    },
  };

  const runtime = createLoopRuntime({
    db,
    worktrees,
    settings: options.settings,
    log,
    supervisorId: `${process.pid}:${randomUUID()}`,
    leaseTtlMs: options.leaseTtlMs,
    toolServerFor(projectId) {
      let server = toolServers.get(projectId);
      if (!server) {
        server = startForgeToolServer({
          backend: createLoopToolBackend({ projectId, db }),
          onCall: (entry) => log.info(`[tools] ${entry.loopName ?? '-'} ${entry.role ?? '?'} ${entry.tool}: ${entry.outcome}${entry.message ? ` — ${entry.message}` : ''}`),
          onError: (e) => log.error(`[tools] ${String(e)}`),
        });
        toolServers.set(projectId, server);
      }
      return server;
    },
    agentPrompts: () => (prompts ??= loadAgentPrompts(options.agentsDir ?? join(options.assetsDir, 'agents'))),
    opencodeEnv: () => {
      const env = baseEnv();
      if (embeddedConfig) env.OPENCODE_CONFIG_CONTENT = JSON.stringify(deepMerge(parseJsonObject(env.OPENCODE_CONFIG_CONTENT), embeddedConfig));
      return env;
    },
    opencodeExtraEnv: options.opencodeExtraEnv,
    defaultModels: async () => {
      const fromEnv = baseEnv().FORGE_MODEL;
      if (fromEnv) return { model: fromEnv, auditorModel: null, notice: null };
      if (!options.embeddedModel) return { model: null, auditorModel: null, notice: null };
      if (options.userHasDefaultModel && (await options.userHasDefaultModel())) return { model: null, auditorModel: null, notice: null };
      const e = await (embedded ??= options.embeddedModel());
      embeddedConfig = e.config;
      return {
        model: e.model,
        auditorModel: e.model,
        notice: `No model is configured (setting forge.model, FORGE_MODEL, or a "model" in your opencode configuration), so this loop runs on Forge's embedded scripted model (${e.model}). It implements only plans that spell out their files in fenced blocks; configure a real model for real work.`,
      };
    },
    sandbox: sandboxPort,
  });

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
    db,
    runtime,
    repos,
    worktrees,
    onDidChangeStore(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async providers(repoPath) {
      const env = baseEnv();
      const server = await startSupervisedOpencode({
        binaryPath: resolveOpencodeBinary({ configuredPath: options.settings()['forge.opencode.binaryPath'] || undefined }),
        cwd: repoPath,
        baseEnv: env,
        extraEnv: options.opencodeExtraEnv,
        restart: { maxAttempts: 0 },
      });
      try {
        const client = createSdkAgentClient({ server, directory: repoPath });
        try {
          return await client.providers();
        } finally {
          await client.close();
        }
      } finally {
        await server.stop();
      }
    },
    async sandboxStatus() {
      const { runtime: rt, reason, driver } = await sandboxRuntime();
      return { available: rt !== null, driver, reason: rt ? null : reason };
    },
    async buildSandboxImage(onLog, signal) {
      const { runtime: rt } = await sandboxRuntime();
      const engine = rt?.driver === 'podman' ? 'podman' : 'docker';
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
      await runtime.dispose('shutdown');
      for (const s of toolServers.values()) await (await s).close().catch(() => {});
      if (embedded) await (await embedded).close().catch(() => {});
      await db.close();
    },
  };
}

function parseJsonObject(text: string | undefined): Record<string, unknown> {
  if (!text) return {};
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
