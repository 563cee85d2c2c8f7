/**
 * The one place where opencode's raw events become Forge's `AgentEvent`s. Pure: no I/O, it
 * only keeps what normalisation needs — each session's parent (to attribute subagent activity
 * to the top-level session) and each session's busy/idle state (so an idle is emitted once per
 * busy→idle change, whether it arrives as `session.status idle`, `session.idle`, both, or is
 * found by polling after a lost event stream).
 */
import type { AgentError, AgentEvent, AgentToolCall } from './agent-client';
import { livePartOfRaw } from '../live/live-parts';

export interface RawOpencodeEvent {
  type: string;
  properties?: Record<string, unknown>;
}

/** `prompted`: Forge sent a prompt and opencode has not reported busy yet. */
export type TrackedSessionState = 'idle' | 'busy' | 'prompted';

export interface EventNormalizer {
  normalize(event: RawOpencodeEvent): AgentEvent[];
  /** Call right before sending a prompt, so a reconcile can tell a pending turn from a finished one. */
  markPrompted(sessionId: string): void;
  /**
   * Reconciles one watched session after the event stream came back. `turnFinished`: the
   * session's latest user message has a completed (or failed) assistant reply.
   */
  reconcile(sessionId: string, status: 'busy' | 'idle' | 'retry', turnFinished: boolean): AgentEvent[];
  /** The opencode process died: every working session lost its turn. */
  serverLost(message: string): AgentEvent[];
  stateOf(sessionId: string): TrackedSessionState | undefined;
  rootOf(sessionId: string): string;
  /** Records a parent link learnt outside the event stream (e.g. from `session.get`). */
  recordParent(sessionId: string, parentSessionId: string | undefined): void;
}

const MAX_SESSION_DEPTH = 32;
const MAX_USER_MESSAGES = 256;

