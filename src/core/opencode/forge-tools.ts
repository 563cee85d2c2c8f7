/**
 * The catalogue of Forge's agent tools: names, which agent role may call each, and the zod
 * schema of its arguments. Shared by the MCP tool server (validation, role checks), the
 * permission ruleset (per-role denies, so a role never even sees a tool it may not call) and
 * the opencode configuration builder.
 */
import { z } from 'zod';

/** Name of Forge's MCP server in opencode's `mcp` configuration; opencode prefixes tool names with it. */
export const FORGE_MCP_SERVER_NAME = 'forge';

export type ForgeAgentRole = 'code' | 'auditor' | 'architect' | 'splitter';
export const FORGE_AGENT_ROLES: readonly ForgeAgentRole[] = ['code', 'auditor', 'architect', 'splitter'];

/** Roles that only read the repository (a detached checkout) and write through their Forge tools. */
export const READ_ONLY_ROLES: readonly ForgeAgentRole[] = ['architect', 'splitter'];

/** opencode agent name per role. */
export const FORGE_AGENT_NAMES: Record<ForgeAgentRole, string> = {
  code: 'forge-code',
  auditor: 'forge-auditor',
  architect: 'forge-architect',
  splitter: 'forge-splitter',
};

export const FORGE_TOOL_NAMES = [
  'review_write',
  'review_read',
  'review_delete',
  'review_reply',
  'plan_read',
  'plan_write',
  'plan_edit',
  'section_read',
  'plan_adjust',
  'loop_handoff',
  'shell',
  'jobs',
  'features_write',
] as const;
export type ForgeToolName = (typeof FORGE_TOOL_NAMES)[number];

export const TOOLS_BY_ROLE: Record<ForgeAgentRole, readonly ForgeToolName[]> = {
  auditor: ['review_write', 'review_read', 'review_delete', 'section_read', 'plan_read', 'plan_adjust', 'loop_handoff'],
  code: ['review_read', 'review_reply', 'plan_read', 'section_read', 'loop_handoff', 'shell', 'jobs'],
  architect: ['plan_read', 'plan_write', 'plan_edit'],
  splitter: ['features_write'],
};

/**
 * Tools of other Forge hosts (the opencode-forge plugin) that start, cancel or inspect loops.
 * Forge never serves them over MCP, but loop sessions deny them by name in case a user's own
 * configuration brings such a server in under the same name.
 */
export const FORGE_LOOP_CONTROL_TOOL_NAMES = ['execute_plan', 'execute_goal', 'loop_status', 'loop_cancel', 'loop_restart'] as const;

export function roleMayUseTool(role: ForgeAgentRole, tool: ForgeToolName): boolean {
  return TOOLS_BY_ROLE[role].includes(tool);
}

/** The name opencode gives an MCP tool: `<server>_<tool>`, non-[a-zA-Z0-9_-] replaced by `_`. */
export function opencodeToolName(tool: string, server: string = FORGE_MCP_SERVER_NAME): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_');
  return `${clean(server)}_${clean(tool)}`;
}

const nonEmpty = (what: string) => z.string().trim().min(1, `${what} must not be empty`);

export const reviewWriteArgs = z.object({
  file: nonEmpty('file').describe('Path of the file the finding is about, relative to the worktree (or GOAL / PLAN for the plan itself).'),
  line: z.number().int().min(0).describe('1-based line number the finding points at (0 when it is about the whole file).'),
  severity: z.enum(['bug', 'warning']).describe('"bug" blocks completion; "warning" does not.'),
  description: nonEmpty('description').describe('What is wrong, precisely enough for the coder to fix it without more context.'),
  scenario: z.string().optional().describe('Optional: the input or steps that show the problem.'),
});

export const reviewReadArgs = z.object({
  file: z.string().trim().min(1).optional().describe('Only findings for this file (relative to the worktree).'),
});

export const reviewDeleteArgs = z
  .object({
    id: z.number().int().positive().optional().describe('Id of the finding, as review_read lists it.'),
    file: z.string().trim().min(1).optional().describe('Alternatively: the file of the finding …'),
    line: z.number().int().min(0).optional().describe('… and its line.'),
  })
  .refine((v) => v.id !== undefined || (v.file !== undefined && v.line !== undefined), {
    message: 'give either "id", or both "file" and "line" of the finding to resolve',
  });

export const reviewReplyArgs = z.object({
  id: z.number().int().positive().describe("Id of the user's review comment, as your prompt or review_read gives it."),
  reply: nonEmpty('reply').describe('What you changed for this comment, or why you believe no change is right.'),
});

