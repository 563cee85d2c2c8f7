import * as vscode from 'vscode';
import type { ForgeContext } from '../forge-context';
import { refused, registerForgeCommand } from './command-support';

interface FindingArg {
  projectId: string;
  loopName: string;
  findingId: number;
}

function findingArg(arg: unknown): FindingArg | undefined {
  const a = arg as Partial<FindingArg> | undefined;
  return a && typeof a.projectId === 'string' && typeof a.loopName === 'string' && typeof a.findingId === 'number'
    ? { projectId: a.projectId, loopName: a.loopName, findingId: a.findingId }
    : undefined;
}

export function registerFindingCommands(ctx: ForgeContext): void {
  registerForgeCommand(ctx, 'forge.dismissFinding', vscode.l10n.t('Dismiss Finding'), async (arg) => {
    const ref = findingArg(arg);
    if (!ref) return refused(ctx, 'no-loop', vscode.l10n.t('Forge: Dismiss Finding works on a Forge problem: use its quick fix in the editor or the Problems view.'));
    const engine = await ctx.engine.get();
    const finding = engine.repos.reviewFindings.get(ref.projectId, ref.findingId);
    if (!finding || finding.loopName !== ref.loopName) return refused(ctx, 'no-loop', vscode.l10n.t('Finding {0} of loop "{1}" no longer exists.', ref.findingId, ref.loopName));
    // Recorded, not deleted: the auditor and the dashboard still see it, as dismissed.
    engine.repos.reviewFindings.setStatus(ref.projectId, ref.findingId, 'dismissed');
    ctx.log.info(`finding ${ref.findingId} of ${ref.loopName} (${finding.file}:${finding.line}) dismissed by the user`);
    await ctx.loops.refreshNow();
    return { status: 'done' };
  });

  registerForgeCommand(ctx, 'forge.showFindingInDashboard', vscode.l10n.t('Show Finding in Dashboard'), async (arg) => {
    const ref = findingArg(arg);
    if (!ref) return refused(ctx, 'no-loop', vscode.l10n.t('Forge: Show Finding in Dashboard works on a Forge problem: use its quick fix in the editor or the Problems view.'));
    await ctx.dashboard.show({ loop: { projectId: ref.projectId, name: ref.loopName }, findingId: ref.findingId });
    return { status: 'done' };
  });
}
