/**
 * A loop's scope in this process: the opencode server it starts and its client, what listens
 * to them (events, permission requests, server restarts), the live feed's reader, the watchdog
 * and lease timers, and their release, in order, when the loop ends here (then the sandbox and
 * the lease). Its own file because acquiring and releasing these is independent of what the
 * loop's phases do with them; the supervisor is told of events through the listeners it gives.
 */
import type { AgentClient, AgentEvent } from '../opencode/agent-client';
import type { LoopOpencode } from '../opencode/loop-opencode';
import { attachPermissionResponder } from '../opencode/permission-responder';
import { serverEventNotice } from '../opencode/server-supervisor';
import type { LoopRow } from '../storage/repositories';
import type { StoredLoopExtras } from './loop-extras';
import type { CurrentSession, SupervisorContext } from './supervisor-deps';

/** What the supervisor hears from the scope's opencode. */
export interface ScopeListeners {
  onAgentEvent(event: AgentEvent): void;
  /** The session whose permission requests the loop answers (its current one). */
  current(): CurrentSession | undefined;
  /** opencode's server is down for good (restarts exhausted). */
  serverGaveUp(error: string): void;
  /** opencode's server came back, as `generation`, after it died: in-flight work died with it. */
  serverRestarted(generation: number): void;
  watchdogTick(): void;
}

/** What the supervisor releases as part of the scope's release. */
export interface ScopeRelease {
  /** Writes still owed (the last hand-over's), made before anything else goes. */
  recordLast(): void;
  /** Deletes the sessions made ahead that no phase used (before opencode stops). */
  dropSpares(): Promise<void>;
}

export class LoopScope {
  agent: LoopOpencode | undefined;
  client: AgentClient | undefined;
  /** The scope was released: nothing may use it any more. */
  disposed = false;
  /** The loop's opencode coming up (a loop can end before it is). */
  private opening: Promise<LoopOpencode> | undefined;
  private disposers: Array<() => void | Promise<void>> = [];

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly release: ScopeRelease,
  ) {}

  /** Something to release with the scope (released in the reverse order of adding). */
  add(...disposers: Array<() => void | Promise<void>>): void {
    this.disposers.push(...disposers);
  }

  /** Starts the loop's opencode server (throws when it cannot start). */
  async open(loop: LoopRow, extras: StoredLoopExtras): Promise<void> {
    this.opening = this.ctx.deps.openAgent(loop, extras);
    this.agent = await this.opening;
  }

  /** Connects the opened server to the supervisor: events, permissions, restarts, live feed, watchdog. */
  attach(extras: StoredLoopExtras, listeners: ScopeListeners): void {
    const { ref, deps } = this.ctx;
    const agent = this.agent!;
    const client = agent.client;
    this.client = client;
    deps.repos.loops.mergeState(ref.projectId, ref.name, { opencodePid: agent.server.pid() ?? null, opencodeMarker: agent.server.marker() ?? null, opencodeLoopMarker: agent.sharedLoopMarker ?? null });
    const unsubscribe = client.subscribe((e) => listeners.onAgentEvent(e));
    deps.live?.reader(ref, (sessionId) => client.liveParts(sessionId));
    this.disposers.push(() => deps.live?.reader(ref, null));
    const detachPermissions = attachPermissionResponder({
      client,
      resolve: (root) => {
        const current = listeners.current();
        return current && root === current.id ? agent.permissionOptions(current.role, extras.userDenyRules) : undefined;
      },
      log: (entry) => deps.log.info(`[loop ${ref.name}] permission ${JSON.stringify(entry)}`),
      onError: (e) => deps.log.warn(`[loop ${ref.name}] permission reply failed: ${String(e)}`),
    });
    const detachServer = agent.server.onEvent((e) => {
      const notice = serverEventNotice(e);
      if (notice) deps.emit({ type: 'loop.notice', loop: ref, ...notice });
      if (e.type === 'gave-up') {
        listeners.serverGaveUp(e.error);
      } else if (e.type === 'started' && e.generation > 1) {
        // A restarted server has a new marker too: a takeover must find its processes, not the dead one's.
        deps.repos.loops.mergeState(ref.projectId, ref.name, { opencodePid: e.pid ?? null, opencodeMarker: e.marker ?? null });
        listeners.serverRestarted(e.generation);
      }
    });
    const watchdog = setInterval(() => listeners.watchdogTick(), Math.max(100, Math.min(1000, Math.floor(extras.timing.stallTimeoutMs / 4))));
    watchdog.unref?.();
    this.disposers.push(unsubscribe, detachPermissions, detachServer, () => clearInterval(watchdog));
  }

  /** Releases the loop's scope; `alongside` (the last commit) runs while opencode stops, and is awaited before the lease goes. */
  async dispose(ended: boolean, alongside?: Promise<void>): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    const { ref, deps } = this.ctx;
    for (const d of this.disposers.reverse()) {
      try {
        await d();
      } catch {
        /* keep releasing */
      }
    }
    this.disposers = [];
    try {
      this.release.recordLast();
    } catch (e) {
      deps.log.warn(`[loop ${ref.name}] recording the last hand-over: ${String(e)}`);
    }
    const stopping = (async () => {
      await this.release.dropSpares();
      // Ended while opencode was still starting: wait for it, so stopping it cannot be skipped
      // (nobody else would; the process would outlive Forge).
      if (!this.agent && this.opening) this.agent = await this.opening.catch(() => undefined);
      if (this.agent) {
        this.agent.scope.setActiveSession(undefined);
        await this.agent.stop().catch((e) => deps.log.warn(`[loop ${ref.name}] stopping opencode: ${String(e)}`));
      }
    })();
    await Promise.all([stopping, alongside]);
    try {
      await deps.releaseSandbox(this.ctx.loop(), ended);
    } catch (e) {
      deps.log.warn(`[loop ${ref.name}] releasing the sandbox: ${String(e)}`);
    }
    try {
      deps.repos.loops.releaseLease(ref.projectId, ref.name, deps.supervisorId);
    } catch {
      /* the row may be gone */
    }
    deps.onDisposed(ref);
  }
}
