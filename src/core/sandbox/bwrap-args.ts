import { JOB_MARKER_VARIABLE, WATCHDOG_MARKER_VARIABLE } from '../jobs/job-core';
import path from 'node:path';
import type { SandboxSpec } from './types';
import type { CgroupJoinStrategy } from './cgroup';
import { shellQuote } from './process';
import { SANDBOX_BASE_ENV } from './sandbox-env';

/**
 * The pure half of the bubblewrap driver: what the host looks like (injected), the bwrap
 * arguments, and the bash launcher that starts bwrap in the sandbox's cgroup.
 */

/** /etc entries a shell, git, node, python and TLS need; never the whole /etc (shadow, ssh keys, …). */
export const BWRAP_ETC_ENTRIES = [
  'passwd', 'group', 'hosts', 'hostname', 'resolv.conf', 'nsswitch.conf', 'host.conf', 'gai.conf',
  'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'alternatives', 'localtime', 'timezone',
  'ssl', 'ca-certificates', 'ca-certificates.conf', 'gitconfig', 'bash.bashrc', 'profile', 'inputrc',
  'mime.types', 'protocols', 'services', 'os-release', 'debian_version', 'environment', 'npmrc', 'pip.conf',
];

/** Top-level system folders: a symlink into /usr on merged-/usr hosts, a folder elsewhere. */
export const BWRAP_SYSTEM_DIRS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * /etc files are copied into the sandbox's root (bwrap `--file`, from a file descriptor the
 * launcher opens) instead of bind-mounted: every bind costs bwrap a mount, a read of
 * /proc/self/mountinfo and a read-only remount (about 0.2 ms each, ~6 ms for the list
 * above), a copy of these small files costs microseconds. The copy is taken at each command,
 * so it is as fresh as a bind, and read-only like it (the root is remounted read-only).
 * Descriptors are numbered from here; bash keeps its own at 10 and 255.
 */
export const BWRAP_ETC_FIRST_FD = 20;

export type HostPathKind = { kind: 'dir' } | { kind: 'file' } | { kind: 'symlink'; target: string } | { kind: 'missing' };

/** What of the host a bwrap sandbox shows, read once per sandbox (see `readBwrapHostLayout`). */
export interface BwrapHostLayout {
  /** `--symlink`/`--ro-bind` arguments for the top-level system folders. */
  systemDirArgs: string[];
  /** /etc entries that are files (or symlinks to files): copied in, in this order from BWRAP_ETC_FIRST_FD. */
  etcFiles: string[];
  /** /etc entries that are folders (or symlinks to folders): bound read-only. */
  etcDirs: string[];
}

/** Follows symlinks (at most 8) through `hostPath`; a dangling or looping link is missing. */
function resolvedKind(p: string, hostPath: (p: string) => HostPathKind): 'dir' | 'file' | 'missing' {
  let current = p;
  for (let hops = 0; hops < 8; hops++) {
    const k = hostPath(current);
    if (k.kind !== 'symlink') return k.kind;
    current = path.posix.resolve(path.posix.dirname(current), k.target);
  }
  return 'missing';
}

export function readBwrapHostLayout(hostPath: (p: string) => HostPathKind): BwrapHostLayout {
  const systemDirArgs: string[] = [];
  for (const dir of BWRAP_SYSTEM_DIRS) {
    const d = hostPath(dir);
    if (d.kind === 'symlink') systemDirArgs.push('--symlink', d.target, dir);
    else if (d.kind === 'dir') systemDirArgs.push('--ro-bind', dir, dir);
  }
  const etcFiles: string[] = [];
  const etcDirs: string[] = [];
  for (const entry of BWRAP_ETC_ENTRIES) {
    const p = `/etc/${entry}`;
    const kind = resolvedKind(p, hostPath);
    if (kind === 'file') etcFiles.push(p);
    else if (kind === 'dir') etcDirs.push(p);
  }
  return { systemDirArgs, etcFiles, etcDirs };
}

export interface BwrapCommandShape {
  /** Working directory inside; BWRAP_CWD_FROM_SHELL stands for the launcher's "$FORGE_CWD". */
  cwd: string;
  env?: Record<string, string>;
  /** The host layout; read through `hostPath` when not given. */
  layout?: BwrapHostLayout;
  /** Tells what each host path is (injected so the argument builder stays pure). */
  hostPath?: (p: string) => HostPathKind;
}

