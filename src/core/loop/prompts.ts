/**
 * Prompt builders: pure functions of the loop's stored state. Findings are the only channel
 * from auditor to coder, so every coder prompt inlines each open finding in full; auditor
 * prose never reaches the coder. Agents end a pass by calling Forge's handoff tool — the
 * runtime never reads their prose to decide anything.
 */
import { userMessagesSection } from './user-message';
import type { LoopState } from './state';

/** Tool names as the model sees them: opencode prefixes MCP tools with the server name `forge`. */
export const AGENT_TOOL = {
  handoff: 'forge_loop_handoff',
  reviewWrite: 'forge_review_write',
  reviewRead: 'forge_review_read',
  reviewDelete: 'forge_review_delete',
  reviewReply: 'forge_review_reply',
  sectionRead: 'forge_section_read',
  planRead: 'forge_plan_read',
  planAdjust: 'forge_plan_adjust',
} as const;

/** A finding returns this many times before both prompts flag it as recurring. */
export const RECURRING_THRESHOLD = 3;

export interface PromptFinding {
  id: number;
  file: string;
  line: number | null;
  severity: 'bug' | 'warning';
  description: string;
  scenario: string | null;
  /** How many times the auditor has raised this finding (1 = first time). */
  occurrences: number;
  sectionIndex: number | null;
  /**
   * 'check': a verification check Forge ran failed (only its passing closes it); 'user': the
   * user's review comment (only the user closes it); default the auditor.
   */
  source?: 'auditor' | 'check' | 'user';
  /** A user's finding: the last line of its range (null: one line). */
  lineEnd?: number | null;
  /** A user's finding: the coder's answer so far (review_reply). */
  reply?: string | null;
}

export interface PromptSection {
  index: number;
  title: string;
  body: string;
  status: 'pending' | 'in_progress' | 'done';
}

export interface CoderHandoff {
  decisions: string;
  verification: string;
  notesForAuditor: string;
}

export interface PromptContext {
  loopName: string;
  state: LoopState;
  /** Plan loops: the plan's title and full text; goal loops: the goal. */
  title: string;
  planText: string | null;
  goal: string | null;
  objective: string | null;
  verification: string | null;
  sections: PromptSection[];
  openFindings: PromptFinding[];
  lastCoderHandoff: CoderHandoff | null;
  postAction: string | null;
  worktreeDir: string;
  baseCommit: string;
  branch: string;
  /** The user's messages (`forge tell`) sent while the loop was between sessions, oldest first. */
  userMessages?: readonly string[];
}

function findingBlock(f: PromptFinding): string {
  const where = f.line ? `${f.file}:${f.line}` : f.file;
  const from = f.source === 'check' ? ' (failed verification check)' : '';
  const lines = [`### Finding #${f.id} — ${f.severity.toUpperCase()}${from} — ${where || 'the loop'}`, '', f.description.trim()];
  if (f.scenario && f.scenario.trim()) lines.push('', `Scenario: ${f.scenario.trim()}`);
  if (f.occurrences >= RECURRING_THRESHOLD) {
    lines.push(
      '',
      `RECURRING: this finding has come back ${f.occurrences} times. The previous fixes did not hold — find the root cause instead of patching the symptom again.`,
    );
  }
  return lines.join('\n');
}

/** Where a user's comment points: FILE:LINE or FILE:LINE-END. */
function userWhere(f: PromptFinding): string {
  if (!f.line) return f.file;
  return f.lineEnd && f.lineEnd > f.line ? `${f.file}:${f.line}-${f.lineEnd}` : `${f.file}:${f.line}`;
}

/**
 * The user's review in a coder's prompt (issue 29): every open comment of the user in full,
 * verbatim, and how to answer it. Empty when there is none. Pure.
 */
export function userReviewSection(findings: readonly PromptFinding[]): string {
  const mine = findings.filter((f) => f.source === 'user');
  if (mine.length === 0) return '';
  const blocks = mine.map((f) => {
    const lines = [`### User comment #${f.id} — ${f.severity.toUpperCase()} — ${userWhere(f)}`, '', f.description];
    if (f.reply) lines.push('', `Your earlier answer: ${f.reply}`);
    return lines.join('\n');
  });
  return [
    `## The user's review (${mine.length} open comment${mine.length === 1 ? '' : 's'})`,
    '',
    'The user reviewed the diff of this loop and wrote these comments. They come first: address every one.',
    '',
    ...blocks.join('\n\n').split('\n'),
    '',
    `For each comment, fix it in the code, then call \`${AGENT_TOOL.reviewReply}\` with its \`id\` and a \`reply\` saying what you changed (or, if you believe no change is right, why). Only the user resolves these comments; you cannot close or delete them.`,
  ].join('\n');
}

