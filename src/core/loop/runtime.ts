/**
 * The loop runtime: starts, cancels and restarts loops, and supervises the ones this process
 * drives (one `LoopSupervisor` — one per-loop scope — each). Host-neutral: the VS Code extension
 * and the CLI both create it through `createForgeEngine`.
 *
 * Nothing is recovered or restarted when a runtime is created: a loop left `running` by a dead
 * process stays as it is until the user restarts it (with `force`).
 */
import type { FileGuardServer } from '../opencode/file-guard-server';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentPrompts } from '../opencode/forge-config';
import { projectConfigNotice, projectLayerFor, readProjectConfig } from '../opencode/project-config';
import type { ForgeToolServer } from '../opencode/forge-tool-server';
import type { SharedOpencodePool } from '../opencode/shared-opencode';
import { createLoopAgentOpener } from './loop-agent';
import { signalMarkedProcesses } from '../process/marked-processes';
import { LOOP_PROCESS_MARKER_VARIABLE } from '../sandbox/shell-router';
import type { PermissionRule } from '../opencode/agent-client';
import { killMarkedProcesses, killServerProcessesNow } from '../opencode/server-process';
import type { ForgeSettings } from '../config/settings';
import { createForgeRepositories, type ForgeRepositories, type LoopRow } from '../storage/repositories';
import type { SqlExecutor } from '../storage/sql-executor';
import {
  chooseLoopName,
  explicitLoopName,
  isWorkspaceError,
  loopNameFromPlan,
  slugifyLoopName,
  uniqueLoopName,
  workingTreeChangesNotice,
  type InspectRepositoryOptions,
  type MergeMode,
  type RepositoryInfo,
  type WorktreeService,
} from '../workspace';
import { isProcessAlive } from '../storage/cross-process-lock';
import { confinementRequest, decideConfinement, type Confinement, LOOP_CONFINEMENT_STATE_KEY, unconfinedNotice } from '../sandbox/confinement';
import { parsePlan, PlanError, type ParsedPlan } from './plan';
import { loopAbout, teardownMessageWriter } from './loop-teardown';
import { supervisorOf } from './lease-holder';
import { projectIdFor } from './project';
import { stepTimer } from './step-timer';
import { planLoopSetup, runSetupPhase, SETUP_TIMEOUT_STATE_KEY } from './loop-setup';
import { WORKTREE_SETUP_STATE_KEY } from '../workspace/worktree-setup/worktree-setup';
import { LoopSupervisor, readExtras, type EngineLog, type StoredLoopExtras } from './loop-supervisor';
import {
  LoopRuntimeError,
  MAX_USER_MESSAGE_CHARS,
  type UserMessageDelivery,
  type LoopRef,
  type LoopRuntime,
  type LoopRuntimeEvent,
  type LoopRuntimeListener,
  type LoopTimingMark,
  type StartLoopRequest,
} from './runtime-types';
import { initialState, terminationStatusFor } from './state';
import { budgetProblem, describeBudget, hasBudget, type LoopBudget } from './budget';
import { goalChecks, loopGate, planChecks } from './loop-checks';
import { hostCheckExecutor, type CheckExecutor } from '../checks';
import type { ScratchCheckRun } from './supervisor-deps';
import { createLoopRestart } from './runtime-restart';
import { namedLoopModels, type NamedModel } from '../opencode/model-check';
import { LoopJobRegistry } from '../jobs/job-registry';
import type { LiveFeedSink } from '../live/live-feed';

