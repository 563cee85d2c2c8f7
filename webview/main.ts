// The Forge dashboard webview (see src/vscode/dashboard/dashboard-panel.ts). Renders the
// host's DashboardState with plain DOM (text only, never HTML from data) and a few
// @vscode-elements components; keeps the selected loop in the webview state so the
// panel serializer can restore it after a reload.
import '@vscode-elements/elements/dist/vscode-badge/index.js';
import '@vscode-elements/elements/dist/vscode-button/index.js';
import '@vscode-elements/elements/dist/vscode-collapsible/index.js';
import '@vscode-elements/elements/dist/vscode-divider/index.js';
import type {
  CheckView,
  DashboardState,
  DashboardViewState,
  FindingView,
  HostToWebview,
  LoopAction,
  LoopDetail,
  LoopKey,
  ProbeRect,
  RenderProbe,
  UsageView,
  WebviewToHost,
} from '../src/vscode/dashboard/protocol';
import { button, h, section, statusChip, type Child } from './dom';
import { groupProbe, renderGroup } from './group-view';
import { renderStateDiagram } from './state-diagram';
import { LiveView } from './live-view';
import { formatDuration, formatTime, renderChecks, renderFindings, renderNext, waitTextOf } from './first-screen';

interface VsCodeApi {
  postMessage(message: WebviewToHost): void;
  getState(): DashboardViewState | undefined;
  setState(state: DashboardViewState): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const app = document.getElementById('app')!;
let current: DashboardState | undefined;

const send = (message: WebviewToHost) => vscode.postMessage(message);
const liveView = new LiveView(send);
const sameKey = (a: LoopKey | null, b: LoopKey | null) => !!a && !!b && a.projectId === b.projectId && a.name === b.name;

const formatCost = (cost: number) => (cost <= 0 ? '$0' : cost >= 1 ? `$${cost.toFixed(2)}` : `$${cost.toFixed(4)}`);
const formatTokens = (n: number) => (n < 1000 ? String(n) : n < 1_000_000 ? `${(n / 1000).toFixed(1)}k` : `${(n / 1_000_000).toFixed(2)}M`);
const PHASES: Record<string, string> = { coding: 'coding', auditing: 'auditing', final_auditing: 'final audit', final_audit_fix: 'final-audit fix', post_action: 'post action' };
const live = (status: string) => status === 'running' || status === 'starting';

function badge(text: string | number, variant?: 'counter' | 'activity-bar-counter'): HTMLElement {
  return h('vscode-badge', variant ? { variant } : {}, String(text));
}



function renderList(state: DashboardState): HTMLElement {
  const list = h('nav', { class: 'loop-list', 'aria-label': 'Loops' });
  list.append(h('h2', {}, 'Loops'));
  const ul = h('ul', {});
  for (const loop of state.loops) {
    const selected = sameKey(loop.key, state.selected);
    const li = h(
      'li',
      { class: `loop-item${selected ? ' selected' : ''}`, tabindex: 0, 'data-loop': loop.key.name, 'aria-current': selected ? 'true' : 'false' },
      h('div', { class: 'loop-item-title' }, loop.key.name),
      h(
        'div',
        { class: 'loop-item-meta' },
        statusChip(loop.status),
        live(loop.status) ? h('span', {}, ` ${PHASES[loop.phase] ?? loop.phase}`) : null,
        h('span', { class: 'muted' }, ` · iter ${loop.iteration}`),
        loop.openBugs > 0 ? h('span', { class: 'bug-count' }, ` · ${loop.openBugs} bug${loop.openBugs === 1 ? '' : 's'}`) : null,
        loop.cost > 0 ? h('span', { class: 'muted' }, ` · ${formatCost(loop.cost)}`) : null,
      ),
    );
    const select = () => {
      vscode.setState({ selected: loop.key });
      send({ type: 'select', loop: loop.key });
    };
    li.addEventListener('click', select);
    li.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') select();
    });
    ul.append(li);
  }
  list.append(ul);
  return list;
}


function usageCells(u: UsageView): HTMLElement[] {
  return [
    h('td', { class: 'num' }, formatTokens(u.inputTokens)),
    h('td', { class: 'num' }, formatTokens(u.outputTokens)),
    h('td', { class: 'num' }, formatTokens(u.reasoningTokens)),
    h('td', { class: 'num' }, formatTokens(u.cacheReadTokens)),
    h('td', { class: 'num' }, String(u.messages)),
    h('td', { class: 'num' }, formatCost(u.cost)),
  ];
}

const USAGE_HEAD = ['input', 'output', 'reasoning', 'cache read', 'messages', 'cost'];

