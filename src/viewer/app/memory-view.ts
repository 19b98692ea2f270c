/**
 * The Active Memory Timeline on the page: one chart per device (a selector when there are
 * several), wheel/drag zoom on time, hover for the allocation under the pointer, click to pin it,
 * search highlighting. The drawing is src/viewer/app/allocation-timeline.ts's.
 */
import type { ReportData } from '../report-data.js';
import { DeviceTimeline, SUMMARISED, deviceTimelines, summedGroup } from './allocation-timeline.js';
import { SMALLER_COLOR } from './band-colors.js';
import { el } from './dom.js';
import { allocationPhase } from '../query.js';
import { axisBytes, countOf, formatTick, formatTime, humanBytes, niceBytesStep, timeStep, wholeNumber, type ViewRange } from './timeline.js';
import { FrameScheduler, fitCanvas, plotArea, type PlotArea } from './canvas.js';
import { bindPanZoom, clampRange, zoomedRange } from './pan-zoom.js';
import { OverviewStrip } from './overview.js';
import { drawOomMarks, oomAt, oomMarks, oomText, type OomMark } from './state-history-oom.js';

const NO_SITE = '(no frames recorded)';

export function hexAddress(a: number): string {
  return a < 0 ? 'unknown' : `0x${a.toString(16)}`;
}

/** Parses "512KiB", "1.5 GiB", "4096" into bytes (NaN if it is not a size). */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kib|kb|k|mib|mb|m|gib|gb|g|tib|tb|t)?\s*$/i.exec(text);
  if (!m) return NaN;
  const unit = (m[2] ?? 'b').toLowerCase()[0];
  const mult = unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : unit === 't' ? 1024 ** 4 : 1;
  return parseFloat(m[1]) * mult;
}

/**
 * A search query over allocations: `0x…` an address inside the block, `A..B` / `>A` / `<B` a
 * size range (units KiB, MiB, GiB), anything else text in the site or any frame of the stack.
 */
export function allocationMatcher(data: ReportData, query: string): ((dev: number, a: number) => boolean) | null {
  const q = query.trim().toLowerCase();
  if (!q || !data.memory) return null;
  const devices = data.memory.devices;
  if (/^0x[0-9a-f]+$/.test(q)) {
    const addr = parseInt(q.slice(2), 16);
    return (d, a) => devices[d].address[a] >= 0 && addr >= devices[d].address[a] && addr < devices[d].address[a] + devices[d].bytes[a];
  }
  const range = /^(.*?)\s*\.\.\s*(.*)$/.exec(q);
  const cmp = /^([<>]=?)\s*(.+)$/.exec(q);
  if (range || cmp) {
    let lo = 0;
    let hi = Infinity;
    if (range) {
      lo = range[1] ? parseSize(range[1]) : 0;
      hi = range[2] ? parseSize(range[2]) : Infinity;
    } else {
      const v = parseSize(cmp![2]);
      if (cmp![1].startsWith('>')) lo = cmp![1] === '>' ? v + 1 : v;
      else hi = cmp![1] === '<' ? v - 1 : v;
    }
    if (!Number.isNaN(lo) && !Number.isNaN(hi)) return (d, a) => devices[d].bytes[a] >= lo && devices[d].bytes[a] <= hi;
  }
  const stackHit = new Map<number, boolean>();
  const stackMatches = (s: number): boolean => {
    let hit = stackHit.get(s);
    if (hit === undefined) {
      hit = s >= 0 && (data.stacks[s] ?? []).some((f) => data.strings[f].toLowerCase().includes(q));
      stackHit.set(s, hit);
    }
    return hit;
  };
  return (d, a) => stackMatches(devices[d].stack[a]) || data.strings[devices[d].site[a]].toLowerCase().includes(q);
}

export class MemoryView {
  private readonly devices: DeviceTimeline[];
  private device = 0;
  private readonly ctx: CanvasRenderingContext2D;
  private view: ViewRange;
  private readonly redraw = new FrameScheduler(() => this.render());
  private image: ImageData | null = null;
  private pinned = -1;
  private matches: Uint8Array[] | null = null;
  /** Byte range shown (null: 0 to the device's peak). */
  private yView: { y0: number; y1: number } | null = null;
  private lastPlot = { x: 0, y: 0, w: 1, h: 1, y0: 0, yMax: 1, t0: 0, t1: 1 };
  frames = 0;
  /**
   * Whether every column of the data can be read. Until then (an embedded report's buffer still
   * inflating) the chart draws, pans and zooms, and hover and click wait: they read addresses and stacks.
   */
  private complete = false;
  /** Time the last hover took to find the allocation and fill the tooltip (layout excluded). */
  lastHoverMs = 0;
  firstFrameMs = 0;
  lastFrameMs = 0;
  /** Hovers again where the pointer rests (bindPanZoom); set once the chart is bound. */
  private rehover: () => void = () => {};

