/**
 * How Forge's own git runs on a loop's worktree (issue 26): the worktree is hostile input, so
 * git must neither discover its repository from the worktree's `.git` file nor run anything the
 * worktree (or a repository the agent made in it) asks for. Pure: the argument vector and
 * environment for one invocation; git-runner.ts spawns it.
 */

/** The repository Forge created for a worktree, named explicitly on every command. */
export interface HardenedGitTarget {
  /** `<common dir>/worktrees/<name>`: the git dir `git worktree add` made. */
  gitDir: string;
  /** The worktree folder. */
  workTree: string;
  /**
   * Names of filter, diff and merge drivers the trusted configuration (system, global, the
   * repository's own) defines: each is switched off for these commands, so an attribute the
   * agent writes (`* filter=lfs`) cannot route files through a program.
   */
  drivers: { filters: string[]; merges: string[] };
}

/**
 * Settings that would make git run a program or reach out, switched off for the command and,
 * through GIT_CONFIG_PARAMETERS, for every git it starts (a submodule's status included).
 * Command-line settings win over every configuration file.
 */
export const HARDENING_CONFIG: readonly string[] = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.untrackedCache=false',
  'core.pager=cat',
  'core.attributesFile=/dev/null',
  'core.askPass=',
  'credential.helper=',
  'protocol.allow=never',
  'submodule.recurse=false',
  'diff.ignoreSubmodules=all',
  'status.submoduleSummary=false',
  'fetch.recurseSubmodules=false',
  'gc.auto=0',
  'maintenance.auto=false',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
];

/** git commands that show content differences: they take --no-ext-diff and --no-textconv. */
const DIFF_COMMANDS = new Set(['diff', 'log', 'show']);

/** Environment variables that name a program git would run, or another repository/config to read. */
export const HARDENING_DROPPED_VARIABLES: readonly string[] = [
  'GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_COMMON_DIR', 'GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_NAMESPACE', 'GIT_PREFIX', 'GIT_CONFIG', 'GIT_CONFIG_PARAMETERS', 'GIT_CONFIG_COUNT',
  'GIT_EXTERNAL_DIFF', 'GIT_SSH', 'GIT_SSH_COMMAND', 'GIT_ASKPASS', 'SSH_ASKPASS', 'GIT_PAGER', 'PAGER', 'GIT_EXEC_PATH',
  'GIT_PROXY_COMMAND', 'GIT_TEMPLATE_DIR', 'GIT_ATTR_SOURCE',
];

/** The driver settings that neutralize `drivers` (an empty command is no command to git). */
export function driverOverrides(drivers: HardenedGitTarget['drivers']): string[] {
  const out: string[] = [];
  for (const name of drivers.filters) out.push(`filter.${name}.clean=`, `filter.${name}.smudge=`, `filter.${name}.process=`, `filter.${name}.required=false`);
  // `false` as a merge driver: the file is left in conflict, nothing of the agent's choosing runs.
  for (const name of drivers.merges) out.push(`merge.${name}.driver=false`);
  return out;
}

/**
 * git's argument vector for `args` on `target`: the repository named explicitly (`--git-dir`,
 * `--work-tree`; nothing is discovered from the worktree), every command-running setting off,
 * `extraConfig` (e.g. an identity) after them, and diff commands without external diff or
 * textconv programs.
 */
export function hardenedGitArgv(target: HardenedGitTarget, args: readonly string[], extraConfig: readonly string[] = []): string[] {
  const config = [...HARDENING_CONFIG, ...driverOverrides(target.drivers), ...extraConfig];
  const command = args[0] ?? '';
  const rest = DIFF_COMMANDS.has(command) ? [command, '--no-ext-diff', '--no-textconv', ...args.slice(1)] : [...args];
  return [`--git-dir=${target.gitDir}`, `--work-tree=${target.workTree}`, ...config.flatMap((c) => ['-c', c]), ...rest];
}

/** The environment for hardened git: `base` without the variables above, and no system attributes file. */
export function hardenedGitEnv(base: Readonly<Record<string, string>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (HARDENING_DROPPED_VARIABLES.includes(key) || /^GIT_CONFIG_(KEY|VALUE)_\d+$/.test(key)) continue;
    env[key] = value;
  }
  env.GIT_ATTR_NOSYSTEM = '1';
  return env;
}

/**
 * The driver names in `git config --name-only --get-regexp` output of the trusted configuration:
 * `filter.<name>.<key>` and `merge.<name>.driver` lines (a name may hold dots).
 */
export function parseDriverNames(configNames: string): HardenedGitTarget['drivers'] {
  const filters = new Set<string>();
  const merges = new Set<string>();
  for (const line of configNames.split(/\r?\n/)) {
    const filter = /^filter\.(.+)\.(clean|smudge|process|required)$/i.exec(line.trim());
    if (filter) filters.add(filter[1]!);
    const merge = /^merge\.(.+)\.(driver|recursive|name)$/i.exec(line.trim());
    if (merge) merges.add(merge[1]!);
  }
  return { filters: [...filters].sort(), merges: [...merges].sort() };
}

/** What `<worktree>/.git` holds when it points at `gitDir` (as `git worktree add` writes it). */
export function gitFileContent(gitDir: string): string {
  return `gitdir: ${gitDir}\n`;
}

/** The git dir a `.git` file names, or null when the text is not a `gitdir:` line. */
export function parseGitFile(text: string): string | null {
  const m = /^gitdir: (.+?)\r?\n?$/.exec(text);
  return m ? m[1]! : null;
}
