import { existsSync, readdirSync, readFileSync } from 'node:fs';

/**
 * Processes Forge starts carry a marker variable in their environment (`NAME=<random>`), which
 * everything they start inherits — double forks and `setsid` included — so a whole tree can be
 * found and killed even after its members left the process group (opencode servers and their
 * tools, verification checks). Shared by the rooms that start such trees.
 */

/** Signals every process (but this one) whose environment has `variable=marker`; the count signalled. Linux (/proc); 0 elsewhere. */
export function signalMarkedProcesses(variable: string, marker: string, signal: NodeJS.Signals): number {
  let signalled = 0;
  // Two sweeps: a process may fork while the first one runs.
  for (let sweep = 0; sweep < 2; sweep++) {
    for (const pid of markedProcessIds(variable, marker)) {
      try {
        process.kill(pid, signal);
        signalled += 1;
      } catch {
        // already gone
      }
    }
  }
  return signalled;
}

/** The processes (but this one) whose environment has `variable=marker`, with their command lines. Linux (/proc); none elsewhere. */
export function findMarkedProcesses(variable: string, marker: string): Array<{ pid: number; command: string }> {
  return markedProcessIds(variable, marker).map((pid) => {
    let command = '';
    try {
      command = readFileSync(`/proc/${pid}/cmdline`).toString('utf8').split('\0').filter(Boolean).join(' ');
    } catch {
      // gone meanwhile
    }
    return { pid, command };
  });
}

function markedProcessIds(variable: string, marker: string): number[] {
  if (!existsSync('/proc/self/environ')) return [];
  const needle = Buffer.from(`${variable}=${marker}\0`);
  const afterNul = Buffer.concat([Buffer.from([0]), needle]);
  const asArguments = Buffer.from(`\0--setenv\0${variable}\0${marker}\0`);
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${entry}/environ`);
    } catch {
      continue; // gone, or not ours to read
    }
    // The marker is a whole variable: the first one, or one after a NUL (never the tail of another name).
    if (environ.subarray(0, needle.length).equals(needle) || environ.includes(afterNul)) {
      found.push(Number(entry));
      continue;
    }
    // bwrap starts with an empty environment and carries the marker as `--setenv VARIABLE MARKER`
    // in its arguments (bwrap-args.ts), which its forked sandbox process keeps too.
    try {
      if (readFileSync(`/proc/${entry}/cmdline`).includes(asArguments)) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
