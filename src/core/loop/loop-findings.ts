/**
 * The review findings as the supervisor sees them: reporting each finding's changes as they
 * happen, and counting the open ones into a handoff's event for the transition table. Its own
 * file because both the idle hand-over and the early checkpoint read findings the same way.
 */
import type { Role, LoopState } from './state';
import type { SupervisorContext } from './supervisor-deps';
import type { LoopEvent, UserReviewCounts } from './transitions';

export class LoopFindings {
  /** Last seen status of each finding, to report changes as they happen. */
  private seen = new Map<number, string>();

  constructor(private readonly ctx: SupervisorContext) {}

  /** Takes the findings as they are now as seen (a takeover does not report them again). */
  prime(): void {
    const { ref, deps } = this.ctx;
    for (const f of deps.repos.reviewFindings.listByLoop(ref.projectId, ref.name)) this.seen.set(f.id, `${f.status}:${f.updatedAt}`);
  }

  /** Emits a `loop.finding` for each finding new or changed since it was last seen. */
  reportChanges(): void {
    const { ref, deps } = this.ctx;
    for (const f of deps.repos.reviewFindings.listByLoop(ref.projectId, ref.name)) {
      const mark = `${f.status}:${f.updatedAt}`;
      if (this.seen.get(f.id) === mark) continue;
      this.seen.set(f.id, mark);
      deps.emit({ type: 'loop.finding', loop: ref, finding: f });
    }
  }

  /**
   * The transition table's event for a handoff of `role`, with the findings open now. A check's
   * finding does not count here: only its check can close it, and the gate that follows a
   * clean audit runs that check again. Nor does the user's: only the user closes it, and the
   * completion gate (userReviewGate) holds the loop for it.
   */
  /** The user's open review findings, and how many of them the coder has not answered. */
  userReviewCounts(): UserReviewCounts {
    const { ref, deps } = this.ctx;
    const open = deps.repos.reviewFindings.listOpen(ref.projectId, ref.name).filter((f) => f.source === 'user');
    return { open: open.length, unanswered: open.filter((f) => !f.reply).length };
  }

  handoffEvent(role: Role, state: LoopState): LoopEvent {
    const { ref, deps } = this.ctx;
    const open = deps.repos.reviewFindings.listOpen(ref.projectId, ref.name).filter((f) => f.source !== 'check' && f.source !== 'user');
    const bugs = open.filter((f) => f.severity === 'bug');
    const openBugsInSection = state.sectionIndex === null ? 0 : bugs.filter((f) => f.sectionIndex === state.sectionIndex).length;
    const event: LoopEvent = { type: 'handoff', role, openBugsInSection, openBugs: bugs.length, openFindings: open.length };
    if (state.kind !== 'plan' || state.sectionIndex === null) return event;
    const sections = deps.repos.sectionPlans.list(ref.projectId, ref.name);
    const firstPending = sections.find((s) => s.status !== 'done' && !(state.phase === 'auditing' && s.index === state.sectionIndex))?.index ?? null;
    return { ...event, sections: { count: sections.length, firstPending } };
  }
}
