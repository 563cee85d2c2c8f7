/**
 * What a loop's agent did to the worktree's git that Forge undid before a commit (issue 26): a
 * rewritten `.git` file, a repository of its own inside the worktree. Each becomes a finding of
 * the loop (a warning, source `check`: it does not send the coder back, and only Forge writes
 * it) and a notice, so the user sees what the agent tried.
 */
import type { ForgeRepositories } from '../storage/repositories';
import type { LoopRef, LoopRuntimeEvent } from './runtime-types';

export interface AgentGitChange {
  kind: string;
  path: string;
  detail: string;
}

export function recordAgentGitChanges(
  deps: { repos: Pick<ForgeRepositories, 'reviewFindings'>; emit: (event: LoopRuntimeEvent) => void },
  ref: LoopRef,
  changes: ReadonlyArray<AgentGitChange>,
): void {
  for (const change of changes) {
    const description = `Forge undid a change to the worktree's git before committing: ${change.detail}. Forge's own git never uses a repository the worktree names.`;
    deps.repos.reviewFindings.record(ref.projectId, {
      loopName: ref.name,
      file: change.path,
      line: 0,
      severity: 'warning',
      description,
      sectionIndex: null,
      fingerprint: `forge-git:${change.kind}:${change.path}`,
      source: 'check',
    });
    deps.emit({ type: 'loop.notice', loop: ref, level: 'warning', message: description });
  }
}