  constructor(
    private readonly data: ReportData,
    private readonly canvas: HTMLCanvasElement,
    private readonly tooltip: HTMLElement,
    private readonly rangeLabel: HTMLElement,
    private readonly pinBox: HTMLElement,
    legend: HTMLElement,
  ) {
    this.devices = deviceTimelines(data);
    this.ooms = this.devices.map((d, i) => oomMarks(data, i, (e) => d.timeAt(e)));
    // The bands are pixels the app writes (putImageData): a CPU-backed canvas takes them without a GPU round trip.
    this.ctx = canvas.getContext('2d', { willReadFrequently: true })!;
    const d = this.dev();
    this.view = { t0: d.tMin, t1: d.tMax };
    if (this.devices.length > 1) {
      const select = el('select', { id: 'device', 'aria-label': 'device' });
      this.devices.forEach((dv, i) => select.append(el('option', { value: String(i) }, dv.data.device)));
      select.addEventListener('change', () => this.selectDevice(Number(select.value)));
      legend.before(el('label', {}, 'device ', select));
    }
    const smaller = el('span', { class: 'swatch', id: 'smaller-swatch' });
    smaller.style.background = `repeating-linear-gradient(135deg, ${SMALLER_COLOR} 0 3px, #a6a6a6 3px 4px)`;
    legend.append(
      el('span', { class: 'legend-item', id: 'band-legend' }, 'one band per allocation a pixel tall or more, coloured by site; lighter: a site\u2019s allocations under a pixel, summed;'),
      el('span', { class: 'legend-item' }, smaller, 'smaller allocations (sites under a pixel, summed);'),
      el('span', { class: 'legend-item' }, 'line: reserved; red marks: search matches under a pixel'),
    );
    this.siteLegend = el('div', { class: 'toolbar', id: 'site-legend' });
    legend.parentElement!.after(this.siteLegend);
    this.fillSiteLegend();
    // The overview strip sits right under the chart.
    const strip = el('canvas', { id: 'overview', 'aria-label': 'overview of the whole run; drag the window to pan, its edges to zoom' }) as HTMLCanvasElement;
    canvas.parentElement!.after(strip);
    this.overview = new OverviewStrip(strip, {
      extent: () => ({ t0: this.dev().tMin, t1: this.dev().tMax }),
      profile: (cols) => this.dev().profile(cols),
      range: () => this.range(),
      setRange: (t0, t1) => this.setRange(t0, t1),
      key: () => String(this.device),
    });
    new ResizeObserver(() => this.schedule()).observe(strip);
    this.bind();
    new ResizeObserver(() => this.schedule()).observe(canvas);
  }

  /** Every column of the data can be read from now on (see `complete`). */
  dataComplete(): void {
    this.complete = true;
  }

  private siteLegend: HTMLElement | null = null;
  private readonly overview: OverviewStrip;
  /** Per device: its out-of-memory events, marked on the chart (state-history-oom.ts). */
  private readonly ooms: OomMark[][];

  /** The sites holding the most bytes over the device's allocations, with their colours. */
  private fillSiteLegend(): void {
    const box = this.siteLegend;
    if (!box) return;
    // The device's site groups come ranked by the bytes their sites allocate.
    const d = this.dev();
    const top = d.groupSite.flatMap((site, g) => (site >= 0 ? [[site, d.groupBytes[g]!] as const] : [])).slice(0, 8);
    box.replaceChildren(el('span', { class: 'muted' }, 'sites allocating the most:'));
    for (const [site, bytes] of top) {
      const sw = el('span', { class: 'swatch' });
      sw.style.background = d.siteColor(site);
      box.append(el('span', { class: 'legend-item' }, sw, ` ${this.str(site) || NO_SITE} (${humanBytes(bytes)})`));
    }
  }

  private dev(): DeviceTimeline {
    return this.devices[this.device];
  }

