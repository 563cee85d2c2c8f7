/**
 * Who holds a loop's lease. Its own file because the CLI's printing side (a `forge run` whose
 * loop another process supervises) reads it without loading the runtime that takes leases.
 */
import type { LoopRow } from '../storage/repositories';
import { isProcessAlive } from '../storage/cross-process-lock';

/**
 * Who supervises a loop: nobody (no live lease), a live process, or a process that died while
 * its lease still runs (a killed process's lease outlives it by up to its TTL). The lease
 * holder's pid leads its supervisor id (`<pid>:<uuid>`); Forge's data folder is local.
 */
export function supervisorOf(loop: Pick<LoopRow, 'supervisorId' | 'leaseExpiresAt'>, now = Date.now()): { state: 'none' } | { state: 'alive' | 'dead'; pid: number } {
  if (!loop.supervisorId || (loop.leaseExpiresAt ?? 0) <= now) return { state: 'none' };
  const pid = Number(loop.supervisorId.split(':')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return { state: 'alive', pid: 0 };
  return { state: pid === process.pid || isProcessAlive(pid) ? 'alive' : 'dead', pid };
}
