/**
 * Drives one loop while this process supervises it: it decides, through the pure transition
 * table, what each event of the loop's session means and which phase runs next. Its parts live
 * beside it: the scope it holds in this process (loop-scope.ts: opencode, listeners, timers and
 * their release), the phase's session (phase-session.ts), sessions made ahead
 * (session-spares.ts), storage writes (phase-writes.ts), spend (loop-spend.ts), findings
 * (loop-findings.ts), checkpoints (section-checkpoints.ts), the gate (gate-pass.ts) and the
 * lease (lease-renewal.ts).
 *
 * Invariants (SPEC §2): one prompt in flight per loop; an idle counts only from the loop's
 * current session and only after that session was seen busy since Forge's last prompt (or the
 * idle gate expired); every event is handled under the loop's lock; phases change only through
 * the pure transition table, each persisted together with its transition-log row.
 */
import type { AgentEvent } from '../opencode/agent-client';
import { FORGE_MCP_SERVER_NAME } from '../opencode/forge-tools';
import { MALFORMED_STREAM_SUMMARY, summarizeModelError } from '../opencode/event-normalizer';
import type { ForgeRepositories, LoopRow } from '../storage/repositories';
import { buildContinueNudge, buildHandoffReminder, buildPhasePrompt, buildUserMessage } from './prompts';
import { LoopRuntimeError, type LoopRef, type LoopRuntimeEvent, type UserMessageDelivery } from './runtime-types';
import { terminationReasonToString, terminationStatusFor, type LoopLimits, type LoopState, type TerminationReason } from './state';
import { nextTransition, userReviewGate, type LoopEvent, type Transition, type TransitionEffect } from './transitions';
import { readExtras } from './loop-extras';
import { commitAndMerge, loopAbout, removeWorktreeIfAsked } from './loop-teardown';
import { promptContextFor } from './prompt-context';
import { hasBudget } from './budget';
import type { CurrentSession, SupervisorContext, SupervisorDeps } from './supervisor-deps';
import { PhaseWrites } from './phase-writes';
import { LoopSpend } from './loop-spend';
import { startLeaseRenewal } from './lease-renewal';
import { SessionSpares } from './session-spares';
import { LoopFindings } from './loop-findings';
import { SectionCheckpoints } from './section-checkpoints';
import { GatePass } from './gate-pass';
import { LoopScope } from './loop-scope';
import { PhaseSessions } from './phase-session';

export { readExtras, type LoopTiming, type StoredLoopExtras } from './loop-extras';
export type { EngineLog, SupervisorDeps } from './supervisor-deps';

/** opencode's name of Forge's handoff tool (MCP server name, underscore, tool name). */
const HANDOFF_TOOL = `${FORGE_MCP_SERVER_NAME}_loop_handoff`;

export class LoopSupervisor {
  readonly ref: LoopRef;
  private lock: Promise<void> = Promise.resolve();
  /** Aborted by a stop: ends the setup phase's command in flight. */
  private readonly setupAbort = new AbortController();
  private ended = false;
  private endedResolve!: (e: LoopRuntimeEvent & { type: 'loop.ended' | 'loop.supervision_lost' }) => void;
  readonly endedPromise: Promise<LoopRuntimeEvent & { type: 'loop.ended' | 'loop.supervision_lost' }>;
  /** What the supervisor's parts share (see supervisor-deps.ts). */
  private readonly ctx: SupervisorContext;
  /** Storage writes around phase changes, some deferred to the next transaction. */
  private readonly writes: PhaseWrites;
  /** Usage and budget. */
  private readonly spending: LoopSpend;
  /** What the review findings say, and which changes were reported. */
  private readonly findings: LoopFindings;
  /** Section checkpoint commits, the early one included. */
  private readonly checkpoints: SectionCheckpoints;
  /** The verification gate's checks, run between an audit and its gated step. */
  private readonly gate: GatePass;
  /** Sessions made ahead for the phase likely to follow. */
  private readonly spares: SessionSpares;
  /** The loop's opencode, listeners and timers in this process, and their release. */
  private readonly scope: LoopScope;
  /** The phase's session: opening, prompting, aborting it. */
  private readonly sessions: PhaseSessions;

