/**
 * The session a phase runs in: opening it (a spare or a new one, its attempt, the live feed),
 * sending its prompts, aborting it and waiting for it to settle, and the session in flight
 * itself. Its own file because this is the one place Forge talks to opencode about a phase's
 * session; which phase runs, and what an outcome means, stay with the supervisor.
 */
import type { AgentEvent, ModelRef } from '../opencode/agent-client';
import { parseModelRef } from '../opencode/agent-client';
import { FORGE_AGENT_NAMES } from '../opencode/forge-tools';
import type { LoopRow } from '../storage/repositories';
import { readExtras } from './loop-extras';
import type { LoopScope } from './loop-scope';
import type { PhaseWrites } from './phase-writes';
import type { SessionSpares } from './session-spares';
import { sessionTitle } from './session-spares';
import { roleOfPhase, type LoopState, type Phase } from './state';
import type { CurrentSession, SupervisorContext } from './supervisor-deps';

function modelFor(phase: Phase, loop: LoopRow, state: LoopState): string | null {
  if (roleOfPhase(phase) === 'code') return loop.model;
  const extras = readExtras(loop);
  if (state.auditorModelIndex >= 0) return extras.limits.auditorFallbackModels[state.auditorModelIndex] ?? loop.auditorModel;
  return loop.auditorModel ?? loop.model;
}

export class PhaseSessions {
  /** The session of the phase running now (one prompt in flight per loop). */
  current: CurrentSession | undefined;
  /** Aborted sessions whose idle we wait for before the next prompt (one prompt at a time). */
  private settleWaiters = new Map<string, () => void>();
  /** The loop's own sessions (their subagents' parts go to the live feed too). */
  private readonly liveRoots = new Set<string>();

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly scope: LoopScope,
    private readonly spares: SessionSpares,
    private readonly writes: PhaseWrites,
  ) {}

  /**
   * Makes a session for `state`'s phase the current one: takes it (a spare, or a new one),
   * records its attempt (with the deferred writes) and announces it. The loop row as the attempt
   * left it, or null when no session could be made (logged).
   */
  async open(loop: LoopRow, state: LoopState): Promise<LoopRow | null> {
    const { ref, deps } = this.ctx;
    const client = this.scope.client!;
    const phase = state.phase;
    const role = roleOfPhase(phase);
    const modelText = modelFor(phase, loop, state);
    let model: ModelRef | undefined;
    if (modelText) model = parseModelRef(modelText);
    let sessionId: string;
    try {
      sessionId = await this.spares.take(role, sessionTitle(ref, phase, state.iteration), model, readExtras(loop).userDenyRules);
    } catch (error) {
      deps.log.error(`[loop ${loop.name}] session creation failed: ${String(error)}`);
      return null;
    }
    // The variant belongs to the coding model: auditor sessions on that same model use it too.
    const variant = readExtras(loop).variant && modelText === loop.model ? readExtras(loop).variant : undefined;
    const { attempt, updated } = this.writes.startAttempt(loop, state, { sessionId, model: modelText, variant });
    const now = Date.now();
    this.current = {
      id: sessionId,
      phase,
      role,
      model: modelText,
      promptSentAt: now,
      seenBusy: false,
      lastProgressAt: now,
      runningTools: new Set(),
      retryAttempt: 0,
      attemptId: attempt.id,
      inFlight: true,
      variant,
      serverGeneration: this.scope.agent!.server.generation(),
    };
    this.liveRoots.add(sessionId);
    deps.live?.session(ref, { sessionId, parentSessionId: null, phase, iteration: state.iteration, startedAt: now });
    this.scope.agent!.scope.setActiveSession({ sessionId, role });
    client.watchSession(sessionId);
    deps.emit({ type: 'loop.session', loop: ref, sessionId, phase, model: modelText });
    return updated;
  }

  /**
   * Housekeeping for opencode waits until the current session shows activity (its model
   * answered): sent at once, it would compete with opencode starting the turn, which is what
   * the user waits for.
   */
  afterFirstActivity(state: LoopState): void {
    const rename = this.spares.takePendingTitle();
    const cur = this.current;
    if (cur) {
      cur.onFirstActivity = () => {
        if (rename) void this.scope.client!.setSessionTitle(rename.sessionId, rename.title).catch((e) => this.ctx.deps.log.debug(`[loop ${this.ctx.ref.name}] renaming ${rename.sessionId}: ${String(e)}`));
        this.spares.prepareFollowing(state);
      };
    }
  }

  /** Prompts the current session; what went wrong when the prompt could not be sent (logged). */
  async prompt(text: string): Promise<{ error: unknown } | undefined> {
    const { ref, deps } = this.ctx;
    const cur = this.current!;
    cur.promptSentAt = Date.now();
    cur.lastProgressAt = cur.promptSentAt;
    cur.seenBusy = false;
    cur.inFlight = true;
    const role = cur.role;
    try {
      if (deps.onTiming) deps.onTiming({ mark: 'prompt_dispatched', loop: ref, sessionId: cur.id, at: performance.now() });
      await this.scope.client!.promptAsync({ sessionId: cur.id, text, agent: FORGE_AGENT_NAMES[role], ...(cur.model ? { model: parseModelRef(cur.model) } : {}), ...(cur.variant ? { variant: cur.variant } : {}) });
      if (deps.onTiming) deps.onTiming({ mark: 'prompt_sent', loop: ref, sessionId: cur.id, at: performance.now() });
      deps.log.debug(`[loop ${ref.name}] prompt accepted ${cur.id}`);
      return undefined;
    } catch (error) {
      deps.log.warn(`[loop ${ref.name}] prompt failed: ${String(error)}`);
      return { error };
    }
  }

  /**
   * Sends the user's message into the current session without touching its pass's bookkeeping:
   * opencode queues a prompt sent to a busy session and the agent reads it within its turn.
   */
  async interject(text: string): Promise<string> {
    const cur = this.current!;
    await this.scope.client!.promptAsync({ sessionId: cur.id, text, agent: FORGE_AGENT_NAMES[cur.role], ...(cur.model ? { model: parseModelRef(cur.model) } : {}), ...(cur.variant ? { variant: cur.variant } : {}) });
    return cur.id;
  }

  /**
   * Aborts a session and waits until opencode reports it idle (at most 5 s): a new session
   * prompted while the old one is still unwinding can be interrupted along with it.
   */
  async abort(sessionId: string): Promise<void> {
    const settled = new Promise<void>((resolve) => {
      this.settleWaiters.set(sessionId, resolve);
      setTimeout(resolve, 5000).unref?.();
    });
    await this.scope.client?.abort(sessionId).catch(() => {});
    await settled;
    this.settleWaiters.delete(sessionId);
  }

  /** What every event of the loop's opencode means for its sessions: the live feed, and aborted sessions settling. */
  observe(event: AgentEvent): void {
    const { ref, deps } = this.ctx;
    // The live view: every part of the loop's sessions and their subagents', current or not.
    if (deps.live) {
      if (event.type === 'activity' && event.part && this.liveRoots.has(event.rootSessionId)) deps.live.part(ref, event.rootSessionId, event.part);
      else if (event.type === 'session.created' && event.parentSessionId && this.liveRoots.has(event.rootSessionId)) {
        const cur = this.current;
        deps.live.session(ref, { sessionId: event.sessionId, parentSessionId: event.parentSessionId, phase: cur?.phase ?? '', iteration: readExtras(this.ctx.loop()).loopState.iteration, startedAt: Date.now() });
      }
    }
    if (event.type === 'session.idle') this.settleWaiters.get(event.sessionId)?.();
  }
}
