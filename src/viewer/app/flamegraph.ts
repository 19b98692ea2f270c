/**
 * The report's flame graphs (a snapshot's `segments` and `memory` views, the SVGs of
 * `memscope segments` / `memory`), drawn on a canvas as an icicle (the root on top): click a
 * frame to zoom to it (its ancestors span the width above it), "reset" or a click on the root
 * to zoom out; the search box highlights every frame whose name contains the text and gives
 * their total (a match inside another match counts once). Hover names a frame with its weight.
 */
import type { FlameGraphData } from '../../render/flamegraph-data.js';
import type { ReportData } from '../report-data.js';
import { el } from './dom.js';
import { humanBytes, wholeNumber } from './timeline.js';

const ROW = 18;

declare global {
  interface Window {
    /** For tests: the flame view's zoom and search. */
    memscopeFlame?: {
      select(i: number): void;
      zoom(node: number): void;
      zoomed(): number;
      search(text: string): { frames: number; total: number };
      /** Centre of the first node named `name` in the current drawing, in page coordinates. */
      locate(name: string): { x: number; y: number } | null;
      nodes(): number;
    };
  }
}

/** Hue from the name, flamegraph.pl's warm palette. */
function warm(name: string): string {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return `rgb(${205 + (h % 50)},${80 + ((h >> 8) % 130)},${40 + ((h >> 16) % 50)})`;
}

class FlameView {
  private graph: FlameGraphData;
  /** The zoomed node (0: the root). */
  private zoom = 0;
  private matches: Uint8Array | null = null;
  private readonly ctx: CanvasRenderingContext2D;

