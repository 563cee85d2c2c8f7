/**
 * The engine's live-parts feed: what the agent sessions of the loops this process drives are
 * doing now, for the dashboard's live view and `forge run --follow`. Fed by each loop's
 * supervisor (from opencode's event stream, normalised), published to subscribers as it comes.
 *
 * Bounded memory: per session the last `maxParts` parts (text tails), per loop the last
 * `maxSessions` sessions, and the last `maxLoops` loops. Older parts of a session are read on
 * demand from opencode's stored messages (`history`), while the loop's opencode server runs in
 * this process.
 *
 * Not persisted: a second window (or `forge status`) does not see it. opencode's server
 * password never leaves the process that started it (server-process.ts), so another process
 * cannot read the server either; its live view says where the loop runs instead.
 */
import type { LoopRef } from '../loop/runtime-types';
import { coalesceUpdates, DEFAULT_LIVE_LIMITS, LivePartBuffer, type LivePart, type LivePartLimits, type LivePartUpdate } from './live-parts';

export interface LiveSessionInfo {
  readonly sessionId: string;
  /** The session a subagent's session was started from; null for the loop's own sessions. */
  readonly parentSessionId: string | null;
  /** The loop's phase the session runs (its parent's for a subagent). */
  readonly phase: string;
  readonly iteration: number;
  readonly startedAt: number;
}

export type LiveFeedEvent =
  | { readonly type: 'session'; readonly loop: LoopRef; readonly session: LiveSessionInfo }
  | { readonly type: 'part'; readonly loop: LoopRef; readonly rootSessionId: string; readonly update: LivePartUpdate };

export type LiveFeedListener = (event: LiveFeedEvent) => void;

export interface LiveHistory {
  readonly parts: LivePart[];
  /** `opencode`: read from the loop's opencode server; `memory`: what this process kept. */
  readonly source: 'opencode' | 'memory';
  /** Why opencode was not read, when it was not. */
  readonly note: string | null;
}

/** What a loop's supervisor feeds in. */
export interface LiveFeedSink {
  session(loop: LoopRef, session: LiveSessionInfo): void;
  part(loop: LoopRef, rootSessionId: string, update: LivePartUpdate): void;
  /** The loop's agent client while its opencode server runs (null when it stopped). */
  reader(loop: LoopRef, read: ((sessionId: string) => Promise<LivePartUpdate[]>) | null): void;
}

/** What a batched subscriber gets per loop: the updates of the interval, coalesced (one per part). */
export interface LiveFeedBatch {
  readonly loop: LoopRef;
  /** A session was added since the last batch. */
  readonly sessionsChanged: boolean;
  readonly updates: LivePartUpdate[];
}

export interface LiveFeed extends LiveFeedSink {
  subscribe(listener: LiveFeedListener): () => void;
  /**
   * Updates gathered for `intervalMs` and coalesced per part, one call per loop that changed:
   * for views that must not redraw per token.
   */
  subscribeBatched(listener: (batch: LiveFeedBatch) => void, intervalMs?: number): () => void;
  /** The loop's sessions this process saw, oldest first (subagents after their parent). */
  sessions(loop: LoopRef): LiveSessionInfo[];
  /** The parts kept in memory for a session (the last `maxParts`), and how many were dropped. */
  parts(loop: LoopRef, sessionId: string): { parts: LivePart[]; dropped: number };
  /** A session's parts in full (up to `maxHistoryParts`), from opencode while it runs here, else memory. */
  history(loop: LoopRef, sessionId: string): Promise<LiveHistory>;
  readonly limits: LiveFeedLimits;
}

export interface LiveFeedLimits extends LivePartLimits {
  readonly maxSessions: number;
  readonly maxLoops: number;
  readonly maxHistoryParts: number;
}

export const DEFAULT_LIVE_FEED_LIMITS: LiveFeedLimits = { ...DEFAULT_LIVE_LIMITS, maxSessions: 40, maxLoops: 20, maxHistoryParts: 2000 };

interface LoopLive {
  sessions: Map<string, { info: LiveSessionInfo; buffer: LivePartBuffer }>;
  read: ((sessionId: string) => Promise<LivePartUpdate[]>) | null;
}