  constructor(
    private readonly deps: SupervisorDeps,
    ref: LoopRef,
  ) {
    this.ref = ref;
    this.endedPromise = new Promise((resolve) => (this.endedResolve = resolve));
    this.ctx = { ref, deps, loop: () => this.loop() };
    this.writes = new PhaseWrites(this.ctx);
    this.spending = new LoopSpend(this.ctx);
    this.findings = new LoopFindings(this.ctx);
    this.checkpoints = new SectionCheckpoints(this.ctx, this.findings);
    this.gate = new GatePass(this.ctx, this.writes, this.findings);
    this.spares = new SessionSpares(this.ctx, { client: () => this.scope.client, agent: () => this.scope.agent, over: () => this.ended || this.scope.disposed });
    this.scope = new LoopScope(this.ctx, {
      recordLast: () => {
        this.writes.flush();
        this.writes.emitEvents();
      },
      dropSpares: () => this.spares.drop(),
    });
    this.sessions = new PhaseSessions(this.ctx, this.scope, this.spares, this.writes);
  }

  private get repos(): ForgeRepositories {
    return this.deps.repos;
  }

  private loop(): LoopRow {
    const row = this.repos.loops.get(this.ref.projectId, this.ref.name);
    if (!row) throw new Error(`Loop "${this.ref.name}" vanished from the database.`);
    return row;
  }

  /** Serialises everything that touches this loop (SPEC §2: per-loop lock). */
  private locked(what: string, fn: () => Promise<void>): Promise<void> {
    const run = this.lock.then(async () => {
      if (this.ended || this.scope.disposed) return;
      try {
        await fn();
      } catch (error) {
        this.deps.log.error(`[loop ${this.ref.name}] ${what} failed: ${(error as Error).stack ?? String(error)}`);
        await this.failHard(error);
      }
    });
    this.lock = run.catch(() => {});
    return run;
  }

