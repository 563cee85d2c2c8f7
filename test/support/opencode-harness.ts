/**
 * A real opencode server for one loop, as the runtime will run it, on the scripted model:
 * a git repository with a loop worktree, an isolated opencode HOME, Forge's tool server with a
 * scope for the loop, `startLoopOpencode`, the permission responder, and a record of every
 * normalised event. Tests script the model and drive sessions through `harness.client`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentEvent, AgentClient } from '../../src/core/opencode/agent-client';
import { loadAgentPrompts } from '../../src/core/opencode/forge-config';
import type { ForgeToolBackend } from '../../src/core/opencode/forge-tool-backend';
import { startForgeToolServer, type ForgeToolCallLogEntry, type ForgeToolServer } from '../../src/core/opencode/forge-tool-server';
import { FORGE_AGENT_NAMES } from '../../src/core/opencode/forge-tools';
import { startLoopOpencode, type LoopOpencode } from '../../src/core/opencode/loop-opencode';
import { attachPermissionResponder, type PermissionResponderLogEntry } from '../../src/core/opencode/permission-responder';
import type { LoopRole } from '../../src/core/opencode/permissions';
import type { OpencodeServerEvent, RestartPolicy } from '../../src/core/opencode/server-supervisor';
import { createTestRepository, git, type TestRepository } from './git-repo';
import { writeOpencodeTestEnvironment, MOCK_MODEL_ID, MOCK_PROVIDER_ID, type OpencodeTestEnvironment } from './opencode-test-env';
import { startScriptedModel, type ScriptedModel, type ScriptedModelOptions } from './scripted-model';

/** Folder of the agent prompts shipped with Forge (the build copies them to `dist/agents/`). */
export const AGENT_PROMPTS_DIR = fileURLToPath(new URL('../../src/core/opencode/agents/', import.meta.url));

export interface HarnessOptions {
  backend: ForgeToolBackend;
  loopName?: string;
  repoFiles?: Record<string, string>;
  model?: ScriptedModelOptions;
  /** Extra fields of the mock model in the user's opencode config (e.g. `variants`). */
  modelConfig?: Record<string, unknown>;
  restart?: Partial<RestartPolicy>;
  /** Variables of "the user's environment" for opencode (e.g. OPENCODE_CONFIG). */
  userEnv?: Record<string, string>;
  /** Called with the worktree path before opencode starts (e.g. to create the loop row). */
  beforeStart?: (worktreeDir: string) => Promise<void> | void;
}

export interface OpencodeHarness {
  model: ScriptedModel;
  env: OpencodeTestEnvironment;
  repo: TestRepository;
  worktreeDir: string;
  loopName: string;
  toolServer: ForgeToolServer;
  opencode: LoopOpencode;
  client: AgentClient;
  events: AgentEvent[];
  serverEvents: OpencodeServerEvent[];
  toolCalls: ForgeToolCallLogEntry[];
  permissionReplies: PermissionResponderLogEntry[];
  /** Creates a loop session of `role` with its ruleset, makes it the scope's active session and watches it. */
  startSession(role: LoopRole, title?: string, options?: { withoutRuleset?: boolean }): Promise<string>;
  prompt(sessionId: string, role: LoopRole, text: string): Promise<void>;
  waitForEvent(predicate: (event: AgentEvent) => boolean, timeoutMs?: number, fromIndex?: number): Promise<AgentEvent>;
  waitForServerEvent(predicate: (event: OpencodeServerEvent) => boolean, timeoutMs?: number): Promise<OpencodeServerEvent>;
  cleanup(): Promise<void>;
}

export async function startOpencodeHarness(options: HarnessOptions): Promise<OpencodeHarness> {
  const loopName = options.loopName ?? 'test-loop';
  const cleanups: Array<() => Promise<unknown>> = [];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => undefined);
  };
  try {
    const model = await startScriptedModel(options.model);
    cleanups.push(() => model.close());
    const env = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL, ...(options.modelConfig ? { modelConfig: options.modelConfig } : {}) });
    cleanups.push(() => env.cleanup());
    const repo = await createTestRepository(options.repoFiles);
    cleanups.push(() => repo.cleanup());
    const worktreeParent = await mkdtemp(join(tmpdir(), 'forge-worktrees-'));
    cleanups.push(() => rm(worktreeParent, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }));
    const worktreeDir = join(worktreeParent, loopName);
    await git(repo.dir, 'worktree', 'add', '-q', '-b', `forge/${loopName}`, worktreeDir);
    await options.beforeStart?.(worktreeDir);

    const toolCalls: ForgeToolCallLogEntry[] = [];
    const toolServer = await startForgeToolServer({ backend: options.backend, onCall: (entry) => toolCalls.push(entry) });
    cleanups.push(() => toolServer.close());
    const serverEvents: OpencodeServerEvent[] = [];
    const opencode = await startLoopOpencode({
      loopName,
      worktreeDir,
      // As a loop's: the user's checkout, whose project files a worktree may hold unchanged.
      userCheckoutDir: repo.dir,
      toolServer,
      prompts: await loadAgentPrompts(AGENT_PROMPTS_DIR),
      extraEnv: { ...env.env, ...(options.userEnv ?? {}) },
      restart: options.restart,
      onServerEvent: (event) => serverEvents.push(event),
    });
    cleanups.push(() => opencode.stop());

    const events: AgentEvent[] = [];
    const roles = new Map<string, LoopRole>();
    const client = opencode.client;
    client.subscribe((event) => events.push(event));
    const permissionReplies: PermissionResponderLogEntry[] = [];
    attachPermissionResponder({
      client,
      resolve: (root) => {
        const role = roles.get(root);
        return role ? opencode.permissionOptions(role) : undefined;
      },
      log: (entry) => permissionReplies.push(entry),
    });
    await waitFor(events, (e) => e.type === 'stream.connected', 60_000, 0);

    return {
      model,
      env,
      repo,
      worktreeDir,
      loopName,
      toolServer,
      opencode,
      client,
      events,
      serverEvents,
      toolCalls,
      permissionReplies,
      async startSession(role, title, sessionOptions) {
        const { id } = await client.createSession({
          title: title ?? `${loopName} ${role}`,
          agent: FORGE_AGENT_NAMES[role],
          model: { providerId: MOCK_PROVIDER_ID, modelId: MOCK_MODEL_ID },
          ...(sessionOptions?.withoutRuleset ? {} : { permission: opencode.permissionRuleset(role) }),
        });
        roles.set(id, role);
        opencode.scope.setActiveSession({ sessionId: id, role });
        client.watchSession(id);
        return id;
      },
      async prompt(sessionId, role, text) {
        await client.promptAsync({ sessionId, text, agent: FORGE_AGENT_NAMES[role] });
      },
      waitForEvent: (predicate, timeoutMs = 120_000, fromIndex = 0) => waitFor(events, predicate, timeoutMs, fromIndex),
      waitForServerEvent: (predicate, timeoutMs = 120_000) => waitFor(serverEvents, predicate, timeoutMs, 0),
      cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Polls a growing array for an element; the timeout only bounds a hung test, it asserts nothing. */
export async function waitFor<T>(list: T[], predicate: (item: T) => boolean, timeoutMs: number, fromIndex: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = list.slice(fromIndex).find(predicate);
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`Nothing matching arrived within ${timeoutMs} ms (${list.length} items so far).`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
