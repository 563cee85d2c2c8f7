import { signalMarkedProcesses as signalMarkedProcessesWith } from '../process/marked-processes';

/**
 * Every process a check starts carries `FORGE_CHECK_RUN=<marker>` in its environment (inherited
 * by whatever it starts, double forks and `setsid` included), so a check that put a child in a
 * session of its own can still be killed whole (the same way server-process.ts finds what an
 * opencode server started).
 */
export const CHECK_MARKER_VARIABLE = 'FORGE_CHECK_RUN';

/** Signals every process whose environment has `FORGE_CHECK_RUN=<marker>`; the count signalled (Linux, via /proc; 0 elsewhere). */
export function signalMarkedProcesses(marker: string, signal: NodeJS.Signals): number {
  return signalMarkedProcessesWith(CHECK_MARKER_VARIABLE, marker, signal);
}
