/**
 * What `forge plan` prints: where the plan went, what the architect said (its questions),
 * what the drafting cost, and the commands that follow. Pure.
 */
import type { DraftResult } from '../core/plan-draft/plan-drafter';

export function formatDraftCost(d: DraftResult['draft']): string {
  const tokens = `${d.inputTokens} input + ${d.outputTokens} output tokens${d.reasoningTokens ? ` (${d.reasoningTokens} reasoning)` : ''}${d.cacheReadTokens ? `, ${d.cacheReadTokens} cache read` : ''}`;
  return `$${d.cost.toFixed(4)}, ${tokens}, ${d.messages} model message${d.messages === 1 ? '' : 's'}`;
}

export function formatDraftResult(result: DraftResult, json: boolean): { stdout: string; stderr: string[] } {
  const { draft, outcome, reply } = result;
  if (json) {
    return {
      stdout: JSON.stringify({
        draft: draft.id,
        status: draft.status,
        outPath: outcome.kind === 'drafted' ? draft.outPath : null,
        summary: outcome.kind === 'drafted' ? outcome.summary : null,
        warnings: outcome.kind === 'drafted' ? outcome.warnings : [],
        message: outcome.kind === 'no_plan' ? outcome.message : null,
        reply,
        sessionId: draft.sessionId,
        model: draft.model,
        turns: draft.turns,
        usage: {
          inputTokens: draft.inputTokens,
          outputTokens: draft.outputTokens,
          reasoningTokens: draft.reasoningTokens,
          cacheReadTokens: draft.cacheReadTokens,
          cacheWriteTokens: draft.cacheWriteTokens,
          cost: draft.cost,
          messages: draft.messages,
        },
      }),
      stderr: outcome.kind === 'no_plan' ? [`forge: ${outcome.message}`] : [],
    };
  }
  const lines: string[] = [];
  const stderr: string[] = [];
  if (outcome.kind === 'drafted') {
    lines.push(`Plan drafted (draft ${draft.id}): ${outcome.summary}`, `Written to ${draft.outPath}`);
    for (const w of outcome.warnings) lines.push(`warning: ${w}`);
  } else {
    stderr.push(`forge: ${outcome.message}`);
    lines.push(`No plan yet (draft ${draft.id}).`);
  }
  if (reply) lines.push('', 'The architect says:', ...reply.split('\n').map((l) => `  ${l}`), '');
  lines.push(`Drafting cost: ${formatDraftCost(draft)} (${draft.turns} turn${draft.turns === 1 ? '' : 's'})`);
  lines.push(`Answer or ask for changes: forge plan --continue ${draft.id} "…"`);
  if (outcome.kind === 'drafted') lines.push(`Run it: forge run ${draft.outPath}`);
  return { stdout: lines.join('\n'), stderr };
}
