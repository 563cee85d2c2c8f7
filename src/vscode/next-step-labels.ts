import * as vscode from 'vscode';
/**
 * The VS Code words for `src/core/loop/next-steps.ts`: what a stopped loop waits for and the
 * actions that fit, localized. The notification, the Loop Explorer, the status bar, the dashboard
 * and `@forge /status` all read a loop's next steps through `nextStepsOfSummary`.
 */
import { nextStepsOf, type LoopWait, type NextSteps, type NextStepId } from '../core/loop/next-steps';
import type { LoopTreeLoop } from './loop-tree-model';

type StepSource = { readonly loop: Pick<LoopTreeLoop, 'name' | 'status' | 'terminationReason' | 'branch' | 'endedAt' | 'state'>; readonly acceptedAt?: number };

/** The loop's budget limits as stored with it (absent: none). */
export function loopBudgetOf(loop: Pick<LoopTreeLoop, 'state'>): { money: number | null; tokens: number | null } | undefined {
  const budget = (loop.state as { budget?: { money?: number | null; tokens?: number | null } }).budget;
  return budget ? { money: budget.money ?? null, tokens: budget.tokens ?? null } : undefined;
}

export function nextStepsOfSummary(summary: StepSource): NextSteps {
  const { loop } = summary;
  return nextStepsOf({
    name: loop.name,
    status: loop.status,
    reason: loop.terminationReason,
    branch: loop.branch,
    budget: loopBudgetOf(loop),
    acceptedAfterEnd: summary.acceptedAt !== undefined && summary.acceptedAt >= (loop.endedAt ?? Number.MAX_SAFE_INTEGER),
  });
}

/** The button / link label of a step. */
export function nextStepLabel(id: NextStepId): string {
  switch (id) {
    case 'review':
      return vscode.l10n.t('Review');
    case 'accept':
      return vscode.l10n.t('Accept');
    case 'restart':
      return vscode.l10n.t('Restart');
    case 'raise_budget':
      return vscode.l10n.t('Raise Budget');
    case 'show_checks':
      return vscode.l10n.t('Show Checks');
    case 'cancel':
      return vscode.l10n.t('End Loop');
    case 'read_answers':
      return vscode.l10n.t('Read Answers');
    case 'send_review':
      return vscode.l10n.t('Send Review');
  }
}

/** What the loop waits for, in a few words (Explorer description, status bar tooltip). */
export function waitText(wait: LoopWait): string {
  switch (wait) {
    case 'running':
      return vscode.l10n.t('running');
    case 'completed':
      return vscode.l10n.t('completed: review and accept');
    case 'budget_paused':
      return vscode.l10n.t('paused: budget spent');
    case 'max_iterations':
      return vscode.l10n.t('stopped at its iteration limit');
    case 'checks_failing':
      return vscode.l10n.t('stopped: checks failing');
    case 'stalled':
      return vscode.l10n.t('stalled');
    case 'interrupted':
      return vscode.l10n.t('interrupted: restart to continue');
    case 'errored':
      return vscode.l10n.t('errored');
    case 'cancelled':
      return vscode.l10n.t('cancelled');
    case 'awaiting_review':
      return vscode.l10n.t('awaiting your review: read the answers');
    case 'setup_failed':
      return vscode.l10n.t('setup failed: fix it, then restart');
  }
}

/** The notification of a loop that stopped: `name` is the loop's, `detail` the reason's message. */
export function waitMessage(wait: LoopWait, name: string, detail: string): string {
  switch (wait) {
    case 'completed':
      return vscode.l10n.t('Forge: loop "{0}" completed. Review its changes, then accept them.', name);
    case 'budget_paused':
      return vscode.l10n.t('Forge: loop "{0}" is paused: its budget is spent. Nothing is lost; raise the budget to continue.', name);
    case 'max_iterations':
      return vscode.l10n.t('Forge: loop "{0}" stopped at its iteration limit.', name);
    case 'checks_failing':
      return vscode.l10n.t('Forge: loop "{0}" stopped at its iteration limit with checks failing: {1}', name, detail);
    case 'stalled':
      return vscode.l10n.t('Forge: loop "{0}" stalled: its agent stopped answering.', name);
    case 'interrupted':
      return vscode.l10n.t('Forge: loop "{0}" was interrupted; restart it to continue.', name);
    case 'awaiting_review':
      return vscode.l10n.t('Forge: the coder of loop "{0}" answered your review. Read the answers, then resolve each comment or send them back.', name);
    case 'setup_failed':
      return vscode.l10n.t('Forge: the worktree setup of loop "{0}" failed before its agent started: {1}. Fix it, then restart the loop (setup runs again).', name, detail);
    default:
      return vscode.l10n.t('Forge: loop "{0}" ended {1}: {2}.', name, wait, detail);
  }
}
