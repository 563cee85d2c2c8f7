/**
 * What a loop's phase prompt is built from (PromptContext), read from the database: the plan or
 * goal, the sections, the open findings and the coder's last handoff.
 */
import type { ForgeRepositories, LoopRow } from '../storage/repositories';
import { readExtras } from './loop-extras';
import type { CoderHandoff, PromptContext } from './prompts';
import type { LoopState } from './state';

export function promptContextFor(repos: ForgeRepositories, loop: LoopRow, state: LoopState): PromptContext {
  const extras = readExtras(loop);
  const large = repos.loops.getLargeFields(loop.projectId, loop.name);
  const sections = repos.sectionPlans.list(loop.projectId, loop.name);
  const open = repos.reviewFindings.listOpen(loop.projectId, loop.name);
  let lastCoderHandoff: CoderHandoff | null = null;
  const coder = repos.handoffs.latest(loop.projectId, loop.name, 'code');
  if (coder) {
    const p = coder.payload as Partial<CoderHandoff>;
    lastCoderHandoff = { decisions: p.decisions ?? '', verification: p.verification ?? '', notesForAuditor: p.notesForAuditor ?? '' };
  }
  return {
    loopName: loop.name,
    state,
    title: extras.title,
    planText: large.planText,
    goal: large.goalText,
    objective: extras.objective,
    verification: extras.verification,
    sections: sections.map((s) => ({ index: s.index, title: s.title, body: s.body, status: s.status })),
    openFindings: open.map((f) => ({
      id: f.id,
      file: f.file,
      line: f.line > 0 ? f.line : null,
      severity: f.severity,
      description: f.description,
      scenario: f.scenario,
      occurrences: f.recurrenceCount,
      sectionIndex: f.sectionIndex,
      source: f.source,
      lineEnd: f.lineEnd,
      reply: f.reply,
    })),
    lastCoderHandoff,
    postAction: extras.postAction,
    worktreeDir: loop.worktreeDir!,
    baseCommit: loop.baseCommit!,
    branch: loop.branch!,
    userMessages: extras.pendingUserMessages ?? [],
  };
}
