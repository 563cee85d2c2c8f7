import { ProcessSpawnError, runProcess } from '../process/process-runner';
import { WorkspaceError } from './workspace-error';
import { hardenedGitArgv, hardenedGitEnv, type HardenedGitTarget } from './git-hardening';

export interface GitResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface GitRunOptions {
  /** `-c key=value` settings for this one command (e.g. a fallback identity). */
  config?: string[];
}

/**
 * Runs git as a child process and reports every outcome, including the exit code. Not through
 * simple-git (used here before): it resolved a command that printed nothing only 50 ms after the
 * command had exited (its completion detection), which cost every clean `git status`, every
 * empty `for-each-ref` and every quiet probe of a loop 50 ms; and it resolved a non-zero exit with
 * an empty stderr as success.
 */
export interface GitRunner {
  /** Runs git in `cwd`; never rejects on a non-zero exit. */
  run(cwd: string, args: string[], options?: GitRunOptions): Promise<GitResult>;
  /** Runs git in `cwd`; rejects with `git_failed` on a non-zero exit. Returns stdout. */
  ok(cwd: string, args: string[], options?: GitRunOptions): Promise<string>;
}

export interface GitRunnerOptions {
  /** Environment for every git process; defaults to this process's environment. */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * The repository Forge made for a folder that is a loop's worktree (hostile input, issue 26),
   * or null for a folder of the user's. For a worktree every command names that repository
   * explicitly and runs with git's command-running settings off (git-hardening.ts); rejects when
   * the folder is a worktree whose repository cannot be established.
   */
  worktreeTarget?: (cwd: string) => Promise<HardenedGitTarget | null>;
}

/**
 * Variables that point git at a different repository or index than the folder
 * a command runs in (set, e.g., when Forge is started from a git hook). Forge
 * always means the folder it names, so they are dropped.
 */
const REPOSITORY_SELECTING_VARIABLES = new Set([
  'GIT_DIR',
  'GIT_WORK_TREE',
  'GIT_INDEX_FILE',
  'GIT_COMMON_DIR',
  'GIT_OBJECT_DIRECTORY',
  'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_NAMESPACE',
  'GIT_PREFIX',
]);

export function createGitRunner(options: GitRunnerOptions = {}): GitRunner {
  // Messages are matched and shown to users: keep them in English, and never
  // let git wait for a password or an editor.
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(options.env ?? process.env)) {
    if (value !== undefined && !REPOSITORY_SELECTING_VARIABLES.has(key)) env[key] = value;
  }
  Object.assign(env, { LC_ALL: 'C', LANGUAGE: 'C', GIT_TERMINAL_PROMPT: '0', GIT_EDITOR: 'true', GIT_MERGE_AUTOEDIT: 'no' });

  function spawnFailure(cwd: string, args: string[], error: unknown): WorkspaceError {
    const kind = error instanceof ProcessSpawnError ? error.kind : 'failed';
    const message = error instanceof Error ? error.message : String(error);
    // spawn says ENOENT both for a missing git and for a missing working folder; the runner tells them apart.
    if (kind === 'cwd-not-found') {
      return new WorkspaceError('path_not_found', `The folder ${cwd} does not exist. Check the path and try again.`, { cause: error });
    }
    if (kind === 'program-not-found') {
      return new WorkspaceError('git_not_found', 'Forge could not run git: it is not installed or not on PATH. Install git and try again.', { cause: error });
    }
    return new WorkspaceError('git_failed', `Forge could not run git ${args.join(' ')} in ${cwd}: ${message}`, { cause: error });
  }

  const worktreeEnv = hardenedGitEnv(env);

  async function run(cwd: string, args: string[], runOptions: GitRunOptions = {}): Promise<GitResult> {
    const target = options.worktreeTarget ? await options.worktreeTarget(cwd) : null;
    // Each `-c key=value` goes before the command, as git wants it.
    const argv = target ? hardenedGitArgv(target, args, runOptions.config) : [...(runOptions.config ?? []).flatMap((setting) => ['-c', setting]), ...args];
    return spawnGit(cwd, args, argv, target ? worktreeEnv : env);
  }

  async function spawnGit(cwd: string, args: string[], argv: string[], childEnv: Record<string, string>): Promise<GitResult> {
    let result;
    try {
      // No shell: every argument reaches git as it is. No stdin: git never waits for input.
      // No output cap: a diff or a log is returned whole.
      result = await runProcess('git', argv, { cwd, env: childEnv, stdin: 'ignore', maxOutputBytes: Number.POSITIVE_INFINITY });
    } catch (error) {
      throw spawnFailure(cwd, args, error);
    }
    const errText = result.stderr;
    return {
      exitCode: result.exitCode ?? 128,
      stdout: result.stdout,
      stderr: result.exitCode === null ? `${errText}${errText && !errText.endsWith('\n') ? '\n' : ''}git was stopped by ${result.signal ?? 'a signal'}` : errText,
    };
  }

  async function ok(cwd: string, args: string[], runOptions?: GitRunOptions): Promise<string> {
    const result = await run(cwd, args, runOptions);
    if (result.exitCode !== 0) {
      const detail = (result.stderr.trim() || result.stdout.trim() || `exit code ${result.exitCode}`).replace(/\s+/g, ' ');
      throw new WorkspaceError('git_failed', `git ${args.join(' ')} failed in ${cwd}: ${detail}`);
    }
    return result.stdout;
  }

  return { run, ok };
}
