/**
 * The pure parts of accepting a loop's work (issue 29 item 4): which strategy the flags and
 * the setting choose, how a merge result is recorded, and the compare / pull-request URL of a
 * known git host for a pushed branch. No I/O.
 */
import type { MergeResult } from '../workspace/worktree-types';
import type { LoopAcceptHow, LoopAcceptRow } from '../storage/repositories/loop-accepts-repository';

/** When the base cannot be fast-forwarded: a merge commit, or one squashed commit. */
export type AcceptStrategy = 'merge-commit' | 'squash';
export const ACCEPT_STRATEGIES: readonly AcceptStrategy[] = ['merge-commit', 'squash'];

/** The flags win over the setting; both flags at once is bad input (null). */
export function chooseAcceptStrategy(setting: AcceptStrategy, flags: { squash?: boolean; mergeCommit?: boolean }): AcceptStrategy | null {
  if (flags.squash && flags.mergeCommit) return null;
  if (flags.squash) return 'squash';
  if (flags.mergeCommit) return 'merge-commit';
  return setting;
}

/** What an accept that changed the base records as its `how`; null when nothing changed. */
export function acceptHowOf(result: Pick<MergeResult, 'kind'>, strategy: AcceptStrategy): LoopAcceptHow | null {
  if (result.kind === 'fast-forwarded') return 'fast-forward';
  if (result.kind === 'merged') return strategy === 'squash' ? 'squash' : 'merge';
  return null;
}

const KNOWN_HOSTS = ['github.com', 'gitlab.com', 'bitbucket.org'] as const;

/** `owner/repo` (gitlab: `group/sub/repo`) and host of a remote URL on a known host, else null. */
export function knownHostRepository(remoteUrl: string): { host: (typeof KNOWN_HOSTS)[number]; path: string } | null {
  const url = remoteUrl.trim();
  let host: string;
  let repoPath: string;
  const scp = /^(?:[^@/\s]+@)?([^:/\s]+):(?!\/)(.+)$/.exec(url);
  if (/^(https?|ssh|git):\/\//i.test(url)) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return null;
    }
    host = parsed.hostname.toLowerCase();
    repoPath = decodeURIComponent(parsed.pathname);
  } else if (scp) {
    host = scp[1]!.toLowerCase();
    repoPath = scp[2]!;
  } else {
    return null;
  }
  const known = KNOWN_HOSTS.find((h) => h === host || host === `www.${h}`);
  if (!known) return null;
  const parts = repoPath.replace(/\.git\/?$/, '').replace(/\/+$/, '').split('/').filter(Boolean);
  if (parts.length < 2 || (known !== 'gitlab.com' && parts.length !== 2)) return null;
  if (parts.some((p) => p === '.' || p === '..')) return null;
  return { host: known, path: parts.join('/') };
}

const encodePath = (ref: string) => ref.split('/').map(encodeURIComponent).join('/');

/**
 * The page where the user opens a pull (merge) request of `branch` against `base` on a known
 * host, or null for any other remote (a file path, a self-hosted server).
 */
export function compareUrl(remoteUrl: string, branch: string, base: string | null): string | null {
  const repo = knownHostRepository(remoteUrl);
  if (!repo) return null;
  const root = `https://${repo.host}/${encodePath(repo.path)}`;
  switch (repo.host) {
    case 'github.com':
      return base ? `${root}/compare/${encodePath(base)}...${encodePath(branch)}?expand=1` : `${root}/pull/new/${encodePath(branch)}`;
    case 'gitlab.com':
      return `${root}/-/merge_requests/new?merge_request%5Bsource_branch%5D=${encodeURIComponent(branch)}${base ? `&merge_request%5Btarget_branch%5D=${encodeURIComponent(base)}` : ''}`;
    case 'bitbucket.org':
      return `${root}/pull-requests/new?source=${encodeURIComponent(branch)}${base ? `&dest=${encodeURIComponent(base)}` : ''}`;
  }
}

/** One line of an accept record, for `forge status NAME` and the dashboard. */
export function describeAccept(a: LoopAcceptRow): string {
  const when = new Date(a.at).toISOString().replace('T', ' ').slice(0, 16);
  const where = a.how === 'push' ? `pushed to ${a.remote}` : `${a.how} into ${a.intoBranch}`;
  return `${where}${a.commit ? ` (${a.commit.slice(0, 12)})` : ''} by ${a.acceptedBy}, ${when} UTC`;
}
