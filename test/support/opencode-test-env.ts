/**
 * An isolated opencode "machine" for a test: HOME and XDG folders in a temporary directory, so
 * nothing the test's opencode reads or writes touches the real user's configuration, and a
 * global opencode config (`$XDG_CONFIG_HOME/opencode/opencode.json`) whose provider `mock`
 * points at a scripted model. That file plays the role of the user's own configuration: Forge
 * layers its configuration on top without touching it.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seedOpencodeConfigDependencies } from './opencode-config-seed';

export const MOCK_PROVIDER_ID = 'mock';
export const MOCK_MODEL_ID = 'fake-1';
export const MOCK_MODEL = `${MOCK_PROVIDER_ID}/${MOCK_MODEL_ID}`;

export interface MockModelCost {
  /** USD per million input tokens. */
  input: number;
  output: number;
  cache_read?: number;
  cache_write?: number;
}

export interface OpencodeTestEnvironmentOptions {
  /** Base URL of the scripted model, e.g. `http://127.0.0.1:PORT/v1`. */
  modelBaseURL: string;
  /** Folder to create the environment in (a fresh temp folder by default). */
  root?: string;
  cost?: MockModelCost;
  /** Extra fields merged into the user's global opencode config. */
  extraUserConfig?: Record<string, unknown>;
  /** Extra fields of the mock model's entry (e.g. `reasoning`, `variants`). */
  modelConfig?: Record<string, unknown>;
  /** More models of the mock provider (ids; same price and fields as `fake-1`), e.g. to switch models. */
  extraModels?: string[];
}

export interface OpencodeTestEnvironment {
  root: string;
  /** HOME and XDG_* variables to hand to opencode (merge over a copy of `process.env`). */
  env: Record<string, string>;
  userConfigPath: string;
  userConfig: Record<string, unknown>;
  cleanup(): Promise<void>;
}

export function mockProviderConfig(modelBaseURL: string, cost: MockModelCost = { input: 1, output: 2 }, modelConfig: Record<string, unknown> = {}, extraModels: string[] = []): Record<string, unknown> {
  const entry = (name: string) => ({ name, tool_call: true, cost, limit: { context: 100_000, output: 4096 }, ...modelConfig });
  return {
    [MOCK_PROVIDER_ID]: {
      npm: '@ai-sdk/openai-compatible',
      name: 'Mock',
      options: { baseURL: modelBaseURL, apiKey: 'sk-fake' },
      models: Object.fromEntries([[MOCK_MODEL_ID, entry('Fake 1')], ...extraModels.map((id) => [id, entry(id)])]),
    },
  };
}

export async function writeOpencodeTestEnvironment(options: OpencodeTestEnvironmentOptions): Promise<OpencodeTestEnvironment> {
  const root = options.root ?? (await mkdtemp(join(tmpdir(), 'forge-oc-env-')));
  const dirs = {
    HOME: join(root, 'home'),
    XDG_CONFIG_HOME: join(root, 'config'),
    XDG_DATA_HOME: join(root, 'data'),
    XDG_CACHE_HOME: join(root, 'cache'),
    XDG_STATE_HOME: join(root, 'state'),
  };
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true });
  await mkdir(join(dirs.XDG_CONFIG_HOME, 'opencode'), { recursive: true });
  await seedOpencodeConfigDependencies(join(dirs.XDG_CONFIG_HOME, 'opencode'));
  const userConfig: Record<string, unknown> = {
    $schema: 'https://opencode.ai/config.json',
    model: MOCK_MODEL,
    small_model: MOCK_MODEL,
    autoupdate: false,
    share: 'disabled',
    provider: mockProviderConfig(options.modelBaseURL, options.cost, options.modelConfig, options.extraModels),
    ...(options.extraUserConfig ?? {}),
  };
  const userConfigPath = join(dirs.XDG_CONFIG_HOME, 'opencode', 'opencode.json');
  await writeFile(userConfigPath, JSON.stringify(userConfig, null, 2));
  return {
    root,
    env: { ...dirs },
    userConfigPath,
    userConfig,
    cleanup: () => rm(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }),
  };
}