/** bwrap arguments up to and including `--`; the program and its arguments follow. */
export function buildBwrapArgs(settings: SandboxSpec, shape: BwrapCommandShape): string[] {
  const layout = shape.layout ?? readBwrapHostLayout(shape.hostPath ?? (() => ({ kind: 'missing' })));
  const args: string[] = ['--ro-bind', '/usr', '/usr', ...layout.systemDirArgs];
  layout.etcFiles.forEach((p, i) => args.push('--perms', '0644', '--file', String(BWRAP_ETC_FIRST_FD + i), p));
  for (const p of layout.etcDirs) args.push('--ro-bind', p, p);
  args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/var/tmp', '--tmpfs', '/run');
  args.push('--bind', settings.worktreeDir, settings.worktreeDir);
  if (settings.gitCommonDir) {
    args.push('--ro-bind', settings.gitCommonDir, settings.gitCommonDir);
    // The worktree's .git file names the repository: read-only, so no command in the sandbox
    // can point it at a git dir of its own (issue 26). `-try`: a worktree without one starts too.
    const gitFile = `${settings.worktreeDir.replace(/\/+$/, '')}/.git`;
    args.push('--ro-bind-try', gitFile, gitFile);
  }
  for (const p of settings.readOnlyPaths ?? []) args.push('--ro-bind', p, p);
  for (const p of settings.writablePaths ?? []) args.push('--bind', p, p);
  for (const b of settings.writableBinds ?? []) args.push('--bind', b.source, b.target);
  for (const b of settings.readOnlyBinds ?? []) args.push('--ro-bind', b.source, b.target);
  args.push('--remount-ro', '/');
  args.push('--unshare-all');
  if (settings.network) args.push('--share-net');
  args.push('--hostname', 'forge-sandbox', '--cap-drop', 'ALL', '--die-with-parent', '--new-session');
  args.push('--clearenv');
  for (const [k, v] of Object.entries({ ...SANDBOX_BASE_ENV, ...(shape.env ?? {}) })) args.push('--setenv', k, v);
  args.push('--chdir', shape.cwd, '--');
  return args;
}

/** Placeholder for `cwd` that the launcher renders as "$FORGE_CWD". */
export const BWRAP_CWD_FROM_SHELL = '@@FORGE_CWD@@';

export interface BwrapLaunchPlan {
  sandboxName: string;
  /** Absolute path of bwrap on the host. */
  bwrapPath: string;
  /** From buildBwrapArgs with cwd BWRAP_CWD_FROM_SHELL. */
  args: string[];
  /** The /etc files of the layout, in descriptor order. */
  etcFiles: string[];
  /** `cgroup.procs` files the sandbox's processes join before the command starts (empty: no limits). */
  procsFiles: string[];
  /** How they join (cgroup.ts); default `overlapped`. */
  joinStrategy?: CgroupJoinStrategy;
  /** The sandbox's record; without it the sandbox is gone and nothing runs. */
  recordFile: string;
  /**
   * Where the command comes from: `environment` (default) `$FORGE_COMMAND`, run in "$FORGE_CWD";
   * `stdin`: the sandbox is set up first and then reads the folder and the command from its
   * standard input, each ended by a NUL byte (BWRAP_AHEAD_READER), so that a launch can be
   * started before its command is known (BwrapRuntime's launch ahead). What follows the two
   * words on stdin is the command's own input.
   */
  commandFrom?: 'environment' | 'stdin';
}

/**
 * The sandbox's first shell when the command comes on stdin: `read` takes a pipe byte by byte,
 * so it consumes the two words and nothing of the command's input. Its variables are not
 * exported, so the command's shell starts with the sandbox's environment only.
 */
export const BWRAP_AHEAD_READER =
  'IFS= read -r -d "" forge_cwd && IFS= read -r -d "" forge_command || exit 125; ' +
  // eval, not `exec bash -c`: a second bash start would cost what the launch ahead saves. The
  // evaluated text first drops the variable that holds it.
  'cd -- "$forge_cwd" || exit 125; unset forge_cwd; eval "unset forge_command; $forge_command"';

/** What a launch started with `commandFrom: 'stdin'` is sent before the command's input. */
export function bwrapAheadRequest(cwd: string, command: string): string {
  if (cwd.includes('\0') || command.includes('\0')) throw new Error('A sandbox command or folder cannot contain a NUL byte.');
  return `${cwd}\0${command}\0`;
}

/**
 * Bash lines that run `bash -c "$FORGE_COMMAND"` in the sandbox, in "$FORGE_CWD", and fail
 * without running anything on the host when the sandbox is not usable.
 *
 * With the `before-exec` strategy (cgroup.ts: where a join is cheap) the shell writes its own
 * pid into each `cgroup.procs` and then execs bwrap, so bwrap and all it starts are inside.
 *
 * Otherwise joining a cgroup (writing a pid to `cgroup.procs`) waits for an RCU grace period
 * in the kernel, which can be a third of every command. So the join overlaps bwrap's
 * own set-up: the shell execs bwrap with `--info-fd` (bwrap reports the sandbox's first
 * process) and `--block-fd` (that process waits, after its mounts and before it starts
 * anything, for one byte). A helper forked beforehand moves that process into the cgroup
 * and only then writes the byte; every process of the command is forked after it and
 * starts inside. bwrap's own monitor process stays outside: it is host-side plumbing, and
 * an out-of-memory kill that picked it would orphan the sandbox before it starts. The block pipe is opened read-write and handed to bwrap so
 * that the sandbox holds a writer too: it never sees end-of-file, only the byte, and a
 * helper that dies or fails leaves it waiting (the helper kills it on failure). The shell
 * execs bwrap, so bwrap's exit status and signals reach the caller as before.
 */
