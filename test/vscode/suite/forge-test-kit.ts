// Shared by Forge's surface tests (not a test file itself): the extension's API, polling
// helpers, and one scripted-model environment per extension host (kept on globalThis,
// since each test file is bundled on its own).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { ForgeExtensionApi } from '../../../src/vscode/api';
import { writeOpencodeTestEnvironment, MOCK_MODEL, type OpencodeTestEnvironment } from '../../support/opencode-test-env';
import { startScriptedModel, type ScriptedModel, type ScriptedRequest } from '../../support/scripted-model';
import { harnessInfo } from './support/harness';

export { MOCK_MODEL };

export async function forgeApi(): Promise<ForgeExtensionApi> {
  const extension = vscode.extensions.getExtension<ForgeExtensionApi>(harnessInfo().extensionId);
  if (!extension) throw new Error(`Forge (${harnessInfo().extensionId}) is not loaded in this extension host.`);
  return extension.isActive ? extension.exports : extension.activate();
}

/** Names of the tools the model has called so far in the conversation of `request`. */
export function calledTools(request: ScriptedRequest): string[] {
  return request.messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.function.name) : []));
}

/** Polls `probe` until it returns a value that is not undefined/false; fails with `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 180_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface ForgeTestEnvironment {
  readonly model: ScriptedModel;
  readonly opencode: OpencodeTestEnvironment;
  readonly dataDir: string;
}

const KEY = Symbol.for('forge.vscode-tests.environment');
type Holder = { [KEY]?: Promise<ForgeTestEnvironment> };

/**
 * The scripted model on 127.0.0.1 inside this extension host, an isolated opencode
 * HOME/XDG whose default model is `mock/fake-1`, and a fresh Forge data folder; handed to
 * the extension before its engine starts. Torn down by `disposeForgeTestEnvironment`.
 */
export function forgeTestEnvironment(): Promise<ForgeTestEnvironment> {
  const holder = globalThis as Holder;
  holder[KEY] ??= (async () => {
    const model = await startScriptedModel();
    const opencode = await writeOpencodeTestEnvironment({ modelBaseURL: model.baseURL });
    // A run whose windows share one data folder names it (runs.mjs); it is the run's to remove.
    const dataDir = process.env.FORGE_DATA_DIR || (await mkdtemp(join(tmpdir(), 'forge-vscode-data-')));
    const api = await forgeApi();
    await api.setTestEnvironment({ ...opencode.env, FORGE_DATA_DIR: dataDir });
    return { model, opencode, dataDir };
  })();
  return holder[KEY];
}

export async function disposeForgeTestEnvironment(): Promise<void> {
  const holder = globalThis as Holder;
  const env = await holder[KEY];
  if (!env) return;
  delete holder[KEY];
  // Loops this window drives end (shutdown) and their opencode servers stop with the engine.
  await (await forgeApi()).setTestEnvironment({});
  await env.model.close();
  await env.opencode.cleanup();
  if (env.dataDir !== process.env.FORGE_DATA_DIR) await rm(env.dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
}

/** Prints a failed test's error at once (mocha's spec reporter prints them only at the end of a long run). */
export function reportFailuresEarly(): void {
  afterEach(function () {
    const test = this.currentTest;
    if (test?.state === 'failed') console.log(`[forge tests] FAILED "${test.title}": ${test.err?.stack ?? test.err?.message ?? 'unknown error'}`);
  });
}
