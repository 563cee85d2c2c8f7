import { existsSync } from 'node:fs';
import { simpleGit } from 'simple-git';
import { WorkspaceError } from './workspace-error';

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
 * Thin adapter over simple-git that reports every outcome, including the exit
 * code. simple-git on its own resolves a non-zero exit with an empty stderr
 * (`merge-base --is-ancestor`, `rev-parse --verify -q`) as success, so the exit
 * code is captured through its error-detection hook.
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

/**
 * simple-git screens arguments and the environment for settings that make git
 * run other programs, to protect callers that pass untrusted text. Forge builds
 * every argument itself (loop names are validated slugs, refs are checked not to
 * start with "-") and passes the user's own environment, which legitimately
 * carries GIT_CONFIG_GLOBAL, GIT_ASKPASS (VS Code sets it), GIT_PAGER, hooks
 * paths and the like; screening it would make Forge fail where plain git works.
 */
const TRUSTED_ENVIRONMENT = {
  allowUnsafeAlias: true,
  allowUnsafeAskPass: true,
  allowUnsafeConfigPaths: true,
  allowUnsafeConfigEnvCount: true,
  allowUnsafeCredentialHelper: true,
  allowUnsafeEditor: true,
  allowUnsafeMergeDriver: true,
  allowUnsafePager: true,
  allowUnsafeSshCommand: true,
  allowUnsafeGitProxy: true,
  allowUnsafeHooksPath: true,
  allowUnsafeDiffExternal: true,
  allowUnsafeDiffTextConv: true,
  allowUnsafeFilter: true,
  allowUnsafeFsMonitor: true,
  allowUnsafeGpgProgram: true,
  allowUnsafeTemplateDir: true,
} as const;

export function createGitRunner(options: GitRunnerOptions = {}): GitRunner {
  // Messages are matched and shown to users: keep them in English, and never
  // let git wait for a password or an editor.
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(options.env ?? process.env)) {
    if (value !== undefined && !REPOSITORY_SELECTING_VARIABLES.has(key)) env[key] = value;
  }
  Object.assign(env, { LC_ALL: 'C', LANGUAGE: 'C', GIT_TERMINAL_PROMPT: '0', GIT_EDITOR: 'true', GIT_MERGE_AUTOEDIT: 'no' });

  async function run(cwd: string, args: string[], runOptions: GitRunOptions = {}): Promise<GitResult> {
    let outcome: GitResult | undefined;
    try {
      const git = simpleGit({
        baseDir: cwd,
        trimmed: false,
        config: runOptions.config ?? [],
        unsafe: TRUSTED_ENVIRONMENT,
        errors: (error, result) => {
          outcome = {
            exitCode: result.exitCode,
            stdout: Buffer.concat(result.stdOut).toString('utf8'),
            stderr: Buffer.concat(result.stdErr).toString('utf8'),
          };
          return error;
        },
      }).env(env);
      await git.raw(args);
    } catch (error) {
      if (outcome === undefined) {
        const message = error instanceof Error ? error.message : String(error);
        if (/directory that does not exist/.test(message)) {
          throw new WorkspaceError('path_not_found', `The folder ${cwd} does not exist. Check the path and try again.`, { cause: error });
        }
        if (/ENOENT/.test(message) && !existsSync(cwd)) {
          throw new WorkspaceError('path_not_found', `The folder ${cwd} does not exist. Check the path and try again.`, { cause: error });
        }
        if (/ENOENT/.test(message)) {
          throw new WorkspaceError('git_not_found', 'Forge could not run git: it is not installed or not on PATH. Install git and try again.', { cause: error });
        }
        throw new WorkspaceError('git_failed', `Forge could not run git ${args.join(' ')} in ${cwd}: ${message}`, { cause: error });
      }
    }
    if (outcome === undefined) {
      throw new WorkspaceError('git_failed', `Forge could not read the result of git ${args.join(' ')} in ${cwd}.`);
    }
    return outcome;
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
