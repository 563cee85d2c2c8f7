/**
 * Accepting a loop's work (issue 29 item 4): its branch merged into the base branch it started
 * from through the one merge Forge has (mergeIntoBase: fast-forward when possible, else a merge
 * commit or a squash, refused when the base's checkout is dirty or the merge conflicts), or
 * pushed to a remote with the user's own git. Each accept is recorded. Shared by `forge accept`
 * and *Forge: Accept Loop*.
 */
import { runProcess } from '../process/process-runner';
import { userInfo } from 'node:os';
import type { ForgeRepositories, LoopAcceptRow } from '../storage/repositories';
import type { LoopRow } from '../storage/repositories/loops-repository';
import type { WorktreeService } from '../workspace/worktree-service';
import { acceptHowOf, compareUrl, type AcceptStrategy } from './accept-decisions';

export interface AcceptDeps {
  repos: Pick<ForgeRepositories, 'accepts'>;
  worktrees: Pick<WorktreeService, 'mergeIntoBase' | 'removeWorktree' | 'deleteLoopBranch'>;
  /** Who accepts: the OS user. */
  user: string;
}

export type AcceptOutcome =
  | { kind: 'accepted'; message: string; record: LoopAcceptRow }
  | { kind: 'refused'; message: string }
  /** Its work is in the base already (accepted before, since it last ran): nothing changed. */
  | { kind: 'already'; message: string };

/** Why `loop` cannot be accepted now, or null. */
export function acceptRefusal(loop: Pick<LoopRow, 'name' | 'status' | 'branch' | 'repoDir'>): string | null {
  if (loop.status === 'awaiting_review') return `Loop "${loop.name}" awaits your review: resolve or dismiss its open comments (forge review ${loop.name}), or send them back (--send), before accepting it.`;
  if (loop.status === 'running') return `Loop "${loop.name}" is still running; only a loop that is not running can be accepted. Wait for it to end, or cancel it (forge cancel ${loop.name}).`;
  if (!loop.branch || !loop.repoDir) return `Loop "${loop.name}" has no branch to accept.`;
  return null;
}

/** Merges the loop's branch into its base branch; nothing changes when refused. */
export async function acceptLoop(deps: AcceptDeps, loop: LoopRow, strategy: AcceptStrategy): Promise<AcceptOutcome> {
  const refusal = acceptRefusal(loop);
  if (refusal) return { kind: 'refused', message: refusal };
  const previous = deps.repos.accepts.listByLoop(loop.projectId, loop.name).filter((a) => a.how !== 'push').at(-1);
  if (previous && previous.at >= (loop.endedAt ?? loop.updatedAt)) {
    return { kind: 'already', message: `Loop "${loop.name}" was accepted already (${previous.how} into ${previous.intoBranch}${previous.commit ? `, ${previous.commit.slice(0, 12)}` : ''}); nothing to merge.` };
  }
  const result = await deps.worktrees.mergeIntoBase(
    { repoDir: loop.repoDir!, branch: loop.branch!, baseBranch: loop.baseBranch, loopName: loop.name },
    'merge',
    { squash: strategy === 'squash', ...(strategy === 'squash' ? { message: `forge: ${loop.name} (squashed ${loop.branch})` } : {}) },
  );
  const how = acceptHowOf(result, strategy);
  if (how === null) return { kind: result.kind === 'kept' && result.message.includes('already contains') ? 'already' : 'refused', message: result.message };
  const record = deps.repos.accepts.append(loop.projectId, { loopName: loop.name, acceptedBy: deps.user, how, intoBranch: loop.baseBranch, remote: null, commit: result.commit ?? null });
  return { kind: 'accepted', message: result.message, record };
}

/** Removes the loop's worktree (when it still exists), then its branch. */
export async function removeAcceptedLoop(deps: Pick<AcceptDeps, 'worktrees'>, loop: Pick<LoopRow, 'worktreeDir' | 'repoDir' | 'branch'>): Promise<void> {
  if (loop.worktreeDir) await deps.worktrees.removeWorktree(loop.worktreeDir);
  await deps.worktrees.deleteLoopBranch(loop.repoDir!, loop.branch!);
}

/** The command that removes what `removeAcceptedLoop` removes, for the user to run. */
export function removeCommandOf(loop: Pick<LoopRow, 'name'>): string {
  return `forge accept ${loop.name} --remove`;
}

/** The user's own git (their configuration, credentials and hooks): never Forge's hardened runner. */
export type UserGit = (cwd: string, args: string[]) => Promise<{ exitCode: number; stdout: string; stderr: string }>;

/** `git` as the user runs it, with the environment given (VS Code sets GIT_TERMINAL_PROMPT=0: no terminal to ask in). */
export function userGit(env: NodeJS.ProcessEnv = process.env): UserGit {
  return async (cwd, args) => {
    try {
      const r = await runProcess('git', args, { cwd, env, stdin: 'ignore' });
      return { exitCode: r.exitCode ?? 128, stdout: r.stdout, stderr: r.stderr };
    } catch (error) {
      // git could not start (not installed, or the folder is gone): as a shell would say it.
      return { exitCode: 127, stdout: '', stderr: (error as Error).message };
    }
  };
}

/**
 * Pushes the loop's branch to `remote` from the host with the user's git, never from the
 * agent's sandbox. The result names the compare / pull-request page on a known host.
 */
export async function pushLoop(deps: Pick<AcceptDeps, 'repos' | 'user'>, git: UserGit, loop: LoopRow, remote: string): Promise<AcceptOutcome & { url?: string | null }> {
  const refusal = acceptRefusal(loop);
  if (refusal) return { kind: 'refused', message: refusal };
  if (!/^[A-Za-z0-9][\w.\-/]*$/.test(remote)) return { kind: 'refused', message: `"${remote}" is not a remote name; "git remote" lists them.` };
  const branch = loop.branch!;
  const remoteUrl = await git(loop.repoDir!, ['remote', 'get-url', '--', remote]);
  if (remoteUrl.exitCode !== 0) return { kind: 'refused', message: `${loop.repoDir} has no remote "${remote}"; "git remote -v" lists them (git remote add ${remote} URL adds one).` };
  const tip = await git(loop.repoDir!, ['rev-parse', '--verify', '-q', `refs/heads/${branch}^{commit}`]);
  if (tip.exitCode !== 0) return { kind: 'refused', message: `The loop branch ${branch} no longer exists in ${loop.repoDir}; there is nothing to push.` };
  const pushed = await git(loop.repoDir!, ['push', '--', remote, `refs/heads/${branch}:refs/heads/${branch}`]);
  if (pushed.exitCode !== 0) {
    return { kind: 'refused', message: `git push ${remote} ${branch} failed: ${(pushed.stderr.trim() || pushed.stdout.trim()).replace(/\s+/g, ' ')}. Nothing was recorded; fix that and run it again.` };
  }
  const commit = tip.stdout.trim();
  const url = compareUrl(remoteUrl.stdout.trim(), branch, loop.baseBranch);
  const record = deps.repos.accepts.append(loop.projectId, { loopName: loop.name, acceptedBy: deps.user, how: 'push', intoBranch: null, remote, commit });
  return { kind: 'accepted', message: `Pushed ${branch} to ${remote} (${commit.slice(0, 12)}).${url ? ` Open a pull request: ${url}` : ''}`, record, url };
}

/** Who accepts: the OS user (USER when the account has no name, as in some containers). */
export function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return process.env.USER ?? process.env.USERNAME ?? 'unknown';
  }
}
