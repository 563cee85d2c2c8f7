/**
 * The dashboard's live view, host side: follows the engine's live feed for the selected loop
 * and posts it to the webview in batches (at most one message per ~50 ms, coalesced per part:
 * never one message per token), with a snapshot when the selection changes or the webview asks
 * for a session's parts.
 */
import * as vscode from 'vscode';
import type { ForgeEngine } from '../engine-contract';
import type { HostToWebview, LiveSessionView, LiveSnapshot, LoopKey } from './protocol';

/** Interval of the batches posted to the webview. */
export const LIVE_BATCH_MS = 50;

export class LiveViewBridge implements vscode.Disposable {
  private loop: LoopKey | null = null;
  private unsubscribe: (() => void) | undefined;
  private disposed = false;

  constructor(
    private readonly engine: () => ForgeEngine | undefined,
    private readonly post: (message: HostToWebview) => Promise<void>,
    private readonly onError: (what: string, error: unknown) => void,
  ) {}

  /** The loop the dashboard shows; a new one (or `force`, a reloaded webview) gets a snapshot. */
  async select(loop: LoopKey | null, force = false): Promise<void> {
    if (!force && sameLoop(loop, this.loop)) return;
    this.loop = loop;
    const engine = this.engine();
    if (!engine || !loop || this.disposed) return;
    this.ensureSubscribed(engine);
    const sessions = this.sessions(engine, loop);
    const roots = sessions.filter((s) => s.parentSessionId === null);
    const latest = roots[roots.length - 1];
    const snapshot: LiveSnapshot | undefined = latest ? { sessionId: latest.sessionId, ...engine.live.parts(loop, latest.sessionId), source: 'memory', note: null } : undefined;
    await this.post({ type: 'live', loop, sessions, updates: [], reset: true, ...(snapshot ? { snapshot } : {}), sentAt: Date.now() });
  }

  /** The webview asks for a session's parts: what was kept, or (`full`) the session read from opencode. */
  async request(loop: LoopKey, sessionId: string, full: boolean): Promise<void> {
    const engine = this.engine();
    if (!engine) return;
    const snapshot: LiveSnapshot = full
      ? { sessionId, ...(await engine.live.history(loop, sessionId)), dropped: 0 }
      : { sessionId, ...engine.live.parts(loop, sessionId), source: 'memory', note: null };
    await this.post({ type: 'live', loop, updates: [], snapshot, sentAt: Date.now() });
  }

  private ensureSubscribed(engine: ForgeEngine): void {
    if (this.unsubscribe) return;
    this.unsubscribe = engine.live.subscribeBatched((batch) => {
      const loop = this.loop;
      if (!loop || !sameLoop(loop, batch.loop)) return;
      void this.post({
        type: 'live',
        loop,
        updates: batch.updates,
        ...(batch.sessionsChanged ? { sessions: this.sessions(engine, loop) } : {}),
        sentAt: Date.now(),
      }).catch((error: unknown) => this.onError(vscode.l10n.t('Forge could not update its live view'), error));
    }, LIVE_BATCH_MS);
  }

  private sessions(engine: ForgeEngine, loop: LoopKey): LiveSessionView[] {
    return engine.live.sessions(loop).map((s) => ({ sessionId: s.sessionId, parentSessionId: s.parentSessionId, phase: s.phase, iteration: s.iteration, startedAt: s.startedAt }));
  }

  /** The panel closed: nothing to post to until it opens again. */
  detach(): void {
    this.loop = null;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  dispose(): void {
    this.disposed = true;
    this.detach();
  }
}

function sameLoop(a: LoopKey | null, b: LoopKey | null): boolean {
  return a === b || (!!a && !!b && a.projectId === b.projectId && a.name === b.name);
}
