// The dashboard's first screen (issue 29 item 6): what the user must act on, before the live view
// and the state diagram. The loop's next steps (what it waits for, the actions that fit and their
// CLI lines), its verification checks (one line each; run history and output folded) and its open
// findings, the user's and the auditor's (resolved ones folded below them).
import '@vscode-elements/elements/dist/vscode-collapsible/index.js';
import type { CheckView, DashboardState, FindingView, LoopAction, LoopDetail, NextStepsView, WebviewToHost } from '../src/vscode/dashboard/protocol';
import { button, h, type Child } from './dom';

type Send = (message: WebviewToHost) => void;

export const formatTime = (ms: number | null) => (ms ? new Date(ms).toLocaleString() : '—');

/** A first-screen part: a section with an id the probe and "Show Checks" find. */
function part(id: string, title: string, ...children: Child[]): HTMLElement {
  return h('section', { class: `panel ${id}-part`, id: `part-${id}` }, h('h3', {}, title), ...children);
}

type StepId = NextStepsView['steps'][number]['id'];

const STEP_LABEL: Record<StepId, string> = {
  review: 'Review',
  accept: 'Accept',
  restart: 'Restart',
  raise_budget: 'Raise Budget',
  show_checks: 'Show Checks',
  cancel: 'End Loop',
  read_answers: 'Read Answers',
  send_review: 'Send Review',
};

const WAIT_TEXT: Record<string, string> = {
  running: 'Running: nothing to do until it stops.',
  completed: 'Completed — waits for you: review its changes, then accept them.',
  budget_paused: 'Paused — its budget is spent; nothing is lost. Raise the budget to continue.',
  max_iterations: 'Stopped at its iteration limit — restart it for more passes, or take what it did.',
  checks_failing: 'Stopped at its iteration limit with checks failing — see which, then restart it.',
  stalled: 'Stalled — its agent stopped answering. Restart it.',
  interrupted: 'Interrupted (its process ended) — restart it to continue.',
  errored: 'Errored — see the reason above; restart it to try again.',
  cancelled: 'Cancelled by you; its worktree and branch are kept.',
  setup_failed: 'Setup failed before the agent started — fix what the reason names, then restart (setup runs again).',
  awaiting_review: 'The coder answered your review — read the answers, then resolve each comment or send them back.',
};

/** What each step's button does: a loop action of the host, or (Show Checks) a scroll to the checks. */
const STEP_ACTION: Record<StepId, LoopAction | 'showChecks'> = {
  review: 'review',
  read_answers: 'review',
  send_review: 'sendReview',
  accept: 'accept',
  cancel: 'cancel',
  show_checks: 'showChecks',
  restart: 'restart',
  raise_budget: 'restart',
};

export const waitTextOf = (wait: string): string => WAIT_TEXT[wait] ?? wait;

/** The steps' buttons (the first primary), then the loop's other actions; each step's CLI line in its tooltip. */
export function renderNext(detail: LoopDetail, send: Send, others: readonly { label: string; action: LoopAction }[]): HTMLElement {
  const act = (action: LoopAction) => send({ type: 'loopAction', loop: detail.key, action });
  const actions = h('div', { class: 'actions' });
  const done = new Set<LoopAction>();
  detail.next.steps.forEach((step, i) => {
    const action: LoopAction | 'showChecks' = STEP_ACTION[step.id];
    const b = button(STEP_LABEL[step.id], () => (action === 'showChecks' ? document.getElementById('part-checks')?.scrollIntoView({ block: 'start' }) : act(action)), i > 0);
    b.setAttribute('title', step.cli);
    b.setAttribute('data-step', step.id);
    actions.append(b);
    if (action !== 'showChecks') done.add(action);
  });
  for (const o of others) if (!done.has(o.action)) actions.append(button(o.label, () => act(o.action), true));
  const cli = detail.next.steps.length > 0 ? h('div', { class: 'next-cli muted' }, 'CLI: ', ...detail.next.steps.flatMap((s, i) => [i > 0 ? ' · ' : '', h('code', {}, s.cli)])) : null;
  return h('div', { class: `next-steps${detail.next.waiting ? ' waiting' : ''}`, id: 'part-next' }, h('div', { class: 'wait-text' }, waitTextOf(detail.next.wait)), actions, cli);
}

/** A finding's text: two lines on the first screen, the whole of it on a click (and in its tooltip). */
function findingText(description: string): HTMLElement {
  const text = h('div', { class: 'finding-text', title: description, tabindex: 0, role: 'button', 'aria-expanded': 'false' }, description);
  const toggle = () => text.setAttribute('aria-expanded', String(text.classList.toggle('expanded')));
  text.addEventListener('click', toggle);
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') toggle();
  });
  return text;
}

/** Open findings first (the user's and the auditor's), resolved and dismissed ones folded below. */
export function renderFindings(state: DashboardState, detail: LoopDetail, send: Send): HTMLElement {
  const open = detail.findings.filter((f) => f.status === 'open');
  const closed = detail.findings.filter((f) => f.status !== 'open');
  const table = (rows: readonly FindingView[], kind: string) =>
    h(
      'table',
      { class: `findings findings-${kind}` },
      h('thead', {}, h('tr', {}, ...['severity', 'where', 'finding', 'section', 'status', ''].map((t) => h('th', {}, t)))),
      h('tbody', {}, ...rows.map((f) => findingRow(detail, f, f.id === state.focusFindingId, send))),
    );
  return part(
    'findings',
    `Open findings — ${open.length}${closed.length > 0 ? ` (${closed.length} resolved or dismissed)` : ''}`,
    open.length === 0 ? h('p', { class: 'muted' }, detail.findings.length === 0 ? 'No findings.' : 'No open finding.') : table(open, 'open'),
    closed.length > 0 ? h('vscode-collapsible', { title: `Resolved and dismissed (${closed.length})`, class: 'closed-findings', open: closed.some((f) => f.id === state.focusFindingId) }, table(closed, 'closed')) : null,
  );
}