export function createEventNormalizer(): EventNormalizer {
  const parents = new Map<string, string | undefined>();
  const states = new Map<string, TrackedSessionState>();
  /** Ids of recent user messages (Forge's prompts), so their parts are marked as such; bounded. */
  const userMessages = new Set<string>();

  function rootOf(sessionId: string): string {
    let current = sessionId;
    for (let depth = 0; depth < MAX_SESSION_DEPTH; depth++) {
      const parent = parents.get(current);
      if (!parent) return current;
      current = parent;
    }
    return current;
  }

  function toBusy(sessionId: string): AgentEvent[] {
    if (states.get(sessionId) === 'busy') return [];
    states.set(sessionId, 'busy');
    return [{ type: 'session.busy', sessionId, rootSessionId: rootOf(sessionId) }];
  }

  function toIdle(sessionId: string, reconciled = false): AgentEvent[] {
    const state = states.get(sessionId);
    // Idle repeats (`session.status idle` and `session.idle`) are one idle. An idle while a
    // prompt is pending is the previous turn's late second idle: the new turn has not begun.
    if (state === 'idle' || (state === 'prompted' && !reconciled)) return [];
    states.set(sessionId, 'idle');
    const event: AgentEvent = { type: 'session.idle', sessionId, rootSessionId: rootOf(sessionId) };
    return [reconciled ? { ...event, reconciled: true } : event];
  }

  function normalize(event: RawOpencodeEvent): AgentEvent[] {
    const p = event.properties ?? {};
    switch (event.type) {
      case 'session.status': {
        const sessionId = str(p.sessionID);
        const status = (p.status ?? {}) as Record<string, unknown>;
        if (!sessionId) return [];
        if (status.type === 'busy') return toBusy(sessionId);
        if (status.type === 'idle') return toIdle(sessionId);
        if (status.type === 'retry') {
          return [
            ...toBusy(sessionId),
            {
              type: 'session.retry',
              sessionId,
              rootSessionId: rootOf(sessionId),
              attempt: num(status.attempt),
              message: str(status.message) ?? '',
              nextAt: num(status.next),
            },
          ];
        }
        return [];
      }
      case 'session.idle': {
        const sessionId = str(p.sessionID);
        return sessionId ? toIdle(sessionId) : [];
      }
      case 'session.error': {
        const sessionId = str(p.sessionID);
        return [
          {
            type: 'session.error',
            sessionId,
            rootSessionId: sessionId ? rootOf(sessionId) : undefined,
            error: normalizeError(p.error),
          },
        ];
      }
      case 'session.created':
      case 'session.updated': {
        const info = (p.info ?? {}) as Record<string, unknown>;
        const sessionId = str(info.id) ?? str(p.sessionID);
        if (!sessionId) return [];
        const parentSessionId = str(info.parentID);
        parents.set(sessionId, parentSessionId);
        if (event.type === 'session.updated') return [];
        const created: AgentEvent = { type: 'session.created', sessionId, rootSessionId: rootOf(sessionId) };
        return [parentSessionId ? { ...created, parentSessionId } : created];
      }
      case 'session.deleted': {
        const info = (p.info ?? {}) as Record<string, unknown>;
        const sessionId = str(info.id) ?? str(p.sessionID);
        if (sessionId) states.delete(sessionId);
        return [];
      }
      case 'message.updated': {
        const info = (p.info ?? {}) as Record<string, unknown>;
        if (info.role === 'user' && typeof info.id === 'string') {
          userMessages.add(info.id);
          if (userMessages.size > MAX_USER_MESSAGES) userMessages.delete(userMessages.values().next().value as string);
        }
        return [];
      }
      case 'message.part.updated': {
        const part = (p.part ?? {}) as Record<string, unknown>;
        const sessionId = str(part.sessionID) ?? str(p.sessionID);
        const messageId = str(part.messageID) ?? '';
        if (!sessionId) return [];
        const base = { type: 'activity' as const, sessionId, rootSessionId: rootOf(sessionId), messageId };
        // What the live view shows of the part (its content, shortened for tool calls).
        const live = livePartOfRaw(part, sessionId);
        const withLive = live ? { part: userMessages.has(messageId) ? { ...live, fromUser: true } : live } : {};
        switch (part.type) {
          case 'tool': {
            const state = (part.state ?? {}) as Record<string, unknown>;
            const callId = str(part.callID);
            const input = state.input && typeof state.input === 'object' && !Array.isArray(state.input) ? (state.input as Record<string, unknown>) : undefined;
            return [
              {
                ...base,
                kind: 'tool',
                tool: str(part.tool) ?? '',
                toolStatus: toolStatus(state.status),
                ...(callId ? { callId } : {}),
                ...(input ? { toolInput: input } : {}),
                ...withLive,
              },
            ];
          }
          case 'text':
            return [{ ...base, kind: 'text', ...withLive }];
          case 'reasoning':
            return [{ ...base, kind: 'reasoning', ...withLive }];
          case 'step-start':
          case 'step-finish':
            return [{ ...base, kind: 'step' }];
          default:
            return [];
        }
      }
      case 'message.part.delta': {
        const sessionId = str(p.sessionID);
        if (!sessionId) return [];
        const kind: 'reasoning' | 'text' = p.field === 'reasoning' ? 'reasoning' : 'text';
        const messageId = str(p.messageID) ?? '';
        const partId = str(p.partID);
        // A delta of a part's text (reasoning parts stream their `text` too: the part's first
        // update, already seen, says which kind it is).
        const live = partId && typeof p.delta === 'string' && (p.field === 'text' || p.field === 'reasoning') ? { part: { partId, sessionId, messageId, kind, delta: p.delta } } : {};
        return [{ type: 'activity', sessionId, rootSessionId: rootOf(sessionId), kind, messageId, ...live }];
      }
      case 'permission.asked': {
        const sessionId = str(p.sessionID);
        const id = str(p.id);
        if (!sessionId || !id) return [];
        const tool = (p.tool ?? undefined) as Record<string, unknown> | undefined;
        return [
          {
            type: 'permission.asked',
            rootSessionId: rootOf(sessionId),
            request: {
              id,
              sessionId,
              permission: str(p.permission) ?? '',
              patterns: Array.isArray(p.patterns) ? p.patterns.map(String) : [],
              metadata: (p.metadata ?? {}) as Record<string, unknown>,
              ...(tool ? { tool: { messageId: str(tool.messageID) ?? '', callId: str(tool.callID) ?? '' } } : {}),
            },
          },
        ];
      }
      case 'question.asked': {
        const sessionId = str(p.sessionID);
        const id = str(p.id);
        if (!sessionId || !id) return [];
        return [{ type: 'question.asked', sessionId, rootSessionId: rootOf(sessionId), requestId: id }];
      }
      default:
        return [];
    }
  }

  return {
    normalize,
    markPrompted(sessionId) {
      if (states.get(sessionId) !== 'busy') states.set(sessionId, 'prompted');
    },
    reconcile(sessionId, status, turnFinished) {
      const before = states.get(sessionId);
      if (status === 'busy' || status === 'retry') return toBusy(sessionId);
      // Idle now. A session still waiting for its prompt to start is not done unless its turn
      // already finished while the stream was away.
      if (before === 'prompted' && !turnFinished) return [];
      if (before === 'prompted') return [...toBusy(sessionId), ...toIdle(sessionId, true)];
      return before === 'busy' ? toIdle(sessionId, true) : [];
    },
    serverLost(message) {
      const events: AgentEvent[] = [];
      for (const [sessionId, state] of states) {
        if (state === 'idle') continue;
        events.push({
          type: 'session.error',
          sessionId,
          rootSessionId: rootOf(sessionId),
          error: { name: 'ServerLost', message, retryable: true },
        });
        if (state === 'prompted') events.push(...toBusy(sessionId));
        events.push(...toIdle(sessionId, true));
      }
      return events;
    },
    stateOf: (sessionId) => states.get(sessionId),
    rootOf,
    recordParent(sessionId, parentSessionId) {
      parents.set(sessionId, parentSessionId);
    },
  };
}