export const planReadArgs = z.object({
  offset: z.number().int().min(0).optional().describe('First line to return (0-based).'),
  limit: z.number().int().min(1).max(5000).optional().describe('Number of lines to return.'),
  pattern: z.string().min(1).optional().describe('Only lines matching this regular expression.'),
});

export const planWriteArgs = z.object({
  content: nonEmpty('content').describe('The complete plan in markdown; replaces the stored plan.'),
});

export const planEditArgs = z.object({
  oldString: z.string().min(1, 'oldString must not be empty').describe('Exact text to replace.'),
  newString: z.string().describe('Replacement text.'),
  replaceAll: z.boolean().optional().describe('Replace every occurrence instead of requiring exactly one.'),
});

export const sectionReadArgs = z.object({
  index: z.number().int().min(0).optional().describe('0-based section index; default: the current section.'),
  pendingSuffix: z.boolean().optional().describe('Return the current and all pending sections instead of one.'),
});

export const planSectionArgs = z.object({
  title: nonEmpty('section title'),
  body: nonEmpty('section body').describe('What the section asks for: the executable requirement.'),
});

export const planAdjustArgs = z
  .object({
    rationale: nonEmpty('rationale').describe('Why the plan must change.'),
    currentSection: planSectionArgs.optional().describe('Revised version of the section under audit.'),
    sections: z.array(planSectionArgs).optional().describe('Replacement for all pending sections after the current one.'),
  })
  .refine((v) => v.currentSection !== undefined || v.sections !== undefined, {
    message: 'give "currentSection", "sections", or both',
  });

/** Free text; a list of strings is accepted too (models like lists) and joined by line breaks. */
const looseText = z.union([z.string(), z.array(z.string())]).transform((v) => (Array.isArray(v) ? v.join('\n') : v));

export const loopHandoffArgs = z.object({
  decisions: looseText.optional().describe('Coder: what you changed and the choices you made.'),
  verification: looseText.optional().describe('Coder: how you verified it (commands you ran and their result).'),
  notesForAuditor: looseText.optional().describe('Coder: anything the auditor should look at closely (may be empty).'),
  summary: looseText.optional().describe('Auditor: what was done.'),
  done: z.boolean().optional().describe('Auditor: true when nothing in scope is left to do.'),
  deviations: looseText.optional().describe('Auditor: where the work departs from the plan.'),
  followUps: looseText.optional().describe('Auditor: work for later (not blocking).'),
});

const requiredText = (what: string) => looseText.pipe(z.string().trim().min(1, `${what} must not be empty`));

export const coderHandoffPayload = z.object({
  decisions: requiredText('decisions'),
  verification: requiredText('verification'),
  notesForAuditor: looseText.default(''),
});

export const auditorHandoffPayload = z.object({
  summary: requiredText('summary'),
  done: z.boolean({ error: 'done must be true or false' }),
  deviations: looseText.default(''),
  followUps: looseText.default(''),
});

export const shellArgs = z.object({
  command: nonEmpty('command').describe('The shell command, run in the worktree (inside the loop\'s sandbox when it has one).'),
  success_pattern: z
    .string()
    .optional()
    .describe('Regular expression: the call returns as soon as new output matches it (a server\'s "listening on" line); the process keeps running.'),
  idle_ms: z.number().int().min(100).max(600_000).optional().describe('Return "still-running" with the job id after this long without output (default 60000).'),
  max_wait_ms: z.number().int().min(100).max(600_000).optional().describe('Return "still-running" after this long in any case (default 120000, at most 600000); the process is not stopped.'),
  run_in_background: z.boolean().optional().describe('Return at once with the job id; follow it with forge_jobs.'),
  keep_alive: z.boolean().optional().describe('With success_pattern: false kills the process once the pattern matched (default true: it keeps running).'),
  description: z.string().optional().describe('Optional: what the command does, in a few words.'),
});

export const jobsArgs = z
  .object({
    action: z.enum(['list', 'poll', 'log', 'kill']).describe('list: the loop\'s jobs · poll: wait (bounded) for new output or the exit · log: read the log by lines · kill: kill the job\'s whole process tree.'),
    jobId: z.string().trim().min(1).optional().describe('The job (as forge_shell returned it); required except for list.'),
    wait_ms: z.number().int().min(0).max(30_000).optional().describe('poll: how long to wait for new output or the exit (default 10000, at most 30000).'),
    offset: z.number().int().min(0).optional().describe('log: first line (0-based).'),
    limit: z.number().int().min(1).max(2000).optional().describe('log: number of lines (default 200).'),
  })
  .refine((v) => v.action === 'list' || v.jobId !== undefined, { message: 'jobId is required for poll, log and kill' });

