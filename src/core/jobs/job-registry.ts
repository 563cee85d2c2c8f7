/**
 * Which `LoopJobs` belongs to which loop, shared by the loop runtime (which opens and disposes a
 * loop's jobs with its scope) and the Forge tool backend (which serves `forge_shell` /
 * `forge_jobs` calls). Made once by the engine (the composition root).
 */
import type { LoopJobs } from './loop-jobs';

export class LoopJobRegistry {
  private readonly byLoop = new Map<string, LoopJobs>();

  private key(projectId: string, loopName: string): string {
    return `${projectId}\u0000${loopName}`;
  }

  set(projectId: string, loopName: string, jobs: LoopJobs): void {
    this.byLoop.set(this.key(projectId, loopName), jobs);
  }

  get(projectId: string, loopName: string): LoopJobs | undefined {
    return this.byLoop.get(this.key(projectId, loopName));
  }

  /** Removes the entry if it is still `jobs` (a later scope of the same loop may have replaced it). */
  delete(projectId: string, loopName: string, jobs: LoopJobs): void {
    if (this.byLoop.get(this.key(projectId, loopName)) === jobs) this.byLoop.delete(this.key(projectId, loopName));
  }
}
