// The webview's DOM helpers, shared by the dashboard's parts (main.ts, group-view.ts): text
// only, never HTML from data.
import '@vscode-elements/elements/dist/vscode-button/index.js';

export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, string | number | boolean>, ...children: Child[]): HTMLElementTagNameMap[K];
export function h(tag: string, attrs?: Record<string, string | number | boolean>, ...children: Child[]): HTMLElement;
export function h(tag: string, attrs: Record<string, string | number | boolean> = {}, ...children: Child[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false) continue;
    node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(c);
  return node;
}

export function button(label: string, onClick: () => void, secondary = false): HTMLElement {
  const b = h('vscode-button', secondary ? { secondary: true } : {}, label);
  b.addEventListener('click', onClick);
  return b;
}

export function statusChip(status: string): HTMLElement {
  return h('span', { class: `status status-${status}` }, status);
}

export function section(title: string, ...children: Child[]): HTMLElement {
  return h('section', { class: 'panel' }, h('h3', {}, title), ...children);
}
