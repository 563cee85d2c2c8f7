/**
 * What the CLI prints: one line per event (or one JSON object per line with --json), and the
 * status / findings tables.
 */
import { describeAmendment, summariseChange, type AmendmentView } from '../core/loop/plan-amendments';
import type { ForgeEngine } from '../core/engine';
import type { LoopRuntimeEvent } from '../core/loop/runtime-types';
import { supervisorOf } from '../core/loop/lease-holder';
import { terminationReasonToString } from '../core/loop/state';
import { nextStepLines, nextStepsOf } from '../core/loop/next-steps';
import { readExtras } from '../core/loop/loop-extras';
import { describeAccept } from '../core/accept/accept-decisions';
import type { CheckRunRow, LoopRow, ShellInterventionRow } from '../core/storage/repositories';
import { confinementOf, describeConfinement } from '../core/sandbox/confinement';
import { describeSupervision, endpointPaths, formatSupervision, readEngineInfo } from '../core/engine-host';
import { budgetUses, describeBudget, hasBudget, spendFromTotals } from '../core/loop/budget';

/** What the user can do next with the loop that just ended. */
function endedNextSteps(e: Extract<LoopRuntimeEvent, { type: 'loop.ended' }>) {
  return nextStepsOf({ name: e.loop.name, status: e.status, reason: e.reason, branch: e.branch });
}

export function formatEvent(e: LoopRuntimeEvent, json: boolean): string | null {
  if (json) {
    const { loop, ...rest } = e;
    return JSON.stringify({ loop: loop.name, ...rest, ...(e.type === 'loop.ended' ? { reason: terminationReasonToString(e.reason), next: endedNextSteps(e).steps.map((s) => s.cli) } : {}) });
  }
  const name = e.loop.name;
  switch (e.type) {
    case 'loop.started': {
      const confined = e.confinement ? `, ${describeConfinement(e.confinement)}` : '';
      // An unconfined loop's notice is a warning, whatever else the start says.
      return [`[${name}] started${confined}`, ...e.notices.map((n) => `[${name}] ${/\bUNCONFINED\b/.test(n) ? 'WARNING' : 'note'}: ${n}`)].join('\n');
    }
    case 'loop.phase': {
      const section = e.sectionIndex === null ? '' : `, section ${e.sectionIndex + 1}`;
      return `[${name}] ${e.from ?? 'start'} → ${e.to} (${e.event}; iteration ${e.iteration}${section})`;
    }
    case 'loop.session':
      return `[${name}] ${e.phase}: session ${e.sessionId}${e.model ? ` on ${e.model}` : ''}`;
    case 'loop.finding': {
      const f = e.finding;
      return `[${name}] finding #${f.id} ${f.status} ${f.severity} ${f.file}${f.line ? `:${f.line}` : ''} — ${f.description}`;
    }
    case 'loop.commit':
      return `[${name}] commit ${e.sha.slice(0, 10)} ${e.message}`;
    case 'loop.check':
      return `[${name}] ${formatCheckRun(e.run)}`;
    case 'loop.notice':
      return `[${name}] ${e.level}: ${e.message}`;
    case 'loop.user_message':
      return `[${name}] message from the user ${e.delivery === 'session' ? `sent into session ${e.sessionId}` : 'kept for the next session'}: ${e.text}`;
    case 'loop.usage':
      return null;
    case 'loop.setup': {
      const time = e.durationMs !== undefined ? ` (${(e.durationMs / 1000).toFixed(1)} s)` : '';
      if (e.step === 'setup') return `[${name}] setup: ${e.status === 'started' ? 'preparing the worktree' : e.status === 'passed' ? `the worktree is ready${time}` : `FAILED${time}`}`;
      return `[${name}] setup: ${e.status === 'started' ? '…' : e.status === 'passed' ? 'done' : 'FAILED'} ${e.step}${time}`;
    }
    case 'loop.setup_output':
      return `[${name}] setup | ${e.line}`;
    case 'loop.budget':
      // A pause's message starts "budget reached: …" itself.
      return e.level === 'paused' ? `[${name}] ${e.message}` : `[${name}] budget warning: ${e.message}`;
    case 'loop.ended': {
      const reason = terminationReasonToString(e.reason);
      const lines = [`[${name}] ended: ${e.status}${reason !== e.status ? ` (${reason})` : ''} after ${e.iterations} iteration${e.iterations === 1 ? '' : 's'}`];
      if (e.branch) lines.push(`[${name}] branch: ${e.branch}`);
      if (e.worktreeDir) lines.push(`[${name}] worktree: ${e.worktreeDir}`);
      if (e.merge) lines.push(`[${name}] merge: ${e.merge}`);
      if (e.status === 'paused') {
        lines.push(`[${name}] paused, nothing lost: continue it with a higher budget (--budget AMOUNT and/or --budget-tokens N), or leave it paused (forge status ${name} shows the spend).`);
      }
      if (e.status === 'awaiting_review') {
        lines.push(`[${name}] the coder answered your review: read the answers with forge review ${name}, then resolve each comment (forge review ${name} --resolve ID) or send it back (forge review ${name} --send).`);
      }
      // The exact commands that fit how it ended (issue 29 item 7).
      for (const line of nextStepLines(endedNextSteps(e))) lines.push(`[${name}] ${line}`);
      return lines.join('\n');
    }
    case 'loop.supervision_lost':
      return `[${name}] another process took over this loop; this process stopped driving it.`;
  }
}

