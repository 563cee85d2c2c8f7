/**
 * The live view's parts: what an agent session is doing now (streamed text, reasoning, tool
 * calls with short arguments and results), accumulated from normalised opencode events and
 * bounded (the last N parts per session, a text tail per part). Pure: no I/O, no DOM; the
 * engine's live feed, the dashboard webview and `forge run --follow` all use it.
 */

export type LivePartKind = 'text' | 'reasoning' | 'tool';
export type LiveToolStatus = 'pending' | 'running' | 'completed' | 'error';

/** One change of one part, as the event normaliser produces it. */
export interface LivePartUpdate {
  readonly partId: string;
  /** The session the part belongs to (a subagent's own session for its parts). */
  readonly sessionId: string;
  readonly messageId: string;
  readonly kind: LivePartKind;
  /** text/reasoning: characters appended (a streamed delta). */
  readonly delta?: string;
  /** text/reasoning: the whole text so far (replaces what was accumulated). */
  readonly text?: string;
  /** text/reasoning: the part is complete (opencode set its end time). */
  readonly ended?: boolean;
  /** tool parts: the call's state, arguments and result already shortened. */
  readonly tool?: LiveToolState;
  /** How many original updates this one stands for (coalescing merges several into one). */
  readonly merged?: number;
  /** A part of a user message: the prompt Forge sent, not the agent's doing. */
  readonly fromUser?: boolean;
}

export interface LiveToolState {
  readonly name: string;
  readonly callId: string;
  readonly status: LiveToolStatus;
  /** Short arguments (`filePath="src/a.ts" content="…"`). */
  readonly args: string;
  /** Short result: the output's first line, or the error. */
  readonly result?: string;
  readonly title?: string;
}

export interface LivePart {
  readonly partId: string;
  readonly sessionId: string;
  readonly messageId: string;
  readonly kind: LivePartKind;
  /** text/reasoning: the text's tail (at most `maxTextChars`). */
  text: string;
  /** text/reasoning: every character seen, kept or not. */
  textLength: number;
  ended: boolean;
  tool?: LiveToolState;
  /** A part of Forge's prompt (a user message). */
  fromUser?: boolean;
  /** Updates applied to this part (a benchmark counts them). */
  updates: number;
}

export interface LivePartLimits {
  /** Parts kept per session; older ones are dropped (and can be fetched from opencode). */
  readonly maxParts: number;
  /** Characters of a text part kept (its tail). */
  readonly maxTextChars: number;
}

export const DEFAULT_LIVE_LIMITS: LivePartLimits = { maxParts: 200, maxTextChars: 4000 };

/** The last N parts of one session, in the order they first appeared. */
export class LivePartBuffer {
  private readonly byId = new Map<string, LivePart>();
  /** Parts dropped to stay within `maxParts`. */
  dropped = 0;
  /** Updates applied in total (merged ones counted as many). */
  updates = 0;

  constructor(readonly limits: LivePartLimits = DEFAULT_LIVE_LIMITS) {
    if (!(limits.maxParts >= 1) || !(limits.maxTextChars >= 1)) throw new Error('LivePartBuffer: maxParts and maxTextChars must be at least 1.');
  }

  get size(): number {
    return this.byId.size;
  }

  parts(): LivePart[] {
    return [...this.byId.values()];
  }

  get(partId: string): LivePart | undefined {
    return this.byId.get(partId);
  }

  /** Applies one update; returns the part as it now is. */
  apply(update: LivePartUpdate): LivePart {
    const count = update.merged ?? 1;
    this.updates += count;
    let part = this.byId.get(update.partId);
    if (!part) {
      part = { partId: update.partId, sessionId: update.sessionId, messageId: update.messageId, kind: update.kind, text: '', textLength: 0, ended: false, updates: 0 };
      this.byId.set(update.partId, part);
      this.evict();
    }
    part.updates += count;
    if (update.fromUser) part.fromUser = true;
    if (update.text !== undefined) {
      // A whole text never shortens what deltas already delivered (a late snapshot).
      if (update.text.length >= part.textLength) {
        part.textLength = update.text.length;
        part.text = tail(update.text, this.limits.maxTextChars);
      }
    }
    if (update.delta !== undefined && update.delta.length > 0) {
      part.textLength += update.delta.length;
      part.text = tail(part.text + update.delta, this.limits.maxTextChars);
    }
    if (update.ended) part.ended = true;
    if (update.tool) {
      part.tool = update.tool;
      part.ended = update.tool.status === 'completed' || update.tool.status === 'error';
    }
    return part;
  }

  /** Replaces the content with `parts` (a snapshot), keeping the last `maxParts`. */
  load(parts: readonly LivePart[], dropped = 0): void {
    this.byId.clear();
    this.dropped = dropped;
    for (const p of parts) this.byId.set(p.partId, { ...p, text: tail(p.text, this.limits.maxTextChars) });
    this.evict();
  }

