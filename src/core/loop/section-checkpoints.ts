/**
 * A section's checkpoint commit. The usual one is made when the table completes the section;
 * the early one is made at the auditor's handoff, while the auditor's turn winds down, and is
 * confirmed or taken back when the table decides at idle. Its own file because the early
 * commit carries state across events (made at a tool event, settled at the next transition).
 */
import type { LoopRow } from '../storage/repositories';
import { sectionCheckpointMessage, type StagedChanges } from '../workspace';
import { recordAgentGitChanges } from './agent-git-findings';
import { readExtras } from './loop-extras';
import type { LoopFindings } from './loop-findings';
import type { CurrentSession, SupervisorContext } from './supervisor-deps';
import { nextTransition, type TransitionEffect } from './transitions';

export class SectionCheckpoints {
  /** The checkpoint commit made at the auditor's handoff (see startEarly). */
  private early: { sessionId: string; index: number; worktreeDir: string; commit: Promise<{ sha: string; message: string } | null> } | undefined;

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly findings: LoopFindings,
  ) {}

  /**
   * The auditor handed off and, as things stand, the section is complete: make its checkpoint
   * commit now, while the auditor's turn winds down, instead of between the sessions. At idle
   * the table decides: the commit stands if the section completes (it holds exactly what the
   * auditor approved), and is taken back (its changes stay staged) if not.
   */
  startEarly(cur: CurrentSession): void {
    if (cur.role !== 'auditor' || this.early?.sessionId === cur.id) return;
    const { ref, deps } = this.ctx;
    const loop = this.ctx.loop();
    const state = readExtras(loop).loopState;
    const handoff = deps.repos.handoffs.forSession(ref.projectId, loop.name, cur.id);
    if (!handoff || handoff.role !== 'auditor' || !loop.worktreeDir) return;
    const predicted = nextTransition(state, this.findings.handoffEvent('auditor', state), readExtras(loop).limits);
    // A gated checkpoint waits for its checks: no early commit.
    const complete = predicted.kind === 'ignore' || predicted.kind === 'remind_handoff' || predicted.kind === 'run_checks' ? undefined : predicted.effects.find((e) => e.type === 'complete_section');
    if (!complete || complete.type !== 'complete_section') return;
    const worktreeDir = loop.worktreeDir;
    const write = this.message(complete.index);
    let message = '';
    const commit = deps.worktrees.commitAll(worktreeDir, (changes) => (message = write(changes)), this.commitOptions()).then((sha) => (sha ? { sha, message } : null));
    // Failures surface at idle, where the ordinary commit runs instead.
    commit.catch((e: unknown) => deps.log.debug(`[loop ${ref.name}] early checkpoint: ${String(e)}`));
    this.early = { sessionId: cur.id, index: complete.index, worktreeDir, commit };
  }

  /** What the agent did to the worktree's git, undone by the commit, becomes findings. */
  private commitOptions() {
    return { onAgentGitChanges: (changes: ReadonlyArray<{ kind: string; path: string; detail: string }>) => recordAgentGitChanges(this.ctx.deps, this.ctx.ref, changes) };
  }

  /** Writes the commit message from what the commit stages (its title, the files it changes). */
  private message(index: number): (changes: StagedChanges) => string {
    const section = this.ctx.deps.repos.sectionPlans.get(this.ctx.ref.projectId, this.ctx.ref.name, index);
    return (changes) => sectionCheckpointMessage({ number: index + 1, title: section?.title ?? '', loopName: this.ctx.ref.name, changes });
  }

  /** Takes back an early checkpoint the table did not confirm (its changes stay staged). */
  private async settleEarly(confirmedIndex: number | null): Promise<{ sha: string; message: string } | 'none' | undefined> {
    const early = this.early;
    this.early = undefined;
    if (!early) return undefined;
    const made = await early.commit.catch(() => undefined);
    if (made === undefined) return undefined; // failed: the ordinary commit runs (and reports)
    if (early.index === confirmedIndex) return made ? made : 'none';
    if (made) {
      const undone = await this.ctx.deps.worktrees.undoLastCommit(early.worktreeDir, made.sha).catch(() => false);
      this.ctx.deps.log.info(`[loop ${this.ctx.ref.name}] the section did not complete after all: ${undone ? 'took back' : 'could not take back'} the early checkpoint ${made.sha.slice(0, 12)}`);
    }
    return undefined;
  }

  /** The checkpoint commits of a transition's completed sections (the early one when it was confirmed). */
  async applyGitEffects(effects: TransitionEffect[], loop: LoopRow): Promise<void> {
    const completes = effects.filter((e): e is Extract<TransitionEffect, { type: 'complete_section' }> => e.type === 'complete_section');
    const early = await this.settleEarly(completes.length === 1 ? completes[0]!.index : null);
    for (const e of completes) {
      const write = this.message(e.index);
      let message = early === undefined ? null : early === 'none' ? null : early.message;
      const sha =
        early === undefined
          ? await this.ctx.deps.worktrees.commitAll(loop.worktreeDir!, (changes) => (message = write(changes)), this.commitOptions())
          : early === 'none'
            ? null
            : early.sha;
      if (sha && message !== null) this.ctx.deps.emit({ type: 'loop.commit', loop: this.ctx.ref, sha, message: message.split('\n')[0]! });
    }
  }
}
