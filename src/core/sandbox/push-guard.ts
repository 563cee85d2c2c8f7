/**
 * `git push` refused for agents, in a way that does not rest on matching shell text.
 *
 * git reads configuration from the environment (`GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` /
 * `GIT_CONFIG_VALUE_n`) in every git process it starts, whichever binary and however the
 * command is spelled (`/usr/bin/git  push`, `command git push`, `env X=1 git push`,
 * `git -c x.y=1 push`). `url.<base>.pushInsteadOf` rewrites the URL of every push whose URL
 * starts with one of the listed prefixes — a remote's URL, a local path or a network URL — to
 * a transport that does not exist, so the push fails before it connects. A `-c` on the command
 * line adds values to a multi-valued key; it cannot remove this one. Forge's own git commands
 * (checkpoints, merge) run in Forge's process, not in this environment, and never push.
 *
 * What it does not stop (said in docs/sandbox.md): an agent that clears the variables from its own
 * environment, names an explicit `pushurl` with `-c`, or adds a longer `pushInsteadOf` prefix that
 * rewrites its URL to itself. Only a sandbox stops those, by leaving
 * no remote reachable.
 */

/** The transport every push is rewritten to: git has no helper for it (an unconfined agent shell adds one that only says why and fails). */
export const PUSH_REFUSED_TRANSPORT = 'forge-push-refused::';

/**
 * The configuration entries, as `[key, value]` pairs. An empty prefix matches every URL — a
 * remote's, a path, file/ssh/git/http(s), scp-like `user@host:` — so one entry covers them all.
 */
export function pushGuardConfig(): Array<[string, string]> {
  return [[`url.${PUSH_REFUSED_TRANSPORT}.pushInsteadOf`, '']];
}

/**
 * The environment entries that add the guard to what `existing` already configures through
 * `GIT_CONFIG_COUNT` (a user's own entries are kept, numbered first).
 */
export function pushGuardEnv(existing: Record<string, string | undefined> = {}): Record<string, string> {
  const start = Number.parseInt(existing.GIT_CONFIG_COUNT ?? '0', 10);
  const offset = Number.isInteger(start) && start > 0 ? start : 0;
  const env: Record<string, string> = {};
  const entries = pushGuardConfig();
  entries.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${offset + i}`] = key;
    env[`GIT_CONFIG_VALUE_${offset + i}`] = value;
  });
  env.GIT_CONFIG_COUNT = String(offset + entries.length);
  return env;
}

/** What an agent sees when it tries: why, and what happens to its work instead. */
export const PUSH_REFUSED_MESSAGE =
  'forge: git push is not allowed in a Forge loop. The loop\'s work reaches your repository only through Forge\'s checkpoint commits on the loop branch (and a merge, if you asked for one); leave publishing to the user.';