export interface LoopSandboxPort {
  /** The driver a new loop would be sandboxed with now, or why none works here. */
  resolveDriver(): Promise<{ driver: string | null; reason: string | null }>;
  /** Creates (or resumes) the loop's sandbox and returns what the opencode server needs. */
  prepare(loop: LoopRow, extras: StoredLoopExtras, resume: boolean): Promise<PreparedAgentShell>;
  /** An unconfined loop's agent shell (secrets dropped, push refused): what the opencode server needs. */
  prepareHost(loop: LoopRow): Promise<PreparedAgentShell>;
  /**
   * An unconfined loop's process cgroup, made at its start: null when it has one, else the
   * start notice saying it cannot be had and what Forge does instead.
   */
  trackHost?(loop: LoopRow): Promise<string | null>;
  /** Removes an ended unconfined loop's agent shell and kills every process its agent left (its cgroup). */
  releaseHost(loop: LoopRow): Promise<void>;
  /** Fails with a clear message when the loop's sandbox is gone. */
  check(loop: LoopRow): Promise<void>;
  release(loop: LoopRow, ended: boolean): Promise<void>;
  /** Runs the loop's verification checks inside its sandbox. */
  checkExecutor(loop: LoopRow): Promise<CheckExecutor>;
  /** A short-lived sandbox for the loop's setup commands (network on, package cache writable), removed by `release`. */
  setupExecutor?(loop: LoopRow): Promise<ScratchCheckRun>;
}

/** What the opencode server needs for a loop's agent shell, and where its builtin shell calls register (the watchdog's input). */
export interface PreparedAgentShell {
  env: Record<string, string>;
  config: Record<string, unknown>;
  callsDir?: string;
  /** The loop's own shell (its sandbox shim or its unconfined agent shell). */
  shellPath: string;
  /** The loop's ripgrep shim (sandboxed loops: ripgrep runs in the sandbox too). */
  ripgrepPath?: string;
  /** Freezes the loop's sandbox while a file tool runs on the host (file-guard-server.ts); null: it cannot be frozen. */
  freeze?: () => Promise<(() => Promise<void>) | null>;
  /** What a new loop's start says about its sandbox (e.g. a Dev Container configuration bwrap does not use). */
  notices?: string[];
}

export interface LoopRuntimeDeps {
  db: SqlExecutor & { transaction<T>(fn: (tx: SqlExecutor) => T): T };
  worktrees: WorktreeService;
  /** Runs the gate's checks of a clean checkout of a sandboxed loop's work in a sandbox of their own over it (issue 27). */
  gateCheckExecutor?: (loop: LoopRow, dir: string) => Promise<ScratchCheckRun>;
  settings: () => ForgeSettings;
  log: EngineLog;
  /** Forge's MCP tool server for a project (the host starts it lazily, one per project). */
  toolServerFor: (projectId: string, onHandoff: () => void) => Promise<ForgeToolServer>;
  agentPrompts: () => Promise<AgentPrompts>;
  /** Environment for opencode (the user's, plus API keys the host adds). */
  opencodeEnv: () => NodeJS.ProcessEnv;
  /** Set over everything (tests isolate HOME/XDG here). */
  opencodeExtraEnv?: Record<string, string>;
  /** Models used when neither the request nor the settings name one (the embedded model). */
  defaultModels?: (repoPath: string) => Promise<{ model: string | null; auditorModel: string | null; notice: string | null; source?: string }>;
  /**
   * Checks the named models against opencode's provider catalog for `repoPath`: a message naming
   * the unknown ones (with a did-you-mean), or null. Asked before anything of a loop is created.
   */
  checkModels?: (repoPath: string, named: NamedModel[]) => Promise<string | null>;
  /**
   * Brings up what a loop's models need before its opencode server starts: the embedded model,
   * when a loop started on it is restarted (in this process or another one).
   */
  prepareModels?: (models: string[]) => Promise<void>;
  sandbox?: LoopSandboxPort;
  /** Lease length; a dead supervisor's loop shows unsupervised after this. */
  leaseTtlMs?: number;
  supervisorId?: string;
  /** Benchmark hook: idle received / prompt sent marks of every loop this runtime drives. */
  onTiming?: (mark: LoopTimingMark) => void;
  /** The running loops' forge_shell jobs, shared with the tool backend. */
  jobs?: LoopJobRegistry;
  /** TEST ONLY: the shell-hang watchdog's floor (default 60 s; the user setting never goes below it). */
  shellWatchdogFloorMs?: number;
  /** Where the supervisors publish what their sessions are doing (the live view). */
  live?: LiveFeedSink;
  /** The opencode servers this process's loops share (setting forge.opencode.serverMode "shared"). */
  sharedOpencode?: SharedOpencodePool;
  /** The guard every file tool call of opencode passes before it runs (file-guard-server.ts). */
  fileGuard?: () => Promise<FileGuardServer>;
}

