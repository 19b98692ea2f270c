/**
 * The report page's app. It reads the embedded ReportData, draws the
 * timeline on a canvas and builds the tables. Every string from the data
 * reaches the page through `textContent`, never as HTML.
 */
import type { ReportData } from '../report-data.js';
import { TimelineModel, axisBytes, formatTick, formatTime, humanBytes, niceBytesStep, placeStepLabels, seriesColors, timeStep, type ViewRange } from './timeline.js';
import { renderSegments } from './segments.js';
import { flameGraphs } from './flamegraph.js';
import { deviceSelector, deviceSlices, legend, sourceWords, stepLabel, traceAllocationsSection, type DeviceSlice } from './sources.js';
import { el } from './dom.js';
import { MemoryView, allocationMatcher, hexAddress } from './memory-view.js';
import { FrameScheduler, fitCanvas, plotArea, type PlotArea } from './canvas.js';
import { bindPanZoom, clampRange, timeAtPointer, zoomedRange } from './pan-zoom.js';
import { mountQueryBox } from './query-box.js';
import { beginPage, showPageError } from './drop.js';
import { renderHistorySections } from './state-history-sections.js';

declare global {
  interface Window {
    /** For tests and the benchmark: the visible range and render timings. */
    memscopeViewer?: {
      range(): ViewRange;
      setRange(t0: number, t1: number): void;
      firstFrameMs: number;
      frames: number;
      lastFrameMs: number;
      search(text: string): number;
      selectDevice(i: number): void;
      pinned(): number;
      setBytes(y0: number, y1: number): void;
      lastHoverMs: number;
      locate(address: number, start: number): { x: number; y: number } | null;
    };
  }
}

/** A table whose rows carry their searchable text. */
function table(headers: string[], rows: { cells: (string | Node)[]; search: string; detail?: Node }[], numeric: number[] = []): HTMLTableElement {
  const t = el('table');
  const head = el('tr');
  headers.forEach((h, i) => head.append(el('th', numeric.includes(i) ? { class: 'num' } : {}, h)));
  t.append(el('thead', {}, head));
  const body = el('tbody');
  for (const r of rows) {
    // Rows without search text (nested state and per-step tables) are never filtered.
    const tr = el('tr', r.search ? { 'data-search': r.search.toLowerCase() } : {});
    r.cells.forEach((c, i) => tr.append(el('td', numeric.includes(i) ? { class: 'num' } : {}, c)));
    body.append(tr);
    if (r.detail) {
      const dr = el('tr', { class: 'detail', 'data-search': r.search.toLowerCase(), hidden: '' });
      dr.append(el('td', { colspan: String(headers.length) }, r.detail));
      tr.classList.add('expandable');
      tr.addEventListener('click', () => dr.toggleAttribute('hidden'));
      body.append(dr);
    }
  }
  t.append(body);
  return t;
}

function stackList(frames: string[]): HTMLElement {
  const ol = el('ol', { class: 'stack' });
  for (const f of frames) ol.append(el('li', {}, f));
  return ol;
}

function location(frame: string | null): string {
  if (!frame) return '';
  const m = /\(([^()]*:\d+:\d+)\)\s*$/.exec(frame);
  return m ? m[1] : frame;
}

// Marks for the benchmark: where the time before the first frame goes.
performance.mark('memscope-start');
// The report this run shows: set by start() below, before main() runs.
let data!: ReportData;
const str = (i: number): string => data.strings[i] ?? '';
const frames = (stack: number): string[] => (stack >= 0 ? (data.stacks[stack] ?? []).map(str) : []);

function header(): void {
  document.title = data.title;
  document.getElementById('title')!.textContent = data.title;
  document.getElementById('source')!.textContent = `${data.source.file} · ${data.source.detail}`;
  const banner = document.getElementById('truncated')!;
  if (data.truncated) {
    banner.textContent = data.truncated;
    banner.hidden = false;
  }
  const notices = document.getElementById('notices')!;
  for (const n of data.notices) notices.append(el('li', {}, n));
}

