/**
 * The report page's app. It reads the embedded ReportData, draws the
 * timeline on a canvas and builds the tables. Every string from the data
 * reaches the page through `textContent`, never as HTML.
 */
import type { ReportData } from '../report-data.js';
import { axisBytes, countOf, formatTick, formatTime, humanBytes, niceBytesStep, placeStepLabels, seriesColors, TimelineModel, timeStep, wholeNumber, type ViewRange } from './timeline.js';
import { renderSegments } from './segments.js';
import { flameGraphs } from './flamegraph.js';
import { deviceSelector, deviceSlices, legend, sourceWords, stepLabel, traceAllocationsSection, type DeviceSlice } from './sources.js';
import { el } from './dom.js';
import { MemoryView, allocationMatcher } from './memory-view.js';
import { FrameScheduler, fitCanvas, plotArea, type PlotArea } from './canvas.js';
import { bindPanZoom, clampRange, timeAtPointer, zoomedRange } from './pan-zoom.js';
import { mountQueryBox } from './query-box.js';
import { allocationsSection, kernelsSection, label, leaksSection, location, modulesSection, snapshotAllocationsSection } from './report-tables.js';
import { beginPage, dataComplete, runSignal, showPageError } from './drop.js';
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
      /** True once the sections under the chart are built (after the chart's first paint). */
      sectionsReady: boolean;
    };
  }
}

// Marks for the benchmark: where the time before the first frame goes.
performance.mark('memscope-start');
// The report this run shows: set by start() below, before main() runs.
let data!: ReportData;
const str = (i: number): string => data.strings[i] ?? '';

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
  /** Hovers again where the pointer rests (bindPanZoom); set once the chart is bound. */
  private rehover: () => void = () => {};

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
    this.rehover = bindPanZoom(this.canvas, {
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

  /** Whether the shown device's stack is reserved bytes: allocated plus cached (profiler traces). */
  private stacksReserved(): boolean {
    return this.slice.data.series.some((s) => s.category.startsWith('cached'));
  }

  private hover(e: MouseEvent): void {
    const t = this.timeAt(e.clientX);
    const live = this.model.liveAt(t);
    let total = 0;
    for (const v of live) total += v;
    const tip = this.tooltip;
    tip.replaceChildren();
    tip.append(el('div', { class: 'tip-head' }, `${formatTime(t, data.timeUnit)} · ${humanBytes(total)} ${this.stacksReserved() ? 'reserved' : 'live'}`));
    const rows = el('table');
    this.slice.series.forEach((g, i) => {
      if (live[i] > 0) {
        const s = data.series[g]!;
        const sw = el('span', { class: 'swatch' });
        sw.style.background = this.colors[g];
        rows.append(el('tr', {}, el('td', {}, sw, ` ${label(data, s.device, s.category)}`), el('td', { class: 'num' }, humanBytes(live[i]))));
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
    // A profiler trace stacks allocated and cached bytes: the top is reserved, and the allocated peak is its own.
    const allocated = this.slice.data.series.findIndex((s) => s.category === 'allocated');
    const peak = this.stacksReserved() && allocated >= 0 ? `peak ${humanBytes(this.model.peak)} reserved, ${humanBytes(this.model.seriesPeak[allocated]!)} allocated` : `peak ${humanBytes(this.model.peak)}`;
    this.rangeLabel.textContent = `${formatTime(this.view.t0, data.timeUnit)} – ${formatTime(this.view.t1, data.timeUnit)} · ${countOf(this.model.n, 'event')} · ${peak}`;
    this.frames++;
    this.lastFrameMs = performance.now() - start;
    if (this.frames === 1) this.firstFrameMs = performance.now();
    this.rehover();
  }
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
    document.getElementById('search-count')!.textContent = q ? `${wholeNumber(matches)} allocation${matches === 1 ? '' : 's'} match` : '';
    return matches;
  }
  document.getElementById('search-count')!.textContent = q ? `${matches} match${matches === 1 ? '' : 'es'}` : '';
  return matches;
}

/** Why the source has nothing for the timeline to draw, in words for the page; null when it has. */
function nothingToDraw(d: ReportData): string | null {
  if (d.memory) return d.memory.devices.length ? null : 'Nothing to draw: the snapshot holds no segment and no trace event.';
  if (d.timeline.dt.length) return null;
  return d.source.kind === 'trace'
    ? 'Nothing to draw: the trace has no memory events (PyTorch\u2019s profiler records them with profile_memory=True).'
    : 'Nothing to draw: the capture recorded no allocation.';
}

/** The timeline section when there is nothing to draw: its sentence instead of an empty chart and search. */
function showNothing(why: string): void {
  const section = document.getElementById('timeline-section')!;
  for (const part of Array.from(section.children)) if (part.tagName !== 'H2') (part as HTMLElement).hidden = true;
  section.append(el('p', { id: 'nothing-to-draw' }, why));
  document.getElementById('search')!.parentElement!.hidden = true;
}

/** What `window.memscopeViewer` reports of a page with no chart. */
const NO_CHART = { range: (): ViewRange => ({ t0: 0, t1: 0 }), setRange: (): void => {}, render: (): void => {}, firstFrameMs: 0, frames: 0, lastFrameMs: 0 };

function main(): void {
  header();
  const canvas = document.getElementById('timeline') as HTMLCanvasElement;
  let view: { range(): ViewRange; setRange(t0: number, t1: number): void; render(): void; firstFrameMs: number; frames: number; lastFrameMs: number };
  const nothing = nothingToDraw(data);
  if (nothing) {
    showNothing(nothing);
    view = NO_CHART;
  } else if (data.memory) {
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
    sectionsReady: false,
  } as Window['memscopeViewer'] & object;
  // The chart paints before the tables, flame graphs and state history are built: they sit below
  // it and take as long again as the chart on a large snapshot.
  // They also read the parts of an embedded report that inflate after the chart's columns.
  const viewer = window.memscopeViewer!;
  const run = runSignal();
  const painted = new Promise<void>((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  void Promise.all([painted, dataComplete()]).then(([, complete]) => {
    // A file dropped meanwhile started a new run on a new page body: its own sections replace these.
    if (run.aborted || !complete) return;
    try {
      memoryView?.dataComplete();
      sections();
    } catch (err) {
      showPageError(err);
    }
    viewer.sectionsReady = true;
  });
}

/** The sections under the chart: tables, segments, flame graphs, the state history, search. */
function sections(): void {
  // The query box (docs/QUERY.md).
  if (memoryView) mountQueryBox(data, memoryView);
  if (data.source.kind === 'capture') {
    leaksSection(data);
    modulesSection(data);
  } else {
    // Leaks and modules come from memscope captures only.
    document.getElementById('leaks')!.hidden = true;
    document.getElementById('modules')!.hidden = true;
  }
  // Profiler traces attribute memory to operators, not kernels.
  if (data.source.kind === 'trace') document.querySelector('#kernels > h2')!.textContent = 'Operators by memory added';
  if (data.kernels.length) kernelsSection(data);
  else document.getElementById('kernels')!.hidden = true;
  if (data.memory?.devices.some((d) => d.bytes.length)) snapshotAllocationsSection(data, (device, allocation) => memoryView?.reveal(device, allocation));
  else if (data.memory || !data.allocations.bytes.length) document.getElementById('allocations')!.hidden = true;
  else if (data.source.kind !== 'trace') allocationsSection(data);
  else traceAllocationsSection(data, document.getElementById('allocations-body')!);
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
