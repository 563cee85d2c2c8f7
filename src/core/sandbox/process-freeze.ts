/**
 * Freezing a bwrap sandbox that has no cgroup of its own (a user without a delegated cgroup):
 * every process of the sandbox descends from a bwrap process that binds the sandbox's worktree
 * (with --unshare-pid, orphans — setsid, double fork — are adopted by the sandbox's own init,
 * which is bwrap's child). SIGSTOP reaches them all from the host; a stopped process cannot fork,
 * so stopping the tree again until a pass finds no new process converges. Slower than the cgroup
 * freezer (a /proc scan per pass), used only where that freezer is not available.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcessEntry {
  pid: number;
  ppid: number;
  /** `/proc/PID/stat` state letter (T: stopped). */
  state: string;
  cmdline: string[];
}

/** Whether `cmdline` is a bwrap of Forge's sandbox for `worktreeDir` (see bwrap-args.ts). */
export function isSandboxBwrap(cmdline: readonly string[], worktreeDir: string): boolean {
  if (!cmdline.some((a) => a === 'bwrap' || a.endsWith('/bwrap'))) return false;
  const host = cmdline.indexOf('--hostname');
  if (host < 0 || cmdline[host + 1] !== 'forge-sandbox') return false;
  for (let i = 0; i + 2 < cmdline.length; i++) {
    if (cmdline[i] === '--bind' && cmdline[i + 1] === worktreeDir && cmdline[i + 2] === worktreeDir) return true;
  }
  return false;
}

/** The sandbox's bwrap processes and all their descendants. */
export function sandboxProcessTree(processes: readonly ProcessEntry[], worktreeDir: string): number[] {
  const children = new Map<number, number[]>();
  for (const p of processes) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const found = new Set<number>();
  const stack = processes.filter((p) => isSandboxBwrap(p.cmdline, worktreeDir)).map((p) => p.pid);
  while (stack.length > 0) {
    const pid = stack.pop()!;
    if (found.has(pid)) continue;
    found.add(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return [...found];
}

export function readProcesses(proc = '/proc'): ProcessEntry[] {
  const out: ProcessEntry[] = [];
  for (const name of readdirSync(proc)) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`${proc}/${name}/stat`, 'utf8');
      // pid (comm) state ppid …; comm may hold spaces and parentheses: split after the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = readFileSync(`${proc}/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      out.push({ pid: Number(name), ppid: Number(rest[1]), state: rest[0] ?? '', cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Stops every process of the sandbox for `worktreeDir` until the returned thaw continues them. */
export async function stopSandboxProcesses(worktreeDir: string, read: () => ProcessEntry[] = () => readProcesses()): Promise<() => Promise<void>> {
  const stopped = new Set<number>();
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // exited meanwhile
    }
  };
  const thaw = async () => {
    for (const pid of stopped) signal(pid, 'SIGCONT');
  };
  try {
    for (let pass = 0; ; pass++) {
      if (pass > 200) throw new Error(`The processes of the sandbox for ${worktreeDir} could not all be stopped.`);
      const all = read();
      const tree = sandboxProcessTree(all, worktreeDir);
      const fresh = tree.filter((pid) => !stopped.has(pid));
      for (const pid of fresh) {
        stopped.add(pid);
        signal(pid, 'SIGSTOP');
      }
      const state = new Map(all.map((p) => [p.pid, p.state]));
      // Done when no new process appeared and every one found was already stopped in this reading.
      if (fresh.length === 0 && tree.every((pid) => /^[TtZX]?$/.test(state.get(pid) ?? ''))) return thaw;
      await new Promise((r) => setImmediate(r));
    }
  } catch (error) {
    await thaw();
    throw error;
  }
}