class TimelineView {
  private model: TimelineModel;
  /** One chart per device: the shown device's series and events. */
  private readonly slices: DeviceSlice[];
  private slice: DeviceSlice;
  private readonly models = new Map<DeviceSlice, TimelineModel>();
  private readonly colors: string[];
  private readonly ctx: CanvasRenderingContext2D;
  private view: ViewRange;
  private readonly redraw = new FrameScheduler(() => this.render());
  frames = 0;
  firstFrameMs = 0;
  lastFrameMs = 0;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly tooltip: HTMLElement,
    private readonly rangeLabel: HTMLElement,
  ) {
    this.slices = deviceSlices(data);
    this.slice = this.slices[0]!;
    this.model = this.modelOf(this.slice);
    this.colors = seriesColors(data);
    deviceSelector(this.slices, document.getElementById('legend')!, (i) => this.selectDevice(i));
    this.ctx = canvas.getContext('2d')!;
    this.view = { t0: this.model.tMin, t1: this.model.tMax };
    this.bind();
    new ResizeObserver(() => this.schedule()).observe(canvas);
  }

  range(): ViewRange {
    return { ...this.view };
  }

  private modelOf(slice: DeviceSlice): TimelineModel {
    let m = this.models.get(slice);
    if (!m) this.models.set(slice, (m = new TimelineModel(slice.data)));
    return m;
  }

  /** Shows device `i`'s chart over the whole time range. */
  selectDevice(i: number): void {
    const s = this.slices[i];
    if (!s) return;
    this.slice = s;
    this.model = this.modelOf(s);
    legend(data, this.colors, s.series);
    const selector = document.getElementById('device') as HTMLSelectElement | null;
    if (selector) selector.value = String(i);
    this.setRange(this.model.tMin, this.model.tMax);
  }

  /** The device whose chart opens first: the one with the highest peak. */
  busiestDevice(): number {
    const peaks = this.slices.map((s) => this.modelOf(s).peak);
    return peaks.indexOf(Math.max(...peaks));
  }

  setRange(t0: number, t1: number): void {
    const full = this.model.tMax - this.model.tMin;
    this.view = clampRange(t0, t1, this.model.tMin, this.model.tMax, Math.max(full * 1e-7, 1e-6));
    this.schedule();
  }

  private plot(): PlotArea {
    return plotArea(this.canvas);
  }

  private timeAt(clientX: number): number {
    return timeAtPointer(this.canvas, this.view, clientX);
  }

  private bind(): void {
    const reset = (): void => this.setRange(this.model.tMin, this.model.tMax);
    bindPanZoom(this.canvas, {
      view: () => this.view,
      setRange: (t0, t1) => this.setRange(t0, t1),
      reset,
      hover: (e) => this.hover(e),
      leave: () => (this.tooltip.hidden = true),
    });
    document.getElementById('zoom-in')!.addEventListener('click', () => this.zoom(0.5));
    document.getElementById('zoom-out')!.addEventListener('click', () => this.zoom(2));
    document.getElementById('zoom-reset')!.addEventListener('click', reset);
  }

  private zoom(factor: number): void {
    const [t0, t1] = zoomedRange(this.view, factor);
    this.setRange(t0, t1);
  }

  private hover(e: MouseEvent): void {
    const t = this.timeAt(e.clientX);
    const live = this.model.liveAt(t);
    let total = 0;
    for (const v of live) total += v;
    const tip = this.tooltip;
    tip.replaceChildren();
    tip.append(el('div', { class: 'tip-head' }, `${formatTime(t, data.timeUnit)} · ${humanBytes(total)} live`));
    const rows = el('table');
    this.slice.series.forEach((g, i) => {
      if (live[i] > 0) {
        const s = data.series[g]!;
        const sw = el('span', { class: 'swatch' });
        sw.style.background = this.colors[g];
        rows.append(el('tr', {}, el('td', {}, sw, ` ${label(s.device, s.category)}`), el('td', { class: 'num' }, humanBytes(live[i]))));
      }
    });
    tip.append(rows);
    const top = topAllocationsAt(t, 5, new Set(this.slice.series));
    if (top.length) {
      tip.append(el('div', { class: 'tip-head' }, 'largest allocations alive'));
      const list = el('ol', { class: 'tip-allocs' });
      for (const i of top) {
        const where = location(str(data.allocations.site[i])) || str(data.allocations.layer[i]);
        list.append(el('li', {}, [humanBytes(data.allocations.bytes[i]), str(data.allocations.kernel[i]) || '—', where].filter(Boolean).join(' · ')));
      }
      tip.append(list);
    }
    const wrap = this.canvas.parentElement!.getBoundingClientRect();
    tip.hidden = false;
    const x = e.clientX - wrap.left + 14;
    tip.style.left = `${Math.min(x, wrap.width - tip.offsetWidth - 4)}px`;
    tip.style.top = `${e.clientY - wrap.top + 10}px`;
  }

  schedule(): void {
    this.redraw.schedule();
  }

  render(): void {
    const start = performance.now();
    const c = this.canvas;
    const dpr = fitCanvas(c);
    const ctx = this.ctx;
    const p = this.plot();
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, c.width, c.height);
    const cols = Math.max(1, p.w);
    const S = this.model.nSeries;
    const { values, max } = this.model.buckets(this.view, cols);
    const yStep = niceBytesStep(Math.max(max, 1) / 4);
    const yMax = Math.max(yStep, Math.ceil(Math.max(max, 1) / yStep) * yStep);
    const scale = p.h / yMax;

    // Grid and byte axis.
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let v = 0; v <= yMax + 1e-9; v += yStep) {
      const y = p.y + p.h - v * scale;
      ctx.fillStyle = '#eee';
      ctx.fillRect(p.x, Math.round(y), p.w, 1);
      ctx.fillStyle = '#555';
      ctx.fillText(axisBytes(v), p.x - 6 * dpr, y);
    }
    // Stacked columns: one 1-pixel rect per series per column.
    for (let col = 0; col < cols; col++) {
      let acc = 0;
      const base = col * S;
      for (let s = 0; s < S; s++) {
        const v = values[base + s];
        if (v <= 0) continue;
        const y0 = p.y + p.h - acc * scale;
        acc += v;
        const y1 = p.y + p.h - acc * scale;
        ctx.fillStyle = this.colors[this.slice.series[s]!] ?? '#888';
        ctx.fillRect(p.x + col, y1, 1, Math.max(y0 - y1, 0.5));
      }
    }
    // Step markers.
    const span = this.view.t1 - this.view.t0;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    const visibleSteps = data.steps.filter((s) => s.t >= this.view.t0 && s.t <= this.view.t1);
    const lines = visibleSteps.map((s) => p.x + Math.round(((s.t - this.view.t0) / span) * p.w));
    ctx.fillStyle = 'rgba(60,60,60,0.55)';
    for (const x of lines) for (let y = p.y; y < p.y + p.h; y += 6 * dpr) ctx.fillRect(x, y, 1, 3 * dpr);
    const texts = visibleSteps.map(stepLabel);
    const labels = placeStepLabels(lines, texts.map((t) => ctx.measureText(t).width), p.x + p.w, 3 * dpr, 6 * dpr);
    ctx.fillStyle = '#333';
    for (const l of labels) ctx.fillText(texts[l.index]!, l.x, p.y + 2 * dpr);
    // For tests: the drawn labels' spans in canvas pixels.
    c.dataset.stepLabels = labels.map((l) => `${Math.round(l.x)}-${Math.round(l.x + ctx.measureText(texts[l.index]!).width)}`).join(',');
    // Time axis.
    ctx.textAlign = 'center';
    ctx.fillStyle = '#555';
    const tStep = timeStep(span, 6, data.timeUnit);
    for (let k = Math.ceil(this.view.t0 / tStep); k * tStep <= this.view.t1; k++) {
      const t = k * tStep;
      const x = p.x + ((t - this.view.t0) / span) * p.w;
      ctx.fillRect(Math.round(x), p.y + p.h, 1, 4 * dpr);
      ctx.fillText(formatTick(t, tStep, data.timeUnit), x, p.y + p.h + 8 * dpr);
    }
    ctx.fillStyle = '#999';
    ctx.fillRect(p.x, p.y + p.h, p.w, 1);

    c.dataset.t0 = String(this.view.t0);
    c.dataset.t1 = String(this.view.t1);
    this.rangeLabel.textContent = `${formatTime(this.view.t0, data.timeUnit)} – ${formatTime(this.view.t1, data.timeUnit)} · ${this.model.n.toLocaleString('en-US')} events · peak ${humanBytes(this.model.peak)}`;
    this.frames++;
    this.lastFrameMs = performance.now() - start;
    if (this.frames === 1) this.firstFrameMs = performance.now();
  }
}

