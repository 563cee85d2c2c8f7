// The dashboard's Group part (issue 14 part 3, issue 16's group budget): the feature group of the
// selected loop, or the group selected in the Loop Explorer: its progress, spend against its
// budget (the 80 % warning, the budget pause), its integration branch and how many features the
// merge queue merged, and each feature with its status and merge state; a feature's
// loop is a click away. The host makes every text (group-model.ts); this only lays it out.
import type { GroupAction, GroupPanelView, GroupProbe, LoopKey, WebviewToHost } from '../src/vscode/dashboard/protocol';
import { button, h, section } from './dom';

const ACTION_LABEL: Record<GroupAction, string> = { launch: 'Launch Group', resume: 'Resume Group…', cancel: 'Cancel Group' };

export function renderGroup(group: GroupPanelView, selected: LoopKey | null, send: (message: WebviewToHost) => void): HTMLElement {
  const actions = h('div', { class: 'actions' });
  for (const action of group.actions) actions.append(button(ACTION_LABEL[action], () => send({ type: 'groupAction', group: group.key, action }), action === 'cancel'));
  const rows = group.features.map((f) => {
    const current = !!selected && !!f.loop && f.loop.projectId === selected.projectId && f.loop.name === selected.name;
    const row = h(
      'li',
      { class: `group-feature feature-${f.status}${current ? ' current' : ''}${f.loop ? ' has-loop' : ''}`, 'data-feature': f.id, tabindex: f.loop ? 0 : false },
      h('span', { class: `status status-${f.status}` }, f.statusText),
      ' ',
      h('strong', {}, f.id),
      ` — ${f.title}`,
      f.dependsOn.length > 0 ? h('span', { class: 'muted' }, ` · after ${f.dependsOn.join(', ')}`) : null,
      f.loop ? h('span', { class: 'muted' }, ` · loop ${f.loop.name}`) : null,
      f.mergeText ? h('span', { class: `feature-merge merge-${f.mergeState ?? 'none'}` }, ` · ${f.mergeText}`) : null,
      f.error ? h('div', { class: 'feature-error' }, f.error) : null,
    );
    const loop = f.loop;
    if (loop) {
      const select = () => send({ type: 'select', loop });
      row.addEventListener('click', select);
      row.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') select();
      });
    }
    return row;
  });
  const percent = group.total > 0 ? Math.round((group.done / group.total) * 100) : 0;
  const part = section(
    `Group ${group.key.id} — ${group.title}`,
    h(
      'div',
      { class: 'facts' },
      h('span', { class: `status status-group-${group.status}` }, group.statusText),
      h('span', { class: 'group-progress' }, ` · ${group.progressText}`),
      group.mergeText ? h('span', { class: 'group-merged' }, ` · ${group.mergeText}`) : null,
      h('span', { class: `group-spend budget-${group.budgetState}` }, ` · ${group.spendText}`),
      h('span', { class: 'muted' }, ` · at most ${group.maxConcurrent} loops at once · from ${group.source}`),
    ),
    h('progress', { class: 'group-progress-bar', max: 100, value: percent, 'aria-label': group.progressText }),
    group.budgetNote ? h('p', { class: group.budgetState === 'reached' || group.status === 'paused' ? 'warning group-budget-note paused' : 'warning group-budget-note' }, group.budgetNote) : null,
    group.integrationText ? h('p', { class: 'muted group-integration' }, group.integrationText) : null,
    h('ol', { class: 'group-features' }, ...rows),
    group.overlapNote ? h('p', { class: 'warning group-overlap-note' }, group.overlapNote) : null,
    group.overlaps.length > 0 ? h('ul', { class: 'group-overlaps' }, ...group.overlaps.map((o) => h('li', { class: 'group-overlap', 'data-file': o.file }, o.text))) : null,
    group.status === 'review' ? h('p', { class: 'muted' }, `The feature plans wait for review in ${group.reviewDir}; edits count when the group launches.`) : null,
    actions,
  );
  part.classList.add('group-part');
  part.setAttribute('data-group', group.key.id);
  return part;
}

/** What the Group part shows, for the tests' probe (null: no Group part). */
export function groupProbe(root: ParentNode): GroupProbe | null {
  const part = root.querySelector('section.group-part');
  if (!part) return null;
  return {
    id: part.getAttribute('data-group') ?? '',
    status: part.querySelector('.facts .status')?.textContent ?? '',
    progress: (part.querySelector('.group-progress')?.textContent ?? '').replace(/^ · /, ''),
    spend: (part.querySelector('.group-spend')?.textContent ?? '').replace(/^ · /, ''),
    budgetNote: part.querySelector('.group-budget-note')?.textContent ?? null,
    features: Array.from(part.querySelectorAll('li.group-feature')).map((li) => `${li.getAttribute('data-feature')}: ${li.querySelector('.status')?.textContent ?? ''}`),
    merges: Array.from(part.querySelectorAll('li.group-feature'))
      .filter((li) => li.querySelector('.feature-merge'))
      .map((li) => `${li.getAttribute('data-feature')}: ${(li.querySelector('.feature-merge')?.textContent ?? '').replace(/^ · /, '')}`),
    merged: part.querySelector('.group-merged')?.textContent?.replace(/^ · /, '') ?? null,
    integration: part.querySelector('.group-integration')?.textContent ?? null,
    actions: Array.from(part.querySelectorAll('.actions vscode-button')).map((b) => b.textContent ?? ''),
    overlaps: Array.from(part.querySelectorAll('li.group-overlap')).map((li) => li.textContent ?? ''),
  };
}
