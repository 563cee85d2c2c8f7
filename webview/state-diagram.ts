/**
 * The loop's state machine as SVG: the phases, the canonical transitions (faint until
 * taken), and every taken edge with its count from the transition log.
 */
import { DIAGRAM_PHASES, type DiagramEdge } from '../src/vscode/dashboard/protocol';

const SVG = 'http://www.w3.org/2000/svg';

interface Point {
  x: number;
  y: number;
}

const NODE_W = 128;
const NODE_H = 40;
const PLAN_NODES: Record<string, Point> = {
  start: { x: 28, y: 70 },
  coding: { x: 150, y: 70 },
  auditing: { x: 340, y: 70 },
  final_auditing: { x: 530, y: 70 },
  final_audit_fix: { x: 530, y: 200 },
  post_action: { x: 720, y: 70 },
  end: { x: 720, y: 200 },
};

const LABELS: Record<string, string> = {
  coding: 'coding',
  auditing: 'auditing',
  final_auditing: 'final audit',
  final_audit_fix: 'final-audit fix',
  post_action: 'post action',
};

/** Transitions the runtime can take, drawn even when not (yet) taken. */
const CANONICAL: readonly [string, string][] = [
  ['start', 'coding'],
  ['coding', 'auditing'],
  ['auditing', 'coding'],
  ['auditing', 'final_auditing'],
  ['final_auditing', 'final_audit_fix'],
  ['final_audit_fix', 'final_auditing'],
  ['final_auditing', 'post_action'],
  ['final_auditing', 'end'],
  ['post_action', 'end'],
];

/**
 * A goal loop has no sections and no final audit: coding ⇄ auditing, then the end (or its post
 * action). Its diagram shows only those states, the end below the audit.
 */
const GOAL_NODES: Record<string, Point> = {
  start: { x: 28, y: 70 },
  coding: { x: 150, y: 70 },
  auditing: { x: 340, y: 70 },
  post_action: { x: 530, y: 70 },
  end: { x: 530, y: 200 },
};

const GOAL_CANONICAL: readonly [string, string][] = [
  ['start', 'coding'],
  ['coding', 'auditing'],
  ['auditing', 'coding'],
  ['auditing', 'post_action'],
  ['auditing', 'end'],
  ['post_action', 'end'],
];

let NODES = PLAN_NODES;

const nodeId = (phase: string | null, side: 'from' | 'to') => (phase === null ? (side === 'from' ? 'start' : 'end') : phase);

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Where the straight line from a node's centre towards `toward` leaves its box (or circle). */
function boundary(id: string, toward: Point): Point {
  const c = NODES[id]!;
  const dx = toward.x - c.x;
  const dy = toward.y - c.y;
  if (id === 'start' || id === 'end') {
    const r = id === 'start' ? 9 : 14;
    const len = Math.hypot(dx, dy) || 1;
    return { x: c.x + (dx / len) * r, y: c.y + (dy / len) * r };
  }
  const sx = dx === 0 ? Infinity : NODE_W / 2 / Math.abs(dx);
  const sy = dy === 0 ? Infinity : NODE_H / 2 / Math.abs(dy);
  const s = Math.min(sx, sy);
  return { x: c.x + dx * s, y: c.y + dy * s };
}

export interface DiagramInput {
  /** A goal's diagram has no final-audit states. */
  readonly kind: 'plan' | 'goal';
  readonly edges: readonly DiagramEdge[];
  /** The loop's phase when it is running, else null. */
  readonly current: string | null;
  /** Terminal status when the loop ended (labels the end node). */
  readonly ended: string | null;
}

