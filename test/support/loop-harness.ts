/**
 * A whole Forge engine for loop tests: real opencode, real git repository, real database file,
 * and the scripted model playing coder and auditor from a per-role script.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultSettings, type ForgeSettings } from '../../src/core/config/settings';
import { createForgeEngine, type ForgeEngine } from '../../src/core/engine';
import type { LoopRuntimeEvent } from '../../src/core/loop/runtime-types';
import { defaultSqlWasmPath } from '../../src/core/storage';
import { createTestRepository, type TestRepository } from './git-repo';
import { MOCK_MODEL, writeOpencodeTestEnvironment, type OpencodeTestEnvironment } from './opencode-test-env';
import { startScriptedModel, text, type ScriptedModel, type ScriptedRequest, type ScriptStep } from './scripted-model';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export type AgentRole = 'code' | 'auditor';

/** Role of the agent that sent a request: the auditor is offered no file-writing tool. */
export function roleOf(request: ScriptedRequest): AgentRole {
  return request.toolNames.includes('write') || request.toolNames.includes('edit') ? 'code' : 'auditor';
}

/**
 * Per-session scripts: the first request of a new session picks that session's steps from
 * `plan(role, nth, request)` (nth counts sessions of that role from 1); later requests of the
 * session take the following steps; past the end the session answers with a short text.
 */
export function sessionScript(plan: (role: AgentRole, nth: number, request: ScriptedRequest) => ScriptStep[]) {
  const queues = new Map<string, ScriptStep[]>();
  const counts: Record<AgentRole, number> = { code: 0, auditor: 0 };
  const firstRequests: Array<{ role: AgentRole; nth: number; request: ScriptedRequest }> = [];
  const handler = (request: ScriptedRequest): ScriptStep => {
    const sid = request.sessionId ?? 'unknown';
    if (!queues.has(sid)) {
      const role = roleOf(request);
      const nth = ++counts[role];
      firstRequests.push({ role, nth, request });
      queues.set(sid, plan(role, nth, request));
    }
    const queue = queues.get(sid)!;
    return queue.shift() ?? text('Done.');
  };
  return { handler, firstRequests, counts };
}

export interface LoopHarness {
  repo: TestRepository;
  model: ScriptedModel;
  env: OpencodeTestEnvironment;
  dataDir: string;
  engine: ForgeEngine;
  settings: ForgeSettings;
  events: LoopRuntimeEvent[];
  projectId: string;
  /** Opens another engine (another "process") on the same data folder. */
  openEngine(): Promise<ForgeEngine>;
  close(): Promise<void>;
}

export interface LoopHarnessOptions {
  files?: Record<string, string>;
  settings?: Partial<ForgeSettings>;
  dataDir?: string;
  leaseTtlMs?: number;
  /** Extra fields of the mock model in the user's opencode config (e.g. `variants`). */
  modelConfig?: Record<string, unknown>;
  /** TEST ONLY engine option: lowers the shell-hang watchdog's floor. */
  shellWatchdogFloorMs?: number;
  /** More models of the mock provider (see OpencodeTestEnvironmentOptions.extraModels). */
  extraModels?: string[];
  /** TEST ONLY engine option: the tool servers' bearer secret. */
  toolServerSecret?: string;
  /** Sees every line the engines log. */
  onLog?: (level: 'debug' | 'info' | 'warn' | 'error', message: string) => void;
}

export async function createLoopHarness(options: LoopHarnessOptions = {}): Promise<LoopHarness> {
  const model = await startScriptedModel();
  const env = await writeOpencodeTestEnvironment({
    modelBaseURL: model.baseURL,
    ...(options.modelConfig ? { modelConfig: options.modelConfig } : {}),
    ...(options.extraModels ? { extraModels: options.extraModels } : {}),
  });
  const repo = await createTestRepository(options.files ?? { 'README.md': '# demo\n' });
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'forge-data-')));
  const settings: ForgeSettings = { ...defaultSettings(), 'forge.model': MOCK_MODEL, ...(options.settings ?? {}) };
  const events: LoopRuntimeEvent[] = [];
  const engines: ForgeEngine[] = [];
  const openEngine = async () => {
    const engine = await createForgeEngine({
      dataDir,
      settings: () => settings,
      log: {
        debug: (m) => (options.onLog?.('debug', m), process.env.FORGE_TEST_LOG === 'debug' && console.warn(m)),
        info: (m) => (options.onLog?.('info', m), process.env.FORGE_TEST_LOG === 'debug' && console.warn(m)),
        warn: (m) => (options.onLog?.('warn', m), process.env.FORGE_TEST_LOG && console.warn(m)),
        error: (m) => (options.onLog?.('error', m), console.error(m)),
      },
      assetsDir: join(REPO_ROOT, 'dist'),
      agentsDir: join(REPO_ROOT, 'src/core/opencode/agents'),
      wasmPath: defaultSqlWasmPath(),
      containerDir: join(REPO_ROOT, 'container'),
      env: { ...process.env, ...env.env },
      opencodeExtraEnv: env.env,
      leaseTtlMs: options.leaseTtlMs,
      ...(options.shellWatchdogFloorMs !== undefined ? { shellWatchdogFloorMs: options.shellWatchdogFloorMs } : {}),
      ...(options.toolServerSecret ? { toolServerSecret: options.toolServerSecret } : {}),
    });
    engines.push(engine);
    return engine;
  };
  const engine = await openEngine();
  engine.runtime.subscribe((e) => events.push(e));
  const { projectId } = await engine.runtime.projectOf(repo.dir);
  return {
    repo,
    model,
    env,
    dataDir,
    engine,
    settings,
    events,
    projectId,
    openEngine,
    async close() {
      for (const e of engines.reverse()) await e.close().catch(() => {});
      await model.close();
      await env.cleanup();
      await repo.cleanup();
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    },
  };
}