function findingsSection(all: PromptFinding[], heading: string): string {
  const findings = all.filter((f) => f.source !== 'user');
  if (findings.length === 0) return '';
  return [`## ${heading} (${findings.length})`, '', ...findings.map(findingBlock).join('\n\n').split('\n')].join('\n');
}

function currentSection(ctx: PromptContext): PromptSection | null {
  const i = ctx.state.sectionIndex;
  return i === null ? null : (ctx.sections.find((s) => s.index === i) ?? null);
}

function findingsInScope(ctx: PromptContext): PromptFinding[] {
  const i = ctx.state.sectionIndex;
  if (ctx.state.phase === 'final_audit_fix' || ctx.state.phase === 'final_auditing' || i === null) return ctx.openFindings;
  // A section's coder sees its section's findings and the loop-wide ones.
  return ctx.openFindings.filter((f) => f.sectionIndex === i || f.sectionIndex === null);
}

function workspaceNote(ctx: PromptContext): string {
  return [
    `You work in the git worktree ${ctx.worktreeDir} on branch ${ctx.branch}. Stay inside it.`,
    'Do not commit, push or switch branches: Forge commits your work when the phase is accepted.',
  ].join(' ');
}

function planContext(ctx: PromptContext): string {
  const parts: string[] = [];
  if (ctx.goal !== null) parts.push('## Goal', '', ctx.goal.trim());
  else if (ctx.planText !== null) parts.push(`## The plan: ${ctx.title}`, '', ctx.planText.trim());
  if (ctx.objective) parts.push('', '## Objective (fixed)', '', ctx.objective.trim());
  if (ctx.verification) parts.push('', '## Verification (fixed)', '', ctx.verification.trim());
  return parts.join('\n');
}

function sectionList(ctx: PromptContext): string {
  if (ctx.sections.length === 0) return '';
  const mark = { done: '[x]', in_progress: '[>]', pending: '[ ]' } as const;
  return ['## Sections', '', ...ctx.sections.map((s) => `${mark[s.status]} ${s.index + 1}. ${s.title}`)].join('\n');
}

function coderHandoffInstruction(): string {
  return [
    '## When you are done',
    '',
    `Call the tool \`${AGENT_TOOL.handoff}\` exactly once, with:`,
    '- `decisions`: what you changed and the choices you made,',
    '- `verification`: how you verified it (commands you ran and their result),',
    '- `notesForAuditor`: anything the auditor should look at closely.',
    'Your pass ends only through that call; ending without it is treated as a failed pass.',
  ].join('\n');
}

export function buildCodingPrompt(ctx: PromptContext): string {
  const section = currentSection(ctx);
  const findings = findingsInScope(ctx);
  const parts: string[] = [`# Forge loop "${ctx.loopName}" — coding, iteration ${ctx.state.iteration}`, '', workspaceNote(ctx), ''];
  parts.push(planContext(ctx), '');
  if (section) {
    parts.push(sectionList(ctx), '');
    parts.push(`## Your task now: section ${section.index + 1} of ${ctx.sections.length} — ${section.title}`, '', section.body.trim() || '(no further detail)', '');
    parts.push('Implement this section only. Later sections come in later passes.', '');
  } else if (ctx.goal !== null) {
    parts.push('## Your task now', '', 'Work towards the goal above.', '');
  } else {
    parts.push('## Your task now', '', 'Implement the plan above.', '');
  }
  const review = userReviewSection(findings);
  if (review) parts.push(review, '');
  if (findings.some((f) => f.source !== 'user')) {
    parts.push(
      findingsSection(findings, 'Open review findings you must fix'),
      '',
      'The auditor raised each finding above. Fix every one of them; the section is accepted only when no open bug remains.',
      '',
    );
  }
  parts.push(coderHandoffInstruction());
  return parts.join('\n');
}

export function buildFinalAuditFixPrompt(ctx: PromptContext): string {
  const parts = [
    `# Forge loop "${ctx.loopName}" — fixing the final audit, iteration ${ctx.state.iteration}`,
    '',
    workspaceNote(ctx),
    '',
    planContext(ctx),
    '',
    userReviewSection(ctx.openFindings),
    '',
    findingsSection(ctx.openFindings, 'Open review findings from the final audit'),
    '',
    'Fix every open bug above without breaking the completed sections.',
    '',
    coderHandoffInstruction(),
  ];
  return parts.join('\n');
}

