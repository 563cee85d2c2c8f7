import * as vscode from 'vscode';
/**
 * Notices that name the next step (issue 29 item 7): when a loop completes, pauses or errors, ONE
 * notification with the actions that fit (`src/core/loop/next-steps.ts`). Loops this window's
 * engine drives are seen through their `loop.ended` event; loops another window or a `forge run`
 * drives, through the loops model (a loop seen running, then stopped). Each stop is said once;
 * a loop seen running again may be said again. Loops of a feature group are the group's to tell
 * (group-notifications.ts). The user's own cancel is not told back.
 */
import type { LoopRuntimeEvent } from '../core/loop/runtime-types';
import { nextStepsOf, type NextStep, type NextSteps } from '../core/loop/next-steps';
import { terminationReasonToString } from '../core/loop/state';
import type { ForgeContext } from './forge-context';
import { loopKey } from './loops-model';
import type { LoopSummary } from './loop-tree-model';
import { loopBudgetOf, nextStepLabel, nextStepsOfSummary, waitMessage } from './next-step-labels';

type LoopRef = { readonly projectId: string; readonly name: string };

const isLive = (status: string) => status === 'running' || status === 'starting';

/** Runs a step on the loop (Show Checks opens the dashboard on the loop). */
export function runNextStep(ctx: Pick<ForgeContext, 'dashboard'>, step: NextStep, ref: LoopRef): void {
  const loop = { projectId: ref.projectId, name: ref.name };
  if (step.id === 'show_checks') void ctx.dashboard.show({ loop });
  else void vscode.commands.executeCommand(step.vscodeCommand, loop);
}

export class LoopNotices implements vscode.Disposable {
  /** Loops whose stop was told and that were not seen running since. */
  private readonly told = new Set<string>();
  /** Each loop's status at the model's last reading (absent: not seen yet). */
  private readonly lastStatus = new Map<string, string>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly ctx: Pick<ForgeContext, 'loops' | 'notifier' | 'dashboard'>) {
    this.subscriptions = [ctx.loops.onRuntimeEvent((e) => this.onRuntimeEvent(e)), ctx.loops.onDidChange(() => this.onModel())];
    this.onModel();
  }

  private inGroup(ref: LoopRef): boolean {
    return this.ctx.loops.groups().some((g) => g.ref.projectId === ref.projectId && g.features.some((f) => f.loopName === ref.name));
  }

  private onRuntimeEvent(e: LoopRuntimeEvent): void {
    // A loop of this window that runs again (a restart) may be told again, seen running by the model or not.
    if (e.type === 'loop.started' || e.type === 'loop.phase') this.told.delete(loopKey(e.loop));
    if (e.type !== 'loop.ended') return;
    const steps = nextStepsOf({ name: e.loop.name, status: e.status, reason: e.reason, branch: e.branch, budget: this.budgetOf(e.loop) });
    this.tell(e.loop, steps, ('message' in e.reason && e.reason.message) || terminationReasonToString(e.reason));
  }

  private budgetOf(ref: LoopRef) {
    const summary = this.ctx.loops.find(ref);
    return summary ? loopBudgetOf(summary.loop) : undefined;
  }

  /** A loop another process drives stopped between two readings of the model. */
  private onModel(): void {
    const seen = new Set<string>();
    for (const summary of this.ctx.loops.summaries()) {
      const key = loopKey(summary.loop);
      seen.add(key);
      const before = this.lastStatus.get(key);
      this.lastStatus.set(key, summary.loop.status);
      if (isLive(summary.loop.status)) {
        this.told.delete(key);
        continue;
      }
      if (before !== undefined && isLive(before)) this.tellSummary(summary);
    }
    for (const key of [...this.lastStatus.keys()]) if (!seen.has(key)) this.lastStatus.delete(key);
  }

  private tellSummary(summary: LoopSummary): void {
    const reason = summary.loop.terminationReason ?? summary.loop.status;
    const detail = reason.includes(': ') ? reason.slice(reason.indexOf(': ') + 2) : reason;
    this.tell(summary.loop, nextStepsOfSummary(summary), detail);
  }

  private tell(ref: LoopRef, steps: NextSteps, detail: string): void {
    const key = loopKey(ref);
    if (!steps.notify || this.told.has(key) || this.inGroup(ref)) return;
    this.told.add(key);
    const openDashboard = vscode.l10n.t('Open Dashboard');
    const labels = steps.steps.map((s) => nextStepLabel(s.id));
    // A few buttons at most: the dashboard has the rest.
    const actions = [...labels.slice(0, 3), ...(labels.length < 3 ? [openDashboard] : [])];
    const message = waitMessage(steps.wait, ref.name, detail);
    const shown = steps.wait === 'completed' ? this.ctx.notifier.info(message, ...actions) : this.ctx.notifier.warn(message, ...actions);
    void shown.then((choice) => {
      if (choice === undefined) return;
      if (choice === openDashboard) return void this.ctx.dashboard.show({ loop: { projectId: ref.projectId, name: ref.name } });
      const step = steps.steps[labels.indexOf(choice)];
      if (step) runNextStep(this.ctx, step, ref);
    });
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}