export function normalizeError(raw: unknown): AgentError {
  if (!raw || typeof raw !== 'object') return { name: 'UnknownError', message: String(raw ?? 'unknown error') };
  const error = raw as Record<string, unknown>;
  const data = (error.data ?? {}) as Record<string, unknown>;
  const name = str(error.name) ?? 'UnknownError';
  const message = str(data.message) ?? str(error.message) ?? name;
  const result: AgentError = { name, message };
  if (typeof data.statusCode === 'number') result.statusCode = data.statusCode;
  if (typeof data.isRetryable === 'boolean') result.retryable = data.isRetryable;
  return result;
}

function toolStatus(value: unknown): AgentToolCall['status'] {
  return value === 'running' || value === 'completed' || value === 'error' ? value : 'pending';
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** The end reason's words for a model whose answers opencode could not parse, try after try. */
export const MALFORMED_STREAM_SUMMARY =
  "The model server answered with a malformed stream (chat-completions chunks that are not valid JSON) on every try. Check the model server, or the provider's baseURL in your opencode configuration; the raw text is in Forge's log.";

const MALFORMED_NAME = /JSONParseError|TypeValidationError/;
const MALFORMED_MESSAGE = /JSON pars(e|ing)|Unexpected end of JSON|Invalid JSON response|is not valid JSON/i;

/**
 * A model error in the words a loop shows (its notices, its end reason): one short line, and
 * whether the model's stream was malformed. The raw text (parser output, stack traces) is for
 * the log only.
 */
export function summarizeModelError(error: AgentError): { malformed: boolean; summary: string } {
  if (MALFORMED_NAME.test(error.name) || MALFORMED_MESSAGE.test(error.message)) {
    return { malformed: true, summary: "the model server's answer was a malformed stream (chunks that are not valid JSON)" };
  }
  const first = error.message.split('\n').find((line) => line.trim())?.trim() ?? error.name;
  return { malformed: false, summary: first.length > 300 ? `${first.slice(0, 297)}…` : first };
}
