/**
 * Sessions made ahead: while a phase's session works, an empty session is created (and titled)
 * for the phase likely to follow, so the hand-over needs no session round trip before its
 * prompt. Its own file because it is an optimisation with state of its own (the spares, the
 * rename owed to a spare taken under another title) that the phases' logic does not depend on.
 */
import type { AgentClient, ModelRef, PermissionRule } from '../opencode/agent-client';
import { FORGE_AGENT_NAMES } from '../opencode/forge-tools';
import type { LoopOpencode } from '../opencode/loop-opencode';
import { readExtras } from './loop-extras';
import type { LoopRef } from './runtime-types';
import { roleOfPhase, type LoopState, type Phase, type Role } from './state';
import type { SupervisorContext } from './supervisor-deps';

/** What the spares need of the loop's agent side, read when they are used. */
export interface SpareHost {
  client(): AgentClient | undefined;
  agent(): LoopOpencode | undefined;
  /** The loop ended or its scope is released: no session is made ahead any more. */
  over(): boolean;
}

/** The phase that usually follows `phase` (undefined when the loop usually ends). */
function likelyNextPhase(phase: Phase): Phase | undefined {
  switch (phase) {
    case 'coding':
      return 'auditing';
    case 'auditing':
      return 'coding';
    case 'final_audit_fix':
      return 'final_auditing';
    default:
      return undefined;
  }
}

export function sessionTitle(ref: LoopRef, phase: Phase, iteration: number): string {
  return `Forge ${ref.name} · ${phase} · iteration ${iteration}`;
}

export class SessionSpares {
  /**
   * At most one empty session per role, created (and titled) for the phase likely to follow
   * while the current session runs, so a hand-over needs no session round trip before its
   * prompt. Unused ones are deleted when the loop's scope ends.
   */
  private spares = new Map<Role, { id: Promise<string | null>; title: string }>();
  /** A spare session taken for a phase gets its real title once its prompt is out. */
  private pendingTitle: { sessionId: string; title: string } | undefined;

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly host: SpareHost,
  ) {}

  private prepare(role: Role, title: string): void {
    const client = this.host.client();
    const agent = this.host.agent();
    if (this.spares.has(role) || this.host.over() || !client || !agent) return;
    const created = client
      .createSession({ title, agent: FORGE_AGENT_NAMES[role], permission: agent.permissionRuleset(role, readExtras(this.ctx.loop()).userDenyRules) })
      .then(
        (session) => session.id,
        (error: unknown) => {
          this.ctx.deps.log.debug(`[loop ${this.ctx.ref.name}] could not prepare a ${role} session ahead: ${String(error)}`);
          return null;
        },
      );
    this.spares.set(role, { id: created, title });
  }

  /**
   * The next hand-over's session, made while the session of `state` works, for the phase that
   * most likely follows (a wrong guess costs a rename, or a session made at the hand-over).
   */
  prepareFollowing(state: LoopState): void {
    const phase = state.phase;
    const next = likelyNextPhase(phase);
    // (Entering a coding pass costs an iteration; an audit keeps it.)
    if (next) this.prepare(roleOfPhase(next), sessionTitle(this.ctx.ref, next, roleOfPhase(next) === 'auditor' ? state.iteration : state.iteration + 1));
    // The last section's audit may as well lead to the final audit.
    if (phase === 'auditing' && (state.sectionIndex === null || state.sectionIndex >= this.ctx.deps.repos.sectionPlans.list(this.ctx.ref.projectId, this.ctx.ref.name).length - 1)) this.prepare('auditor', sessionTitle(this.ctx.ref, 'final_auditing', state.iteration));
  }

  /** A session for the next phase: the spare of its role (renamed), else a new one. */
  async take(role: Role, title: string, model: ModelRef | undefined, userDenyRules: PermissionRule[]): Promise<string> {
    const spare = this.spares.get(role);
    this.spares.delete(role);
    const spareId = spare ? await spare.id : null;
    if (spareId) {
      if (spare!.title !== title) this.pendingTitle = { sessionId: spareId, title };
      return spareId;
    }
    const created = await this.host.client()!.createSession({
      title,
      agent: FORGE_AGENT_NAMES[role],
      ...(model ? { model } : {}),
      permission: this.host.agent()!.permissionRuleset(role, userDenyRules),
    });
    return created.id;
  }

  /** The rename owed to the spare just taken (once), to send when its session shows activity. */
  takePendingTitle(): { sessionId: string; title: string } | undefined {
    const rename = this.pendingTitle;
    this.pendingTitle = undefined;
    return rename;
  }

  /** Deletes the sessions prepared ahead that no phase used. */
  async drop(): Promise<void> {
    const pending = [...this.spares.values()].map((spare) => spare.id);
    this.spares.clear();
    for (const id of await Promise.all(pending)) {
      if (id) await this.host.client()?.deleteSession(id).catch(() => {});
    }
  }
}
