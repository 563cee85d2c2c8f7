// The dashboard's live view (webview side): what the selected loop's agent session is doing
// now — streamed text, tool calls with short arguments and results, subagents — from the
// host's batches (dashboard/live-bridge.ts). Bounded (the last N parts per session, a few
// sessions); rendered at most once per animation frame, touching only the parts that changed.
// Its DOM node lives across the dashboard's re-renders, so scroll and follow survive them.
import { LivePartBuffer, DEFAULT_LIVE_LIMITS, type LivePart } from '../src/core/live/live-parts';
import { inertText } from '../src/core/text/inert-text';
import { userWordsIn } from '../src/core/loop/user-message';
import type { LiveBatch, LiveProbe, LiveSessionView, LoopDetail, LoopKey, WebviewToHost } from '../src/vscode/dashboard/protocol';

/** Sessions whose parts the webview keeps (the shown one is never dropped). */
const MAX_SESSIONS_KEPT = 20;
const LAG_SAMPLES = 2000;

const PHASE_LABEL: Record<string, string> = { coding: 'coding', auditing: 'audit', final_auditing: 'final audit', final_audit_fix: 'final-audit fix', post_action: 'post action' };

const sameLoop = (a: LoopKey | null, b: LoopKey | null) => !!a && !!b && a.projectId === b.projectId && a.name === b.name;

/** An element with inert text: the agent's words, tool arguments and results are model text. */
function el(tag: string, className?: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = inertText(text);
  return node;
}

export class LiveView {
  readonly root = el('section', 'panel live');
  private readonly heading = el('h3', undefined, 'Live');
  private readonly message = el('p', 'muted live-message');
  private readonly controls = el('div', 'live-controls');
  private readonly followBox = document.createElement('input');
  private readonly sessionList = el('ol', 'live-sessions');
  private readonly note = el('p', 'muted live-note');
  private readonly partList = el('div', 'live-parts');
  private loop: LoopKey | null = null;
  private supervision: LoopDetail['supervision'] = 'none';
  private running = false;
  private sessions: LiveSessionView[] = [];
  private readonly buffers = new Map<string, LivePartBuffer>();
  private readonly notes = new Map<string, string>();
  private shown: string | null = null;
  private follow = true;
  private readonly rows = new Map<string, HTMLElement>();
  private readonly dirtyParts = new Set<string>();
  private rebuild = true;
  private frameRequested = false;
  private pendingSentAt: number[] = [];
  private readonly lags: number[] = [];
  private stats = { updatesApplied: 0, batches: 0, frames: 0 };
  /** Where the reader left the part list (a re-render of the dashboard re-attaches it, which resets scrolling). */
  private scrollTop = 0;
  private atBottom = true;

  constructor(private readonly send: (message: WebviewToHost) => void) {
    this.followBox.type = 'checkbox';
    this.followBox.checked = true;
    this.followBox.id = 'live-follow';
    this.followBox.addEventListener('change', () => {
      this.follow = this.followBox.checked;
      if (this.follow) this.showSession(this.currentRoot(), false);
    });
    const followLabel = el('label', 'live-follow');
    followLabel.append(this.followBox, ' follow the current session (moves on at each phase change)');
    const loadAll = el('button', 'live-load-all', 'Load the whole session from opencode');
    loadAll.addEventListener('click', () => {
      if (this.loop && this.shown) this.send({ type: 'liveSession', loop: this.loop, sessionId: this.shown, full: true });
    });
    this.controls.append(followLabel, loadAll);
    this.partList.addEventListener('scroll', () => {
      if (!this.partList.isConnected || this.partList.clientHeight === 0) return;
      this.scrollTop = this.partList.scrollTop;
      this.atBottom = this.partList.scrollHeight - this.partList.scrollTop - this.partList.clientHeight < 40;
    });
    this.root.append(this.heading, this.message, this.controls, this.sessionList, this.note, this.partList);
  }

  /** The dashboard rendered a (new) detail: the loop shown and who drives it. */
  setDetail(detail: LoopDetail): void {
    if (!sameLoop(detail.key, this.loop)) {
      this.loop = detail.key;
      this.clear();
    }
    this.supervision = detail.supervision;
    this.running = detail.status === 'running' || detail.status === 'starting';
    this.schedule(false);
  }

