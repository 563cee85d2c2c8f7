import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createWorktreeService, type WorkspaceLog, type WorktreeService } from '../../../src/core/workspace';

/**
 * A temporary folder with its own git configuration: HOME, the global config
 * file and XDG folders point inside it and the system config is off, so the
 * machine's identity and settings never leak into a test.
 */
export interface GitSandbox {
  root: string;
  env: Record<string, string>;
  /** Runs real git in `cwd` with the sandbox's environment; returns trimmed stdout. */
  git(cwd: string, ...args: string[]): string;
  /** Like `git` but returns the exit code instead of throwing. */
  gitStatus(cwd: string, ...args: string[]): number;
  /** Creates `<root>/<name>` as a repository on `main`, with one commit unless `commit: false`. */
  initRepo(name: string, options?: { commit?: boolean; files?: Record<string, string> }): string;
  /** Writes files (creating folders) under `dir`. */
  write(dir: string, files: Record<string, string>): void;
  /** Writes files and commits them with a fixture identity; returns the commit sha. */
  commit(dir: string, files: Record<string, string>, message?: string): string;
  setGlobalIdentity(name: string, email: string): void;
  /** A worktree service on `<root>/data`, logging into `logLines`. */
  service(options?: { dataDir?: string }): WorktreeService;
  logLines: string[];
  cleanup(): void;
}

const FIXTURE_IDENTITY = ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.com'];

export function createGitSandbox(): GitSandbox {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'forge-workspace-')));
  const home = path.join(root, 'home');
  mkdirSync(home, { recursive: true });
  const globalConfig = path.join(home, '.gitconfig');
  writeFileSync(globalConfig, '');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    GIT_CONFIG_GLOBAL: globalConfig,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CEILING_DIRECTORIES: root,
    // No hostname-derived identity either: without user.email, git must fail rather than guess.
    EMAIL: '',
  };
  const logLines: string[] = [];
  const log: WorkspaceLog = {
    debug: (message) => logLines.push(`debug ${message}`),
    info: (message) => logLines.push(`info ${message}`),
    warn: (message) => logLines.push(`warn ${message}`),
  };

  const git = (cwd: string, ...args: string[]): string =>
    execFileSync('git', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

  const gitStatus = (cwd: string, ...args: string[]): number => {
    try {
      execFileSync('git', args, { cwd, env, stdio: 'ignore' });
      return 0;
    } catch (error) {
      return (error as { status?: number }).status ?? -1;
    }
  };

  const write = (dir: string, files: Record<string, string>): void => {
    for (const [file, content] of Object.entries(files)) {
      const target = path.join(dir, file);
      mkdirSync(path.dirname(target), { recursive: true });
      writeFileSync(target, content);
    }
  };

  const commit = (dir: string, files: Record<string, string>, message = 'fixture commit'): string => {
    write(dir, files);
    git(dir, 'add', '-A');
    git(dir, ...FIXTURE_IDENTITY, 'commit', '-q', '--allow-empty', '-m', message);
    return git(dir, 'rev-parse', 'HEAD');
  };

  return {
    root,
    env,
    git,
    gitStatus,
    write,
    commit,
    logLines,
    initRepo(name, options = {}) {
      const dir = path.join(root, name);
      mkdirSync(dir, { recursive: true });
      git(dir, 'init', '-q', '-b', 'main');
      if (options.commit !== false) commit(dir, options.files ?? { 'README.md': '# fixture\n' }, 'initial commit');
      return dir;
    },
    setGlobalIdentity(name, email) {
      git(root, 'config', '--global', 'user.name', name);
      git(root, 'config', '--global', 'user.email', email);
    },
    service(options = {}) {
      return createWorktreeService({ dataDir: options.dataDir ?? path.join(root, 'data'), log, gitEnv: env });
    },
    cleanup() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Awaits `promise` and returns the error it rejects with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected the promise to reject, but it resolved');
}