function label(device: string, category: string): string {
  const devices = new Set(data.series.map((s) => s.device));
  return devices.size > 1 ? `${device} · ${category}` : category;
}

/** Indexes of the `k` largest embedded allocations of `series` alive at `t`. */
function topAllocationsAt(t: number, k: number, series: ReadonlySet<number>): number[] {
  const a = data.allocations;
  const alive: number[] = [];
  for (let i = 0; i < a.t0.length; i++) {
    if (a.t0[i] <= t && (a.t1[i] < 0 || a.t1[i] > t) && series.has(a.series[i])) alive.push(i);
  }
  alive.sort((x, y) => a.bytes[y] - a.bytes[x]);
  return alive.slice(0, k);
}

function leaksSection(): void {
  const box = document.getElementById('leaks-body')!;
  if (data.leaks.length === 0) {
    box.append(el('p', { class: 'muted' }, data.leakNote ? `No verdict: ${data.leakNote}.` : `No leaks: no unowned storage kept growing across ${data.steps.length} steps.`));
    return;
  }
  data.leaks.forEach((g, i) => {
    const where = location(g.userFrame) || (g.layer ? `layer ${g.layer}` : 'unknown site (record with --stacks)');
    const card = el('div', { class: 'leak', 'data-search': [g.kernel, g.layer, ...g.frames].join(' ').toLowerCase() });
    card.append(el('div', { class: 'leak-head' }, `#${i + 1} ${humanBytes(g.bytes)} in ${g.count} storage${g.count === 1 ? '' : 's'} · kernel ${g.kernel ?? '(none)'} · ${g.device} · ${g.categories.join('/')}`));
    card.append(el('div', {}, 'allocated at ', el('code', { class: 'leak-site' }, where)));
    card.append(
      table(
        ['step', 'still alive', 'bytes', 'live at step end'],
        g.perStep.map((r) => ({ cells: [String(r.step), String(r.count), humanBytes(r.bytes), humanBytes(g.liveAtStepEnd[r.step - 1] ?? 0)], search: '' })),
        [0, 1, 2, 3],
      ),
    );
    if (g.frames.length) card.append(el('details', {}, el('summary', {}, `stack (${g.frames.length} frames)`), stackList(g.frames)));
    box.append(card);
  });
}

