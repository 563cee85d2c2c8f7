/**
 * What Forge's agent tools mean, over storage: the `ForgeToolBackend` the MCP tool server calls
 * after it has validated the arguments and checked the caller's role. Every refusal is a
 * `ForgeToolError` whose text goes back to the agent, and a refused call changes nothing.
 */
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { ForgeToolError, type ForgeToolBackend, type ForgeToolCaller } from '../opencode/forge-tool-backend';
import {
  auditorHandoffPayload,
  coderHandoffPayload,
  type FeaturesWriteArgs,
  type PlanAdjustArgs,
  type ReviewDeleteArgs,
  type ReviewReadArgs,
  type ReviewReplyArgs,
  type ReviewWriteArgs,
} from '../opencode/forge-tools';
import { formatIssues } from '../opencode/forge-tool-server';
import type { SqlExecutor } from '../storage/sql-executor';
import {
  createForgeRepositories,
  SectionPlanError,
  type ForgeRepositories,
  type LoopHandoffRow,
  type LoopRow,
  type ReviewFindingRow,
  type SectionPlanRow,
} from '../storage/repositories';
import { MAX_SECTIONS, parsePlan } from './plan';
import { hasActiveCharacter, inertLine } from '../text/inert-text';
import type { Role } from './state';
import type { LoopJobRegistry } from '../jobs/job-registry';
import { JobRequestError, type LoopJobs } from '../jobs/loop-jobs';

/** Pseudo-paths a finding may point at instead of a file: the goal or the plan itself. */
export const FINDING_PSEUDO_PATHS = ['GOAL', 'PLAN'] as const;

/** Section titles that would pose as the plan's immutable parts. */
const IMMUTABLE_TITLES = /^(objective|goal|verification|acceptance criteria)$/i;

export interface LoopToolBackendOptions {
  projectId: string;
  /** The database; plan amendments run in one transaction on it. */
  db: SqlExecutor;
  /** Repositories over `db` (default: created from it). */
  repositories?: ForgeRepositories;
  /** Called after a handoff was stored, so the runtime can move the loop on. */
  onHandoff?: (handoff: LoopHandoffRow) => void;
  /** The running loops' forge_shell jobs. */
  jobs?: LoopJobRegistry;
  /**
   * Where a feature splitter's `forge_features_write` goes (keyed by its scope key, the split's
   * id): the group service validates it and answers with the text the agent sees.
   */
  featureSplits?: { write(scopeKey: string, args: FeaturesWriteArgs): string };
}