  private evict(): void {
    while (this.byId.size > this.limits.maxParts) {
      const oldest = this.byId.keys().next().value as string;
      this.byId.delete(oldest);
      this.dropped += 1;
    }
  }
}

function tail(text: string, max: number): string {
  return text.length <= max ? text : text.slice(text.length - max);
}

/**
 * Merges a batch of updates into one per part (deltas concatenated, the latest tool state, a
 * whole text then the deltas after it), in the order the parts first appear. What a batch
 * sent every ~50 ms carries instead of one message per token.
 */
export function coalesceUpdates(updates: readonly LivePartUpdate[]): LivePartUpdate[] {
  const merged = new Map<string, { -readonly [K in keyof LivePartUpdate]: LivePartUpdate[K] }>();
  for (const u of updates) {
    const prev = merged.get(u.partId);
    if (!prev) {
      merged.set(u.partId, { ...u, merged: u.merged ?? 1 });
      continue;
    }
    prev.merged = (prev.merged ?? 1) + (u.merged ?? 1);
    if (u.text !== undefined) {
      const pending = prev.text !== undefined ? prev.text + (prev.delta ?? '') : undefined;
      // A whole text that is shorter than what the batch already carries is stale: keep ours.
      if (pending === undefined || u.text.length >= pending.length) {
        prev.text = u.text;
        delete prev.delta;
      }
    }
    if (u.delta) prev.delta = (prev.delta ?? '') + u.delta;
    if (u.ended) prev.ended = true;
    if (u.fromUser) prev.fromUser = true;
    if (u.tool) prev.tool = u.tool;
  }
  return [...merged.values()];
}

// ---- Shortening (tool arguments and results) ---------------------------------------------

export const SHORT_ARGS_CHARS = 160;
export const SHORT_VALUE_CHARS = 60;
export const SHORT_RESULT_CHARS = 120;

/** One line, whitespace runs collapsed, cut at `max` characters with "…". */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

function shortValue(value: unknown): string {
  if (typeof value === 'string') {
    const lines = value.split('\n').length;
    const flat = oneLine(value, SHORT_VALUE_CHARS);
    return `${JSON.stringify(flat)}${lines > 1 ? ` (${lines} lines)` : ''}`;
  }
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === undefined) return 'undefined';
  let json: string;
  try {
    json = JSON.stringify(value) ?? String(value);
  } catch {
    json = String(value);
  }
  return oneLine(json, SHORT_VALUE_CHARS);
}

/** A tool call's arguments on one short line: `key=value` pairs, long strings cut. */
export function shortArgs(input: unknown): string {
  if (input === undefined || input === null) return '';
  if (typeof input !== 'object' || Array.isArray(input)) return oneLine(shortValue(input), SHORT_ARGS_CHARS);
  const parts = Object.entries(input as Record<string, unknown>).map(([k, v]) => `${k}=${shortValue(v)}`);
  return oneLine(parts.join(' '), SHORT_ARGS_CHARS);
}

/** A tool result on one short line: its first non-empty line, and how many lines it had. */
export function shortResult(output: string): string {
  const lines = output.split('\n');
  const first = lines.find((l) => l.trim() !== '') ?? '';
  const more = lines.filter((l) => l.trim() !== '').length - 1;
  return `${oneLine(first, SHORT_RESULT_CHARS)}${more > 0 ? ` (+${more} line${more === 1 ? '' : 's'})` : ''}`;
}

/**
 * The live update of one raw opencode part (`message.part.updated`'s `part`, or a part of a
 * stored message): undefined for parts the live view does not show (step marks, synthetic
 * text, files, patches).
 */
export function livePartOfRaw(part: Record<string, unknown>, fallbackSessionId?: string): LivePartUpdate | undefined {
  const partId = str(part.id);
  const sessionId = str(part.sessionID) ?? fallbackSessionId;
  if (!partId || !sessionId) return undefined;
  const messageId = str(part.messageID) ?? '';
  if (part.type === 'text' || part.type === 'reasoning') {
    if (part.synthetic === true || part.ignored === true) return undefined;
    const time = (part.time ?? {}) as Record<string, unknown>;
    return { partId, sessionId, messageId, kind: part.type, text: typeof part.text === 'string' ? part.text : '', ...(typeof time.end === 'number' ? { ended: true } : {}) };
  }
  if (part.type === 'tool') {
    const state = (part.state ?? {}) as Record<string, unknown>;
    const status: LiveToolStatus = state.status === 'running' || state.status === 'completed' || state.status === 'error' ? state.status : 'pending';
    const result = status === 'completed' && typeof state.output === 'string' ? shortResult(state.output) : status === 'error' && typeof state.error === 'string' ? `error: ${shortResult(state.error)}` : undefined;
    const title = str(state.title);
    return {
      partId,
      sessionId,
      messageId,
      kind: 'tool',
      tool: { name: str(part.tool) ?? '', callId: str(part.callID) ?? '', status, args: shortArgs(state.input), ...(result !== undefined ? { result } : {}), ...(title ? { title } : {}) },
    };
  }
  return undefined;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
