/**
 * What a test of the real `forge` CLI running loops needs, for one `describe` block: the
 * scripted model, an opencode test environment pointing at it, a test repository with `files`,
 * a scratch folder holding the data folder (`<work>/data`), and a CLI runner on them. Set up in
 * `before`, torn down in `after`; read the fields inside tests and hooks only.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliRunner, ensureCliBuilt, type CliRunner } from './cli-runner';
import { createTestRepository, type TestRepository } from './git-repo';
import { REPO_ROOT } from './loop-harness';
import { writeOpencodeTestEnvironment, type OpencodeTestEnvironment, type OpencodeTestEnvironmentOptions } from './opencode-test-env';
import { startScriptedModel, type ScriptedModel } from './scripted-model';

export interface CliLoopWorld {
  readonly model: ScriptedModel;
  readonly env: OpencodeTestEnvironment;
  readonly repo: TestRepository;
  /** Scratch folder; the data folder is `<work>/data`. */
  readonly work: string;
  readonly runner: CliRunner;
}

export interface CliLoopWorldOptions {
  /** More of the opencode environment (`extraUserConfig: { model: undefined }`: no default model, so the embedded model runs). */
  environment?: Omit<OpencodeTestEnvironmentOptions, 'modelBaseURL'>;
}

export function useCliLoopWorld(scratchPrefix: string, files: Record<string, string>, options: CliLoopWorldOptions = {}): CliLoopWorld {
  const world: Partial<{ -readonly [K in keyof CliLoopWorld]: CliLoopWorld[K] }> = {};
  before(async () => {
    const cliPath = ensureCliBuilt(REPO_ROOT);
    world.model = await startScriptedModel();
    world.env = await writeOpencodeTestEnvironment({ ...options.environment, modelBaseURL: world.model.baseURL });
    world.repo = await createTestRepository(files);
    world.work = await mkdtemp(join(tmpdir(), scratchPrefix));
    world.runner = createCliRunner({ cliPath, env: world.env.env, commonArgs: ['--data-dir', join(world.work, 'data'), '--repo', world.repo.dir] });
  });
  after(async () => {
    await world.runner?.killAll();
    await world.model?.close();
    await world.env?.cleanup();
    await world.repo?.cleanup();
    if (world.work) await rm(world.work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  });
  return world as CliLoopWorld;
}
