// What `@forge /status` answers: the workspace's loops as markdown, with a button per loop
// for its dashboard and its diff. Pure (no I/O): the participant streams what this returns.
import * as vscode from 'vscode';
import { phaseLabel, type LoopSummary } from '../loop-tree-model';
import { inertText } from '../../core/text/inert-text';
import { nextStepLabel, nextStepsOfSummary } from '../next-step-labels';

export interface ChatButton {
  readonly command: string;
  readonly title: string;
  readonly arguments: unknown[];
}

export interface ChatStatusAnswer {
  readonly markdown: string;
  readonly buttons: readonly ChatButton[];
}

/** Markdown special characters of a loop name or a message, escaped so they show as written (control characters as `\uXXXX`). */
export const escapeMarkdown = (text: string): string => inertText(text).replace(/[\\`*_{}[\]()#+\-.!|<>]/g, (c) => `\\${c}`);

const isLive = (status: string) => status === 'running' || status === 'starting';

function loopLine(summary: LoopSummary): string {
  const { loop } = summary;
  const state = isLive(loop.status)
    ? vscode.l10n.t('{0}, {1}, iteration {2}', loop.status, phaseLabel(loop.phase), loop.iteration)
    : loop.terminationReason && loop.terminationReason !== loop.status
      ? vscode.l10n.t('{0} ({1}) after {2} iterations', loop.status, loop.terminationReason, loop.iteration)
      : vscode.l10n.t('{0} after {1} iterations', loop.status, loop.iteration);
  const findings =
    summary.openFindings.bug + summary.openFindings.warning === 0
      ? vscode.l10n.t('no open finding')
      : vscode.l10n.t('open findings: {0} bugs, {1} warnings', summary.openFindings.bug, summary.openFindings.warning);
  const checks = summary.checks ? ` · ${vscode.l10n.t('checks {0}/{1} passing', summary.checks.passed, summary.checks.total)}` : '';
  const branch = loop.branch ? ` · \`${loop.branch.replace(/`/g, '')}\`` : '';
  // What the user can do next, with the CLI line of each (issue 29 item 7).
  const next = nextStepsOfSummary(summary);
  const steps = next.waiting && next.steps.length > 0 ? ` · ${vscode.l10n.t('**next:** {0}', next.steps.map((s) => `${escapeMarkdown(nextStepLabel(s.id))} (\`${s.cli.replace(/`/g, '')}\`)`).join(', '))}` : '';
  return `- **${escapeMarkdown(loop.name)}** — ${escapeMarkdown(state)} · ${findings}${checks}${branch}${steps}`;
}

/** Running loops first, then the most recent; at most `limit` loops get a line and buttons. */
export function chatStatusAnswer(summaries: readonly LoopSummary[], limit = 10): ChatStatusAnswer {
  if (summaries.length === 0) {
    return {
      markdown: vscode.l10n.t('No Forge loops in this workspace yet. Open a markdown plan and run `@forge /run` (or **Forge: Execute Plan**).'),
      buttons: [{ command: 'forge.openDashboard', title: vscode.l10n.t('Open Dashboard'), arguments: [] }],
    };
  }
  const sorted = [...summaries].sort(
    (a, b) => Number(isLive(b.loop.status)) - Number(isLive(a.loop.status)) || (b.loop.endedAt ?? b.loop.updatedAt) - (a.loop.endedAt ?? a.loop.updatedAt),
  );
  const shown = sorted.slice(0, limit);
  const running = summaries.filter((s) => isLive(s.loop.status)).length;
  const lines = [
    `### ${running === 1 ? vscode.l10n.t('Forge loops: 1 running, {0} in all', summaries.length) : vscode.l10n.t('Forge loops: {0} running, {1} in all', running, summaries.length)}`,
    '',
    ...shown.map(loopLine),
  ];
  if (sorted.length > shown.length) lines.push('', vscode.l10n.t('…and {0} more in the Loop Explorer.', sorted.length - shown.length));
  const buttons: ChatButton[] = [];
  for (const summary of shown) {
    const { loop } = summary;
    const ref = { projectId: loop.projectId, name: loop.name };
    buttons.push({ command: 'forge.openDashboard', title: vscode.l10n.t('Open Dashboard: {0}', loop.name), arguments: [ref] });
    if (loop.branch) buttons.push({ command: 'forge.showLoopDiff', title: vscode.l10n.t('Show Diff: {0}', loop.name), arguments: [ref] });
    // A stopped loop's work can be reviewed: comments on its diff go back to it as findings.
    if (loop.branch && !isLive(loop.status)) buttons.push({ command: 'forge.reviewLoop', title: vscode.l10n.t('Review: {0}', loop.name), arguments: [ref] });
    // A waiting loop's next steps as buttons too (Review is Show Diff; Show Checks is the dashboard).
    const next = nextStepsOfSummary(summary);
    if (!next.waiting) continue;
    for (const step of next.steps) {
      if (step.id === 'review' || step.id === 'show_checks') continue;
      buttons.push({ command: step.vscodeCommand, title: vscode.l10n.t('{0}: {1}', nextStepLabel(step.id), loop.name), arguments: [ref] });
    }
  }
  return { markdown: lines.join('\n'), buttons };
}
