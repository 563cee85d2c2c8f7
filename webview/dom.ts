// The webview's DOM helpers, shared by the dashboard's parts (main.ts, group-view.ts): text
// only, never HTML from data; and that text inert (model text: control, escape and bidi
// characters shown as \uXXXX), in children and in tooltips.
import '@vscode-elements/elements/dist/vscode-button/index.js';
import { inertText } from '../src/core/text/inert-text';

/** Attributes whose value the user reads (tooltips, screen readers). */
const SHOWN_ATTRIBUTES = new Set(['title', 'aria-label']);

export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, string | number | boolean>, ...children: Child[]): HTMLElementTagNameMap[K];
export function h(tag: string, attrs?: Record<string, string | number | boolean>, ...children: Child[]): HTMLElement;
export function h(tag: string, attrs: Record<string, string | number | boolean> = {}, ...children: Child[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false) continue;
    node.setAttribute(k, v === true ? '' : SHOWN_ATTRIBUTES.has(k) ? inertText(String(v)) : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(typeof c === 'string' ? inertText(c) : c);
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