  /** Brings up the loop's agent side and runs the persisted phase in a fresh session. */
  async begin(event: string): Promise<void> {
    const loop = this.loop();
    const extras = readExtras(loop);
    this.scope.add(
      startLeaseRenewal(this.ctx, {
        ended: () => this.ended,
        relinquish: () => void this.relinquish(),
        cancel: () => void this.stop('cancel'),
      }),
    );
    // The setup phase (issue 27): the coder never starts on a worktree whose setup failed.
    if (this.deps.runSetup) {
      const failure = await this.deps.runSetup(this.ref, this.setupAbort.signal).catch((error: Error) => `the setup could not run: ${error.message}`);
      if (this.ended || this.scope.disposed) return;
      if (failure !== null) {
        await this.locked('setup', async () => {
          this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'error', message: `setup failed; the worktree is kept for inspection (forge restart ${this.ref.name} runs the setup again): ${failure}` });
          await this.applyTransition({ kind: 'terminate', event: 'setup_failed', to: extras.loopState, reason: { kind: 'setup_failed', message: failure }, effects: [] });
        });
        return;
      }
    }
    try {
      await this.scope.open(loop, extras);
    } catch (error) {
      await this.locked('start opencode', async () => {
        this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'error', message: `opencode could not start: ${(error as Error).message}` });
        await this.applyTransition({ kind: 'terminate', event: 'session_creation_failed', to: extras.loopState, reason: { kind: 'session_creation_failed' }, effects: [] });
      });
      return;
    }
    // The loop ended (cancel) while its opencode server was starting: the scope's disposal
    // waited for the start and stopped the server.
    if (this.ended || this.scope.disposed) return;
    this.findings.prime();
    this.scope.attach(extras, {
      onAgentEvent: (e) => this.onAgentEvent(e),
      current: () => this.sessions.current,
      serverGaveUp: (error) =>
        void this.locked('opencode gave up', async () => {
          await this.applyTransition(nextTransition(this.state(), { type: 'model_retries_exhausted', message: `opencode server is down: ${error}` }, this.limits()));
        }),
      // In-flight work died with the old process: the phase restarts in a fresh session.
      serverRestarted: (generation) =>
        void this.locked('opencode restarted', async () => {
          // A session made on the restarted server (the lost one's retry, prompted while this
          // waited for the lock) lost nothing: aborting it would cost the phase another error.
          if (!this.sessions.current || this.sessions.current.serverGeneration >= generation) return;
          await this.applyTransition(nextTransition(this.state(), { type: 'model_error', message: 'opencode restarted and lost the session in flight' }, this.limits()));
        }),
      watchdogTick: () => void this.watchdogTick(),
    });
    await this.locked('begin', async () => {
      await this.runPhase(event === 'start' ? 0 : 0);
    });
  }

  private state(): LoopState {
    return readExtras(this.loop()).loopState;
  }

  private limits(): LoopLimits {
    return readExtras(this.loop()).limits;
  }

  /** A fresh session in the persisted phase, prompted for it. Caller holds the lock. */
  private async runPhase(delayMs: number, pendingState?: LoopState): Promise<void> {
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    if (this.ended || this.scope.disposed) return;
    const loop = this.loop();
    // A phase change not yet written (it goes into the new attempt's transaction).
    const state = pendingState ?? readExtras(loop).loopState;
    try {
      await this.deps.checkSandbox(loop);
    } catch (error) {
      this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'error', message: (error as Error).message });
      await this.applyTransition({ kind: 'terminate', event: 'sandbox_lost', to: state, reason: { kind: 'worktree_failed', message: (error as Error).message }, effects: [] });
      return;
    }
    const opened = await this.sessions.open(loop, state);
    if (!opened) {
      await this.applyTransition({ kind: 'terminate', event: 'session_creation_failed', to: state, reason: { kind: 'session_creation_failed' }, effects: [] });
      return;
    }
    const context = promptContextFor(this.repos, opened, state);
    const failed = await this.sendPromptOrFail(buildPhasePrompt(context));
    // The user's messages went out with that prompt: they are delivered, not kept for the next one.
    if (!failed && context.userMessages && context.userMessages.length > 0) this.dropDeliveredUserMessages(context.userMessages.length);
    this.sessions.afterFirstActivity(state);
  }

  /**
   * The user's words to the agent (issue 29): into the running session at once (opencode queues
   * them behind its turn), or, between sessions (none yet, its pass handed off, the loop at a
   * gate), kept for the next session's first prompt. Not under the loop's lock: a gate's checks
   * may hold it for minutes, and the user is told at once where the message went.
   */
  async tell(text: string): Promise<{ delivery: UserMessageDelivery; sessionId: string | null }> {
    if (this.ended || this.scope.disposed) throw new LoopRuntimeError('not_running', `Loop "${this.ref.name}" is ending; it takes no more messages.`);
    const cur = this.sessions.current;
    let result: { delivery: UserMessageDelivery; sessionId: string | null };
    if (cur && !cur.handedOff && !cur.budgetStopped && this.scope.client) {
      const sessionId = await this.sessions.interject(buildUserMessage(text));
      result = { delivery: 'session', sessionId };
    } else {
      const pending = readExtras(this.loop()).pendingUserMessages ?? [];
      this.repos.loops.mergeState(this.ref.projectId, this.ref.name, { pendingUserMessages: [...pending, text] });
      result = { delivery: 'next_session', sessionId: null };
    }
    this.deps.emit({ type: 'loop.user_message', loop: this.ref, text, ...result });
    return result;
  }

  private dropDeliveredUserMessages(count: number): void {
    const pending = readExtras(this.loop()).pendingUserMessages ?? [];
    this.repos.loops.mergeState(this.ref.projectId, this.ref.name, { pendingUserMessages: pending.slice(count) });
  }

  private async sendPrompt(text: string): Promise<void> {
    await this.sendPromptOrFail(text);
  }

  /** Sends a prompt to the current session; true when it could not be sent (the transition applied). */
  private async sendPromptOrFail(text: string): Promise<boolean> {
    const failed = await this.sessions.prompt(text);
    if (failed) await this.applyTransition(nextTransition(this.state(), { type: 'model_error', message: `prompt could not be sent: ${(failed.error as Error).message}` }, this.limits()));
    return failed !== undefined;
  }

  private onAgentEvent(event: AgentEvent): void {
    this.sessions.observe(event);
    if (event.type !== 'activity') this.deps.log.debug(`[loop ${this.ref.name}] event ${event.type} ${'sessionId' in event ? event.sessionId : ''} current=${this.sessions.current?.id ?? '-'}`);
    const cur = this.sessions.current;
    if (!cur || this.ended) return;
    // Progress signals stay cheap and outside the lock (the watchdog only reads them).
    if (event.type === 'activity' && event.rootSessionId === cur.id) {
      cur.lastProgressAt = Date.now();
      const first = cur.onFirstActivity;
      cur.onFirstActivity = undefined;
      first?.();
      if (event.kind === 'tool' && event.tool === HANDOFF_TOOL && event.toolStatus === 'completed' && event.sessionId === cur.id) {
        cur.handedOff = true;
        this.checkpoints.startEarly(cur);
      }
      if (event.kind === 'tool' && event.tool) {
        const key = `${event.messageId}:${event.tool}`;
        if (event.toolStatus === 'pending' || event.toolStatus === 'running') cur.runningTools.add(key);
        else cur.runningTools.delete(key);
      }
      // The budget is a cap inside a session too: checked at each model step's mark, so a session
      // overshoots by at most the step that crossed it.
      if (event.kind === 'step' && event.sessionId === cur.id && !cur.budgetStopped) {
        const pause = this.spending.pauseDuringSession(this.scope.client, cur);
        if (pause) {
          cur.budgetStopped = true;
          void this.locked('budget', () => this.pauseInSession(cur, pause));
        }
      }
      return;
    }
    if (event.type === 'session.busy' && event.sessionId === cur.id) {
      cur.seenBusy = true;
      return;
    }
    if (event.type === 'question.asked' && event.rootSessionId === cur.id) {
      void this.scope.client!.rejectQuestion(event.requestId).catch(() => {});
      return;
    }
    if (event.type === 'session.idle' && event.sessionId === cur.id) {
      if (this.deps.onTiming) this.deps.onTiming({ mark: 'idle', loop: this.ref, sessionId: cur.id, at: performance.now() });
      void this.locked('idle', () => this.onIdle(cur.id));
      return;
    }
    if (event.type === 'session.error' && event.sessionId === cur.id) {
      this.deps.log.debug(`[loop ${this.ref.name}] session error ${event.sessionId} ${event.error.name}: ${event.error.message.split('\n')[0]} (prompted ${Date.now() - cur.promptSentAt} ms ago, seen busy: ${cur.seenBusy})`);
      if (event.error.name === 'MessageAbortedError') return;
      void this.locked('session error', async () => {
        if (this.sessions.current?.id !== cur.id) return;
        this.writes.finishAttempt('failed', event.error.message, cur.attemptId);
        await this.spending.recordUsage(this.scope.client, cur);
        this.sessions.current = undefined;
        // Notices and the end reason get one line; opencode's own text (parser output, stack) the log.
        const { malformed, summary } = summarizeModelError(event.error);
        if (summary !== event.error.message) this.deps.log.warn(`[loop ${this.ref.name}] model error, as opencode reported it: ${event.error.name}: ${event.error.message}`);
        this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'warning', message: `model error: ${summary}` });
        await this.applyTransition(nextTransition(this.state(), { type: 'model_error', message: malformed ? MALFORMED_STREAM_SUMMARY : summary, malformed }, this.limits()));
      });
      return;
    }
    if (event.type === 'session.retry' && event.sessionId === cur.id) {
      cur.retryAttempt = event.attempt;
      cur.lastProgressAt = Date.now();
      this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'warning', message: `model retry ${event.attempt}: ${event.message}` });
      if (event.attempt > this.limits().maxModelRetries) {
        void this.locked('retries exhausted', async () => {
          if (this.sessions.current?.id !== cur.id) return;
          this.sessions.current = undefined;
          await this.sessions.abort(cur.id);
          this.writes.finishAttempt('failed', event.message, cur.attemptId);
          await this.applyTransition(nextTransition(this.state(), { type: 'model_retries_exhausted', message: event.message }, this.limits()));
        });
      }
    }
  }

  /** The budget ran out inside `cur`: stop it now and pause the loop in its phase (a restart runs that session again). */
  private async pauseInSession(cur: CurrentSession, message: string): Promise<void> {
    if (this.sessions.current?.id !== cur.id || this.ended) return;
    this.sessions.current = undefined;
    await this.sessions.abort(cur.id);
    this.writes.finishAttempt('abandoned', 'budget reached during the session', cur.attemptId);
    await this.spending.recordUsage(this.scope.client, cur);
    this.deps.emit({ type: 'loop.budget', loop: this.ref, level: 'paused', message });
    const paused = nextTransition(this.state(), { type: 'budget_reached' }, this.limits());
    if (paused.kind === 'terminate') await this.terminate(paused.event, paused.to, paused.reason, paused.effects);
  }

  private async onIdle(sessionId: string): Promise<void> {
    const cur = this.sessions.current;
    if (!cur || cur.id !== sessionId || !cur.inFlight) return;
    const loop = this.loop();
    const timing = readExtras(loop).timing;
    // Idle gate: an idle that arrives before the session was seen busy is the idle from
    // before our prompt — unless the gate expired and the session really never went busy.
    if (!cur.seenBusy && Date.now() - cur.promptSentAt < timing.idleGateTimeoutMs) {
      this.deps.log.debug(`[loop ${loop.name}] idle before busy ignored (idle gate)`);
      return;
    }
    cur.inFlight = false;
    this.findings.reportChanges();
    const handoff = this.repos.handoffs.forSession(this.ref.projectId, loop.name, cur.id);
    const state = readExtras(loop).loopState;
    let event: LoopEvent;
    if (handoff) {
      event = this.findings.handoffEvent(handoff.role, state);
      const fields = handoff.role === 'auditor' ? { lastAuditSummary: (handoff.payload as { summary?: string }).summary ?? null } : { lastCoderHandoff: JSON.stringify(handoff.payload) };
      this.writes.defer((repos) => repos.loops.setLargeFields(this.ref.projectId, loop.name, fields));
    } else {
      event = { type: 'idle_without_handoff' };
    }
    const transition = nextTransition(state, event, readExtras(loop).limits);
    if (transition.kind !== 'remind_handoff' && transition.kind !== 'ignore') {
      this.writes.finishAttempt(handoff ? 'succeeded' : 'failed', handoff ? undefined : 'ended without a handoff', cur.attemptId, true);
      this.sessions.current = undefined;
    }
    let next = transition;
    if (transition.kind === 'ignore') {
      this.deps.log.warn(`[loop ${loop.name}] ${transition.why}`);
      // A handoff of the wrong role cannot move the loop; remind this session of its own.
      next = nextTransition(state, { type: 'idle_without_handoff' }, readExtras(loop).limits);
    }
    // A clean audit whose step is gated: Forge runs the checks, and their result moves the loop.
    if (next.kind === 'run_checks') next = await this.gate.pass(next);
    // Reading the session's usage is a round trip to opencode: after the next prompt is out
    // (it only adds rows of its own), but before a terminal transition so the ended loop's
    // totals are complete.
    // With a budget, the hand-over's decision needs this session's spend first.
    const usageFirst = next.kind === 'terminate' || hasBudget(readExtras(loop).budget);
    if (usageFirst) await this.spending.recordUsage(this.scope.client, cur);
    await this.applyTransition(next);
    if (!usageFirst) await this.spending.recordUsage(this.scope.client, cur);
  }

  private async watchdogTick(): Promise<void> {
    const cur = this.sessions.current;
    if (!cur || !cur.inFlight || this.ended) return;
    const timing = readExtras(this.loop()).timing;
    const quietFor = Date.now() - cur.lastProgressAt;
    if (cur.runningTools.size === 0 && quietFor > timing.stallTimeoutMs) {
      await this.locked('stall', async () => {
        if (this.sessions.current !== cur || !cur.inFlight) return;
        this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'warning', message: `no activity for ${Math.round(quietFor / 1000)} s: re-triggering ${cur.phase}` });
        this.sessions.current = undefined;
        await this.sessions.abort(cur.id);
        this.writes.finishAttempt('failed', 'stalled', cur.attemptId);
        await this.spending.recordUsage(this.scope.client, cur);
        await this.applyTransition(nextTransition(this.state(), { type: 'stall' }, this.limits()));
      });
    } else if (cur.runningTools.size > 0 && quietFor > timing.busyStallTimeoutMs) {
      await this.locked('busy stall', async () => {
        if (this.sessions.current !== cur || !cur.inFlight) return;
        this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'warning', message: `a tool has run without progress for ${Math.round(quietFor / 1000)} s: aborting it and asking the agent to continue` });
        await this.sessions.abort(cur.id);
        cur.runningTools.clear();
        await this.sendPrompt(buildContinueNudge());
      });
    }
  }

  /** Applies one transition: persist state + log row atomically, then its effects. Caller holds the lock. */
  private async applyTransition(proposed: Transition): Promise<void> {
    // The user's open review findings hold a completing loop (a coding pass, or awaiting_review).
    const t = proposed.kind === 'terminate' || proposed.kind === 'advance' ? userReviewGate(proposed, this.state(), this.findings.userReviewCounts(), this.limits()) : proposed;
    if (t.kind === 'run_checks') {
      await this.applyTransition(await this.gate.pass(t));
      return;
    }
    if (t.kind === 'ignore') {
      this.deps.log.info(`[loop ${this.ref.name}] ignored: ${t.why}`);
      this.writes.flush();
      this.writes.emitEvents();
      return;
    }
    const before = this.loop();
    const fromState = readExtras(before).loopState;
    if (t.kind === 'remind_handoff') {
      this.writes.persistState(t.to, null);
      if (this.sessions.current) {
        this.sessions.current.inFlight = true;
        await this.sendPrompt(buildHandoffReminder({ state: t.to }));
      }
      return;
    }
    // Checkpoints go to git first: if the process dies right after, the next audit finds the
    // section clean again and the commit is not repeated (nothing left to commit).
    await this.checkpoints.applyGitEffects(t.effects, before);
    if (t.kind === 'terminate') {
      await this.terminate(t.event, t.to, t.reason, t.effects);
      return;
    }
    const log = { event: t.event, from: fromState.phase, effects: t.effects };
    const phaseEvent: LoopRuntimeEvent = {
      type: 'loop.phase',
      loop: this.ref,
      event: t.event,
      from: fromState.phase,
      to: t.to.phase,
      iteration: t.to.iteration,
      sectionIndex: t.to.sectionIndex,
    };
    // The cost governor: a spent budget pauses the loop here, between two sessions, with the
    // phase change recorded so a restart starts exactly the session it held back.
    const pause = this.spending.budgetPause(t.to);
    if (pause) {
      this.writes.persistState(t.to, log);
      this.deps.emit(phaseEvent);
      const previous = this.sessions.current;
      if (previous) {
        this.sessions.current = undefined;
        await this.sessions.abort(previous.id);
      }
      this.deps.emit({ type: 'loop.budget', loop: this.ref, level: 'paused', message: pause });
      const paused = nextTransition(t.to, { type: 'budget_reached' }, this.limits());
      if (paused.kind === 'terminate') await this.terminate(paused.event, paused.to, paused.reason, paused.effects);
      return;
    }
    const delayMs = t.kind === 'retrigger' ? t.delayMs : 0;
    if (delayMs === 0 && !this.sessions.current && !readExtras(this.loop()).cancelRequested) {
      // The common hand-over: the phase change and its log row are written in one transaction
      // with the next session's attempt (one journal sync, before the prompt goes out).
      this.writes.defer((repos) => this.writes.persistStateIn(repos, t.to, log));
      this.writes.deferEvent(phaseEvent);
      await this.runPhase(0, t.to);
      return;
    }
    this.writes.persistState(t.to, log);
    this.deps.emit(phaseEvent);
    if (readExtras(this.loop()).cancelRequested) {
      await this.terminate('cancel', t.to, { kind: 'cancelled' }, []);
      return;
    }
    const previous = this.sessions.current;
    if (previous) {
      this.sessions.current = undefined;
      await this.sessions.abort(previous.id);
    }
    await this.runPhase(delayMs);
  }

  private async terminate(event: string, state: LoopState, reason: TerminationReason, effects: TransitionEffect[]): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const cur = this.sessions.current;
    this.sessions.current = undefined;
    if (cur) {
      await this.sessions.abort(cur.id);
      this.writes.finishAttempt(reason.kind === 'completed' ? 'succeeded' : 'abandoned', terminationReasonToString(reason), cur.attemptId);
      if (this.scope.client) await this.spending.recordUsage(this.scope.client, cur);
    }
    const status = terminationStatusFor(reason);
    // Paused (budget): the loop waits for the user with its worktree as the agents left it,
    // its sandbox and its sessions; nothing is committed, merged or removed.
    const paused = status === 'paused';
    const reasonText = terminationReasonToString(reason);
    const loopBefore = this.loop();
    this.writes.recordEnd(event, state, effects, status, reasonText);
    // A message kept for a next session that never came is not silently lost: the user is told.
    const undelivered = readExtras(loopBefore).pendingUserMessages?.length ?? 0;
    if (undelivered > 0) {
      this.deps.emit({ type: 'loop.notice', loop: this.ref, level: 'warning', message: `${undelivered} message${undelivered === 1 ? '' : 's'} from the user (forge tell) reached no agent: the loop ended (${reasonText}) before another session started${status === 'completed' ? '' : '; a restart delivers them'}.` });
    }
    // The last commit (and merge) runs while opencode stops: the session is over, and git and
    // opencode have nothing to wait for from each other. The worktree goes (when asked) after both.
    let mergeText: string | null = null;
    await this.scope.dispose(
      !paused,
      paused
        ? undefined
        : commitAndMerge(this.teardownDeps(), loopBefore, reason, state).then((text) => {
            mergeText = text;
          }),
    );
    // A failed setup keeps its worktree for inspection (and the restart that runs it again);
    // awaiting the user's review: its work is committed, its worktree stays for the next pass.
    if (!paused && status !== 'setup_failed' && status !== 'awaiting_review') await removeWorktreeIfAsked(this.teardownDeps(), loopBefore);
    const ended = {
      type: 'loop.ended' as const,
      loop: this.ref,
      status,
      reason,
      iterations: state.iteration,
      branch: loopBefore.branch,
      worktreeDir: loopBefore.worktreeDir,
      merge: mergeText,
    };
    this.deps.emit(ended);
    this.endedResolve(ended);
  }

  private teardownDeps() {
    return { worktrees: this.deps.worktrees, emit: this.deps.emit, ref: this.ref, repos: this.deps.repos, about: (sectionIndex: number | null) => loopAbout(this.deps.repos, this.ref, sectionIndex) };
  }

  /** Terminates through the table (cancel, shutdown). */
  stop(kind: 'cancel' | 'shutdown' | 'user_abort'): Promise<void> {
    // A check running under the lock would hold the stop back until it ends.
    this.gate.abort();
    this.setupAbort.abort();
    return this.locked(kind, async () => {
      await this.applyTransition(nextTransition(this.state(), { type: kind }, this.limits()));
    });
  }

  /** Another process took over: stop driving without touching the loop's persisted state. */
  async relinquish(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const cur = this.sessions.current;
    this.sessions.current = undefined;
    if (cur) await this.sessions.abort(cur.id);
    await this.scope.dispose(false);
    const event = { type: 'loop.supervision_lost' as const, loop: this.ref };
    this.deps.emit(event);
    this.endedResolve(event);
  }

  private async failHard(error: unknown): Promise<void> {
    if (this.ended) return;
    try {
      await this.terminate('internal_error', this.state(), { kind: 'error_max_retries', message: `internal error: ${(error as Error).message}` }, []);
    } catch (e) {
      this.deps.log.error(`[loop ${this.ref.name}] could not record the failure: ${String(e)}`);
      await this.scope.dispose(false);
    }
  }
}