export function renderStateDiagram(input: DiagramInput): SVGSVGElement {
  const goal = input.kind === 'goal';
  NODES = goal ? GOAL_NODES : PLAN_NODES;
  const canonical = goal ? GOAL_CANONICAL : CANONICAL;
  const phases = goal ? DIAGRAM_PHASES.filter((p) => p in GOAL_NODES) : DIAGRAM_PHASES;
  const svg = el('svg', { viewBox: goal ? '0 0 610 250' : '0 0 800 250', class: `state-diagram state-diagram-${input.kind}`, role: 'img', 'aria-label': 'Loop state machine with transition counts' });
  const defs = el('defs', {});
  for (const kind of ['taken', 'idle']) {
    const marker = el('marker', { id: `arrow-${kind}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.append(el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: `arrow arrow-${kind}` }));
    defs.append(marker);
  }
  svg.append(defs);

  const counts = new Map<string, number>();
  for (const e of input.edges) {
    const key = `${nodeId(e.from, 'from')}->${nodeId(e.to, 'to')}`;
    counts.set(key, (counts.get(key) ?? 0) + e.count);
  }
  const keys = new Set<string>(canonical.map(([a, b]) => `${a}->${b}`));
  for (const key of counts.keys()) keys.add(key);

  const edgeLayer = el('g', { class: 'edges' });
  for (const key of keys) {
    const [from, to] = key.split('->') as [string, string];
    if (!NODES[from] || !NODES[to]) continue;
    const count = counts.get(key) ?? 0;
    const group = el('g', { class: `edge ${count > 0 ? 'taken' : 'idle'}`, 'data-edge': key });
    let d: string;
    let label: Point;
    if (from === to) {
      const c = NODES[from]!;
      const top = c.y - NODE_H / 2;
      d = `M ${c.x - 18} ${top} C ${c.x - 30} ${top - 38}, ${c.x + 30} ${top - 38}, ${c.x + 18} ${top}`;
      label = { x: c.x, y: top - 32 };
    } else {
      const a = NODES[from]!;
      const b = NODES[to]!;
      // Bend every edge to its left, so that a→b and b→a are drawn apart.
      const mx = (a.x + b.x) / 2;
      const my = (a.y + b.y) / 2;
      const len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      const bend = 26;
      const ctrl = { x: mx + ((b.y - a.y) / len) * bend, y: my - ((b.x - a.x) / len) * bend };
      const p1 = boundary(from, ctrl);
      const p2 = boundary(to, ctrl);
      d = `M ${p1.x.toFixed(1)} ${p1.y.toFixed(1)} Q ${ctrl.x.toFixed(1)} ${ctrl.y.toFixed(1)} ${p2.x.toFixed(1)} ${p2.y.toFixed(1)}`;
      label = { x: (p1.x + 2 * ctrl.x + p2.x) / 4, y: (p1.y + 2 * ctrl.y + p2.y) / 4 };
    }
    group.append(el('path', { d, class: 'edge-line', 'marker-end': `url(#arrow-${count > 0 ? 'taken' : 'idle'})` }));
    if (count > 0) {
      group.append(el('rect', { x: label.x - 14, y: label.y - 9, width: 28, height: 16, rx: 8, class: 'edge-count-bg' }));
      group.append(el('text', { x: label.x, y: label.y + 3, class: 'edge-count', 'text-anchor': 'middle' }, `×${count}`));
    }
    edgeLayer.append(group);
  }
  svg.append(edgeLayer);

  const nodeLayer = el('g', { class: 'nodes' });
  const start = el('g', { class: 'node terminal-node', 'data-node': 'start' });
  start.append(el('circle', { cx: NODES.start!.x, cy: NODES.start!.y, r: 9, class: 'start-dot' }));
  nodeLayer.append(start);
  for (const phase of phases) {
    const c = NODES[phase]!;
    const classes = ['node', 'phase-node'];
    if (input.current === phase) classes.push('current');
    const g = el('g', { class: classes.join(' '), 'data-node': phase });
    g.append(el('rect', { x: c.x - NODE_W / 2, y: c.y - NODE_H / 2, width: NODE_W, height: NODE_H, rx: 6 }));
    g.append(el('text', { x: c.x, y: c.y + 4, 'text-anchor': 'middle' }, LABELS[phase] ?? phase));
    nodeLayer.append(g);
  }
  const endClasses = ['node', 'terminal-node'];
  if (input.ended) endClasses.push('ended', `ended-${input.ended}`);
  const end = el('g', { class: endClasses.join(' '), 'data-node': 'end' });
  end.append(el('circle', { cx: NODES.end!.x, cy: NODES.end!.y, r: 14, class: 'end-ring' }));
  end.append(el('circle', { cx: NODES.end!.x, cy: NODES.end!.y, r: 8, class: 'end-dot' }));
  end.append(el('text', { x: NODES.end!.x, y: NODES.end!.y + 32, 'text-anchor': 'middle', class: 'end-label' }, input.ended ?? 'end'));
  nodeLayer.append(end);
  svg.append(nodeLayer);
  return svg;
}