function usageTable(firstColumn: string, rows: { label: string; usage: UsageView }[], kind: string): HTMLElement {
  return h(
    'table',
    { class: `usage usage-${kind}` },
    h('thead', {}, h('tr', {}, h('th', {}, firstColumn), ...USAGE_HEAD.map((t) => h('th', { class: 'num' }, t)))),
    h('tbody', {}, ...rows.map((r) => h('tr', { 'data-usage-row': kind }, h('td', {}, r.label), ...usageCells(r.usage)))),
  );
}

/** Each plan_adjust: when, during which audit, the rationale, and a before/after diff per changed section. */
function renderAmendments(detail: LoopDetail): HTMLElement | null {
  if (detail.amendments.length === 0) return null;
  return h(
    'vscode-collapsible',
    { title: `Plan amendments (${detail.amendments.length})`, class: 'amendments', open: true },
    ...detail.amendments.map((a) =>
      h(
        'div',
        { class: 'amendment', 'data-amendment': a.id },
        h(
          'div',
          { class: 'amendment-head' },
          h('strong', {}, formatTime(a.at)),
          a.auditedSection !== null ? h('span', { class: 'muted' }, ` · during the audit of section ${a.auditedSection + 1}${a.iteration !== null ? `, iteration ${a.iteration}` : ''}`) : null,
        ),
        h('div', { class: 'amendment-rationale' }, a.rationale || '(no rationale given)'),
        ...a.changes.map((c) =>
          h(
            'div',
            { class: 'amendment-change' },
            h('div', { class: 'muted' }, c.summary),
            h('pre', { class: 'diff' }, ...c.diff.map((d) => h('span', { class: d.op === '+' ? 'diff-add' : d.op === '-' ? 'diff-del' : 'diff-same' }, `${d.op} ${d.text}\n`))),
          ),
        ),
      ),
    ),
  );
}

function renderShellInterventions(detail: LoopDetail): HTMLElement | null {
  if (detail.shellInterventions.length === 0) return null;
  return section(
    `Shell-hang watchdog — ${detail.shellInterventions.length} intervention${detail.shellInterventions.length === 1 ? '' : 's'}`,
    h('p', { class: 'muted' }, 'Builtin bash calls that ran past forge.watchdog.stallMs. Long-running work belongs in forge_shell.'),
    h(
      'ul',
      { class: 'shell-interventions' },
      ...detail.shellInterventions.map((i) =>
        h(
          'li',
          { 'data-intervention': i.id, title: i.processes.map((p) => `${p.pid} ${p.command}`).join('\n') },
          `${formatTime(i.at)} — ${i.action === 'killed' ? `killed ${i.processes.length} process(es)` : i.action === 'dry-run' ? `dry-run: would kill ${i.processes.length} process(es)` : 'unresolved: nothing to kill'} after ${formatDuration(i.elapsedMs)}: `,
          h('code', {}, i.command.slice(0, 200)),
        ),
      ),
    ),
  );
}