  selectDevice(i: number): void {
    if (i < 0 || i >= this.devices.length) return;
    this.device = i;
    this.fillSiteLegend();
    this.pin(-1);
    this.view = { t0: this.dev().tMin, t1: this.dev().tMax };
    this.schedule();
  }

  range(): ViewRange {
    return { ...this.view };
  }

  setRange(t0: number, t1: number): void {
    const d = this.dev();
    // Down to a few microseconds (the trace's clock) or a few events across the plot.
    this.view = clampRange(t0, t1, d.tMin, d.tMax, this.data.timeUnit === 'event' ? 4 : 0.004);
    this.schedule();
  }

  private plot(): PlotArea {
    return plotArea(this.canvas);
  }

  private bind(): void {
    this.rehover = bindPanZoom(this.canvas, {
      view: () => this.view,
      setRange: (t0, t1) => this.setRange(t0, t1),
      reset: () => this.reset(),
      hover: (e) => this.hover(e.clientX, e.clientY),
      leave: () => (this.tooltip.hidden = true),
      // A click on the chart pins the allocation under the pointer, or unpins.
      click: (e) => this.complete && this.pin(this.allocationAt(e.clientX, e.clientY)),
      // Shift+wheel zooms the byte axis, so allocations thinner than a pixel get their own bands.
      shiftWheel: (e, factor) => {
        const rect = this.canvas.getBoundingClientRect();
        const lp = this.lastPlot;
        const frac = 1 - Math.max(0, Math.min(1, ((e.clientY - rect.top) * (window.devicePixelRatio || 1) - lp.y) / lp.h));
        const anchor = lp.y0 + frac * (lp.yMax - lp.y0);
        this.setBytes(anchor - (anchor - lp.y0) * factor, anchor + (lp.yMax - anchor) * factor);
      },
    });
  }

  zoom(factor: number): void {
    const [t0, t1] = zoomedRange(this.view, factor);
    this.setRange(t0, t1);
  }

  reset(): void {
    this.yView = null;
    this.setRange(this.dev().tMin, this.dev().tMax);
  }

  /** Shows bytes [y0, y1] (clamped to 0 … the device's peak; at least 1 KiB tall). */
  setBytes(y0: number, y1: number): void {
    const full = this.fullBytes();
    const span = Math.min(full, Math.max(1024, y1 - y0));
    const start = Math.max(0, Math.min(y0, full - span));
    this.yView = span >= full ? null : { y0: start, y1: start + span };
    this.schedule();
  }

  private fullBytes(): number {
    const d = this.dev().data;
    const peak = Math.max(d.peakAllocated, d.peakReserved, 1);
    const step = niceBytesStep(peak / 4);
    return Math.ceil(peak / step) * step;
  }

  /** The allocation under a page point: its index, SUMMARISED, or -1. */
  allocationAt(clientX: number, clientY: number): number {
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const lp = this.lastPlot;
    const col = Math.floor((clientX - rect.left) * dpr - lp.x);
    const row = (clientY - rect.top) * dpr - lp.y;
    if (col < 0 || col >= lp.w || row < 0 || row >= lp.h) return -1;
    const bytes = lp.y0 + ((lp.h - row) / lp.h) * (lp.yMax - lp.y0);
    return this.dev().lastFrame.at(col, bytes);
  }

  /** The plot's pixel column under `clientX`. */
  private columnAt(clientX: number): number {
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    return Math.max(0, Math.min(this.lastPlot.w - 1, Math.floor((clientX - rect.left) * dpr - this.lastPlot.x)));
  }

  /** The time at the centre of the pixel column under `clientX`. */
  private columnTime(clientX: number): number {
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const lp = this.lastPlot;
    const col = Math.floor((clientX - rect.left) * dpr - lp.x);
    return lp.t0 + ((col + 0.5) / lp.w) * (lp.t1 - lp.t0);
  }

  private str(i: number): string {
    return this.data.strings[i] ?? '';
  }

  site(a: number): string {
    return this.str(this.dev().data.site[a]) || NO_SITE;
  }

  private when(event: number, none: string): string {
    const d = this.dev();
    if (event < 0 || event >= d.n) return none;
    return `${formatTime(d.timeAt(event), this.data.timeUnit)} (event ${wholeNumber(event)})`;
  }

