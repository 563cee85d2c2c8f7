/**
 * The guardian of one opencode server: a tiny shell process that kills the server when the
 * process that started it (Forge: the CLI, the VS Code extension host) dies without stopping it.
 *
 * Forge starts opencode in a process group of its own (so stopping it takes its tools along),
 * which also means a SIGKILLed Forge leaves it running, re-parented, working in the loop's
 * worktree. Nothing in a killed process can clean up, so the clean-up lives in a process of its
 * own: the guardian watches its parent pid (it changes when Forge dies: the guardian is
 * re-parented) and then kills the server's process group and every process carrying the
 * server's marker (opencode runs bash tools in new sessions, outside the group). It ends by
 * itself once the server's group is gone, and Forge kills it when it stops the server.
 *
 * A shell script rather than `setpriv --pdeathsig`: the parent-death signal reaches only
 * opencode's main process, not the tools it started; and rather than a node script: the
 * extension host's executable is not node, and a shell costs a few hundred kilobytes.
 */
import { existsSync } from 'node:fs';
import { startProcess } from '../process/process-runner';

/** How often the guardian looks at its parent (seconds). */
export const GUARDIAN_POLL_SECONDS = 0.5;

/**
 * $1 Forge's pid, $2 the server's process group, $3 the marker line (`VAR=value`).
 * Reading /proc/$$/stat with the shell's own `read` costs no process per look; `ps` is the
 * fallback where there is no /proc.
 */
export const GUARDIAN_SCRIPT = `
forge=$1 group=$2 needle=$3
read_parent() {
  if read -r stat < /proc/$$/stat 2>/dev/null; then
    rest=\${stat##*) }
    set -- $rest
    parent=$2
  else
    parent=$(ps -o ppid= -p $$ | tr -d ' ')
  fi
}
sweep() {
  kill -KILL "-$group" 2>/dev/null
  [ -d /proc/self ] || return 0
  for f in $(grep -lsxzF -e "$needle" /proc/[0-9]*/environ 2>/dev/null); do
    p=\${f#/proc/}; p=\${p%/environ}
    [ "$p" = "$$" ] || kill -KILL "$p" 2>/dev/null
  done
}
while kill -0 "-$group" 2>/dev/null; do
  read_parent
  if [ "$parent" != "$forge" ]; then
    sweep; sweep
    exit 0
  fi
  sleep ${GUARDIAN_POLL_SECONDS}
done
`;

export interface ServerGuardian {
  readonly pid: number | undefined;
  /** Ends the guardian (the server is being stopped by Forge itself). */
  stop(): Promise<void>;
}

/**
 * Starts the guardian of the server whose process group is `serverPid`. `env` is the server's
 * environment without its marker variable (the guardian must not find itself), `markerLine`
 * the `VAR=value` every process of the server carries. Undefined where there is no POSIX shell.
 */
export function startServerGuardian(serverPid: number, markerLine: string, env: Record<string, string>): ServerGuardian | undefined {
  if (process.platform === 'win32' || !existsSync('/bin/sh')) return undefined;
  const guardian = startProcess('/bin/sh', ['-c', GUARDIAN_SCRIPT, 'forge-opencode-guardian', String(process.pid), String(serverPid), markerLine], {
    processGroup: true,
    output: 'ignore',
    env,
  });
  if (!guardian.child || guardian.pid === undefined) return undefined;
  guardian.child.unref();
  const exited = Promise.race([guardian.exited, guardian.spawnFailed]);
  return {
    pid: guardian.pid,
    async stop() {
      // Its whole group: the guardian's `sleep` between two polls would otherwise outlive it by
      // up to a poll interval, a process of Forge's still running after the loop ended.
      guardian.kill('SIGKILL');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    },
  };
}