function renderDetail(state: DashboardState, detail: LoopDetail): HTMLElement {
  const running = live(detail.status);
  // The next steps lead (next.steps); the loop's other actions follow them.
  const others: { label: string; action: LoopAction }[] = [];
  if (running) others.push({ label: 'Cancel', action: 'cancel' }, { label: 'Message the Agent', action: 'message' });
  if (!running && detail.status !== 'completed') others.push({ label: 'Restart', action: 'restart' });
  if (running && detail.supervision !== 'this-window') others.push({ label: 'Force Restart', action: 'forceRestart' });
  if (detail.worktreeDir) others.push({ label: 'Open Worktree', action: 'openWorktree' });
  if (detail.branch) others.push({ label: 'Show Diff', action: 'showDiff' });

  const header = h(
    'header',
    { class: 'detail-header' },
    h('h2', {}, detail.title),
    h(
      'div',
      { class: 'facts' },
      statusChip(detail.status),
      running
        ? h('span', {}, ` ${PHASES[detail.phase] ?? detail.phase}`)
        : detail.terminationReason && detail.terminationReason !== detail.status
          ? h('span', { class: 'muted' }, ` ${detail.terminationReason}`)
          : null,
      h('span', { class: 'muted' }, ` · ${detail.kind} loop ${detail.key.name} · iteration ${detail.iteration}/${detail.maxIterations > 0 ? detail.maxIterations : '∞'}`),
      detail.sandbox
        ? h('span', { class: 'muted', title: detail.confinement }, ' · sandboxed')
        : h('span', { class: 'unconfined', title: detail.confinement }, ' · ⚠ UNCONFINED: agent commands run on this machine as you'),
      h('span', { class: 'muted' }, detail.supervision === 'this-window' ? ' · driven by this window' : detail.supervision === 'elsewhere' ? ' · driven by another window or process' : ''),
    ),
    detail.setup ? h('div', { class: detail.setup.startsWith('Setup failed') ? 'unconfined' : 'muted' }, detail.setup) : null,
    h('div', { class: 'muted' }, `Branch ${detail.branch ?? '—'}${detail.baseBranch ? ` from ${detail.baseBranch}` : ''} · models ${detail.model ?? 'default'}${detail.auditorModel && detail.auditorModel !== detail.model ? ` / auditor ${detail.auditorModel}` : ''} · started ${formatTime(detail.createdAt)}${detail.endedAt ? ` · ended ${formatTime(detail.endedAt)}` : ''}`),
    renderNext(detail, send, others),
  );

  const diagram = section(
    'State machine',
    renderStateDiagram({ kind: detail.kind, edges: detail.edges, current: running ? detail.phase : null, ended: running ? null : detail.status }),
    detail.recentTransitions.length > 0
      ? h(
          'vscode-collapsible',
          { title: `Transition log (last ${detail.recentTransitions.length})` },
          h(
            'ol',
            { class: 'transitions' },
            ...detail.recentTransitions.map((t) =>
              h('li', {}, `${formatTime(t.at)} — ${t.event}: ${t.from ?? 'start'} → ${t.to ?? t.status ?? 'end'} (iteration ${t.iteration}${t.sectionIndex === null ? '' : `, section ${t.sectionIndex + 1}`})${t.reason ? ` — ${t.reason}` : ''}`),
            ),
          ),
        )
      : null,
  );

  const amendedCounts = new Map<number, number>();
  for (const a of detail.amendments) for (const c of a.changes) if (c.kind !== 'removed') amendedCounts.set(c.index, (amendedCounts.get(c.index) ?? 0) + 1);
  const plan =
    detail.kind === 'goal'
      ? section('Goal', h('pre', { class: 'goal' }, detail.goal ?? ''))
      : section(
          `Plan — ${detail.sections.filter((s) => s.status === 'done').length}/${detail.sections.length} sections done`,
          detail.sections.length === 0
            ? h('p', { class: 'muted' }, 'An unsectioned plan: one audit scope.')
            : h(
                'ol',
                { class: 'sections' },
                ...detail.sections.map((s) =>
                  h(
                    'li',
                    { class: `section section-${s.status}${s.current ? ' current' : ''}`, 'data-section': s.index },
                    h('span', { class: 'section-status' }, s.status.replace('_', ' ')),
                    ' ',
                    s.title,
                    amendedCounts.has(s.index) ? h('span', { class: 'amended-badge', title: 'The auditor amended this section (see Plan amendments)' }, amendedCounts.get(s.index)! > 1 ? `amended ×${amendedCounts.get(s.index)}` : 'amended') : null,
                    s.attempts > 0 ? h('span', { class: 'muted' }, ` · ${s.attempts} coding pass${s.attempts === 1 ? '' : 'es'}`) : null,
                  ),
                ),
              ),
          renderAmendments(detail),
        );

  const usage = section(
    `Usage — ${formatCost(detail.usageTotal.cost)}, ${detail.usageTotal.sessions} session${detail.usageTotal.sessions === 1 ? '' : 's'}`,
    ...(detail.budget
      ? [
          h(
            'p',
            { class: detail.budget.state === 'ok' ? 'muted' : 'warning' },
            `Budget ${detail.budget.text}: ${detail.budget.used.map((u) => `${u.limit} ${u.percent} %`).join(', ')}${detail.budget.state === 'reached' ? ' — reached: the loop pauses at its next hand-over (restart it with a higher budget)' : detail.budget.state === 'warning' ? ' — over 80 %' : ''}`,
          ),
        ]
      : []),
    usageTable('model', detail.usageByModel.map((u) => ({ label: u.model, usage: u })), 'model'),
    usageTable('role', detail.usageByRole.map((u) => ({ label: u.role, usage: u })), 'role'),
    h('vscode-collapsible', { title: `Sessions (${detail.sessions.length})` }, usageTable('session', detail.sessions.map((s) => ({ label: `${s.role} · ${s.model} · ${s.sessionId}`, usage: s })), 'session')),
  );

  const summary =
    detail.completionSummary || detail.lastAuditSummary
      ? section(
          detail.status === 'completed' ? 'Completion summary' : 'Last audit summary',
          h('pre', { class: 'summary' }, detail.completionSummary ?? detail.lastAuditSummary ?? ''),
        )
      : null;

  liveView.setDetail(detail);
  // The first screen: state and next steps (header), checks, open findings; then the rest.
  return h('div', { class: 'detail' }, header, renderChecks(detail), renderFindings(state, detail, send), summary, liveView.root, plan, diagram, renderShellInterventions(detail), usage);
}