function modulesSection(): void {
  const box = document.getElementById('modules-body')!;
  if (data.modules.length === 0) {
    box.append(el('p', { class: 'muted' }, 'No modules were tracked (the program used no tfjs-layers model, or the source has none).'));
    return;
  }
  const peak = (r: Record<string, number>) => Object.entries(r).map(([d, b]) => (Object.keys(r).length > 1 ? `${d} ${humanBytes(b)}` : humanBytes(b))).join(', ') || '—';
  const rows = data.modules.map((m) => {
    const name = el('span', { class: 'module-name' }, m.path);
    name.style.paddingLeft = `${m.depth * 16}px`;
    return {
      cells: [name, m.className, humanBytes(m.parameterBytes), humanBytes(m.bufferBytes), peak(m.localPeakForward), peak(m.localPeakBackward)],
      search: `${m.path} ${m.className}`,
      detail: stateTable(m.states),
    };
  });
  box.append(table(['module', 'class', 'parameters', 'buffers', 'local peak fwd', 'local peak bwd'], rows, [2, 3, 4, 5]));
  box.append(el('p', { class: 'muted' }, 'Click a module for its state snapshots (Pre/Post/Peak Forward and Backward, by category).'));
}

function stateTable(states: ReportData['modules'][number]['states']): Node {
  // MemTracker's order of states.
  const ORDER = ['Pre-Forward', 'Post-Forward', 'Peak-Forward', 'Pre-Backward', 'Post-Backward', 'Peak-Backward'];
  const rank = (n: string) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  const names = Object.keys(states).sort((a, b) => rank(a) - rank(b));
  if (!names.length) return el('span', { class: 'muted' }, 'no state recorded (the module never ran)');
  const cats = new Set<string>();
  const devices = new Set<string>();
  for (const st of Object.values(states)) for (const [d, row] of Object.entries(st)) {
    devices.add(d);
    for (const c of Object.keys(row)) cats.add(c);
  }
  const catList = [...cats];
  const rows: { cells: string[]; search: string }[] = [];
  for (const n of names) for (const d of devices) {
    const row = states[n][d] ?? {};
    const total = Object.values(row).reduce((a, b) => a + b, 0);
    rows.push({ cells: [n, d, ...catList.map((c) => humanBytes(row[c] ?? 0)), humanBytes(total)], search: '' });
  }
  return table(['state', 'device', ...catList, 'Total'], rows, catList.map((_, i) => i + 2).concat(catList.length + 2));
}