  /** Size, address, times, site and the stack: the user's frames first, the internals folded. */
  details(a: number, full: boolean): HTMLElement {
    const d = this.dev();
    const box = el('div', { class: 'alloc-detail' });
    const sw = el('span', { class: 'swatch' });
    sw.style.background = d.colorHex(a);
    box.append(el('div', { class: 'tip-head' }, sw, ` ${humanBytes(d.bytes[a])} at ${hexAddress(d.data.address[a])}`));
    box.append(el('div', {}, `allocated ${this.when(d.start[a], 'before the trace began')} · freed ${this.when(d.end[a], 'never (live at the end)')}`));
    box.append(el('div', {}, 'site ', el('code', { class: 'alloc-site' }, this.site(a))));
    const facets = d.data.facets;
    if (facets) box.append(el('div', { class: 'alloc-category' }, `category ${facets.categoryNames[facets.category[a]]} (inferred) · phase ${allocationPhase(facets, d.start[a]).phase} · stream ${facets.stream[a]} · pool ${this.str(facets.pool[a])}`));
    const stack = d.data.stack[a];
    const frames = stack >= 0 ? (this.data.stacks[stack] ?? []).map((i) => this.str(i)) : [];
    const folded = stack >= 0 ? (this.data.memory?.stackFolded[stack] ?? 0) : 0;
    const user = frames.slice(folded);
    const shown = full ? user : user.slice(0, 8);
    const ol = el('ol', { class: 'stack' });
    for (const f of shown) ol.append(el('li', {}, f));
    if (shown.length) box.append(ol);
    if (user.length > shown.length) box.append(el('div', { class: 'muted' }, `… ${user.length - shown.length} more callers (click to pin and see all)`));
    if (folded > 0) {
      const inner = el('ol', { class: 'stack' });
      for (const f of frames.slice(0, folded)) inner.append(el('li', {}, f));
      const det = el('details', { class: 'folded' }, el('summary', {}, `${folded} allocator/framework frame${folded === 1 ? '' : 's'} (innermost)`), inner);
      box.append(det);
    }
    return box;
  }

  private hover(clientX: number, clientY: number): void {
    const started = performance.now();
    this.showTip(clientX, clientY);
    this.lastHoverMs = performance.now() - started;
  }

  private showTip(clientX: number, clientY: number): void {
    const tip = this.tooltip;
    if (!this.complete) {
      // Addresses and stacks are still inflating: say so rather than read them.
      tip.replaceChildren(el('div', { class: 'muted' }, 'reading the rest of the report…'));
      this.placeTip(clientX, clientY);
      return;
    }
    const a = this.allocationAt(clientX, clientY);
    const dpr = window.devicePixelRatio || 1;
    const oom = oomAt(this.ooms[this.device], this.lastPlot, this.lastPlot, (clientX - this.canvas.getBoundingClientRect().left) * dpr, dpr);
    if (a === -1 && !oom) {
      tip.hidden = true;
      return;
    }
    tip.replaceChildren();
    if (oom) tip.append(el('div', { class: 'tip-head oom-tip' }, oomText(oom, this.data.timeUnit)));
    const group = summedGroup(a);
    if (a === SUMMARISED || group >= 0) {
      const d = this.dev();
      const col = this.columnAt(clientX);
      const m = d.lastFrame.moment[col] ?? 0;
      const t = m > 0 ? d.timeAt(m - 1) : this.columnTime(clientX);
      const { count, bytes, largest } = d.smallLiveAt(m, d.lastFrame.threshold, group, 5);
      const what = group >= 0 ? `from ${d.groupSite[group] < 0 ? 'other sites' : this.str(d.groupSite[group]) || NO_SITE}` : 'summed in "smaller allocations"';
      const sw = el('span', { class: 'swatch' });
      sw.style.background = group >= 0 ? d.summedColor(group) : SMALLER_COLOR;
      tip.append(el('div', { class: 'tip-head' }, sw, ` ${humanBytes(bytes)} in ${wholeNumber(count)} allocation${count === 1 ? '' : 's'} under a pixel each, ${what}`));
      tip.append(el('div', { class: 'muted' }, `at ${formatTime(t, this.data.timeUnit)}; the largest:`));
      const list = el('ol', { class: 'tip-allocs' });
      for (const x of largest) list.append(el('li', {}, `${humanBytes(d.bytes[x])} · ${hexAddress(d.data.address[x])} · ${this.site(x)}`));
      tip.append(list);
    } else if (a >= 0) {
      tip.append(this.details(a, false));
    }
    this.placeTip(clientX, clientY);
  }

