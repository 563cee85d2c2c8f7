/** A real git repository in a temporary folder, with one commit, for tests. */
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const TEST_GIT_ENV: Record<string, string> = {
  GIT_AUTHOR_NAME: 'Forge Test',
  GIT_AUTHOR_EMAIL: 'forge-test@example.invalid',
  GIT_COMMITTER_NAME: 'Forge Test',
  GIT_COMMITTER_EMAIL: 'forge-test@example.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
};

export interface TestRepository {
  dir: string;
  git(...args: string[]): Promise<string>;
  cleanup(): Promise<void>;
}

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, { cwd, env: { ...process.env, ...TEST_GIT_ENV } });
  return stdout;
}

/** `files` are written and committed as the first commit (a README by default). */
export async function createTestRepository(files: Record<string, string> = { 'README.md': '# test\n' }): Promise<TestRepository> {
  const dir = await mkdtemp(join(tmpdir(), 'forge-repo-'));
  await git(dir, 'init', '-q', '-b', 'main');
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  await git(dir, 'add', '-A');
  await git(dir, 'commit', '-q', '-m', 'initial');
  return {
    dir,
    git: (...args) => git(dir, ...args),
    cleanup: () => rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }),
  };
}
