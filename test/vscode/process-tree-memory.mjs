// Samples the resident memory of a process and all its descendants (code-server,
// its extension host, Chromium's processes) to report a test run's peak.
import { readdirSync, readFileSync } from 'node:fs';

const PAGE_SIZE = 4096;

function processTable() {
  /** @type {Map<number, { ppid: number, rss: number }>} */
  const table = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name (field 2) may hold spaces and parentheses: split after its closing ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { ppid: Number(fields[1]), rss: Number(fields[21]) * PAGE_SIZE });
    } catch {
      // The process exited while the table was read.
    }
  }
  return table;
}

export function processTreeRss(rootPid) {
  const table = processTable();
  /** @type {Map<number, number[]>} */
  const children = new Map();
  for (const [pid, { ppid }] of table) {
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(pid);
  }
  let total = 0;
  const queue = [rootPid];
  while (queue.length > 0) {
    const pid = queue.pop();
    total += table.get(pid)?.rss ?? 0;
    queue.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** Samples every `intervalMs` until stopped; `stop()` returns the peak in bytes. */
export function startPeakMemorySampler(rootPid = process.pid, intervalMs = 1000) {
  let peak = processTreeRss(rootPid);
  const timer = setInterval(() => {
    peak = Math.max(peak, processTreeRss(rootPid));
  }, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, processTreeRss(rootPid));
    },
  };
}