  private placeTip(clientX: number, clientY: number): void {
    const tip = this.tooltip;
    const wrap = this.canvas.parentElement!.getBoundingClientRect();
    tip.hidden = false;
    const x = clientX - wrap.left + 14;
    tip.style.left = `${Math.max(0, Math.min(x, wrap.width - tip.offsetWidth - 4))}px`;
    tip.style.top = `${clientY - wrap.top + 10}px`;
  }

  /** Shows allocation `a` of device `device`: selects the device, pins it and zooms time to its life. */
  reveal(device: number, a: number): void {
    if (device !== this.device) this.selectDevice(device);
    const d = this.dev();
    const t0 = d.start[a] >= 0 ? d.timeAt(d.start[a]) : d.tMin;
    const t1 = d.end[a] < d.n ? d.timeAt(d.end[a]) : d.tMax;
    const margin = Math.max((t1 - t0) * 0.1, this.data.timeUnit === 'event' ? 2 : 0.002);
    this.setRange(t0 - margin, t1 + margin);
    this.pin(a);
    this.canvas.scrollIntoView({ block: 'nearest' });
  }

  /** Pins an allocation (its details stay below the chart, its band drawn dark); -1 unpins. */
  pin(a: number): void {
    this.pinned = a >= 0 ? a : -1;
    this.pinBox.replaceChildren();
    if (this.pinned >= 0) {
      this.pinBox.append(el('div', { class: 'muted' }, 'Pinned (click the chart elsewhere to unpin):'), this.details(this.pinned, true));
      this.pinBox.hidden = false;
    } else this.pinBox.hidden = true;
    this.schedule();
  }

  /** Page coordinates of the middle of allocation `a`'s band where it is first drawn; null if it is not drawn. */
  locate(a: number): { x: number; y: number } | null {
    const lp = this.lastPlot;
    const hit = this.dev().lastFrame.find(a);
    if (!hit) return null;
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const mid = (Math.max(hit.bottom, lp.y0) + Math.min(hit.top, lp.yMax)) / 2;
    return { x: rect.left + (lp.x + hit.col + 0.5) / dpr, y: rect.top + (lp.y + lp.h - ((mid - lp.y0) / (lp.yMax - lp.y0)) * lp.h) / dpr };
  }

  /** Index of the allocation of the current device at `address` made by trace event `start` (-1: before the trace). */
  allocationIndex(address: number, start: number): number {
    const d = this.dev();
    for (let a = 0; a < d.count; a++) if (d.data.address[a] === address && (start === -2 || d.start[a] === start)) return a;
    return -1;
  }

  pinnedAllocation(): number {
    return this.pinned;
  }

  /** How many allocations the highlight keeps, over every device (0: no highlight). */
  highlightedCount(): number {
    let n = 0;
    for (const m of this.matches ?? []) for (let a = 0; a < m.length; a++) n += m[a];
    return n;
  }

  /** Colours every device's bands by `keysOf(device)` through `colorOf`; null goes back to colouring by site (query box). */
  colorBy(keysOf: ((device: number) => ArrayLike<number>) | null, colorOf?: (key: number) => string): void {
    this.devices.forEach((d, i) => (keysOf && colorOf ? d.recolor(keysOf(i), colorOf) : d.recolor(d.data.site, (site) => d.siteColor(site))));
    if (this.siteLegend) this.siteLegend.style.display = keysOf ? 'none' : '';
    this.schedule();
  }

