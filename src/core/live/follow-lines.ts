/**
 * `forge run --follow`: the live feed as lines. One line per tool call (name, short arguments,
 * short result) once it finished, one line per text part (its streamed deltas collapsed) once
 * it ended or the next part began. Pure and stateful: events in, lines out.
 */
import type { LiveFeedEvent, LiveSessionInfo } from './live-feed';
import { oneLine, type LivePartKind } from './live-parts';

export const FOLLOW_TEXT_CHARS = 200;
/** Characters of a text part a follower keeps (the JSON line carries them; the text line cuts to FOLLOW_TEXT_CHARS). */
export const FOLLOW_KEPT_TEXT_CHARS = 4000;
const PRINTED_PARTS_KEPT = 5000;

export interface FollowLine {
  /** The line for people: `[loop] coding › tool write filePath="a.js" → Wrote file successfully.` */
  readonly text: string;
  /** The same as a JSON object (`forge run --follow --json`). */
  readonly json: Record<string, unknown>;
}

interface OpenText {
  sessionId: string;
  rootSessionId: string;
  kind: Exclude<LivePartKind, 'tool'>;
  text: string;
  length: number;
}

export class FollowLines {
  private readonly sessions = new Map<string, LiveSessionInfo>();
  private readonly open = new Map<string, OpenText>();
  /** Parts already printed (a tool call once finished, a text once closed): later updates of them print nothing. */
  private readonly printed = new Set<string>();

  constructor(private readonly loopName: string) {}

  onEvent(event: LiveFeedEvent): FollowLine[] {
    if (event.type === 'session') {
      this.sessions.set(event.session.sessionId, event.session);
      // A new session of the loop: what the previous one left open is finished.
      return event.session.parentSessionId === null ? this.flush() : [];
    }
    const u = event.update;
    const lines: FollowLine[] = [];
    // Forge's own prompt (the user message of each turn) is not the agent's doing.
    if (u.fromUser) return lines;
    // The session went on with another part: its open text parts are complete.
    for (const [partId, t] of this.open) {
      if (partId !== u.partId && t.sessionId === u.sessionId) lines.push(...this.closeText(partId));
    }
    if (u.kind === 'tool') {
      const tool = u.tool;
      if (tool && (tool.status === 'completed' || tool.status === 'error') && !this.printed.has(u.partId)) {
        this.remember(u.partId);
        lines.push(this.toolLine(u.sessionId, event.rootSessionId, tool.name, tool.status, tool.args, tool.result ?? ''));
      }
      return lines;
    }
    if (this.printed.has(u.partId)) return lines;
    let t = this.open.get(u.partId);
    if (!t) {
      t = { sessionId: u.sessionId, rootSessionId: event.rootSessionId, kind: u.kind, text: '', length: 0 };
      this.open.set(u.partId, t);
    }
    if (u.text !== undefined && u.text.length >= t.length) {
      t.text = u.text.slice(-FOLLOW_KEPT_TEXT_CHARS);
      t.length = u.text.length;
    }
    if (u.delta) {
      t.text = (t.text + u.delta).slice(-FOLLOW_KEPT_TEXT_CHARS);
      t.length += u.delta.length;
    }
    if (u.ended) lines.push(...this.closeText(u.partId));
    return lines;
  }

  /** Everything still open, as lines (a session or the loop ended). */
  flush(): FollowLine[] {
    return [...this.open.keys()].flatMap((partId) => this.closeText(partId));
  }

  private closeText(partId: string): FollowLine[] {
    const t = this.open.get(partId);
    this.open.delete(partId);
    this.remember(partId);
    if (!t || t.text.trim() === '') return [];
    const where = this.where(t.sessionId, t.rootSessionId);
    const label = t.kind === 'reasoning' ? 'thinking' : 'says';
    const shown = oneLine(t.text, FOLLOW_TEXT_CHARS);
    return [
      {
        text: `[${this.loopName}] ${where.prefix}${label}: ${t.length > t.text.length ? `…${shown}` : shown}`,
        json: { loop: this.loopName, type: 'live.text', kind: t.kind, ...where.json, text: t.text, chars: t.length },
      },
    ];
  }

  private toolLine(sessionId: string, rootSessionId: string, name: string, status: string, args: string, result: string): FollowLine {
    const where = this.where(sessionId, rootSessionId);
    const verdict = status === 'error' ? 'FAILED ' : '';
    return {
      text: `[${this.loopName}] ${where.prefix}tool ${verdict}${name}${args ? ` ${args}` : ''}${result ? ` → ${result}` : ''}`,
      json: { loop: this.loopName, type: 'live.tool', ...where.json, tool: name, status, args, result },
    };
  }

  private where(sessionId: string, rootSessionId: string): { prefix: string; json: Record<string, unknown> } {
    const root = this.sessions.get(rootSessionId);
    const phase = root?.phase ?? '';
    const subagent = sessionId !== rootSessionId;
    return {
      prefix: `${phase ? `${phase} › ` : ''}${subagent ? `subagent ${sessionId} › ` : ''}`,
      json: { phase, sessionId, ...(subagent ? { subagentOf: rootSessionId } : {}) },
    };
  }

  private remember(partId: string): void {
    this.printed.add(partId);
    if (this.printed.size > PRINTED_PARTS_KEPT) this.printed.delete(this.printed.values().next().value as string);
  }
}
