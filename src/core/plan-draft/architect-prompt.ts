/**
 * Plan authoring (issue 15), the pure part: what the architect is told, and what a finished
 * architect turn means. No I/O; `plan-drafter.ts` is the adapter around opencode and storage.
 */
import { parsePlan } from '../loop/plan';

/** Characters of the user's request kept in a session title. */
const TITLE_REQUEST_CHARS = 60;

export class PlanDraftError extends Error {
  constructor(
    readonly code: 'bad_request' | 'not_found' | 'no_model' | 'out_exists' | 'opencode' | 'busy',
    message: string,
  ) {
    super(message);
    this.name = 'PlanDraftError';
  }
}

/** The request as given, checked: an empty one is bad input with a way to fix it. */
export function checkDraftRequest(request: string, what: 'request' | 'answer' = 'request'): string {
  const trimmed = request.trim();
  if (!trimmed) {
    throw new PlanDraftError(
      'bad_request',
      what === 'request'
        ? 'The request is empty. Say what you want planned, e.g. forge plan "add a --verbose flag to the CLI".'
        : 'The answer is empty. Give your answer to the architect or the change you want, e.g. forge plan --continue ID "split section 2 in two".',
    );
  }
  return trimmed;
}

export function architectSessionTitle(request: string): string {
  const oneLine = request.replace(/\s+/g, ' ').trim();
  const short = oneLine.length > TITLE_REQUEST_CHARS ? `${oneLine.slice(0, TITLE_REQUEST_CHARS - 1)}…` : oneLine;
  return `Forge plan · ${short}`;
}

export interface ArchitectPromptInput {
  request: string;
  /** Absolute path of the folder the architect reads (a checkout of the repository's HEAD). */
  checkoutDir: string;
  /** The commit the checkout is at. */
  headCommit: string;
}

/**
 * The first prompt of a drafting session. The agent prompt (forge-architect.md) says how to
 * plan; this says what to plan, where the code is, and how the turn must end.
 */
export function buildArchitectPrompt(input: ArchitectPromptInput): string {
  return [
    '# Draft a plan of record',
    '',
    `The repository is checked out (read-only for you) at ${input.checkoutDir}, at commit ${input.headCommit.slice(0, 12)}: the commit a loop running your plan starts from. Read the code you need there (read, grep, glob, list). You cannot edit files, run shell commands or start subagents: Forge refuses them.`,
    '',
    '## What the user wants',
    '',
    input.request,
    '',
    '## How to finish',
    '',
    '- Write the complete plan with `forge_plan_write` (markdown: a `# ` title, an objective, a `## Verification` part with the commands or file checks that prove the whole plan is done, and the work split into `## ` sections in execution order, at most 24). Refine it with `forge_plan_edit`.',
    '- Forge stores the plan and shows it to the user as a file; your chat text is not the plan.',
    '- If something essential is unclear, still write the best plan you can, and end your turn with your questions: the user answers them in this same session.',
  ].join('\n');
}

export interface FollowUpInput {
  /** The user's answer to the architect's questions, or the change they ask for. */
  answer: string;
  /** True when the user edited the plan file since the architect last wrote it (the edit is now the stored plan). */
  userEditedPlan: boolean;
}

export function buildArchitectFollowUp(input: FollowUpInput): string {
  return [
    '# The user answers',
    '',
    input.answer,
    '',
    ...(input.userEditedPlan ? ['The user edited the plan file since you last wrote it; the stored plan is now their version. Read it with `forge_plan_read` before changing it, and keep their edits unless asked otherwise.', ''] : []),
    'Update the plan of record with `forge_plan_edit` (or `forge_plan_write` for a rewrite). End your turn with any remaining questions.',
  ].join('\n');
}

export type DraftOutcome =
  | { kind: 'drafted'; summary: string; warnings: string[] }
  | { kind: 'no_plan'; message: string };

/**
 * What a finished architect turn produced. Decided from the stored plan (written only through
 * the plan tools), never from the architect's prose; the prose is passed on as its questions.
 */
export function draftOutcome(input: { plan: string | null; planChangedThisTurn: boolean; draftId: string; continued: boolean }): DraftOutcome {
  if (input.plan === null) {
    return {
      kind: 'no_plan',
      message: `The architect ended its turn without writing a plan (it never called plan_write). The session is kept: answer it or ask again with forge plan --continue ${input.draftId} "…".`,
    };
  }
  let summary: string;
  const warnings: string[] = [];
  try {
    const parsed = parsePlan(input.plan, 'The drafted plan');
    summary = `"${parsed.title}", ${parsed.sections.length} section${parsed.sections.length === 1 ? '' : 's'}`;
    if (!parsed.verification) warnings.push('The plan has no verification part: Forge will not run checks on the final tree. Ask the architect for one, or add a "## Verification" part.');
    warnings.push(...parsed.notices);
  } catch (error) {
    summary = 'a plan Forge cannot run yet';
    warnings.push((error as Error).message);
  }
  if (input.continued && !input.planChangedThisTurn) warnings.push('The architect did not change the plan in this turn.');
  return { kind: 'drafted', summary, warnings };
}

/** Default file name of a drafted plan. */
export function draftFileName(draftId: string): string {
  return `forge-plan-${draftId}.md`;
}