function render(state: DashboardState): void {
  current = state;
  vscode.setState({ selected: state.selected, selectedGroup: state.group?.key ?? null });
  app.replaceChildren();
  const groupPart = state.group ? renderGroup(state.group, state.selected, send) : null;
  if (state.loops.length === 0 && groupPart) {
    app.append(h('div', { class: 'detail' }, groupPart));
    return;
  }
  if (state.loops.length === 0) {
    app.append(h('div', { class: 'empty' }, h('h2', {}, 'Forge'), h('p', {}, state.emptyMessage ?? 'No loops yet.')));
    return;
  }
  const detail = state.detail ? renderDetail(state, state.detail) : h('div', { class: 'detail' }, groupPart ? null : h('p', { class: 'muted' }, 'Select a loop.'));
  // The Group part leads the detail: the selected loop is one feature of it.
  if (groupPart) detail.prepend(groupPart);
  const layout = h('div', { class: 'layout' }, renderList(state), detail);
  app.append(layout);
  if (state.focusFindingId !== null) document.getElementById(`finding-${state.focusFindingId}`)?.scrollIntoView({ block: 'center' });
}

function rectOf(e: Element | null): ProbeRect | null {
  if (!e) return null;
  const r = e.getBoundingClientRect();
  return { top: r.top, bottom: r.bottom, left: r.left, right: r.right };
}

function probe(): RenderProbe {
  const diagram = app.querySelector('svg.state-diagram');
  return {
    selectedLoop: current?.selected?.name ?? null,
    loopCount: app.querySelectorAll('li.loop-item').length,
    diagramNodes: diagram ? Array.from(diagram.querySelectorAll('[data-node]')).map((n) => n.getAttribute('data-node') ?? '') : [],
    diagramEdgeLabels: diagram ? Array.from(diagram.querySelectorAll('g.edge.taken')).map((g) => `${g.getAttribute('data-edge')} ${g.querySelector('text')?.textContent ?? ''}`) : [],
    currentNode: diagram?.querySelector('.node.current')?.getAttribute('data-node') ?? null,
    findingRows: app.querySelectorAll('tr.finding').length,
    findingFiles: Array.from(app.querySelectorAll('a.file-link')).map((a) => a.getAttribute('data-file') ?? ''),
    findingTexts: Array.from(app.querySelectorAll('tr.finding')).map((r) => r.children[2]?.textContent ?? ''),
    sectionRows: app.querySelectorAll('li.section').length,
    amendedSections: app.querySelectorAll('li.section .amended-badge').length,
    amendments: app.querySelectorAll('div.amendment').length,
    amendmentDiffLines: { added: app.querySelectorAll('pre.diff .diff-add').length, removed: app.querySelectorAll('pre.diff .diff-del').length },
    usageRows: app.querySelectorAll('tr[data-usage-row]').length,
    checks: Array.from(app.querySelectorAll('div.check')).map((c) => `${c.querySelector('.check-label')?.textContent ?? ''}: ${c.querySelector('.check-status')?.textContent ?? ''}`),
    checkRunRows: app.querySelectorAll('tr.check-run').length,
    checkOutputBlocks: app.querySelectorAll('pre.check-output-text').length,
    group: groupProbe(app),
    live: app.contains(liveView.root) ? liveView.probe() : { ...liveView.probe(), state: 'hidden' },
    nextSteps: Array.from(app.querySelectorAll('#part-next [data-step]')).map((b) => b.textContent ?? ''),
    waitText: app.querySelector('#part-next .wait-text')?.textContent ?? null,
    layout: {
      viewport: { width: window.innerWidth, height: window.innerHeight },
      nextSteps: rectOf(app.querySelector('#part-next')),
      checks: rectOf(app.querySelector('#part-checks')),
      checkHeads: Array.from(app.querySelectorAll('#part-checks .check-head')).map((e) => rectOf(e)!),
      openFindings: Array.from(app.querySelectorAll('#part-findings table.findings-open tr.finding')).map((e) => rectOf(e)!),
      liveView: app.contains(liveView.root) ? rectOf(liveView.root) : null,
      diagram: rectOf(diagram),
    },
  };
}

window.addEventListener('message', (event: MessageEvent<HostToWebview>) => {
  const message = event.data;
  if (message.type === 'state') render(message.state);
  else if (message.type === 'live') liveView.onBatch(message);
  else if (message.type === 'probe') send({ type: 'probeResult', requestId: message.requestId, probe: probe() });
});

send({ type: 'ready' });