function findingRow(detail: LoopDetail, f: FindingView, focus: boolean, send: Send): HTMLElement {
  const location = f.pseudo ? h('span', { class: 'pseudo-path' }, f.file) : h('a', { href: '#', class: 'file-link', 'data-file': f.file, 'data-line': f.line }, `${f.file}:${f.line}`);
  if (!f.pseudo) {
    location.addEventListener('click', (e) => {
      e.preventDefault();
      send({ type: 'openFile', loop: detail.key, file: f.file, line: f.line });
    });
  }
  const actions = h('td', {});
  if (f.status === 'open') {
    actions.append(button('Dismiss', () => send({ type: 'dismissFinding', loop: detail.key, findingId: f.id }), true));
  }
  return h(
    'tr',
    { class: `finding finding-${f.status}${focus ? ' focused' : ''}`, 'data-finding': f.id, id: `finding-${f.id}` },
    h('td', {}, h('span', { class: `severity severity-${f.severity}` }, f.severity)),
    h('td', {}, location),
    h(
      'td',
      {},
      findingText(f.description),
      f.scenario ? h('div', { class: 'muted scenario' }, `Scenario: ${f.scenario}`) : null,
      f.recurrenceCount >= 3 ? h('div', { class: 'recurring' }, `recurring (${f.recurrenceCount}×)`) : null,
    ),
    h('td', {}, f.sectionIndex === null ? '—' : String(f.sectionIndex + 1)),
    h('td', {}, f.status),
    actions,
  );
}

export const formatDuration = (ms: number) => (ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`);
/** passed → pass; cancelled or never run → neutral; anything else failed the check. */
const checkOutcome = (status: string | null) => (status === 'passed' ? 'pass' : status === null || status === 'cancelled' ? 'none' : 'fail');
const CHECK_MARK: Record<string, string> = { pass: '✓', fail: '✗', none: '○' };

function checkBlock(check: CheckView): HTMLElement {
  const outcome = checkOutcome(check.latestStatus);
  const failedRun = check.runs.find((r) => checkOutcome(r.status) === 'fail' && r.outputTail !== '');
  return h(
    'div',
    { class: `check check-${outcome}`, 'data-check': check.checkId },
    h(
      'div',
      { class: 'check-head' },
      h('span', { class: `check-status check-status-${outcome}` }, `${CHECK_MARK[outcome]} ${check.latestStatus ?? 'not run yet'}`),
      ' ',
      h('span', { class: 'check-label' }, check.label),
      check.command !== null && check.command !== check.label ? h('code', { class: 'check-command' }, check.command) : null,
    ),
    check.runs.length === 0
      ? null
      : h(
          'vscode-collapsible',
          { title: `Runs (${check.runs.length})`, class: 'check-runs-part' },
          h(
          'table',
          { class: 'check-runs' },
          h('thead', {}, h('tr', {}, ...['status', 'exit', 'duration', 'gate', 'iteration', 'at'].map((t) => h('th', {}, t)))),
          h(
            'tbody',
            {},
            ...check.runs.map((r) =>
              h(
                'tr',
                { class: `check-run check-run-${checkOutcome(r.status)}`, 'data-check-run': r.id, title: r.message },
                h('td', {}, h('span', { class: `check-status-${checkOutcome(r.status)}` }, r.status)),
                h('td', { class: 'num' }, r.exitCode === null ? '—' : String(r.exitCode)),
                h('td', { class: 'num' }, formatDuration(r.durationMs)),
                h('td', {}, r.gate === 'section' && r.sectionIndex !== null ? `section ${r.sectionIndex + 1}` : r.gate),
                h('td', { class: 'num' }, String(r.iteration)),
                h('td', {}, formatTime(r.startedAt)),
              ),
            ),
          ),
          ),
        ),
    check.olderRuns > 0 ? h('div', { class: 'muted' }, `${check.olderRuns} older run${check.olderRuns === 1 ? '' : 's'} not shown (forge status --json has them all)`) : null,
    failedRun
      ? h(
          'vscode-collapsible',
          {
            title: `Output of the failed run (iteration ${failedRun.iteration}, ${failedRun.message})${failedRun.outputBytes > failedRun.outputTail.length ? ' — its tail' : ''}`,
            class: 'check-output',
            open: outcome === 'fail',
          },
          h('pre', { class: 'check-output-text' }, failedRun.outputTail),
        )
      : null,
  );
}

export function renderChecks(detail: LoopDetail): HTMLElement {
  if (detail.checks.length === 0) {
    // Said, not hidden (issue 28): such a loop completes on the auditor's word alone.
    return part(
      'checks',
      'Checks — none',
      h('p', { class: 'no-checks' }, 'Forge runs no check of its own for this loop, so it completes when the auditor finds nothing. A plan names checks in its "## Verification" part (- `npm test`, - exists: FILE); a goal with --check, --exists, --contains or --matches.'),
    );
  }
  const passing = detail.checks.filter((c) => c.latestStatus === 'passed').length;
  return part(
    'checks',
    `Checks — ${passing}/${detail.checks.length} passing`,
    h('p', { class: 'muted' }, 'Forge runs these itself in the worktree; the loop cannot complete while one fails.'),
    ...detail.checks.map(checkBlock),
  );
}

