/**
 * Restarting a loop (split from runtime.ts): taking over one still marked running (force), going
 * on after a pause (a new budget), reopening a completed one with a finding (a group's merge
 * queue), and the user's review (issue 29): `review: 'send'` — another coding pass carrying the
 * user's open comments; `review: 'final'` — every comment settled, the final gate once more.
 */
import { createForgeRepositories, type ForgeRepositories } from '../storage/repositories';
import { isWorkspaceError } from '../workspace';
import { supervisorOf } from './lease-holder';
import { readExtras, type LoopSupervisor, type StoredLoopExtras } from './loop-supervisor';
import { LoopRuntimeError, type LoopRef, type LoopRuntimeEvent, type RestartLoopOptions } from './runtime-types';
import { roleOfPhase } from './state';
import { budgetAllowsContinuing, budgetProblem, budgetUses, describeBudget, formatMoney, formatTokens, hasBudget, spendFromTotals, type LoopBudget } from './budget';
import { iterationCap, restartState, reviewPassState } from './transitions';
import type { LoopRuntimeDeps } from './runtime';

export interface LoopRestartContext {
  deps: LoopRuntimeDeps;
  repos: ForgeRepositories;
  supervisorId: string;
  leaseTtlMs: number;
  emit: (event: LoopRuntimeEvent) => void;
  supervise: (ref: LoopRef) => LoopSupervisor;
  stopOrphanedOpencode: (ref: LoopRef, extras: StoredLoopExtras) => void;
  /** The supervisor this process runs for the loop, if any. */
  supervising: (ref: LoopRef) => LoopSupervisor | undefined;
}

const MODEL_REF = /^[^/\s]+\/\S+$/;