  onBatch(batch: LiveBatch): void {
    if (!sameLoop(batch.loop, this.loop)) {
      // The host switched loops before the dashboard's state arrived: take its word.
      if (!batch.reset) return;
      this.loop = batch.loop;
      this.clear();
    }
    this.stats.batches += 1;
    if (batch.reset) this.clear();
    if (batch.sessions) {
      this.sessions = [...batch.sessions];
      this.rebuild = true;
      if (this.follow) this.showSession(this.currentRoot(), false);
    }
    if (batch.snapshot) {
      const snapshot = batch.snapshot;
      const buffer = new LivePartBuffer(snapshot.source === 'opencode' ? { ...DEFAULT_LIVE_LIMITS, maxParts: Math.max(DEFAULT_LIVE_LIMITS.maxParts, snapshot.parts.length) } : DEFAULT_LIVE_LIMITS);
      buffer.load(snapshot.parts, snapshot.dropped);
      this.buffers.set(snapshot.sessionId, buffer);
      if (snapshot.note) this.notes.set(snapshot.sessionId, snapshot.note);
      else this.notes.delete(snapshot.sessionId);
      if (this.shown === null) this.shown = snapshot.sessionId;
      if (this.shown === snapshot.sessionId) this.rebuild = true;
    }
    for (const update of batch.updates) {
      this.bufferOf(update.sessionId).apply(update);
      this.stats.updatesApplied += update.merged ?? 1;
      if (this.shown === null && this.isRoot(update.sessionId)) this.showSession(update.sessionId, false);
      if (update.sessionId === this.shown) this.dirtyParts.add(update.partId);
    }
    this.pendingSentAt.push(batch.sentAt);
    // A hidden webview gets no animation frames: keep the lag samples bounded meanwhile.
    if (this.pendingSentAt.length > LAG_SAMPLES) this.pendingSentAt.shift();
    this.schedule(false);
  }

  probe(): LiveProbe {
    const state = this.availability();
    const buffer = this.shown ? this.buffers.get(this.shown) : undefined;
    const sorted = [...this.lags].sort((a, b) => a - b);
    return {
      state: state.state,
      message: this.message.textContent ?? '',
      follow: this.follow,
      shownSession: this.shown,
      sessions: this.sessions.length,
      toolCalls: Array.from(this.partList.querySelectorAll('[data-live-tool]')).map((n) => `${n.getAttribute('data-live-tool')} ${n.getAttribute('data-status')}`),
      partRows: this.partList.childElementCount,
      userMessages: Array.from(this.partList.querySelectorAll('[data-user-message] .live-text')).map((n) => n.textContent ?? ''),
      textChars: buffer ? buffer.parts().reduce((n, p) => n + (p.kind === 'tool' || p.fromUser ? 0 : p.textLength), 0) : 0,
      parts: buffer ? buffer.parts().map((p) => ({ partId: p.partId, kind: p.fromUser ? 'prompt' : p.kind, chars: p.textLength, updates: p.updates })) : [],
      updatesApplied: this.stats.updatesApplied,
      batches: this.stats.batches,
      frames: this.stats.frames,
      lagMedianMs: sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0,
      lagMaxMs: sorted.length ? sorted[sorted.length - 1]! : 0,
    };
  }

  private clear(): void {
    this.sessions = [];
    this.buffers.clear();
    this.notes.clear();
    this.shown = null;
    this.rebuild = true;
    this.dirtyParts.clear();
    this.stats = { updatesApplied: 0, batches: 0, frames: 0 };
    this.lags.length = 0;
    this.pendingSentAt = [];
  }

  private isRoot(sessionId: string): boolean {
    const s = this.sessions.find((x) => x.sessionId === sessionId);
    return !s || s.parentSessionId === null;
  }

  private currentRoot(): string | null {
    const roots = this.sessions.filter((s) => s.parentSessionId === null);
    return roots[roots.length - 1]?.sessionId ?? this.shown;
  }

  private bufferOf(sessionId: string): LivePartBuffer {
    let buffer = this.buffers.get(sessionId);
    if (!buffer) {
      buffer = new LivePartBuffer(DEFAULT_LIVE_LIMITS);
      this.buffers.set(sessionId, buffer);
      for (const id of this.buffers.keys()) {
        if (this.buffers.size <= MAX_SESSIONS_KEPT) break;
        if (id !== this.shown && id !== sessionId) this.buffers.delete(id);
      }
    }
    return buffer;
  }

  private showSession(sessionId: string | null, ask: boolean): void {
    if (sessionId === null || sessionId === this.shown) return;
    this.shown = sessionId;
    this.rebuild = true;
    if (ask && this.loop && !this.buffers.has(sessionId)) this.send({ type: 'liveSession', loop: this.loop, sessionId, full: false });
    this.schedule(false);
  }

  private availability(): { state: LiveProbe['state']; text: string } {
    if (this.supervision === 'elsewhere') {
      return {
        state: 'elsewhere',
        text: "The live view is available in the window that runs this loop (another VS Code window or a forge CLI). This window reads the loop from Forge's database, which does not carry the agent's live activity, and the loop's opencode server answers only the process that started it.",
      };
    }
    if (this.sessions.length === 0 && this.buffers.size === 0) {
      return {
        state: 'none',
        text: this.running
          ? 'Waiting for the agent: its messages and tool calls appear here as they happen.'
          : 'No live activity of this loop was seen in this window (it ran before this window opened, or in another window or process). Its sessions and their usage are under Usage.',
      };
    }
    return { state: 'live', text: this.running ? (this.follow ? 'Following the current session.' : 'Showing a chosen session; tick "follow" to follow the current one.') : 'The loop is not running: the parts this window kept.' };
  }