export function createLiveFeed(limits: LiveFeedLimits = DEFAULT_LIVE_FEED_LIMITS, log: (message: string) => void = () => {}): LiveFeed {
  const loops = new Map<string, LoopLive>();
  const listeners = new Set<LiveFeedListener>();
  const key = (loop: LoopRef) => `${loop.projectId}\u0000${loop.name}`;

  function loopLive(loop: LoopRef): LoopLive {
    const k = key(loop);
    let entry = loops.get(k);
    if (entry) {
      // Most recently used last: the oldest loop goes first.
      loops.delete(k);
      loops.set(k, entry);
      return entry;
    }
    entry = { sessions: new Map(), read: null };
    loops.set(k, entry);
    while (loops.size > limits.maxLoops) loops.delete(loops.keys().next().value as string);
    return entry;
  }

  function publish(event: LiveFeedEvent): void {
    for (const l of [...listeners]) {
      try {
        l(event);
      } catch (error) {
        log(`live feed listener failed: ${String(error)}`);
      }
    }
  }

  function subscribe(listener: LiveFeedListener): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  function sessionEntry(live: LoopLive, info: LiveSessionInfo) {
    let entry = live.sessions.get(info.sessionId);
    if (!entry) {
      entry = { info, buffer: new LivePartBuffer(limits) };
      live.sessions.set(info.sessionId, entry);
      while (live.sessions.size > limits.maxSessions) live.sessions.delete(live.sessions.keys().next().value as string);
    }
    return entry;
  }

  return {
    limits,
    session(loop, session) {
      const live = loopLive(loop);
      if (live.sessions.has(session.sessionId)) return;
      sessionEntry(live, session);
      publish({ type: 'session', loop, session });
    },
    part(loop, rootSessionId, update) {
      const live = loopLive(loop);
      let entry = live.sessions.get(update.sessionId);
      if (!entry) {
        // A subagent's session first seen through its part.
        const root = live.sessions.get(rootSessionId)?.info;
        const info: LiveSessionInfo = {
          sessionId: update.sessionId,
          parentSessionId: update.sessionId === rootSessionId ? null : rootSessionId,
          phase: root?.phase ?? '',
          iteration: root?.iteration ?? 0,
          startedAt: Date.now(),
        };
        entry = sessionEntry(live, info);
        publish({ type: 'session', loop, session: info });
      }
      entry.buffer.apply(update);
      publish({ type: 'part', loop, rootSessionId, update });
    },
    reader(loop, read) {
      loopLive(loop).read = read;
    },
    subscribe,
    subscribeBatched(listener, intervalMs = 50) {
      const pending = new Map<string, { loop: LoopRef; sessionsChanged: boolean; updates: LivePartUpdate[] }>();
      let timer: NodeJS.Timeout | undefined;
      const flush = () => {
        timer = undefined;
        const batches = [...pending.values()];
        pending.clear();
        for (const b of batches) {
          try {
            listener({ loop: b.loop, sessionsChanged: b.sessionsChanged, updates: coalesceUpdates(b.updates) });
          } catch (error) {
            log(`live feed batch listener failed: ${String(error)}`);
          }
        }
      };
      const off = subscribe((event) => {
        const k = key(event.loop);
        let entry = pending.get(k);
        if (!entry) {
          entry = { loop: event.loop, sessionsChanged: false, updates: [] };
          pending.set(k, entry);
        }
        if (event.type === 'session') entry.sessionsChanged = true;
        else {
          entry.updates.push(event.update);
          // A burst within one interval stays bounded too.
          if (entry.updates.length >= 4096) entry.updates = coalesceUpdates(entry.updates);
        }
        if (!timer) {
          timer = setTimeout(flush, intervalMs);
          timer.unref?.();
        }
      });
      return () => {
        off();
        if (timer) clearTimeout(timer);
        pending.clear();
      };
    },
    sessions(loop) {
      const live = loops.get(key(loop));
      if (!live) return [];
      const all = [...live.sessions.values()].map((s) => s.info);
      const roots = all.filter((s) => s.parentSessionId === null || !live.sessions.has(s.parentSessionId));
      return roots.flatMap((r) => [r, ...all.filter((s) => s.parentSessionId === r.sessionId)]);
    },
    parts(loop, sessionId) {
      const entry = loops.get(key(loop))?.sessions.get(sessionId);
      return entry ? { parts: entry.buffer.parts().map((p) => ({ ...p })), dropped: entry.buffer.dropped } : { parts: [], dropped: 0 };
    },
    async history(loop, sessionId) {
      const live = loops.get(key(loop));
      const kept = live?.sessions.get(sessionId);
      const fromMemory = (note: string): LiveHistory => ({ parts: kept ? kept.buffer.parts().map((p) => ({ ...p })) : [], source: 'memory', note });
      if (!live?.read) return fromMemory('The loop\'s opencode server is not running in this process: only the parts kept in memory are shown.');
      try {
        const updates = await live.read(sessionId);
        const buffer = new LivePartBuffer({ maxParts: limits.maxHistoryParts, maxTextChars: limits.maxTextChars });
        for (const u of updates) buffer.apply(u);
        return { parts: buffer.parts(), source: 'opencode', note: buffer.dropped > 0 ? `The first ${buffer.dropped} parts are not shown (only the last ${limits.maxHistoryParts}).` : null };
      } catch (error) {
        return fromMemory(`opencode did not give the session's messages (${(error as Error).message}): only the parts kept in memory are shown.`);
      }
    },
  };
}