/** One line per check run: `check PASS check 1: npm test (exit 0, 1.2 s)`. */
export function formatCheckRun(run: CheckRunRow): string {
  const verdict = run.status === 'passed' ? 'PASS' : run.status === 'failed' ? 'FAIL' : run.status.toUpperCase();
  const exit = run.exitCode !== null ? `exit ${run.exitCode}` : run.signal ? `signal ${run.signal}` : run.message;
  const where = run.gate === 'section' && run.sectionIndex !== null ? `, section ${run.sectionIndex + 1} gate` : ', final gate';
  return `check ${verdict} ${run.label} (${exit}, ${(run.durationMs / 1000).toFixed(1)} s${where}; iteration ${run.iteration})`;
}

/** A completed loop's last phase is history, not where it is: the table shows "done". */
function shownPhase(status: string, phase: string): string {
  return status === 'completed' ? 'done' : phase;
}

function money(n: number): string {
  return `$${n.toFixed(4)}`;
}

/** The loop's budget and how much of each limit is used (null: no budget). */
function budgetSummary(engine: ForgeEngine, loop: LoopRow) {
  const budget = readExtras(loop).budget;
  if (!hasBudget(budget)) return null;
  const spend = spendFromTotals(engine.repos.sessionUsage.totalsByRole(loop.projectId, loop.name));
  return {
    money: budget.money,
    tokens: budget.tokens,
    auditorShare: budget.auditorShare,
    spent: spend,
    used: budgetUses(budget, spend).map((u) => ({ limit: u.what, used: u.used, of: u.limit, percent: Math.round(u.fraction * 100) })),
  };
}

function loopSummary(engine: ForgeEngine, loop: LoopRow) {
  const progress = engine.repos.sectionPlans.progress(loop.projectId, loop.name);
  const findings = engine.repos.reviewFindings.countOpen(loop.projectId, loop.name);
  const usage = engine.repos.sessionUsage.totalsForLoop(loop.projectId, loop.name);
  return {
    name: loop.name,
    status: loop.status,
    phase: loop.phase,
    kind: loop.kind,
    iteration: loop.iteration,
    sections: progress,
    openFindings: findings,
    sessions: usage.sessions,
    tokens: { input: usage.inputTokens, output: usage.outputTokens, reasoning: usage.reasoningTokens, cacheRead: usage.cacheReadTokens, cacheWrite: usage.cacheWriteTokens },
    cost: usage.cost,
    branch: loop.branch,
    worktree: loop.worktreeDir,
    reason: loop.terminationReason,
    model: loop.model,
    auditorModel: loop.auditorModel,
    variant: readExtras(loop).variant ?? null,
    budget: budgetSummary(engine, loop),
    supervised: loop.status === 'running' && supervisorOf(loop).state === 'alive',
    // Which process holds the lease (SPEC §2): read from the lease and the engine's info file only.
    supervisor: describeSupervision(loop, readEngineInfo(endpointPaths(engine.dataDir))),
    confinement: confinementOf(loop),
  };
}

export function formatLoopList(engine: ForgeEngine, projectId: string, json: boolean): string {
  const loops = engine.repos.loops.list(projectId);
  const rows = loops.map((l) => loopSummary(engine, l));
  if (json) return rows.map((r) => JSON.stringify(r)).join('\n');
  if (rows.length === 0) return 'No loops in this repository yet. Start one with: forge run PLAN.md';
  return formatLoopRows(rows);
}

/** What a row of `forge status` shows of a loop. */
export type LoopListRow = Pick<ReturnType<typeof loopSummary>, 'name' | 'status' | 'phase' | 'iteration' | 'sections' | 'openFindings' | 'cost' | 'reason' | 'supervised' | 'supervisor' | 'confinement'>;

