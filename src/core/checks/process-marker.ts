import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * Every process a check starts carries `FORGE_CHECK_RUN=<marker>` in its environment (inherited
 * by whatever it starts, double forks and `setsid` included), so a check that put a child in a
 * session of its own can still be killed whole (the same way server-process.ts finds what an
 * opencode server started).
 */
export const CHECK_MARKER_VARIABLE = 'FORGE_CHECK_RUN';

/** Signals every process whose environment has `FORGE_CHECK_RUN=<marker>`; the count signalled (Linux, via /proc; 0 elsewhere). */
export function signalMarkedProcesses(marker: string, signal: NodeJS.Signals): number {
  if (!existsSync('/proc/self/environ')) return 0;
  const needle = Buffer.from(`${CHECK_MARKER_VARIABLE}=${marker}\0`);
  let signalled = 0;
  // Two sweeps: a process may fork while the first one runs.
  for (let sweep = 0; sweep < 2; sweep++) {
    let entries: string[];
    try {
      entries = readdirSync('/proc');
    } catch {
      return signalled;
    }
    for (const entry of entries) {
      if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
      let environ: Buffer;
      try {
        environ = readFileSync(`/proc/${entry}/environ`);
      } catch {
        continue; // gone, or not ours to read
      }
      // The marker may be the first variable (no NUL before it) or any later one.
      if (environ.subarray(0, needle.length).equals(needle) || environ.includes(Buffer.concat([Buffer.from([0]), needle]))) {
        try {
          process.kill(Number(entry), signal);
          signalled += 1;
        } catch {
          // already gone
        }
      }
    }
  }
  return signalled;
}

/** Signals a process group; a group already gone is fine. */
export function signalProcessGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is gone.
  }
}
