import * as vscode from 'vscode';
import type { ForgeEngine } from '../engine-contract';
import type { ForgeContext } from '../forge-context';
import { errorMessage } from '../log';
import type { LoopSummary } from '../loop-tree-model';

/** What every Forge command resolves to, so callers (and tests) can tell what happened. */
export type CommandResult =
  | { readonly status: 'done'; readonly detail?: unknown }
  /** supervisorPid: the loop was handed to the data folder's engine, that process (not this window) supervises it. */
  | { readonly status: 'started'; readonly loop: { readonly projectId: string; readonly name: string }; readonly notices: readonly string[]; readonly supervisorPid?: number }
  | { readonly status: 'refused'; readonly reason: 'untrusted' | 'no-workspace' | 'no-repository' | 'no-plan' | 'bad-plan' | 'bad-checks' | 'no-loop' | 'unavailable' | 'no-opencode' | 'no-group' | 'bad-group' | 'not-accepted'; readonly message: string }
  | { readonly status: 'cancelled' }
  | { readonly status: 'failed'; readonly message: string };

export function registerForgeCommand(
  ctx: ForgeContext,
  id: string,
  title: string,
  handler: (...args: unknown[]) => Promise<CommandResult>,
): void {
  ctx.extension.subscriptions.push(
    vscode.commands.registerCommand(id, async (...args: unknown[]): Promise<CommandResult> => {
      try {
        return await handler(...args);
      } catch (error) {
        ctx.notifier.error(vscode.l10n.t('Forge: {0} failed', title), error);
        return { status: 'failed', message: errorMessage(error) };
      }
    }),
  );
}

export function refused(ctx: ForgeContext, reason: Extract<CommandResult, { status: 'refused' }>['reason'], message: string, ...actions: string[]): CommandResult {
  void ctx.notifier.warn(message, ...actions).then((choice) => {
    if (choice === vscode.l10n.t('Open Folder')) void vscode.commands.executeCommand('workbench.action.files.openFolder');
  });
  return { status: 'refused', reason, message };
}

export function noWorkspace(ctx: ForgeContext, action: string): CommandResult | undefined {
  if (vscode.workspace.workspaceFolders?.length) return undefined;
  return refused(ctx, 'no-workspace', vscode.l10n.t('Forge needs a folder with a git repository to {0}: open one first.', action), vscode.l10n.t('Open Folder'));
}

/** The engine, started under a progress notification the first time. */
export async function engineWithProgress(ctx: ForgeContext): Promise<ForgeEngine> {
  const existing = ctx.engine.peek();
  if (existing) return existing;
  return vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: vscode.l10n.t('Forge: starting') }, () => ctx.engine.get());
}

export interface LoopRefArg {
  readonly projectId: string;
  readonly name: string;
}

/** A loop reference from a command argument: a {projectId, name}, a Loop Explorer node, or a finding reference. */
export function loopRefFrom(arg: unknown): LoopRefArg | undefined {
  if (!arg || typeof arg !== 'object') return undefined;
  const a = arg as Record<string, unknown>;
  if (typeof a.projectId === 'string' && typeof a.name === 'string') return { projectId: a.projectId, name: a.name };
  if (typeof a.projectId === 'string' && typeof a.loopName === 'string') return { projectId: a.projectId, name: a.loopName };
  return undefined;
}

/** The loop a command acts on: from its argument, else picked among the loops `filter` accepts. */
export async function resolveLoop(
  ctx: ForgeContext,
  arg: unknown,
  filter: (summary: LoopSummary) => boolean,
  placeHolder: string,
): Promise<LoopSummary | undefined | 'none'> {
  await ctx.loops.start();
  const ref = loopRefFrom(arg);
  if (ref) return ctx.loops.find(ref) ?? 'none';
  const candidates = ctx.loops.summaries().filter(filter);
  if (candidates.length === 0) return 'none';
  if (candidates.length === 1) return candidates[0];
  const picked = await vscode.window.showQuickPick(
    candidates.map((summary) => ({
      summary,
      label: summary.loop.name,
      description: vscode.l10n.t('{0} · {1} · iteration {2}', summary.loop.status, summary.loop.phase, summary.loop.iteration),
    })),
    { placeHolder },
  );
  return picked?.summary;
}

export interface GroupRefArg {
  readonly projectId: string;
  readonly id: string;
}

/** A feature-group reference from a command argument: a {projectId, id}, {projectId, groupId} (a Loop Explorer group node). */
export function groupRefFrom(arg: unknown): GroupRefArg | undefined {
  if (!arg || typeof arg !== 'object') return undefined;
  const a = arg as Record<string, unknown>;
  if (typeof a.projectId !== 'string') return undefined;
  if (typeof a.groupId === 'string') return { projectId: a.projectId, id: a.groupId };
  if (typeof a.id === 'string') return { projectId: a.projectId, id: a.id };
  return undefined;
}