function auditorInstructions(scope: string): string {
  return [
    '## How to audit',
    '',
    `- Review the changes with \`git diff\` against the loop's base (for example \`git diff <base>\` in the worktree) and read the code. Scope: ${scope}.`,
    `- For every real defect call \`${AGENT_TOOL.reviewWrite}\` with \`file\` (relative to the worktree), \`line\`, \`severity\` (\`bug\` blocks acceptance, \`warning\` does not), \`description\` (what is wrong and why) and \`scenario\` (how it shows).`,
    `- Call \`${AGENT_TOOL.reviewRead}\` to see the open findings; for each one that is now fixed call \`${AGENT_TOOL.reviewDelete}\` with its id. Do not delete a finding that is not fixed. Findings from a failed verification check are not yours to close: Forge runs the check again after a clean audit and closes them when it passes. Nor are the user's review comments: only the user closes them.`,
    '- Do not edit files: you review, the coder fixes.',
    `- Finish by calling \`${AGENT_TOOL.handoff}\` exactly once with \`summary\` (what was done), \`done\` (true when nothing in scope is left), \`deviations\` (where the work departs from the plan) and \`followUps\`.`,
  ].join('\n');
}

export function buildAuditPrompt(ctx: PromptContext): string {
  const section = currentSection(ctx);
  const scope = section ? `section ${section.index + 1} — ${section.title}` : ctx.goal !== null ? 'the goal' : 'the whole plan';
  const parts = [
    `# Forge loop "${ctx.loopName}" — audit, iteration ${ctx.state.iteration}`,
    '',
    `You audit the work in the git worktree ${ctx.worktreeDir} (branch ${ctx.branch}, base commit ${ctx.baseCommit}).`,
    '',
    planContext(ctx),
    '',
  ];
  if (section) {
    parts.push(sectionList(ctx), '', `## Section under audit: ${section.index + 1}. ${section.title}`, '', section.body.trim(), '');
    parts.push(
      `If the section as written cannot work, you may revise it or the pending sections with \`${AGENT_TOOL.planAdjust}\` (completed sections, the objective and the verification are fixed); give your rationale.`,
      '',
    );
  }
  if (ctx.lastCoderHandoff) {
    parts.push(
      '## The coder\'s handoff',
      '',
      `Decisions: ${ctx.lastCoderHandoff.decisions}`,
      `Verification: ${ctx.lastCoderHandoff.verification}`,
      `Notes for you: ${ctx.lastCoderHandoff.notesForAuditor}`,
      '',
    );
  }
  const findings = findingsInScope(ctx);
  if (findings.length > 0) parts.push(findingsSection(findings, 'Findings still open from earlier audits'), '');
  parts.push(auditorInstructions(scope));
  return parts.join('\n');
}

export function buildFinalAuditPrompt(ctx: PromptContext): string {
  const parts = [
    `# Forge loop "${ctx.loopName}" — final audit`,
    '',
    `Every section has passed its audit. Audit the whole change in ${ctx.worktreeDir} (branch ${ctx.branch}) against the whole plan, base commit ${ctx.baseCommit}.`,
    '',
    planContext(ctx),
    '',
    sectionList(ctx),
    '',
  ];
  if (ctx.openFindings.length > 0) parts.push(findingsSection(ctx.openFindings, 'Findings still open'), '');
  parts.push(
    ctx.verification ? 'Check the verification part of the plan explicitly.' : 'Check that the work does what the plan says, end to end.',
    '',
    auditorInstructions('the whole plan'),
  );
  return parts.join('\n');
}

export function buildPostActionPrompt(ctx: PromptContext): string {
  return [
    `# Forge loop "${ctx.loopName}" — post action`,
    '',
    workspaceNote(ctx),
    '',
    'The plan is implemented and passed its final audit. Now do this:',
    '',
    (ctx.postAction ?? '').trim(),
    '',
    `Then call \`${AGENT_TOOL.handoff}\` with \`decisions\`, \`verification\` and \`notesForAuditor\` (may be empty).`,
  ].join('\n');
}

export { buildUserMessage } from './user-message';

/** The prompt a fresh session of the state's phase starts with, then the user's queued messages. */
export function buildPhasePrompt(ctx: PromptContext): string {
  return phasePrompt(ctx) + userMessagesSection(ctx.userMessages ?? []);
}

function phasePrompt(ctx: PromptContext): string {
  switch (ctx.state.phase) {
    case 'coding':
      return buildCodingPrompt(ctx);
    case 'auditing':
      return buildAuditPrompt(ctx);
    case 'final_auditing':
      return buildFinalAuditPrompt(ctx);
    case 'final_audit_fix':
      return buildFinalAuditFixPrompt(ctx);
    case 'post_action':
      return buildPostActionPrompt(ctx);
  }
}


export function buildHandoffReminder(ctx: Pick<PromptContext, 'state'>): string {
  const role = ctx.state.phase === 'auditing' || ctx.state.phase === 'final_auditing' ? 'audit' : 'work';
  return `You stopped without calling \`${AGENT_TOOL.handoff}\`. If your ${role} is complete, call it now with the required fields; otherwise finish the ${role} first and then call it. Forge only moves on through that call.`;
}

export function buildContinueNudge(): string {
  return 'Your previous turn was interrupted because it made no progress for a long time. Continue the task from where you are; avoid commands that wait forever (servers, watchers, interactive prompts).';
}