  private schedule(now: boolean): void {
    if (this.frameRequested) return;
    this.frameRequested = true;
    if (now) this.frame();
    else requestAnimationFrame(() => this.frame());
  }

  private frame(): void {
    this.frameRequested = false;
    this.stats.frames += 1;
    const { state, text } = this.availability();
    if (this.message.textContent !== inertText(text)) this.message.textContent = inertText(text);
    const liveShown = state === 'live';
    this.controls.hidden = !liveShown;
    this.sessionList.hidden = !liveShown;
    this.partList.hidden = !liveShown;
    const stick = this.follow && this.atBottom;
    if (this.rebuild) this.renderSessions();
    const buffer = this.shown ? this.buffers.get(this.shown) : undefined;
    this.note.textContent = inertText(this.shown ? (this.notes.get(this.shown) ?? (buffer && buffer.dropped > 0 ? `${buffer.dropped} older part${buffer.dropped === 1 ? '' : 's'} not kept here: "Load the whole session from opencode" reads them.` : '')) : '');
    if (this.rebuild) {
      this.rows.clear();
      this.partList.replaceChildren();
      for (const part of buffer?.parts() ?? []) this.partList.append(this.row(part));
    } else if (buffer) {
      for (const partId of this.dirtyParts) {
        const part = buffer.get(partId);
        if (!part) continue;
        const existing = this.rows.get(partId);
        const fresh = this.row(part);
        if (existing) existing.replaceWith(fresh);
        else this.partList.append(fresh);
      }
      // Parts the buffer dropped (older than the last N) leave the list too.
      if (this.rows.size > buffer.size) {
        for (const [id, node] of this.rows) {
          if (!buffer.get(id)) {
            node.remove();
            this.rows.delete(id);
          }
        }
      }
    }
    this.rebuild = false;
    this.dirtyParts.clear();
    if (stick) this.partList.scrollTop = this.partList.scrollHeight;
    else if (this.partList.scrollTop !== this.scrollTop) this.partList.scrollTop = this.scrollTop;
    const now = Date.now();
    for (const sentAt of this.pendingSentAt) {
      this.lags.push(now - sentAt);
      if (this.lags.length > LAG_SAMPLES) this.lags.shift();
    }
    this.pendingSentAt = [];
  }

  private renderSessions(): void {
    const current = this.currentRoot();
    this.sessionList.replaceChildren(
      ...this.sessions.map((s) => {
        const sub = s.parentSessionId !== null;
        const li = el('li', `live-session${s.sessionId === this.shown ? ' shown' : ''}${sub ? ' subagent' : ''}`);
        li.tabIndex = 0;
        li.setAttribute('data-session', s.sessionId);
        li.textContent = inertText(`${sub ? '↳ subagent · ' : ''}${PHASE_LABEL[s.phase] ?? s.phase} · iteration ${s.iteration} · ${s.sessionId}${s.sessionId === current && this.running ? ' (current)' : ''}`);
        const choose = () => {
          this.follow = false;
          this.followBox.checked = false;
          this.showSession(s.sessionId, true);
        };
        li.addEventListener('click', choose);
        li.addEventListener('keydown', (e) => {
          if (e.key === 'Enter' || e.key === ' ') choose();
        });
        return li;
      }),
    );
  }

  private row(part: LivePart): HTMLElement {
    let node: HTMLElement;
    if (part.kind === 'tool' && part.tool) {
      const t = part.tool;
      node = el('div', `live-part live-tool live-tool-${t.status}`);
      node.setAttribute('data-live-tool', t.name);
      node.setAttribute('data-status', t.status);
      node.append(el('span', 'live-tool-name', `⚙ ${t.name}`), el('span', `live-tool-status status-${t.status}`, ` ${t.status}`));
      if (t.args) node.append(el('code', 'live-tool-args', t.args));
      if (t.result) node.append(el('div', 'live-tool-result', `→ ${t.result}`));
    } else if (part.fromUser) {
      // The user's words (forge tell, Message the Agent) show as such, not folded into Forge's prompt.
      const words = userWordsIn(part.text);
      const direct = words !== null && part.text.length === part.textLength && part.text.startsWith('Message from the user');
      node = el(direct ? 'div' : 'details', direct ? 'live-part' : 'live-part live-prompt');
      if (!direct) node.append(el('summary', undefined, `Forge's prompt (${part.textLength} characters)`), el('pre', undefined, part.text));
      if (words !== null) {
        const said = el('div', 'live-user-message');
        said.setAttribute('data-user-message', '');
        said.append(el('span', 'muted', '✉ message from the user: '), el('span', 'live-text', words));
        node.append(said);
      }
    } else {
      node = el('div', `live-part live-${part.kind}${part.ended ? '' : ' streaming'}`);
      if (part.kind === 'reasoning') node.append(el('span', 'muted', 'thinking: '));
      node.append(el('span', 'live-text', `${part.textLength > part.text.length ? '…' : ''}${part.text}`));
    }
    node.setAttribute('data-part', part.partId);
    this.rows.set(part.partId, node);
    return node;
  }
}
