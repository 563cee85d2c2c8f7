// Process inspection for tests (Linux /proc): which processes work in a folder, and whose
// descendants they are.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { readdirSync, readFileSync } from 'node:fs';

export interface WorkingProcess {
  readonly pid: number;
  /** The command line, arguments separated by spaces. */
  readonly command: string;
}

/** The processes whose working folder is `dir`, also once it was removed ("<dir> (deleted)"). */
export async function processesWorkingIn(dir: string): Promise<WorkingProcess[]> {
  const found: WorkingProcess[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => '');
    if (cwd !== dir && cwd !== `${dir} (deleted)`) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    found.push({ pid: Number(entry), command: cmdline.split('\0').join(' ').trim() });
  }
  return found;
}

/** Whether `pid` is `ancestor` or one of its descendants. */
export async function descendsFrom(pid: number, ancestor: number): Promise<boolean> {
  for (let current = pid; current > 1; ) {
    if (current === ancestor) return true;
    const stat = await readFile(`/proc/${current}/stat`, 'utf8').catch(() => '');
    // The command name (field 2) may hold spaces and parentheses: the fields after its closing
    // ')' are the state, then the parent's pid.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!Number.isInteger(parent) || parent <= 0) return false;
    current = parent;
  }
  return false;
}

/** Pids of processes whose command line is exactly `command`. */
export async function processesRunning(command: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.split('\0').join(' ').trim() === command) found.push(Number(entry));
  }
  return found;
}

/** Pids of processes one of whose arguments is exactly `argument` (a test's unique `sleep` duration, say). */
export function processesWithArgument(argument: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(argument)) pids.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return pids;
}
