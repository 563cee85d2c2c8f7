/**
 * Who supervises a loop, as `forge status` shows it: the lease holder's pid and host kind (both
 * read from its supervisor id, `<pid>:<kind>-<uuid>`), whether that process is the data
 * folder's engine (its info file names the same supervisor id) and whether it is alive. Pure
 * apart from the liveness check supervisorOf makes.
 */
import { supervisorOf } from '../loop/lease-holder';
import type { LoopRow } from '../storage/repositories';
import type { EngineInfo, EngineKind } from './protocol';

export interface LoopSupervision {
  pid: number;
  /** null: a supervisor id of an older Forge, which did not record its kind. */
  kind: EngineKind | null;
  /** The data folder's engine (other processes hand their loops to it). */
  engine: boolean;
  alive: boolean;
}

/** The kind a supervisor id records, if any. */
export function supervisorKind(supervisorId: string): EngineKind | null {
  const m = /^\d+:(cli|vscode)-/.exec(supervisorId);
  return m ? (m[1] as EngineKind) : null;
}

/** Null when no live lease names a supervisor (the loop is not running, or its lease ran out). */
export function describeSupervision(loop: Pick<LoopRow, 'supervisorId' | 'leaseExpiresAt' | 'status'>, engine: EngineInfo | null, now = Date.now()): LoopSupervision | null {
  if (loop.status !== 'running' && loop.status !== 'starting') return null;
  const sup = supervisorOf(loop, now);
  if (sup.state === 'none' || !loop.supervisorId) return null;
  return { pid: sup.pid, kind: supervisorKind(loop.supervisorId), engine: engine?.supervisorId === loop.supervisorId, alive: sup.state === 'alive' };
}

/** `process 1234 (cli, the data folder's engine)`, `process 1234 (vscode, gone)`. */
export function formatSupervision(s: LoopSupervision): string {
  const parts = [s.kind ?? 'unknown kind', ...(s.engine ? ["the data folder's engine"] : []), ...(s.alive ? [] : ['gone'])];
  return `process ${s.pid} (${parts.join(', ')})`;
}