function kernelsSection(): void {
  const box = document.getElementById('kernels-body')!;
  if (!data.kernels.length) {
    box.append(el('p', { class: 'muted' }, 'No kernel statistics in this source.'));
    return;
  }
  // PyTorch traces attribute memory to CPU operators (self / inclusive), not to kernel calls.
  const headers =
    data.source.kind === 'trace'
      ? ['operator', 'allocations', 'self bytes allocated', 'self net', 'inclusive net']
      : ['kernel', 'calls', 'bytes allocated', 'alive at end', 'largest growth in one call'];
  box.append(
    table(
      headers,
      data.kernels.map((k) => ({ cells: [k.name, k.calls ? k.calls.toLocaleString('en-US') : '—', humanBytes(k.bytesAllocated), humanBytes(k.bytesRetained), humanBytes(k.peakAdded)], search: k.name })),
      [1, 2, 3, 4],
    ),
  );
}

function allocationsSection(): void {
  const box = document.getElementById('allocations-body')!;
  const a = data.allocations;
  const order = a.bytes.map((_, i) => i).sort((x, y) => a.bytes[y] - a.bytes[x]).slice(0, 100);
  if (!order.length) {
    box.append(el('p', { class: 'muted' }, 'No allocations in this source.'));
    return;
  }
  const rows = order.map((i) => {
    const fr = frames(a.stack[i]);
    const s = data.series[a.series[i]];
    return {
      cells: [
        humanBytes(a.bytes[i]),
        s ? label(s.device, s.category) : '',
        str(a.layer[i]) || '—',
        str(a.kernel[i]) || '—',
        formatTime(a.t0[i], data.timeUnit),
        a.t1[i] < 0 ? 'alive at end' : formatTime(a.t1[i], data.timeUnit),
        // The site (computed with the report: src/core/site-rule.ts); a stack wholly inside the framework has none.
        location(str(a.site[i])) || (fr.length ? 'framework frames only' : '—'),
      ],
      search: [str(a.layer[i]), str(a.kernel[i]), ...fr].join(' '),
      detail: fr.length ? stackList(fr) : undefined,
    };
  });
  box.append(el('p', { class: 'muted' }, `The ${order.length} largest of ${data.allocationsTotal.toLocaleString('en-US')} allocations. Click a row for its stack.`));
  box.append(table(['bytes', 'category', 'layer', 'kernel', 'allocated', 'freed', 'site'], rows, [0]));
}