  /** Highlights the allocations `match` accepts (null clears); returns how many, over every device. */
  highlight(match: ((dev: number, a: number) => boolean) | null): number {
    if (!match) {
      this.matches = null;
      this.schedule();
      return 0;
    }
    let count = 0;
    this.matches = this.devices.map((d, di) => {
      const m = new Uint8Array(d.count);
      for (let a = 0; a < d.count; a++) if (match(di, a)) {
        m[a] = 1;
        count++;
      }
      return m;
    });
    this.schedule();
    return count;
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
    const d = this.dev();
    const y0 = this.yView?.y0 ?? 0;
    const yMax = this.yView?.y1 ?? this.fullBytes();
    const yStep = niceBytesStep((yMax - y0) / 4);
    const yTicks: string[] = [];
    const xTicks: string[] = [];
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, c.width, c.height);
    if (!this.image || this.image.width !== p.w || this.image.height !== p.h) this.image = ctx.createImageData(p.w, p.h);
    const pixels = new Uint32Array(this.image.data.buffer);
    pixels.fill(0xffffffff);
    d.render({ t0: this.view.t0, t1: this.view.t1, cols: p.w, rows: p.h, y0, yMax, pinned: this.pinned, matches: this.matches ? this.matches[this.device] : null }, pixels);
    ctx.putImageData(this.image, p.x, p.y);
    drawOomMarks(ctx, this.ooms[this.device], this.view, p, dpr);
    // The pinned allocation's lifetime as two marks, visible even when its band is under a pixel.
    if (this.pinned >= 0) {
      ctx.fillStyle = 'rgba(17,17,17,0.7)';
      const span0 = this.view.t1 - this.view.t0;
      for (const ev of [d.start[this.pinned], d.end[this.pinned]]) {
        if (ev < 0 || ev >= d.n) continue;
        const x = p.x + Math.round(((d.timeAt(ev) - this.view.t0) / span0) * p.w);
        if (x < p.x || x > p.x + p.w) continue;
        for (let y = p.y; y < p.y + p.h; y += 6 * dpr) ctx.fillRect(x, y, Math.max(1, dpr), 3 * dpr);
      }
    }
    this.lastPlot = { ...p, y0, yMax, t0: this.view.t0, t1: this.view.t1 };

    // Byte axis: round steps in binary units.
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let k = Math.ceil(y0 / yStep); k * yStep <= yMax; k++) {
      const v = k * yStep;
      const y = p.y + p.h - ((v - y0) / (yMax - y0)) * p.h;
      ctx.fillStyle = 'rgba(0,0,0,0.08)';
      ctx.fillRect(p.x, Math.round(y), p.w, 1);
      ctx.fillStyle = '#555';
      ctx.fillText(axisBytes(v), p.x - 6 * dpr, y);
      yTicks.push(axisBytes(v));
    }
    // Time axis: round steps, as many decimals as the step needs.
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillStyle = '#555';
    const span = this.view.t1 - this.view.t0;
    if (d.n === 0) {
      ctx.fillText('final state (the snapshot has no allocation history)', p.x + p.w / 2, p.y + p.h + 8 * dpr);
      xTicks.push('final state');
    } else {
      const tStep = timeStep(span, 6, this.data.timeUnit);
      for (let k = Math.ceil(this.view.t0 / tStep); k * tStep <= this.view.t1; k++) {
        const t = k * tStep;
        const x = p.x + ((t - this.view.t0) / span) * p.w;
        ctx.fillRect(Math.round(x), p.y + p.h, 1, 4 * dpr);
        const text = formatTick(t, tStep, this.data.timeUnit);
        // A label at the right edge ends at the edge instead of being cut off.
        const half = ctx.measureText(text).width / 2;
        ctx.fillText(text, Math.min(x, c.width - half - 2), p.y + p.h + 8 * dpr);
        xTicks.push(text);
      }
    }
    // The axis labels as drawn, for tests and assistive reading.
    c.dataset.xTicks = xTicks.join('|');
    c.dataset.yTicks = yTicks.join('|');
    ctx.fillStyle = '#999';
    ctx.fillRect(p.x, p.y + p.h, p.w, 1);

    c.dataset.t0 = String(this.view.t0);
    c.dataset.t1 = String(this.view.t1);
    c.dataset.device = d.data.device;
    c.dataset.peakAllocated = String(d.data.peakAllocated);
    c.dataset.peakReserved = String(d.data.peakReserved);
    const where = d.n === 0 ? 'final state' : `${formatTime(this.view.t0, this.data.timeUnit)} – ${formatTime(this.view.t1, this.data.timeUnit)} · ${countOf(d.n, 'event')}`;
    this.rangeLabel.textContent = `${d.data.device} · ${where} · ${countOf(d.count, 'allocation')} · peak ${humanBytes(d.data.peakAllocated)} requested, ${humanBytes(d.data.peakReserved)} reserved`;
    if (d.n > 0) this.overview.draw();
    this.overview.canvas.style.display = d.n === 0 ? 'none' : '';
    this.frames++;
    this.lastFrameMs = performance.now() - start;
    if (this.frames === 1) this.firstFrameMs = performance.now();
    this.rehover();
  }
}