/** The table of `forge status`: aligned columns whatever the names' length. Pure. */
export function formatLoopRows(rows: readonly LoopListRow[]): string {
  // Columns as wide as the longest name (loop names run to 48 characters).
  const nameWidth = Math.max(24, ...rows.map((r) => r.name.length));
  return rows
    .map((r) => {
      const sec = r.sections.total > 0 ? ` section ${Math.min(r.sections.done + 1, r.sections.total)}/${r.sections.total}` : '';
      const end =
        r.status === 'running'
          ? r.supervised
            ? `  supervised by ${formatSupervision(r.supervisor!)}`
            : ` (no live supervisor: restart with --force${r.supervisor ? `; the lease names ${formatSupervision(r.supervisor)}` : ''})`
          : r.reason && r.reason !== r.status
            ? ` — ${r.reason}`
            : '';
      const confined = r.confinement.sandboxed ? '' : '  UNCONFINED';
      return `${r.name.padEnd(nameWidth)} ${r.status.padEnd(9)} ${shownPhase(r.status, r.phase).padEnd(15)} it ${r.iteration}${sec}  bugs ${r.openFindings.bug} warnings ${r.openFindings.warning}  ${money(r.cost)}${confined}${end}`;
    })
    .join('\n');
}

export function formatLoopDetail(engine: ForgeEngine, loop: LoopRow, json: boolean): string {
  const s = loopSummary(engine, loop);
  const transitions = engine.repos.transitions.listByLoop(loop.projectId, loop.name);
  const checkRuns = engine.repos.checkRuns.listByLoop(loop.projectId, loop.name);
  const marks = transitions.map((t) => ({ at: t.at, iteration: t.iteration }));
  const amendments = engine.repos.planAmendments.listByLoop(loop.projectId, loop.name).map((a) => describeAmendment(a, marks));
  const interventions = engine.repos.shellInterventions.listByLoop(loop.projectId, loop.name);
  const attempts = engine.repos.attempts.listByLoop(loop.projectId, loop.name);
  const accepts = engine.repos.accepts.listByLoop(loop.projectId, loop.name);
  if (json) {
    return JSON.stringify({
      ...s,
      accepts: accepts.map((a) => ({ how: a.how, into: a.intoBranch, remote: a.remote, commit: a.commit, by: a.acceptedBy, at: a.at })),
      attempts: attempts.map((a) => ({ kind: a.kind, iteration: a.iteration, section: a.sectionIndex, attempt: a.attempt, model: a.model, variant: a.variant, outcome: a.outcome, error: a.error, session: a.sessionId, at: a.startedAt })),
      transitions: transitions.map((t) => ({ event: t.event, from: t.fromPhase, to: t.toPhase, iteration: t.iteration, section: t.sectionIndex, at: t.at })),
      checks: (readExtras(loop).checks ?? []).map((c) => ({ id: c.id, label: c.label, kind: c.kind, scope: c.scope.kind === 'section' ? `section ${c.scope.index + 1}` : c.scope.kind })),
      checkRuns: checkRuns.map((r) => ({
        check: r.checkId,
        label: r.label,
        gate: r.gate,
        section: r.sectionIndex,
        iteration: r.iteration,
        command: r.command,
        status: r.status,
        message: r.message,
        exitCode: r.exitCode,
        signal: r.signal,
        durationMs: r.durationMs,
        outputTail: r.outputTail,
        outputBytes: r.outputBytes,
        at: r.startedAt,
      })),
      amendments: amendments.map((a) => ({
        id: a.id,
        at: a.at,
        auditedSectionIndex: a.auditedSection,
        iteration: a.iteration,
        rationale: a.rationale,
        changes: a.changes.map((c) => ({ kind: c.kind, sectionIndex: c.index, title: c.title, ...(c.previousTitle !== undefined ? { previousTitle: c.previousTitle } : {}), diff: c.diff })),
      })),
      shellInterventions: interventions.map((i) => ({
        action: i.action,
        mode: i.mode,
        command: i.command,
        elapsedMs: i.elapsedMs,
        thresholdMs: i.thresholdMs,
        processes: i.processes,
        sessionId: i.sessionId,
        at: i.at,
      })),
    });
  }
  const checks = readExtras(loop).checks ?? [];
  const lines = [
    `${s.name}: ${s.status}${s.status === 'completed' ? '' : ` in ${s.phase}`}, iteration ${s.iteration}${s.reason && s.reason !== s.status ? ` (${s.reason})` : ''}`,
    `branch ${s.branch}   worktree ${s.worktree}`,
    ...(s.supervisor ? [`supervised by ${formatSupervision(s.supervisor)}`] : []),
    `confinement: ${describeConfinement(s.confinement)}${s.confinement.sandboxed ? '' : ` — ${s.confinement.detail}`}`,
    `sections ${s.sections.done}/${s.sections.total} done; open findings: ${s.openFindings.bug} bug, ${s.openFindings.warning} warning`,
    `models: coding ${s.model ?? "opencode's default model"}${s.variant ? ` (variant ${s.variant})` : ''}, audit ${s.auditorModel ?? 'same as coding'}`,
    `usage: ${s.sessions} sessions, ${s.tokens.input} in / ${s.tokens.output} out tokens, ${money(s.cost)}`,
    `budget: ${describeBudget(readExtras(loop).budget)}${s.budget ? ` — used ${s.budget.used.map((u) => `${u.limit} ${u.percent} %`).join(', ')}` : ''}`,
    ...(s.status === 'paused' ? [`paused: continue with forge restart ${s.name} --budget AMOUNT (higher than spent), or leave it.`] : []),
    ...(s.status === 'awaiting_review' ? [`awaiting your review: forge review ${s.name} lists the coder's answers; resolve them (--resolve ID) or send the review back (--send).`] : []),
    'attempts:',
    ...attempts.map((a) => `  ${a.kind} iteration ${a.iteration}${a.sectionIndex !== null ? ` section ${a.sectionIndex + 1}` : ''} #${a.attempt} on ${a.model ?? "opencode's default model"}${a.variant ? ` (${a.variant})` : ''}: ${a.outcome}${a.error ? ` — ${a.error.split('\n')[0]!.slice(0, 160)}` : ''}`),
    'transitions:',
    ...transitions.map((t) => `  ${new Date(t.at).toISOString()} ${t.event}: ${t.fromPhase ?? '-'} → ${t.toPhase ?? '-'} (iteration ${t.iteration})`),
    checks.length === 0 ? 'checks: none (a plan names them in its ## Verification part, a goal with --check / --exists / --contains / --matches)' : `checks (${checks.length}): ${checks.map((c) => c.label).join('; ')}`,
    ...(checkRuns.length > 0 ? ['check log:', ...checkRuns.map((r) => `  ${new Date(r.startedAt).toISOString()} ${formatCheckRun(r)}`)] : []),
    ...(amendments.length > 0 ? [`plan amendments (${amendments.length}):`, ...amendments.flatMap(formatAmendment)] : []),
    ...(accepts.length > 0 ? ['accepted:', ...accepts.map((a) => `  ${describeAccept(a)}`)] : []),
    ...(interventions.length > 0 ? ['shell-hang watchdog:', ...interventions.map((i) => `  ${new Date(i.at).toISOString()} ${formatShellIntervention(i)}`)] : []),
  ];
  return lines.join('\n');
}

