import { pushGuardEnv } from './push-guard';
/**
 * The environment every sandboxed command starts from, whatever the driver. The host's
 * environment never leaks in: it holds the opencode server's secrets and the model
 * provider's keys.
 */

/** HOME inside the sandbox: a scratch folder on the sandbox's private /tmp. */
export const SANDBOX_HOME = '/tmp';

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export const SANDBOX_BASE_ENV: Readonly<Record<string, string>> = {
  HOME: SANDBOX_HOME,
  PATH: SANDBOX_PATH,
  LANG: 'C.UTF-8',
  TERM: 'dumb',
  FORGE_SANDBOX: '1',
  // A sandbox reaches no remote (no path outside the worktree, no network unless allowed, no
  // credentials); the guard makes a push fail at once with network on too (push-guard.ts).
  ...pushGuardEnv(),
};

export function describeExit(kind: 'memory-limit' | 'signal', memoryMb: number | undefined): string {
  if (kind === 'memory-limit') {
    return `The command was killed because the sandbox hit its memory limit${memoryMb ? ` (${memoryMb} MiB)` : ''}. Use less memory or raise the loop's sandbox memory limit.`;
  }
  return 'The command was killed by a signal (SIGKILL).';
}