  constructor(
    private readonly graphs: FlameGraphData[],
    private readonly canvas: HTMLCanvasElement,
    private readonly status: HTMLElement,
    private readonly hover: HTMLElement,
  ) {
    this.graph = graphs[0]!;
    this.ctx = canvas.getContext('2d')!;
    canvas.addEventListener('click', (e) => {
      const n = this.nodeAt(e);
      if (n >= 0) this.setZoom(n);
    });
    canvas.addEventListener('mousemove', (e) => {
      const n = this.nodeAt(e);
      const g = this.graph;
      this.hover.textContent = n < 0 ? '' : `${g.names[g.name[n]!]} · ${humanBytes(g.value[n]!)} · ${percent(g.value[n]!, g.value[0]!)} of all`;
    });
    canvas.addEventListener('mouseleave', () => (this.hover.textContent = ''));
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  select(i: number): void {
    const g = this.graphs[i];
    if (!g) return;
    this.graph = g;
    this.zoom = 0;
    this.matches = null;
    // What the pointer was over belongs to the other graph.
    this.hover.textContent = '';
    this.draw();
  }

  setZoom(node: number): void {
    if (node < 0 || node >= this.graph.value.length) return;
    this.zoom = node;
    this.draw();
  }

  zoomed(): number {
    return this.zoom;
  }

  /** Highlights frames whose name contains `text` (case-insensitive); empty clears. */
  search(text: string): { frames: number; total: number } {
    const q = text.trim().toLowerCase();
    const g = this.graph;
    if (!q) {
      this.matches = null;
      this.draw();
      return { frames: 0, total: 0 };
    }
    const hitName = g.names.map((n) => n.toLowerCase().includes(q));
    const m = new Uint8Array(g.name.length);
    let frames = 0;
    let total = 0;
    // Pre-order: a node's subtree follows it, so the open match (if any) is an ancestor while depth is deeper.
    let coverDepth = -1;
    for (let i = 0; i < m.length; i++) {
      if (coverDepth >= 0 && g.depth[i]! <= coverDepth) coverDepth = -1;
      if (!hitName[g.name[i]!]) continue;
      m[i] = 1;
      frames++;
      if (coverDepth < 0) {
        total += g.value[i]!;
        coverDepth = g.depth[i]!;
      }
    }
    this.matches = m;
    this.lastSearch = { frames, total };
    this.draw();
    return this.lastSearch;
  }

  private lastSearch: { frames: number; total: number } | null = null;

  /** The drawn extent of node `i` in canvas pixels, or null when it is outside the zoomed range or under a pixel. */
  private box(i: number, w: number): { x: number; y: number; w: number } | null {
    const g = this.graph;
    const z = this.zoom;
    const z0 = g.offset[z]!;
    const zw = g.value[z]!;
    const scale = w / zw;
    const x0 = Math.max(g.offset[i]!, z0);
    const x1 = Math.min(g.offset[i]! + g.value[i]!, z0 + zw);
    if (x1 <= x0) return null;
    // Ancestors of the zoomed node overlap its range entirely: they span the width above it.
    const bw = (x1 - x0) * scale;
    if (bw < 0.5) return null;
    return { x: (x0 - z0) * scale, y: g.depth[i]! * ROW * (window.devicePixelRatio || 1), w: bw };
  }

  private nodeAt(e: MouseEvent): number {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const x = (e.clientX - r.left) * dpr;
    const depth = Math.floor((e.clientY - r.top) / ROW);
    const g = this.graph;
    for (let i = 0; i < g.value.length; i++) {
      if (g.depth[i] !== depth) continue;
      const b = this.box(i, this.canvas.width);
      if (b && x >= b.x && x < b.x + b.w) return i;
    }
    return -1;
  }

  locate(name: string): { x: number; y: number } | null {
    const g = this.graph;
    const id = g.names.indexOf(name);
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    for (let i = 0; i < g.value.length; i++) {
      if (g.name[i] !== id) continue;
      const b = this.box(i, this.canvas.width);
      if (b) return { x: r.left + (b.x + b.w / 2) / dpr, y: r.top + (g.depth[i]! + 0.5) * ROW };
    }
    return null;
  }

  draw(): void {
    const g = this.graph;
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    let maxDepth = 0;
    for (const d of g.depth) if (d > maxDepth) maxDepth = d;
    c.style.height = `${(maxDepth + 1) * ROW}px`;
    c.width = Math.max(1, Math.round(c.clientWidth * dpr));
    c.height = Math.round((maxDepth + 1) * ROW * dpr);
    const ctx = this.ctx;
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = 'middle';
    const h = ROW * dpr;
    for (let i = 0; i < g.value.length; i++) {
      const b = this.box(i, c.width);
      if (!b) continue;
      const name = g.names[g.name[i]!]!;
      const hit = this.matches ? this.matches[i] === 1 : true;
      ctx.fillStyle = this.matches ? (hit ? 'rgb(230,60,200)' : 'rgb(225,225,225)') : i === 0 ? 'rgb(200,200,200)' : warm(name);
      ctx.fillRect(b.x, b.y, Math.max(b.w - 1, 0.5), h - 1);
      if (b.w > 30 * dpr) {
        ctx.fillStyle = '#111';
        ctx.save();
        ctx.beginPath();
        ctx.rect(b.x, b.y, b.w - 2, h);
        ctx.clip();
        ctx.fillText(i === 0 ? `${name} (${humanBytes(g.value[0]!)})` : name, b.x + 3 * dpr, b.y + h / 2);
        ctx.restore();
      }
    }
    const z = this.zoom;
    const parts = [`${g.title}. Widths are ${g.unit}.`];
    if (z > 0) parts.push(`Zoomed to ${g.names[g.name[z]!]} (${humanBytes(g.value[z]!)}, ${percent(g.value[z]!, g.value[0]!)} of all).`);
    if (this.matches && this.lastSearch) parts.push(`${wholeNumber(this.lastSearch.frames)} matching frame${this.lastSearch.frames === 1 ? '' : 's'}, ${humanBytes(this.lastSearch.total)} (${percent(this.lastSearch.total, g.value[0]!)} of all).`);
    if (g.dropped) parts.push(`${wholeNumber(g.dropped)} frame${g.dropped === 1 ? '' : 's'} under a millionth of the total ${g.dropped === 1 ? 'is' : 'are'} left out.`);
    this.status.textContent = parts.join(' ');
    c.dataset.zoom = String(z);
  }
}

function percent(part: number, whole: number): string {
  return whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : '0%';
}

/** The flame-graph section: shown when the report has flame graphs, hidden otherwise. */
export function flameGraphs(data: ReportData): void {
  const section = document.getElementById('flames');
  if (!section) return;
  const graphs = data.flames ?? [];
  if (!graphs.length) {
    section.hidden = true;
    return;
  }
  const body = document.getElementById('flames-body')!;
  const select = el('select', { id: 'flame-select', 'aria-label': 'flame graph' });
  graphs.forEach((g, i) => select.append(el('option', { value: String(i) }, g.title.split(':')[0]!)));
  const search = el('input', { id: 'flame-search', type: 'search', placeholder: 'highlight frames containing…', 'aria-label': 'search frames' });
  const reset = el('button', { id: 'flame-reset', type: 'button' }, 'reset zoom');
  const status = el('div', { id: 'flame-status', class: 'muted' });
  const hover = el('div', { id: 'flame-hover', class: 'muted' });
  const canvas = el('canvas', { id: 'flame', 'aria-label': 'flame graph' });
  canvas.style.width = '100%';
  canvas.style.display = 'block';
  canvas.style.cursor = 'pointer';
  body.append(el('div', { class: 'toolbar' }, select, search, reset), status, el('div', { class: 'canvas-wrap' }, canvas), hover);
  const view = new FlameView(graphs, canvas, status, hover);
  select.addEventListener('change', () => {
    view.select(Number(select.value));
    if (search.value) view.search(search.value);
  });
  search.addEventListener('input', () => view.search(search.value));
  reset.addEventListener('click', () => view.setZoom(0));
  view.draw();
  window.memscopeFlame = {
    select: (i) => view.select(i),
    zoom: (n) => view.setZoom(n),
    zoomed: () => view.zoomed(),
    search: (t) => view.search(t),
    locate: (n) => view.locate(n),
    nodes: () => graphs.reduce((s, g) => s + g.value.length, 0),
  };
}