export function createLoopRestart(ctx: LoopRestartContext): (ref: LoopRef, options?: RestartLoopOptions) => Promise<void> {
  const { deps, repos, supervisorId, leaseTtlMs, emit, supervise, stopOrphanedOpencode } = ctx;
  return async function restart(ref: LoopRef, options: RestartLoopOptions = {}): Promise<void> {
    const loop = repos.loops.get(ref.projectId, ref.name);
    if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}".`);
    for (const [what, m] of [['model', options.model], ['auditor model', options.auditorModel]] as const) {
      if (m !== undefined && !MODEL_REF.test(m)) throw new LoopRuntimeError('bad_request', `The ${what} must be "provider/model" (for example anthropic/claude-sonnet-4-5), not "${m}".`);
    }
    // Models named for the restart are checked against opencode's catalog before anything changes.
    const named = [
      ...(options.model ? [{ role: 'coding model (--model)', model: options.model }] : []),
      ...(options.auditorModel ? [{ role: 'audit model (--auditor-model)', model: options.auditorModel }] : []),
    ];
    const modelProblem = named.length > 0 && deps.checkModels ? await deps.checkModels(loop.repoDir ?? '', named) : null;
    if (modelProblem) throw new LoopRuntimeError('bad_request', modelProblem);
    if (options.budget) {
      const problem = budgetProblem(options.budget);
      if (problem) throw new LoopRuntimeError('bad_request', problem);
    }
    if (options.reopen && loop.status !== 'completed') {
      throw new LoopRuntimeError('bad_request', `Loop "${ref.name}" is ${loop.status}; only a completed loop can be reopened with a finding.`);
    }
    if (options.review) {
      // The user's review (issue 29): checked here too, whoever asks (the CLI, VS Code, a handed-over run).
      const open = repos.reviewFindings.listOpen(ref.projectId, ref.name).filter((f) => f.source === 'user');
      if (loop.status === 'running' || loop.status === 'starting') {
        throw new LoopRuntimeError('running', `Loop "${ref.name}" is running; send the review when it has stopped (its comments reach it at the next send).`);
      }
      if (options.review === 'send' && open.length === 0) {
        throw new LoopRuntimeError('bad_request', `Loop "${ref.name}" has no open comment of your review to send. Add one first: forge review ${ref.name} --comment FILE:LINE "TEXT".`);
      }
      if (options.review === 'final' && (loop.status !== 'awaiting_review' || open.length > 0)) {
        throw new LoopRuntimeError('bad_request', `Loop "${ref.name}" is ${loop.status} with ${open.length} open comment${open.length === 1 ? '' : 's'} of your review; it completes once it awaits your review and none is open.`);
      }
    }
    if (loop.status === 'completed' && !options.reopen && !options.review) {
      throw new LoopRuntimeError('completed', `Loop "${ref.name}" completed; completed loops are history. Start a new loop to continue the work.`);
    }
    const running = loop.status === 'running' || loop.status === 'starting';
    if (running && !options.force) {
      const sup = supervisorOf(loop);
      const who = sup.state === 'alive' ? `process ${sup.pid} supervises it` : sup.state === 'dead' ? `its supervising process ${sup.pid} is gone` : 'its supervising process seems gone';
      throw new LoopRuntimeError('running', `Loop "${ref.name}" is still marked running (${who}). Restart it with force to take it over.`);
    }
    const before = readExtras(loop);
    const budget: LoopBudget | undefined = options.budget ? { ...(before.budget ?? { money: null, tokens: null, auditorShare: null }), ...options.budget } : before.budget;
    if (loop.status === 'paused') {
      // Paused on its budget: continuing needs room for the session it stopped before.
      const spend = spendFromTotals(repos.sessionUsage.totalsByRole(ref.projectId, ref.name));
      const nextRole = roleOfPhase(before.loopState.phase);
      if (!budgetAllowsContinuing(budget, spend, nextRole)) {
        const spent = hasBudget(before.budget) ? budgetUses(before.budget, spend).filter((u) => u.fraction >= 1 - 1e-9).map((u) => `${u.what}: ${u.what.endsWith('money') ? `${formatMoney(u.used)} of ${formatMoney(u.limit)}` : `${formatTokens(u.used)} of ${formatTokens(u.limit)}`}`).join('; ') : '';
        throw new LoopRuntimeError(
          'bad_request',
          `Loop "${ref.name}" is paused because its budget (${describeBudget(before.budget)}) is spent${spent ? ` (${spent})` : ''}. ${options.budget ? `The new budget (${describeBudget(budget)}) leaves no room for the next session either. ` : ''}Restart it with a higher budget, for example --budget or --budget-tokens above what it spent (forge status ${ref.name} shows the spend).`,
        );
      }
    }
    const mine = ctx.supervising(ref);
    if (mine) await mine.relinquish();
    const extras = readExtras(loop);
    // A forced takeover: the previous supervisor's opencode must not keep working in the worktree.
    stopOrphanedOpencode(ref, extras);
    try {
      await deps.worktrees.ensureWorktree({ worktreeDir: loop.worktreeDir!, branch: loop.branch!, repoDir: loop.repoDir! });
    } catch (error) {
      if (isWorkspaceError(error)) throw new LoopRuntimeError('workspace', `Loop "${ref.name}" cannot restart: ${error.message}`);
      throw error;
    }
    const reopen = loop.status === 'completed' ? options.reopen : undefined;
    const state = options.review ? reviewPassState(extras.loopState, options.review) : reopen ? reviewPassState(extras.loopState, 'send') : restartState(extras.loopState);
    // Other models from now on; the variant belongs to the coding model, so a new model drops the old one's.
    const model = options.model ?? loop.model;
    const auditorModel = options.auditorModel ?? loop.auditorModel;
    const { variant: oldVariant, ...extrasWithoutVariant } = extras;
    const variant = options.variant !== undefined ? options.variant.trim() || undefined : options.model !== undefined && options.model !== loop.model ? undefined : oldVariant;
    const changes: string[] = [];
    if (model !== loop.model) changes.push(`coding model ${loop.model ?? 'default'} → ${model}`);
    if (auditorModel !== loop.auditorModel) changes.push(`audit model ${loop.auditorModel ?? 'same as coding'} → ${auditorModel}`);
    if (variant !== oldVariant) changes.push(`variant ${oldVariant ?? 'default'} → ${variant ?? 'default'}`);
    if (options.budget) changes.push(`budget ${describeBudget(extras.budget)} → ${describeBudget(budget)}`);
    deps.db.transaction((tx) => {
      const r = createForgeRepositories(tx);
      r.attempts.abandonRunning(ref.projectId, ref.name);
      // Force: take the lease whoever holds it (the user asked for it).
      r.loops.update(ref.projectId, ref.name, {
        status: 'running',
        terminationReason: null,
        endedAt: null,
        supervisorId,
        leaseExpiresAt: Date.now() + leaseTtlMs,
        iteration: state.iteration,
        maxIterations: iterationCap(state, extras.limits),
        errorCount: 0,
        consecutiveStalls: 0,
        currentSessionId: null,
        model,
        auditorModel,
        state: {
          ...extrasWithoutVariant,
          ...(variant ? { variant } : {}),
          ...(budget ? { budget } : {}),
          // A new budget gets its own 80 % warning.
          budgetWarned: options.budget ? false : extras.budgetWarned ?? false,
          loopState: state,
          opencodePid: null,
          cancelRequested: false,
        },
      });
      if (reopen) {
        r.reviewFindings.record(ref.projectId, { loopName: ref.name, file: reopen.file, line: 0, severity: 'bug', description: reopen.description, sectionIndex: null, fingerprint: reopen.fingerprint, source: 'check' });
      }
      r.transitions.append(ref.projectId, { loopName: ref.name, event: options.review === 'send' ? 'review_sent' : options.review === 'final' ? 'review_resolved' : reopen ? 'reopen' : options.force ? 'force_restart' : 'restart', fromPhase: extras.loopState.phase, toPhase: state.phase, iteration: state.iteration, sectionIndex: state.sectionIndex });
    });
    const sup = supervise(ref);
    if (changes.length > 0) emit({ type: 'loop.notice', loop: ref, level: 'info', message: `restarted with ${changes.join(', ')}` });
    emit({ type: 'loop.phase', loop: ref, event: 'restart', from: extras.loopState.phase, to: state.phase, iteration: state.iteration, sectionIndex: state.sectionIndex });
    void sup.begin('restart');
  };
}