export function renderBwrapLaunch(plan: BwrapLaunchPlan): string {
  const q = shellQuote;
  const argv = plan.args.map((a) => (a === BWRAP_CWD_FROM_SHELL ? '"$FORGE_CWD"' : q(a))).join(' ');
  const lines = [
    // The record is the sandbox: once it is gone (stopped loop, removal out of band), fail.
    `if [ ! -f ${q(plan.recordFile)} ]; then echo "forge: sandbox ${plan.sandboxName} is gone; the command was not run (it never runs on the host)" >&2; exit 125; fi`,
  ];
  let syncArgs = '';
  const joinFailed = `echo "forge: cannot join the sandbox cgroup (sandbox ${plan.sandboxName} stopped?); the command was not run" >&2`;
  if (plan.procsFiles.length > 0 && plan.joinStrategy === 'before-exec') {
    // `echo` is a builtin: each write is made by this shell, which then becomes bwrap.
    const joins = plan.procsFiles.map((f) => `echo $$ > ${q(f)}`).join(' && ');
    lines.push(`if ! { ${joins}; } 2>/dev/null; then ${joinFailed}; exit 125; fi`);
  } else if (plan.procsFiles.length > 0) {
    const joins = plan.procsFiles.map((f) => `echo "$forge_child" > ${q(f)}`).join(' && ');
    const primeJoins = plan.procsFiles.map((f) => `echo "$BASHPID" > ${q(f)}`).join(' && ');
    lines.push(
      'exec {forge_block}<> <(:) {forge_info}<> <(:)',
      'exec {forge_info_r}</dev/fd/$forge_info {forge_info_w}>/dev/fd/$forge_info {forge_info}<&-',
      'forge_bwrap=$$',
      '{',
      '  exec {forge_info_w}>&- >/dev/null',
      // The helper joins first itself, while bwrap sets up: that write waits out the grace period
      // (it starts at once instead of after bwrap's report), and the child's join right after
      // finds the kernel's lock still in its fast state. A failure here (pids limit) changes
      // nothing: the child's join below decides.
      `  { ${primeJoins}; } 2>/dev/null`,
      '  forge_child=',
      // bwrap writes {"child-pid": N, …} once the sandbox's first process exists; end-of-file
      // (bwrap failed before that, and says why itself) leaves nothing to do.
      '  while read -r -u "$forge_info_r" forge_line; do case $forge_line in *\'"child-pid"\'*) forge_child=${forge_line##*: }; forge_child=${forge_child%,}; break;; esac; done',
      '  [ -n "$forge_child" ] || exit 0',
      `  if ! { ${joins}; } 2>/dev/null; then`,
      `    ${joinFailed}`,
      '    kill -KILL "$forge_child" "$forge_bwrap" 2>/dev/null',
      '    exit 125',
      '  fi',
      '  echo go >&"$forge_block"',
      // Read bwrap's report to its end: bwrap dies when a write to it fails (no reader left),
      // and it still has to release its sandbox after the line above.
      '  while read -r -u "$forge_info_r" forge_line; do :; done',
      '} &',
      'exec {forge_info_r}<&-',
    );
    syncArgs = ' --info-fd "$forge_info_w" --block-fd "$forge_block"';
  }
  // A file that vanished since the layout was read shows as empty rather than failing every command.
  plan.etcFiles.forEach((p, i) => {
    const fd = BWRAP_ETC_FIRST_FD + i;
    lines.push(`[ -r ${q(p)} ] && exec ${fd}<${q(p)} || exec ${fd}</dev/null`);
  });
  // bwrap's own processes (the sandbox's pid 1 among them, visible in its /proc) keep the
  // environment they are started with; --clearenv reaches only the command. The shim runs with
  // opencode's environment (its password, Forge's tool secret), so bwrap starts from none:
  // `exec -c` clears it without starting /usr/bin/env first (one program start less per command).
  // The process markers (random handles, no secret) ride in bwrap's arguments instead, as
  // `--setenv` options that --clearenv later drops for the command: a forge_shell job or a stalled
  // shell call is found (marked-processes.ts reads them from /proc/PID/cmdline) and killed through
  // bwrap's processes, and the sandbox's pid namespace dies with them.
  const markers = [JOB_MARKER_VARIABLE, WATCHDOG_MARKER_VARIABLE].map((v) => ` \${${v}:+--setenv ${v} "\$${v}"}`).join('');
  const command = plan.commandFrom === 'stdin' ? q(BWRAP_AHEAD_READER) : '"$FORGE_COMMAND"';
  lines.push(`exec -c ${q(plan.bwrapPath)}${markers}${syncArgs} ${argv} bash -c ${command}`);
  return lines.join('\n');
}