/** PyTorch snapshots: the largest allocations of every device, those live before the trace included. */
function snapshotAllocationsSection(): void {
  const box = document.getElementById('allocations-body')!;
  const devices = data.memory!.devices;
  const all: [number, number][] = [];
  devices.forEach((d, di) => d.bytes.forEach((_, a) => all.push([di, a])));
  all.sort((x, y) => devices[y[0]].bytes[y[1]] - devices[x[0]].bytes[x[1]]);
  const top = all.slice(0, 100);
  if (!top.length) {
    box.append(el('p', { class: 'muted' }, 'No allocations in this source.'));
    return;
  }
  // Each device's event times, summed once (a row's time is the sum of its device's deltas so far).
  const times = new Map<(typeof devices)[number], Float64Array>();
  const when = (d: (typeof devices)[number], event: number, none: string): string => {
    if (event < 0) return none;
    let t = times.get(d);
    if (!t) {
      t = new Float64Array(d.eventDt.length);
      let us = 0;
      for (let i = 0; i < t.length; i++) t[i] = us += d.eventDt[i];
      times.set(d, t);
    }
    return formatTime((t.length ? t[Math.min(event, t.length - 1)] : 0) / 1000, data.timeUnit);
  };
  const rows = top.map(([di, a]) => {
    const d = devices[di];
    const fr = frames(d.stack[a]);
    const site = str(d.site[a]) || '(no frames recorded)';
    const show = el('button', { type: 'button', class: 'show-alloc' }, 'show');
    show.addEventListener('click', (e) => {
      e.stopPropagation();
      memoryView?.reveal(di, a);
    });
    return {
      cells: [humanBytes(d.bytes[a]), d.device, hexAddress(d.address[a]), when(d, d.start[a], 'before the trace'), when(d, d.end[a], 'alive at end'), site, show],
      search: [site, hexAddress(d.address[a]), ...fr].join(' '),
      detail: fr.length ? stackList(fr) : undefined,
    };
  });
  box.append(el('p', { class: 'muted' }, `The ${top.length} largest of ${data.allocationsTotal.toLocaleString('en-US')} allocations (blocks live before the trace began included). Click a row for its stack, "show" to pin it on the timeline.`));
  box.append(table(['bytes', 'device', 'address', 'allocated', 'freed', 'site', ''], rows, [0]));
}

let memoryView: MemoryView | null = null;
let timelineView: TimelineView | null = null;

function search(text: string): number {
  const q = text.trim().toLowerCase();
  let matches = 0;
  for (const node of Array.from(document.querySelectorAll<HTMLElement>('[data-search]'))) {
    const hit = !q || (node.dataset.search ?? '').includes(q);
    if (node.classList.contains('detail')) {
      if (!hit) node.hidden = true;
      continue;
    }
    node.classList.toggle('filtered', !hit);
    if (hit && q && node.tagName === 'TR') matches++;
    if (hit && q && node.classList.contains('leak')) matches++;
  }
  // Snapshots: the count is over every allocation, not the rows shown.
  if (memoryView) {
    matches = memoryView.highlight(allocationMatcher(data, text));
    document.getElementById('search-count')!.textContent = q ? `${matches.toLocaleString('en-US')} allocation${matches === 1 ? '' : 's'} match` : '';
    return matches;
  }
  document.getElementById('search-count')!.textContent = q ? `${matches} match${matches === 1 ? '' : 'es'}` : '';
  return matches;
}