/** The feature splitter's one write: the whole split, replacing any earlier one of the turn. */
export const featuresWriteArgs = z.object({
  features: z
    .array(
      z.object({
        id: nonEmpty('id').describe('Short id: lower-case letters, digits and "-" (at most 32), e.g. "auth" or "search-api".'),
        title: nonEmpty('title').describe('One line naming the feature.'),
        dependsOn: z.array(z.string()).default([]).describe('Ids of the features that must be complete before this one starts (none: []).'),
        plan: nonEmpty('plan').describe('The feature\'s plan in markdown: a "# " title, an objective, a "## Verification" part and "## " sections in execution order.'),
      }),
    )
    .describe('Every feature of the PRD, in a sensible order.'),
});

export type ShellArgs = z.infer<typeof shellArgs>;
export type FeaturesWriteArgs = z.infer<typeof featuresWriteArgs>;
export type JobsArgs = z.infer<typeof jobsArgs>;
export type ReviewWriteArgs = z.infer<typeof reviewWriteArgs>;
export type ReviewReadArgs = z.infer<typeof reviewReadArgs>;
export type ReviewDeleteArgs = z.infer<typeof reviewDeleteArgs>;
export type ReviewReplyArgs = z.infer<typeof reviewReplyArgs>;
export type PlanReadArgs = z.infer<typeof planReadArgs>;
export type PlanWriteArgs = z.infer<typeof planWriteArgs>;
export type PlanEditArgs = z.infer<typeof planEditArgs>;
export type SectionReadArgs = z.infer<typeof sectionReadArgs>;
export type PlanAdjustArgs = z.infer<typeof planAdjustArgs>;
export type LoopHandoffArgs = z.infer<typeof loopHandoffArgs>;
export type CoderHandoffPayload = z.infer<typeof coderHandoffPayload>;
export type AuditorHandoffPayload = z.infer<typeof auditorHandoffPayload>;

export interface ForgeToolDefinition {
  name: ForgeToolName;
  description: string;
  args: z.ZodType;
}

export const FORGE_TOOLS: Record<ForgeToolName, ForgeToolDefinition> = {
  review_write: {
    name: 'review_write',
    description: 'Record an audit finding (a bug or a warning) about a file in the worktree. The coder sees every open finding in full.',
    args: reviewWriteArgs,
  },
  review_read: {
    name: 'review_read',
    description: "List this loop's open audit findings, optionally for one file.",
    args: reviewReadArgs,
  },
  review_delete: {
    name: 'review_delete',
    description: 'Mark an audit finding as resolved (by id, or by file and line) once the code fixes it.',
    args: reviewDeleteArgs,
  },
  review_reply: {
    name: 'review_reply',
    description: "Answer one of the user's review comments: what you fixed, or why no change is right. Only the user resolves the comment.",
    args: reviewReplyArgs,
  },
  plan_read: {
    name: 'plan_read',
    description: 'Read the plan of record, optionally a range of lines or the lines matching a pattern.',
    args: planReadArgs,
  },
  plan_write: {
    name: 'plan_write',
    description: 'Write the complete plan of record (markdown, "## " headings split it into sections).',
    args: planWriteArgs,
  },
  plan_edit: {
    name: 'plan_edit',
    description: 'Edit the plan of record by exact string replacement.',
    args: planEditArgs,
  },
  section_read: {
    name: 'section_read',
    description: 'Read the section of the plan being worked on (or another by index, or all pending sections).',
    args: sectionReadArgs,
  },
  plan_adjust: {
    name: 'plan_adjust',
    description:
      'During a section audit: revise the section under audit and/or replace the pending sections. Completed sections, the objective and the verification cannot change.',
    args: planAdjustArgs,
  },
  loop_handoff: {
    name: 'loop_handoff',
    description:
      'End your pass. Coder: give decisions, verification and notesForAuditor. Auditor: give summary, done, deviations and followUps (record findings with review_write first).',
    args: loopHandoffArgs,
  },
  shell: {
    name: 'shell',
    description:
      'Run a shell command that can never hang your session: returns on the first of the process exiting (exit code and output tail), success_pattern matching its output, idle_ms without output or max_wait_ms (then "still-running" and a job id; the process keeps running), or at once with run_in_background. Use it for servers, watchers, test suites and anything long-running; follow jobs with forge_jobs. Jobs end with the loop.',
    args: shellArgs,
  },
  jobs: {
    name: 'jobs',
    description: "Manage this loop's forge_shell jobs: list them, poll one (waits up to wait_ms for new output or its exit), read its log by lines, or kill it with its whole process tree.",
    args: jobsArgs,
  },
  features_write: {
    name: 'features_write',
    description:
      'Write the split of the PRD: every feature with its id, title, the ids it depends on, and its complete plan (markdown). Replaces an earlier write. Forge checks it and returns the problems to fix, or confirms it.',
    args: featuresWriteArgs,
  },
};