/** An amendment as `forge status NAME` prints it: when, during which audit, why, then each change with its diff. */
function formatAmendment(a: AmendmentView): string[] {
  const during = a.auditedSection !== null ? ` during the audit of section ${a.auditedSection + 1}${a.iteration !== null ? ` (iteration ${a.iteration})` : ''}` : '';
  return [
    `  ${new Date(a.at).toISOString()}${during}: ${a.rationale || '(no rationale given)'}`,
    ...a.changes.flatMap((c) => [`    ${summariseChange(c)}`, ...c.diff.map((d) => `      ${d.op} ${d.text}`)]),
  ];
}

export function formatShellIntervention(i: ShellInterventionRow): string {
  const what = i.action === 'killed' ? `killed ${i.processes.length} process(es)` : i.action === 'dry-run' ? `dry-run: would kill ${i.processes.length} process(es)` : 'unresolved: no process found';
  return `${what} of a bash call after ${Math.round(i.elapsedMs / 1000)} s (threshold ${Math.round(i.thresholdMs / 1000)} s): ${i.command.slice(0, 120)}`;
}

export function formatFindings(engine: ForgeEngine, projectId: string, loopName: string, json: boolean): string {
  const findings = engine.repos.reviewFindings.listByLoop(projectId, loopName);
  // One JSON array, `[]` when there is none.
  if (json) return JSON.stringify(findings);
  if (findings.length === 0) return `Loop "${loopName}" has no findings.`;
  return findings
    .map((f) => `#${f.id} ${f.status.padEnd(9)} ${f.severity.padEnd(7)} ${f.file}${f.line ? `:${f.line}${f.lineEnd ? `-${f.lineEnd}` : ''}` : ''}${f.source === 'user' ? ' (your review)' : ''}\n    ${f.description}${f.scenario ? `\n    scenario: ${f.scenario}` : ''}${f.reply ? `\n    coder: ${f.reply}` : ''}`)
    .join('\n');
}
