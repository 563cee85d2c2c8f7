/**
 * Restart Loop's choices (issue 16): the model, auditor model, variant and budget steps of
 * Execute Plan (runExecutionFlow, not a copy), each with the loop's current choice first, and
 * the budget step showing what the loop spent so far. Only what the user changed is passed on.
 */
import * as vscode from 'vscode';
import type { RestartLoopOptions } from '../core/loop/runtime-types';
import type { StoredLoopExtras } from '../core/loop/loop-extras';
import { describeBudget, formatMoney, spendFromTotals } from '../core/loop/budget';
import type { ForgeEngine } from './engine-contract';
import type { ForgeContext } from './forge-context';
import { runExecutionFlow } from './execution-flow';
import { loopRefFrom } from './commands/command-support';

/**
 * Undefined: the user cancelled. A call that names its loop and any of model / auditorModel /
 * variant / budget, or says `interactive: false`, asks nothing and restarts with what it gave.
 */
export async function askRestartOptions(ctx: ForgeContext, engine: ForgeEngine, ref: { projectId: string; name: string }, arg: unknown): Promise<RestartLoopOptions | undefined> {
  const given = (arg && typeof arg === 'object' ? arg : {}) as Record<string, unknown>;
  const explicit: RestartLoopOptions = {
    ...(typeof given.model === 'string' ? { model: given.model } : {}),
    ...(typeof given.auditorModel === 'string' ? { auditorModel: given.auditorModel } : {}),
    ...(typeof given.variant === 'string' ? { variant: given.variant } : {}),
    ...(typeof given.budget === 'number' ? { budget: { money: given.budget } } : {}),
  };
  if (loopRefFrom(arg) && (Object.keys(explicit).length > 0 || given.interactive === false)) return explicit;
  const loop = engine.runtime.get(ref);
  if (!loop) return explicit;
  const extras = loop.state as unknown as StoredLoopExtras;
  const spend = spendFromTotals(engine.repos.sessionUsage.totalsByRole(ref.projectId, ref.name));
  const spent = spend.code.cost + spend.auditor.cost;
  const recent = ctx.executionMemory.recentModels();
  const currentFirst = [loop.model, loop.auditorModel].filter((m): m is string => !!m);
  const choices = await runExecutionFlow({
    kind: 'plan',
    interactive: true,
    title: vscode.l10n.t('Forge: Restart Loop {0}', ref.name),
    // Mode, iterations and confinement stay the loop's: only models and budget are asked.
    given: { mode: 'loop', maxIterations: loop.maxIterations, sandbox: loop.sandbox },
    defaults: { model: loop.model, auditorModel: loop.auditorModel, maxIterations: loop.maxIterations, sandbox: loop.sandbox },
    memory: {
      last: () => ({ mode: 'loop', model: loop.model, auditorModel: loop.auditorModel, variant: extras.variant ?? null }),
      recentModels: () => [...new Set([...currentFirst, ...recent])],
      remember: async () => {},
    },
    catalog: () =>
      Promise.resolve(vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t("Forge: asking opencode for its models…") }, () => engine.providers(loop.repoDir ?? ''))).then(
        (c) => c,
        () => undefined,
      ),
    sandboxAvailability: async () => ({ available: loop.sandbox, reason: null }),
    budget: {
      current: extras.budget?.money ?? null,
      estimate: async () =>
        vscode.l10n.t('Spent so far: {0} (budget {1}){2}.', formatMoney(spent), describeBudget(extras.budget), loop.status === 'paused' ? vscode.l10n.t('; the loop is paused: give a budget above what it spent') : ''),
    },
  });
  if (!choices) return undefined;
  const options: RestartLoopOptions = { ...explicit };
  if (choices.model && choices.model !== loop.model) options.model = choices.model;
  if (choices.auditorModel && choices.auditorModel !== loop.auditorModel) options.auditorModel = choices.auditorModel;
  if ((choices.variant ?? undefined) !== extras.variant) options.variant = choices.variant ?? '';
  if (choices.budget !== undefined && choices.budget !== (extras.budget?.money ?? null)) options.budget = { money: choices.budget };
  return options;
}
