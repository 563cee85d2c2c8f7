/**
 * Clean-up after a crash (issue 26). A Forge process killed with SIGKILL (or a machine that lost
 * power) leaves behind what only its `finally` blocks and loop teardowns would have removed: the
 * throw-away merge worktrees of a group merge (registered in the user's repository), sandboxes
 * (bwrap records, Docker / Podman containers), cgroups (`forge-*` under /sys/fs/cgroup, with
 * whatever processes are still in them) and the agent-shell folders with their job records.
 *
 * Every engine start (any `forge` command that opens the engine, `forge status` included, and the
 * VS Code extension's engine) removes those of THIS data folder that no live process owns:
 * - a loop's resources are owned while the process that last held its lease runs (checked by pid,
 *   whatever the loop's status: it may be restarting the loop; another forge process on the same
 *   data folder keeps its own),
 * - a merge worktree or merge-check sandbox is owned by the process named in its owner record
 *   (owner-records.ts), alive unless provably dead (same machine, pid gone or reused),
 * - so is every sandbox and process cgroup of a loop: its record outranks the loop rows, which are
 *   a snapshot (a loop that ended, released its lease and was restarted in a new sandbox of the
 *   same name reads as unowned in a snapshot taken in between).
 * It never touches the database, a loop's worktree or branch, or another data folder's resources
 * (their names carry another prefix), so a read-only command stays read-only for data.
 */
import type { ForgeDatabase } from './storage';
import { isProcessAlive } from './storage/cross-process-lock';

export interface CrashCleanupReport {
  /** One line per thing removed (what and where). */
  removed: string[];
  /** What could not be checked or removed (the rest was still done). */
  problems: string[];
}

/** A loop row's ownership facts (columns of `loops`). */
export interface LoopOwnership {
  name: string;
  status: string;
  supervisorId: string | null;
  leaseExpiresAt: number | null;
}

/**
 * Whether a live process owns the loop's resources: its last lease holder runs, whatever the
 * loop's status and lease say. The status read here may be older than that process's last write
 * (a database snapshot), and a live process may be restarting the loop it just ended, its new
 * sandbox already up: only the holder's death makes the resources leftovers. (`now` is kept for
 * callers; the lease's expiry no longer decides.)
 */
export function loopOwnedByLiveProcess(loop: LoopOwnership, _now: number, alive: (pid: number) => boolean): boolean {
  if (!loop.supervisorId) return false;
  const pid = Number(loop.supervisorId.split(':')[0]);
  // An id without a pid cannot be checked: owned.
  return !Number.isInteger(pid) || pid <= 0 || pid === process.pid || alive(pid);
}

export interface CrashCleanupDeps {
  db: Pick<ForgeDatabase, 'query'>;
  sandboxes: { removeUnowned(isLoopOwned: (loopName: string) => boolean, driversInUse: Iterable<string>): Promise<{ removed: string[]; problems: string[] }> };
  worktrees: { sweepMergeScratch(repoDirs: readonly string[]): Promise<string[]> };
  now?: () => number;
  alive?: (pid: number) => boolean;
}

export async function cleanUpAfterCrash(deps: CrashCleanupDeps): Promise<CrashCleanupReport> {
  const now = (deps.now ?? Date.now)();
  const alive = deps.alive ?? isProcessAlive;
  const rows = deps.db.query('SELECT name, status, supervisor_id, lease_expires_at, repo_dir, sandbox, state FROM loops');
  const owned = new Set<string>();
  const drivers = new Set<string>();
  const repoDirs = new Set<string>();
  for (const r of rows) {
    const name = String(r.name);
    const loop: LoopOwnership = { name, status: String(r.status), supervisorId: (r.supervisor_id as string | null) ?? null, leaseExpiresAt: (r.lease_expires_at as number | null) ?? null };
    const isOwned = loopOwnedByLiveProcess(loop, now, alive);
    if (isOwned) owned.add(name);
    if (typeof r.repo_dir === 'string' && r.repo_dir) repoDirs.add(r.repo_dir);
    // Docker and Podman are asked only for loops a dead process left unfinished (an engine that is
    // down would otherwise be reported at every command); bwrap's records are always read.
    if (!isOwned && Number(r.sandbox) === 1 && ['running', 'starting', 'paused'].includes(loop.status)) {
      const driver = storedDriver(r.state);
      if (driver) drivers.add(driver);
    }
  }
  for (const g of deps.db.query('SELECT repo_dir FROM feature_groups')) if (typeof g.repo_dir === 'string' && g.repo_dir) repoDirs.add(g.repo_dir);
  const report: CrashCleanupReport = { removed: [], problems: [] };
  try {
    report.removed.push(...(await deps.worktrees.sweepMergeScratch([...repoDirs])));
  } catch (error) {
    report.problems.push(`could not check the merge worktrees: ${(error as Error).message.split('\n')[0]}`);
  }
  try {
    const r = await deps.sandboxes.removeUnowned((name) => owned.has(name), drivers);
    report.removed.push(...r.removed);
    report.problems.push(...r.problems);
  } catch (error) {
    report.problems.push(`could not check the sandboxes and cgroups: ${(error as Error).message.split('\n')[0]}`);
  }
  return report;
}

function storedDriver(state: unknown): string | null {
  try {
    const parsed = (typeof state === 'string' ? JSON.parse(state) : state) as { sandboxConfig?: { driver?: unknown } } | null;
    const d = parsed?.sandboxConfig?.driver;
    return typeof d === 'string' ? d : null;
  } catch {
    return null;
  }
}

/** The report for people: nothing when nothing was removed or went wrong. */
export function describeCrashCleanup(report: CrashCleanupReport): string[] {
  const lines: string[] = [];
  if (report.removed.length > 0) {
    lines.push(`Cleaned up after a Forge process that ended without cleaning up (killed or crashed): removed ${report.removed.length} leftover${report.removed.length === 1 ? '' : 's'}:`);
    for (const r of report.removed) lines.push(`  ${r}`);
  }
  for (const p of report.problems) lines.push(`Clean-up after a crash: ${p}`);
  return lines;
}