/** The value of a settled lookup; its error when it failed. */
function settledValue<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

export function createLoopRuntime(deps: LoopRuntimeDeps): LoopRuntime {
  const repos: ForgeRepositories = createForgeRepositories(deps.db);
  const supervisorId = deps.supervisorId ?? `${process.pid}:${randomUUID()}`;
  const leaseTtlMs = deps.leaseTtlMs ?? 30_000;
  const listeners = new Set<LoopRuntimeListener>();
  const supervisors = new Map<string, LoopSupervisor>();
  /** How loops this process drove last ended, so waitForEnd after the fact still answers. */
  const lastEnd = new Map<string, LoopRuntimeEvent & { type: 'loop.ended' | 'loop.supervision_lost' }>();
  const key = (ref: LoopRef) => `${ref.projectId}\u0000${ref.name}`;
  let disposed = false;

  function emit(event: LoopRuntimeEvent): void {
    if (event.type === 'loop.ended' || event.type === 'loop.supervision_lost') lastEnd.set(key(event.loop), event);
    for (const l of [...listeners]) {
      try {
        l(event);
      } catch (error) {
        deps.log.warn(`runtime listener failed: ${String(error)}`);
      }
    }
  }

  async function projectOf(repoPath: string, inspect: InspectRepositoryOptions = {}): Promise<RepositoryInfo & { projectId: string }> {
    try {
      const info = await deps.worktrees.inspectRepository(repoPath, inspect);
      return { projectId: projectIdFor(info.gitCommonDir), ...info };
    } catch (error) {
      if (isWorkspaceError(error)) throw new LoopRuntimeError('workspace', error.message);
      throw error;
    }
  }

  const openAgentFor = createLoopAgentOpener(deps, repos, emit);

  /** The worktree setup of a new loop (issue 27), planned and stored; the supervisor runs it. */
  async function planSetupAtStart(loop: LoopRow, settings: ForgeSettings, sandboxed: boolean, notices: string[]): Promise<void> {
    try {
      const plan = await planLoopSetup({ dataDir: deps.worktrees.dataDir, loop, settings, sandboxed });
      repos.loops.mergeState(loop.projectId, loop.name, { [SETUP_TIMEOUT_STATE_KEY]: settings['forge.worktree.setupTimeoutMs'], ...(plan ? { [WORKTREE_SETUP_STATE_KEY]: plan } : {}) });
      if (plan) notices.push(...plan.problems);
    } catch (error) {
      notices.push(`The worktree's setup could not be planned, so none runs: ${(error as Error).message}`);
    }
  }
  const setupPhaseDeps = {
    dataDir: deps.worktrees.dataDir,
    repos,
    emit,
    log: deps.log,
    executor: async (loop: LoopRow): Promise<ScratchCheckRun> => {
      if (!loop.sandbox) return { exec: hostCheckExecutor(), where: 'the host (the loop runs unconfined)', release: async () => undefined };
      if (!deps.sandbox?.setupExecutor) throw new LoopRuntimeError('sandbox', 'This loop runs sandboxed, but this Forge has no sandbox for its setup.');
      return deps.sandbox.setupExecutor(loop);
    },
  };

  function supervise(ref: LoopRef): LoopSupervisor {
    lastEnd.delete(key(ref));
    const sup = new LoopSupervisor(
      {
        db: deps.db,
        repos,
        worktrees: deps.worktrees,
        log: deps.log,
        supervisorId,
        leaseTtlMs,
        emit,
        ...(deps.live ? { live: deps.live } : {}),
        openAgent: openAgentFor(ref.projectId),
        releaseSandbox: async (loop, ended) => {
          if (loop.sandbox && deps.sandbox) await deps.sandbox.release(loop, ended);
          else if (ended && deps.sandbox) await deps.sandbox.releaseHost(loop);
        },
        checkSandbox: async (loop) => {
          if (loop.sandbox && deps.sandbox) await deps.sandbox.check(loop);
        },
        checkExecutor: async (loop) => {
          if (!loop.sandbox) return hostCheckExecutor();
          if (!deps.sandbox) throw new LoopRuntimeError('sandbox', 'This loop runs sandboxed, but no sandbox driver is configured in this Forge, so its checks cannot run.');
          return deps.sandbox.checkExecutor(loop);
        },
        checkExecutorOver: async (loop, dir) => {
          if (!loop.sandbox) return { exec: hostCheckExecutor(), where: 'on the host (the loop ran unconfined)', release: async () => undefined };
          if (!deps.gateCheckExecutor) throw new LoopRuntimeError('sandbox', 'This loop runs sandboxed, but this Forge has no sandbox for checks of a clean checkout, so its checks cannot run.');
          return deps.gateCheckExecutor(loop, dir);
        },
        runSetup: (r, signal) => runSetupPhase(setupPhaseDeps, r, signal),
        onDisposed: (r) => supervisors.delete(key(r)),
        ...(deps.onTiming ? { onTiming: deps.onTiming } : {}),
      },
      ref,
    );
    supervisors.set(key(ref), sup);
    return sup;
  }

  async function reserveName(projectId: string, desired: string, userGiven: boolean, loop: Parameters<ForgeRepositories['loops']['reserve']>[2]): Promise<LoopRow> {
    // Worktree folders are shared by every project in the data folder: avoid names whose
    // folder exists already, then let the repository reserve atomically within the project.
    let onDisk: string[] = [];
    try {
      onDisk = await readdir(join(deps.worktrees.dataDir, 'worktrees'));
    } catch {
      /* no worktrees yet */
    }
    const base = uniqueLoopName(desired, onDisk);
    if (userGiven && base !== desired && repos.loops.get(projectId, desired)) {
      throw new LoopRuntimeError('bad_name', `A loop named "${desired}" already exists. Choose another name, or restart that loop.`);
    }
    return repos.loops.reserve(projectId, base, loop);
  }

  async function start(request: StartLoopRequest): Promise<LoopRef & { notices: string[]; confinement: Confinement }> {
    if (disposed) throw new LoopRuntimeError('bad_request', 'Forge is shutting down.');
    const settings = deps.settings();
    const timing = stepTimer();
    // 1. Everything that can be wrong with the request is checked before anything is created.
    let plan: ParsedPlan | null = null;
    if (request.kind === 'plan') {
      try {
        plan = parsePlan(request.planText ?? '', request.planSource ?? 'The plan');
      } catch (error) {
        if (error instanceof PlanError) throw new LoopRuntimeError('bad_plan', error.message);
        throw error;
      }
    } else if (!request.goal || !request.goal.trim()) {
      throw new LoopRuntimeError('bad_request', 'The goal is empty. Say what the agent should achieve.');
    }
    // The checks are parsed once, here, and stored with the loop: nothing changes them after.
    if (request.kind === 'plan' && request.checks) {
      throw new LoopRuntimeError('bad_request', "A plan names its checks in its ## Verification part and its sections' Verify: lines; check options are for goals.");
    }
    const checks = plan ? planChecks(plan) : goalChecks(request.checks);
    if (checks.problems) throw new LoopRuntimeError('bad_plan', checks.problems);
    // A name the user chose, with --name or in the plan's Loop Name line, follows one rule
    // (chooseLoopName): refused when path-like or unusable, else made valid and the user told.
    const nameNotices: string[] = [];
    let desired: string;
    const chosenName = request.name ?? (plan ? explicitLoopName(plan.text) : null);
    if (chosenName !== null) {
      const chosen = chooseLoopName(chosenName, request.name !== undefined ? 'option' : 'plan');
      if (!chosen.ok) throw new LoopRuntimeError('bad_name', chosen.message);
      desired = chosen.name;
      if (chosen.notice) nameNotices.push(chosen.notice);
    } else if (plan) {
      desired = loopNameFromPlan(plan.text);
    } else {
      desired = slugifyLoopName(request.goal!.split(/\s+/).slice(0, 6).join(' '));
    }
    timing.mark('request');
    // The repository, the default models and the sandbox driver are independent lookups (git,
    // opencode's configuration, the drivers' probes): asked at once, answered in this order.
    const confinementWanted = confinementRequest(request.sandbox, { enabled: settings['forge.sandbox.enabled'], required: settings['forge.sandbox.required'] });
    const settingsModels = { model: settings['forge.model'], auditorModel: settings['forge.auditorModel'], auditorFallbackModels: settings['forge.auditorFallbackModels'] };
    const [projectLookup, defaultsLookup, driverLookup, modelCheck] = await Promise.allSettled([
      projectOf(request.repoPath, { workingTreeChanges: true }),
      deps.defaultModels ? deps.defaultModels(request.repoPath) : Promise.resolve({ model: null, auditorModel: null, notice: null }),
      confinementWanted === 'off'
        ? Promise.resolve({ driver: null, reason: null })
        : deps.sandbox
          ? deps.sandbox.resolveDriver()
          : Promise.resolve({ driver: null, reason: 'this Forge was built without sandbox support.' }),
      // The models the request and the settings name, checked before anything is created.
      deps.checkModels ? deps.checkModels(request.repoPath, namedLoopModels(request, settingsModels)) : Promise.resolve(null),
    ]);
    const project = settledValue(projectLookup);
    const defaults = settledValue(defaultsLookup);
    const driver = settledValue(driverLookup);
    // A default (FORGE_MODEL, opencode's own) is checked too; the catalog is read once either way.
    const defaultNamed = !request.model && !settings['forge.model'] && defaults.model ? [{ role: `coding model (${defaults.source ?? 'the default'})`, model: defaults.model }] : [];
    const modelProblem = settledValue(modelCheck) ?? (defaultNamed.length > 0 && deps.checkModels ? await deps.checkModels(request.repoPath, defaultNamed) : null);
    if (modelProblem) throw new LoopRuntimeError('bad_request', modelProblem);
    timing.mark('repository, models and sandbox driver');
    const model = request.model || settings['forge.model'] || defaults.model || null;
    const auditorModel = request.auditorModel || settings['forge.auditorModel'] || (request.model || settings['forge.model'] ? null : defaults.auditorModel) || null;
    const notices = [...nameNotices, ...(plan?.notices ?? []), ...checks.notes];
    if (checks.checks.length === 0) notices.push(NO_CHECK_NOTICE);
    // The worktree starts from HEAD: say so when the user's own working tree holds more.
    const uncommitted = project.workingTreeChanges ? workingTreeChangesNotice(project, project.workingTreeChanges) : null;
    if (uncommitted) notices.push(uncommitted);
    // opencode reads no configuration from the worktree: say what of the user's project configuration loops leave out.
    const projectConfig = settings['forge.opencode.serverUrl'] ? null : projectConfigNotice(projectLayerFor(await readProjectConfig(project.repoDir)));
    if (projectConfig) notices.push(projectConfig);
    if (!request.model && !settings['forge.model'] && defaults.notice) notices.push(defaults.notice);
    // Safe by default: sandboxed wherever a driver works; unconfined only when allowed, and said.
    const decision = decideConfinement(confinementWanted, driver, settings['forge.sandbox.driver']);
    if (!decision.ok) throw new LoopRuntimeError('sandbox', decision.message);
    const confinement = decision.confinement;
    const sandbox = confinement.sandboxed;
    if (!confinement.sandboxed) notices.push(unconfinedNotice(confinement));

    const budget = startBudget(request.budget, settings);
    const sections = plan?.sections ?? [];
    const loopState = initialState(request.kind, sections.length);
    const extras: StoredLoopExtras = {
      loopState,
      limits: {
        maxIterations: request.maxIterations ?? settings['forge.loop.maxIterations'],
        maxConsecutiveStalls: settings['forge.loop.maxConsecutiveStalls'],
        maxModelRetries: settings['forge.loop.maxModelRetries'],
        auditorFallbackModels: settings['forge.auditorFallbackModels'],
        postAction: request.kind === 'plan' && settings['forge.loop.postAction'].trim().length > 0,
        gate: loopGate(checks.checks, sections.length),
      },
      checks: checks.checks,
      checkTimeoutMs: settings['forge.checks.timeoutMs'],
      timing: {
        stallTimeoutMs: settings['forge.loop.stallTimeoutMs'],
        busyStallTimeoutMs: settings['forge.loop.busyStallTimeoutMs'],
        idleGateTimeoutMs: settings['forge.loop.idleGateTimeoutMs'],
      },
      title: plan?.title ?? request.goal!.trim().split('\n')[0]!.slice(0, 120),
      objective: plan?.objective ?? null,
      verification: plan?.verification ?? null,
      merge: request.merge ?? settings['forge.loop.merge'],
      postAction: settings['forge.loop.postAction'].trim() || null,
      cleanupWorktree: settings['forge.loop.cleanupWorktree'],
      gitCommonDir: project.gitCommonDir,
      userDenyRules: settings['forge.loop.permissions'] as PermissionRule[],
      ...(request.variant?.trim() ? { variant: request.variant.trim() } : {}),
      ...(hasBudget(budget) ? { budget } : {}),
    };
    if (hasBudget(budget)) notices.push(`Budget: ${describeBudget(budget)}. Forge warns at 80 % and pauses the loop at the next hand-over at 100 %.`);

    // 2. Identity first: the name is reserved before any side effect.
    const row = await reserveName(project.projectId, desired, request.name !== undefined, {
      kind: request.kind,
      status: 'starting',
      phase: 'coding',
      iteration: 1,
      maxIterations: extras.limits.maxIterations,
      sectionIndex: loopState.sectionIndex,
      model,
      auditorModel,
      sandbox,
      repoDir: project.repoDir,
      state: { ...(extras as unknown as Record<string, unknown>), [LOOP_CONFINEMENT_STATE_KEY]: confinement },
    });
    const ref: LoopRef = { projectId: project.projectId, name: row.name };
    timing.mark('name');
    if (row.name !== desired) notices.splice(nameNotices.length, 0, `The name "${desired}" is taken (by an earlier loop or its worktree folder), so this loop is named "${row.name}".`);
    try {
      const wt = await deps.worktrees.createWorktree({ repoPath: project.repoDir, loopName: row.name, repository: project, ...(request.baseCommit ? { baseCommit: request.baseCommit } : {}) });
      timing.mark('worktree');
      deps.db.transaction((tx) => {
        const r = createForgeRepositories(tx);
        r.loops.update(ref.projectId, ref.name, {
          worktreeDir: wt.worktreeDir,
          branch: wt.branch,
          baseBranch: wt.baseBranch,
          baseCommit: wt.baseCommit,
          repoDir: wt.repoDir,
        });
        r.loops.setLargeFields(ref.projectId, ref.name, { planText: plan?.text ?? null, goalText: request.kind === 'goal' ? request.goal!.trim() : null });
        if (sections.length > 0) {
          r.sectionPlans.replaceAll(ref.projectId, ref.name, sections.map((s) => ({ title: s.title, body: s.body })));
          r.sectionPlans.setStatus(ref.projectId, ref.name, 0, 'in_progress');
          r.sectionPlans.incrementAttempts(ref.projectId, ref.name, 0);
        }
        if (!r.loops.acquireLease(ref.projectId, ref.name, supervisorId, leaseTtlMs)) throw new Error('lease taken by another process');
        r.loops.update(ref.projectId, ref.name, { status: 'running' });
        r.transitions.append(ref.projectId, { loopName: ref.name, event: 'start', fromPhase: null, toPhase: 'coding', iteration: 1, sectionIndex: loopState.sectionIndex });
      });
    } catch (error) {
      // Nothing ran yet: give the name back so the user can fix the cause and run again.
      repos.loops.delete(ref.projectId, ref.name);
      if (isWorkspaceError(error)) throw new LoopRuntimeError('workspace', error.message);
      throw error;
    }
    await planSetupAtStart(repos.loops.get(ref.projectId, ref.name)!, settings, sandbox, notices);
    timing.mark('setup planned');
    if (sandbox && deps.sandbox) {
      // The sandbox must come up before the loop counts as started (no supervisor, no
      // started event yet); failure rolls the start back: worktree, then the loop's row.
      const loop = repos.loops.get(ref.projectId, ref.name)!;
      try {
        const prepared = await deps.sandbox.prepare(loop, readExtras(loop), false);
        if (prepared.notices) notices.push(...prepared.notices);
      } catch (error) {
        await deps.worktrees
          .removeWorktree(loop.worktreeDir!)
          .catch((e) => deps.log.warn(`rolling back loop ${ref.name}: could not remove its worktree: ${(e as Error).message}`));
        repos.loops.delete(ref.projectId, ref.name);
        throw new LoopRuntimeError('sandbox', `The sandbox could not start, so the loop was not started: ${(error as Error).message}`);
      }
    }
    if (!sandbox && deps.sandbox?.trackHost) {
      const notice = await deps.sandbox.trackHost(repos.loops.get(ref.projectId, ref.name)!);
      if (notice) notices.push(notice);
    }
    timing.mark(sandbox ? 'stored, sandbox' : 'stored');
    deps.log.debug(`[loop ${ref.name}] started in ${timing.total()} ms: ${timing.summary()}`);
    const sup = supervise(ref);
    emit({ type: 'loop.started', loop: ref, notices, confinement });
    emit({ type: 'loop.phase', loop: ref, event: 'start', from: null, to: 'coding', iteration: 1, sectionIndex: loopState.sectionIndex });
    void sup.begin('start');
    return { ...ref, notices, confinement };
  }

  async function cancel(ref: LoopRef): Promise<void> {
    const loop = repos.loops.get(ref.projectId, ref.name);
    if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}".`);
    // A paused loop (budget) can be ended too: it is recorded as cancelled, its work kept.
    if (loop.status !== 'running' && loop.status !== 'starting' && loop.status !== 'paused' && loop.status !== 'awaiting_review') {
      throw new LoopRuntimeError('not_running', `Loop "${ref.name}" is not running (it is ${loop.status}).`);
    }
    const sup = supervisors.get(key(ref));
    if (sup) {
      await sup.stop('cancel');
      return;
    }
    if (loop.status !== 'paused' && loop.status !== 'awaiting_review' && supervisorOf(loop).state === 'alive') {
      // Another process drives it: ask that supervisor to cancel at its next lease tick.
      repos.loops.mergeState(ref.projectId, ref.name, { cancelRequested: true });
      return;
    }
    // Nobody drives it (its process died): record the cancel here and keep its work; the dead
    // process's opencode server must not keep working in the worktree.
    const extras = readExtras(loop);
    stopOrphanedOpencode(ref, extras);
    if (loop.worktreeDir) {
      await deps.worktrees
        .commitAll(loop.worktreeDir, teardownMessageWriter(loop.name, 'cancelled', extras.loopState.iteration, loopAbout(repos, ref, extras.loopState.sectionIndex)))
        .catch(() => null);
    }
    deps.db.transaction((tx) => {
      const r = createForgeRepositories(tx);
      r.transitions.append(ref.projectId, { loopName: ref.name, event: 'cancel', fromPhase: extras.loopState.phase, toPhase: null, iteration: extras.loopState.iteration, sectionIndex: extras.loopState.sectionIndex, status: 'cancelled', reason: 'cancelled' });
      r.loops.terminate(ref.projectId, ref.name, { status: terminationStatusFor({ kind: 'cancelled' }), terminationReason: 'cancelled' });
    });
    emit({ type: 'loop.ended', loop: ref, status: 'cancelled', reason: { kind: 'cancelled' }, iterations: extras.loopState.iteration, branch: loop.branch, worktreeDir: loop.worktreeDir, merge: null });
  }

  /**
   * Kills the opencode server a loop's previous supervisor left (its process group, and every
   * process carrying its marker, even when the server's main process is already gone).
   */
  function stopOrphanedOpencode(ref: LoopRef, extras: StoredLoopExtras): void {
    // A shared server serves other loops too: only this loop's own processes go.
    if (extras.opencodeLoopMarker) signalMarkedProcesses(LOOP_PROCESS_MARKER_VARIABLE, extras.opencodeLoopMarker, 'SIGKILL');
    if (!extras.opencodeMarker) return;
    if (extras.opencodePid && isProcessAlive(extras.opencodePid)) {
      deps.log.info(`loop ${ref.name}: stopping the previous opencode server (pid ${extras.opencodePid})`);
      killServerProcessesNow(extras.opencodePid, extras.opencodeMarker);
    } else {
      killMarkedProcesses(extras.opencodeMarker);
    }
  }

  const restart = createLoopRestart({ deps, repos, supervisorId, leaseTtlMs, emit, supervise, stopOrphanedOpencode, supervising: (ref) => supervisors.get(key(ref)) });

  async function tell(ref: LoopRef, text: string): Promise<{ delivery: UserMessageDelivery; sessionId: string | null }> {
    const loop = repos.loops.get(ref.projectId, ref.name);
    if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}".`);
    if (loop.status !== 'running' && loop.status !== 'starting') throw new LoopRuntimeError('not_running', `Loop "${ref.name}" is not running (it is ${loop.status}); a message reaches only a running loop.`);
    if (text.trim() === '') throw new LoopRuntimeError('bad_request', 'The message is empty: say what the agent should know.');
    if (text.length > MAX_USER_MESSAGE_CHARS) throw new LoopRuntimeError('bad_request', `The message is ${text.length} characters long; at most ${MAX_USER_MESSAGE_CHARS} are sent to the agent.`);
    const sup = supervisors.get(key(ref));
    if (!sup) throw new LoopRuntimeError('not_running', `This process does not drive loop "${ref.name}".`);
    return sup.tell(text);
  }

  return {
    async projectOf(repoPath) {
      const p = await projectOf(repoPath);
      return { projectId: p.projectId, repoDir: p.repoDir, headCommit: p.headCommit };
    },
    start,
    cancel,
    tell,
    restart,
    get: (ref) => repos.loops.get(ref.projectId, ref.name),
    list: (projectId) => repos.loops.list(projectId),
    isSupervising: (ref) => supervisors.has(key(ref)),
    waitForEnd(ref) {
      const sup = supervisors.get(key(ref));
      const ended = lastEnd.get(key(ref));
      if (!sup && ended) return Promise.resolve(ended);
      if (!sup) return Promise.reject(new LoopRuntimeError('not_running', `This process does not drive loop "${ref.name}".`));
      return sup.endedPromise;
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async dispose(reason = 'shutdown') {
      disposed = true;
      await Promise.all([...supervisors.values()].map((s) => s.stop(reason === 'cancelled' ? 'cancel' : 'shutdown')));
      listeners.clear();
    },
  };
}


export type { MergeMode };


/** Said at the start of a loop with no check of Forge's own (issue 28): what it completes on. */
export const NO_CHECK_NOTICE =
  'No check: Forge runs no check of its own for this loop, so it completes when the auditor finds nothing. A plan names checks in its "## Verification" part ("- `npm test`", "- exists: FILE"), a goal with --check, --exists, --contains or --matches.';

/**
 * A new loop's budget: the request's fields over the `forge.budget.*` settings (0 there: none).
 * Throws a bad_request error for numbers that cannot be a budget.
 */
function startBudget(requested: Partial<LoopBudget> | undefined, settings: ForgeSettings): LoopBudget {
  const problem = requested ? budgetProblem(requested) : null;
  if (problem) throw new LoopRuntimeError('bad_request', problem);
  const orNull = (n: number) => (n > 0 ? n : null);
  return {
    money: requested?.money !== undefined ? requested.money : orNull(settings['forge.budget.money']),
    tokens: requested?.tokens !== undefined ? requested.tokens : orNull(settings['forge.budget.tokens']),
    auditorShare: requested?.auditorShare !== undefined ? requested.auditorShare : orNull(settings['forge.budget.auditorShare']),
  };
}