export function createLoopToolBackend(options: LoopToolBackendOptions): ForgeToolBackend {
  const { projectId, db } = options;
  const repos = options.repositories ?? createForgeRepositories(db);

  function loopOf(caller: ForgeToolCaller): LoopRow {
    if (!caller.loopName) throw new ForgeToolError('This tool works only inside a Forge loop, and this session is not part of one.');
    const loop = repos.loops.get(projectId, caller.loopName);
    if (!loop) throw new ForgeToolError(`Forge has no loop named "${caller.loopName}" any more; stop working and end your turn.`);
    return loop;
  }

  function worktreeOf(loop: LoopRow): string {
    if (!loop.worktreeDir) throw new ForgeToolError(`Loop "${loop.name}" has no worktree yet; findings need one.`);
    return loop.worktreeDir;
  }

  /** A worktree-relative, '/'-separated path, or a pseudo-path; refuses anything outside the worktree. */
  function findingPath(loop: LoopRow, file: string): string {
    const trimmed = file.trim();
    if ((FINDING_PSEUDO_PATHS as readonly string[]).includes(trimmed)) return trimmed;
    // A file name is shown on every surface (terminal, Problems view, dashboard): refuse one
    // carrying control or bidi characters rather than store a name no file has.
    if (hasActiveCharacter(trimmed)) {
      throw new ForgeToolError(
        `The file "${inertLine(trimmed)}" contains control, escape or bidi characters (shown here as \\uXXXX), which no file of the worktree should have. Give the plain path of the file relative to the worktree; put anything else in the description.`,
      );
    }
    const worktree = resolve(worktreeOf(loop));
    const absolute = isAbsolute(trimmed) ? resolve(trimmed) : resolve(worktree, trimmed);
    const rel = relative(worktree, absolute);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
      throw new ForgeToolError(
        `"${inertLine(file)}" is not a file inside the loop's worktree (${worktree}). Give a path relative to the worktree, or GOAL / PLAN for a finding about the goal or plan itself.`,
      );
    }
    return rel.split(sep).join('/');
  }

  function roleOf(caller: ForgeToolCaller): Role {
    if (caller.role === 'architect' || caller.role === 'splitter') throw new ForgeToolError(`The ${caller.role} takes no part in loops.`);
    return caller.role;
  }

  function planTextOf(caller: ForgeToolCaller): { text: string; what: string } {
    if (caller.loopName) {
      const loop = loopOf(caller);
      const large = repos.loops.getLargeFields(projectId, loop.name);
      const text = loop.kind === 'goal' ? large.goalText : large.planText;
      if (text === null) throw new ForgeToolError(`Loop "${loop.name}" has no stored ${loop.kind === 'goal' ? 'goal' : 'plan'}.`);
      return { text, what: loop.kind === 'goal' ? 'goal' : 'plan' };
    }
    const plan = repos.plans.get(projectId, planKeyOf(caller));
    if (!plan) throw new ForgeToolError('There is no plan yet; write one with plan_write.');
    return { text: plan.content, what: 'plan' };
  }

  function planKeyOf(caller: ForgeToolCaller): string {
    const key = caller.scopeKey ?? caller.sessionId;
    if (!key) throw new ForgeToolError('Forge cannot tell which plan this session works on.');
    return key;
  }

  function jobsOf(caller: ForgeToolCaller): LoopJobs {
    const loop = loopOf(caller);
    const jobs = options.jobs?.get(projectId, loop.name);
    if (!jobs) throw new ForgeToolError(`Loop "${loop.name}" is not driven by this Forge process right now, so it cannot run jobs; end your turn.`);
    return jobs;
  }

  async function refusingBadJobRequests(run: () => Promise<string>): Promise<string> {
    try {
      return await run();
    } catch (error) {
      if (error instanceof JobRequestError) throw new ForgeToolError(error.message);
      throw error;
    }
  }

  return {
    async featuresWrite(caller, args) {
      if (!caller.scopeKey || !options.featureSplits) throw new ForgeToolError('No feature split is waiting for this session; end your turn.');
      return options.featureSplits.write(caller.scopeKey, args);
    },

    async shell(caller, args) {
      return refusingBadJobRequests(() => jobsOf(caller).shell(args));
    },

    async jobs(caller, args) {
      return refusingBadJobRequests(() => jobsOf(caller).jobs(args));
    },

    async reviewWrite(caller, args: ReviewWriteArgs) {
      const loop = loopOf(caller);
      const file = findingPath(loop, args.file);
      const row = repos.reviewFindings.record(projectId, {
        loopName: loop.name,
        file,
        line: args.line,
        severity: args.severity,
        description: args.description.trim(),
        scenario: args.scenario?.trim() || null,
        sectionIndex: loop.phase === 'final_auditing' ? null : loop.sectionIndex,
      });
      const again = row.recurrenceCount > 1 ? ` It has now been reported ${row.recurrenceCount} times.` : '';
      return `Recorded finding #${row.id} (${row.severity}) at ${where(row)}.${again}`;
    },

    async reviewRead(caller, args: ReviewReadArgs) {
      const loop = loopOf(caller);
      let findings = repos.reviewFindings.listOpen(projectId, loop.name);
      if (args.file) {
        const file = findingPath(loop, args.file);
        findings = findings.filter((f) => f.file === file);
      }
      if (findings.length === 0) return args.file ? `No open findings for ${args.file}.` : 'No open findings.';
      return [`${findings.length} open finding${findings.length === 1 ? '' : 's'}:`, '', ...findings.map(describeFinding)].join('\n');
    },

    async reviewDelete(caller, args: ReviewDeleteArgs) {
      const loop = loopOf(caller);
      let finding: ReviewFindingRow | undefined;
      if (args.id !== undefined) {
        finding = repos.reviewFindings.get(projectId, args.id);
        if (!finding || finding.loopName !== loop.name) throw new ForgeToolError(`This loop has no finding #${args.id}. Use review_read to list them.`);
      } else {
        const file = findingPath(loop, args.file ?? '');
        const matches = repos.reviewFindings.listOpen(projectId, loop.name).filter((f) => f.file === file && f.line === args.line);
        if (matches.length === 0) throw new ForgeToolError(`No open finding at ${file}:${args.line}. Use review_read to list them.`);
        if (matches.length > 1) {
          throw new ForgeToolError(`${matches.length} open findings at ${file}:${args.line} (${matches.map((m) => `#${m.id}`).join(', ')}); give the id.`);
        }
        finding = matches[0];
      }
      if (!finding) throw new ForgeToolError('No such finding.');
      if (finding.status !== 'open') return `Finding #${finding.id} is already ${finding.status}.`;
      if (finding.source === 'check') {
        throw new ForgeToolError(
          `Finding #${finding.id} comes from a verification check Forge ran, not from an audit: no agent can resolve or delete it. Forge resolves it itself when the check passes; fix what the check reports.`,
        );
      }
      if (finding.source === 'user') {
        throw new ForgeToolError(
          `Finding #${finding.id} is the user's review comment: no agent can resolve or delete it, only the user. The coder answers it with review_reply.`,
        );
      }
      repos.reviewFindings.setStatus(projectId, finding.id, 'resolved');
      return `Resolved finding #${finding.id} (${where(finding)}).`;
    },

    async reviewReply(caller, args: ReviewReplyArgs) {
      const loop = loopOf(caller);
      if (roleOf(caller) !== 'code') throw new ForgeToolError('Only the coder answers the user\'s review comments.');
      const finding = repos.reviewFindings.get(projectId, args.id);
      if (!finding || finding.loopName !== loop.name || finding.source !== 'user') {
        throw new ForgeToolError(`This loop has no review comment of the user numbered #${args.id}; your prompt lists them ("User comment #N").`);
      }
      if (finding.status !== 'open') return `The user's comment #${finding.id} is already ${finding.status}; nothing to answer.`;
      repos.reviewFindings.setReply(projectId, finding.id, args.reply.trim());
      return `Your answer to the user's comment #${finding.id} is recorded. The comment stays open until the user resolves it.`;
    },

    async planRead(caller, args) {
      const { text, what } = planTextOf(caller);
      const lines = text.split('\n');
      if (args.pattern !== undefined) {
        let regex: RegExp;
        try {
          regex = new RegExp(args.pattern, 'i');
        } catch (error) {
          throw new ForgeToolError(`"${args.pattern}" is not a valid regular expression: ${(error as Error).message}`);
        }
        const hits = lines.map((line, i) => ({ line, n: i + 1 })).filter((l) => regex.test(l.line));
        if (hits.length === 0) return `No line of the ${what} matches /${args.pattern}/.`;
        return hits.map((h) => `${h.n}: ${h.line}`).join('\n');
      }
      const offset = args.offset ?? 0;
      const limit = args.limit ?? lines.length;
      if (offset >= lines.length && lines.length > 0) throw new ForgeToolError(`The ${what} has only ${lines.length} lines.`);
      const page = lines.slice(offset, offset + limit).join('\n');
      const rest = lines.length - (offset + limit);
      return rest > 0 ? `${page}\n\n(${rest} more lines; read on with offset ${offset + limit})` : page;
    },

    async planWrite(caller, args) {
      if (caller.loopName) throw new ForgeToolError('A running loop\'s plan cannot be rewritten; the auditor adjusts it with plan_adjust.');
      const key = planKeyOf(caller);
      repos.plans.put(projectId, key, args.content);
      return `Plan saved.\n${planStructureReport(args.content)}`;
    },

    async planEdit(caller, args) {
      if (caller.loopName) throw new ForgeToolError('A running loop\'s plan cannot be edited; the auditor adjusts it with plan_adjust.');
      const key = planKeyOf(caller);
      const plan = repos.plans.get(projectId, key);
      if (!plan) throw new ForgeToolError('There is no plan yet; write one with plan_write.');
      const count = plan.content.split(args.oldString).length - 1;
      if (count === 0) throw new ForgeToolError('oldString does not occur in the plan; read it with plan_read and copy the text exactly.');
      if (count > 1 && !args.replaceAll) {
        throw new ForgeToolError(`oldString occurs ${count} times in the plan; give more context to make it unique, or set replaceAll.`);
      }
      const content = args.replaceAll ? plan.content.split(args.oldString).join(args.newString) : plan.content.replace(args.oldString, () => args.newString);
      repos.plans.put(projectId, key, content);
      return `Plan updated (${args.replaceAll ? count : 1} replacement${count > 1 && args.replaceAll ? 's' : ''}).\n${planStructureReport(content)}`;
    },

    async sectionRead(caller, args) {
      const loop = loopOf(caller);
      const sections = repos.sectionPlans.list(projectId, loop.name);
      if (sections.length === 0) {
        throw new ForgeToolError(`Loop "${loop.name}" has no sections (it runs a goal or an unsectioned plan); read the whole plan with plan_read.`);
      }
      const current = loop.sectionIndex ?? 0;
      if (args.pendingSuffix) {
        const pending = sections.filter((s) => s.index >= current && s.status !== 'done');
        if (pending.length === 0) return 'No pending sections.';
        return pending.map((s) => describeSection(s, sections.length, current)).join('\n\n');
      }
      const index = args.index ?? current;
      const section = sections.find((s) => s.index === index);
      if (!section) throw new ForgeToolError(`There is no section ${index} (sections are numbered 0 to ${sections.length - 1}).`);
      return describeSection(section, sections.length, current);
    },

    async planAdjust(caller, args: PlanAdjustArgs) {
      const loop = loopOf(caller);
      if (loop.phase !== 'auditing' || loop.sectionIndex === null) {
        throw new ForgeToolError('plan_adjust is only available while a section of a sectioned plan is being audited.');
      }
      const current = loop.sectionIndex;
      const drafts = [...(args.currentSection ? [args.currentSection] : []), ...(args.sections ?? [])];
      const posing = drafts.find((d) => IMMUTABLE_TITLES.test(d.title.trim()));
      if (posing) throw new ForgeToolError(`A section cannot be titled "${posing.title}": the plan's objective and verification are immutable.`);
      try {
        const after = db.transaction((tx) => {
          const r = createForgeRepositories(tx);
          const before = r.sectionPlans.list(projectId, loop.name);
          if (args.currentSection) r.sectionPlans.revise(projectId, loop.name, current, args.currentSection);
          if (args.sections) {
            if (current + 1 + args.sections.length > MAX_SECTIONS) {
              throw new SectionPlanError(`A plan may have at most ${MAX_SECTIONS} sections; this change would make ${current + 1 + args.sections.length}.`);
            }
            r.sectionPlans.replaceFrom(projectId, loop.name, current + 1, args.sections);
          }
          const next = r.sectionPlans.list(projectId, loop.name);
          r.planAmendments.append(projectId, {
            loopName: loop.name,
            sectionIndex: current,
            before: before.map(sectionSnapshot),
            after: next.map(sectionSnapshot),
            rationale: args.rationale.trim(),
          });
          return next;
        });
        const changes = [
          args.currentSection ? `section ${current + 1} revised` : undefined,
          args.sections ? `pending sections replaced (${args.sections.length})` : undefined,
        ].filter(Boolean);
        return `Plan adjusted: ${changes.join('; ')}. Sections now:\n${after.map((s) => `${s.index + 1}. ${s.title} [${s.status}]`).join('\n')}`;
      } catch (error) {
        if (error instanceof SectionPlanError) throw new ForgeToolError(error.message);
        throw error;
      }
    },

    async loopHandoff(caller, args) {
      const loop = loopOf(caller);
      const role = roleOf(caller);
      if (!caller.sessionId) throw new ForgeToolError('Forge cannot tell which session is handing off.');
      if (loop.status !== 'running') throw new ForgeToolError(`Loop "${loop.name}" is ${loop.status}; there is nothing to hand off to.`);
      const parsed = role === 'code' ? coderHandoffPayload.safeParse(args) : auditorHandoffPayload.safeParse(args);
      if (!parsed.success) {
        const fields = role === 'code' ? 'decisions, verification and notesForAuditor' : 'summary, done, deviations and followUps';
        throw new ForgeToolError(`Invalid handoff for the ${role === 'code' ? 'coder' : 'auditor'}: ${formatIssues(parsed.error.issues)}. Give ${fields}.`);
      }
      if (repos.handoffs.forSession(projectId, loop.name, caller.sessionId)) {
        throw new ForgeToolError('This session has already handed off; its pass is over. Stop now.');
      }
      const row = repos.handoffs.append(projectId, {
        loopName: loop.name,
        role,
        sessionId: caller.sessionId,
        iteration: loop.iteration,
        sectionIndex: loop.sectionIndex,
        payload: parsed.data,
      });
      options.onHandoff?.(row);
      return 'Handoff recorded. Your pass is over: stop here without further tool calls.';
    },
  };
}