function main(): void {
  header();
  const canvas = document.getElementById('timeline') as HTMLCanvasElement;
  let view: { range(): ViewRange; setRange(t0: number, t1: number): void; render(): void; firstFrameMs: number; frames: number; lastFrameMs: number };
  if (data.memory) {
    document.querySelector('#timeline-section > h2')!.textContent = 'Active Memory Timeline';
    const help = document.querySelector('#timeline-section > p.muted');
    if (help) help.textContent = 'One band per allocation, stacked in allocation order over the blocks live before the trace. Wheel to zoom time, shift+wheel to zoom bytes (allocations under a pixel are summed per site, then in "smaller allocations"), drag to pan, double-click to reset; hover for an allocation, click to pin it.';
    // Taller than the category chart: a band per allocation needs the pixels.
    canvas.style.height = '520px';
    const pinBox = el('div', { id: 'pinned', hidden: '' });
    canvas.parentElement!.after(pinBox);
    const mv = new MemoryView(data, canvas, document.getElementById('tooltip')!, document.getElementById('range')!, pinBox, document.getElementById('legend')!);
    document.getElementById('zoom-in')!.addEventListener('click', () => mv.zoom(0.5));
    document.getElementById('zoom-out')!.addEventListener('click', () => mv.zoom(2));
    document.getElementById('zoom-reset')!.addEventListener('click', () => mv.reset());
    memoryView = mv;
    // The query box (docs/QUERY.md).
    mountQueryBox(data, mv);
    performance.mark('memscope-model');
    view = mv;
    document.getElementById('search')!.setAttribute('placeholder', 'search frames, 0xADDRESS or sizes (1MiB..2GiB, >1GiB)');
  } else {
    const tv = new TimelineView(canvas, document.getElementById('tooltip')!, document.getElementById('range')!);
    timelineView = tv;
    view = tv;
    tv.selectDevice(tv.busiestDevice());
  }
  view.render();
  window.memscopeViewer = {
    range: () => view.range(),
    setRange: (t0, t1) => view.setRange(t0, t1),
    get firstFrameMs() {
      return view.firstFrameMs;
    },
    get frames() {
      return view.frames;
    },
    get lastFrameMs() {
      return view.lastFrameMs;
    },
    search,
    selectDevice: (i: number) => (memoryView ? memoryView.selectDevice(i) : timelineView?.selectDevice(i)),
    pinned: () => memoryView?.pinnedAllocation() ?? -1,
    setBytes: (y0: number, y1: number) => memoryView?.setBytes(y0, y1),
    get lastHoverMs() {
      return memoryView?.lastHoverMs ?? 0;
    },
    locate: (address: number, start: number) => (memoryView ? memoryView.locate(memoryView.allocationIndex(address, start)) : null),
  } as Window['memscopeViewer'] & object;
  if (data.source.kind === 'capture') {
    leaksSection();
    modulesSection();
  } else {
    // Leaks and modules come from memscope captures only.
    document.getElementById('leaks')!.hidden = true;
    document.getElementById('modules')!.hidden = true;
  }
  // Profiler traces attribute memory to operators, not kernels.
  if (data.source.kind === 'trace') document.querySelector('#kernels > h2')!.textContent = 'Operators by memory added';
  if (data.kernels.length || data.source.kind !== 'snapshot') kernelsSection();
  else document.getElementById('kernels')!.hidden = true;
  if (data.memory) snapshotAllocationsSection();
  else if (data.source.kind !== 'trace') allocationsSection();
  else if (data.allocations.bytes.length) traceAllocationsSection(data, document.getElementById('allocations-body')!);
  else document.getElementById('allocations')!.hidden = true;
  sourceWords(data);
  flameGraphs(data);
  if (data.segments.length) renderSegments(document.getElementById('segments-body')!, data);
  else document.getElementById('segments')!.hidden = true;
  // Allocator State History, Active Cached Segment Timeline, allocator settings (state-history-sections.ts).
  renderHistorySections(data);
  const input = document.getElementById('search') as HTMLInputElement;
  input.addEventListener('input', () => search(input.value));
}

/** Runs the app on `shown` (null: the empty viewer, or a read that failed or was superseded). */
function start(shown: ReportData | null): void {
  performance.mark('memscope-parsed');
  if (!shown) return;
  data = shown;
  try {
    main();
  } catch (err) {
    // Data the app cannot draw (a damaged page) gets the page's one error line, not a stack trace.
    showPageError(err);
  }
}

// The embedded report (read asynchronously: its columns inflate), or a file dropped on the page (drop.ts, at once).
const shown = beginPage();
if (shown instanceof Promise) void shown.then(start);
else start(shown);