function where(f: Pick<ReviewFindingRow, 'file' | 'line'>): string {
  return f.line > 0 ? `${f.file}:${f.line}` : f.file;
}

function describeFinding(f: ReviewFindingRow): string {
  const from = f.source === 'user' ? " (the user's review comment; only the user closes it)" : f.source === 'check' ? ' (failed check)' : '';
  const lines = [`#${f.id} [${f.severity}] ${where(f)}${from}${f.recurrenceCount > 1 ? ` (reported ${f.recurrenceCount} times)` : ''}`, `  ${f.description}`];
  if (f.scenario) lines.push(`  Scenario: ${f.scenario}`);
  if (f.reply) lines.push(`  Coder's answer: ${f.reply}`);
  return lines.join('\n');
}

function describeSection(s: SectionPlanRow, total: number, current: number): string {
  const marker = s.index === current ? ' (current)' : '';
  return `## Section ${s.index + 1} of ${total}: ${s.title} [${s.status}]${marker}\n\n${s.body}`;
}

function sectionSnapshot(s: SectionPlanRow): { index: number; title: string; body: string; status: string } {
  return { index: s.index, title: s.title, body: s.body, status: s.status };
}

function planStructureReport(text: string): string {
  try {
    const plan = parsePlan(text, 'the plan');
    const lines = [
      `Title: ${plan.title}`,
      `Objective: ${plan.objective ? 'yes' : 'missing'}; verification: ${plan.verification ? 'yes' : 'missing'}`,
      `${plan.sections.length} section${plan.sections.length === 1 ? '' : 's'}${plan.sections.length ? ':' : ''}`,
      ...plan.sections.map((s) => `  ${s.index + 1}. ${s.title}`),
      ...plan.notices,
    ];
    return lines.join('\n');
  } catch (error) {
    return `Warning: ${(error as Error).message}`;
  }
}
