/**
 * The Active Cached Segment Timeline section (PyTorch snapshots): each segment's reserved bytes
 * over time as its own band, per device, drawn by the Active Memory Timeline's renderer
 * (allocation-timeline.ts) from segment-timeline-model.ts's bands. Wheel zooms time, drag pans,
 * double-click resets; hover names the segment (address, size, pool, stream) and OOM marks.
 */
import type { ReportData } from '../report-data.js';
import { DeviceTimeline, SUMMARISED, summedGroup } from './allocation-timeline.js';
import { FrameScheduler, fitCanvas, plotArea } from './canvas.js';
import { bindPanZoom, clampRange } from './pan-zoom.js';
import { el } from './dom.js';
import { axisBytes, formatTick, formatTime, humanBytes, niceBytesStep, timeStep, wholeNumber, type ViewRange } from './timeline.js';
import type { AllocatorHistory } from './state-history-model.js';
import { segmentBands, type SegmentBands } from './segment-timeline-model.js';
import { drawOomMarks, oomAt, oomMarks, oomText, type OomMark } from './state-history-oom.js';
import { hexAddress, segmentText, streamName } from './state-history-text.js';

declare global {
  interface Window {
    /** For tests: the segment timeline's device, its exact peak and where a segment's band is drawn. */
    memscopeSegments?: {
      selectDevice(i: number): void;
      peak(): number;
      locate(address: number): { x: number; y: number } | null;
      locateOom(k: number): { x: number; y: number } | null;
      frames: number;
      /** Time the bands and their renderer took to make. */
      bandsMs: number;
    };
  }
}

interface DeviceBands {
  bands: SegmentBands;
  timeline: DeviceTimeline;
  ooms: OomMark[];
}

export class SegmentTimelineView {
  private readonly devices: DeviceBands[];
  private current = 0;
  private view: ViewRange = { t0: 0, t1: 1 };
  private readonly canvas: HTMLCanvasElement;
  private readonly tooltip: HTMLElement;
  private readonly label: HTMLElement;
  private readonly redraw = new FrameScheduler(() => this.render());
  private image: ImageData | null = null;
  private last = { x: 0, y: 0, w: 1, h: 1, yMax: 1 };
  frames = 0;
  /** Hovers again where the pointer rests (bindPanZoom); set once the chart is bound. */
  private rehover: () => void = () => {};

  constructor(
    private readonly data: ReportData,
    box: HTMLElement,
    models: AllocatorHistory[],
  ) {
    this.devices = models.map((m) => {
      const mem = data.memory!.devices[m.device.memory];
      const bands = segmentBands(m, mem.eventDt, m.device.device);
      const timeline = new DeviceTimeline(bands.memory, bands.group);
      return { bands, timeline, ooms: oomMarks(data, m.device.memory, (e) => timeline.timeAt(e)) };
    });
    const toolbar = el('div', { class: 'toolbar' });
    if (this.devices.length > 1) {
      const select = el('select', { id: 'segments-device', 'aria-label': 'device' });
      models.forEach((m, i) => select.append(el('option', { value: String(i) }, m.device.device)));
      select.addEventListener('change', () => this.selectDevice(Number(select.value)));
      toolbar.append(el('label', {}, 'device ', select));
    }
    this.label = el('span', { id: 'segments-range' });
    toolbar.append(this.label);
    this.legend = el('div', { class: 'toolbar', id: 'segments-legend' });
    this.canvas = el('canvas', { id: 'segment-timeline-chart', 'aria-label': 'reserved bytes per segment over time' });
    this.tooltip = el('div', { class: 'history-tip', hidden: '' });
    box.append(toolbar, this.legend, el('div', { class: 'canvas-wrap' }, this.canvas, this.tooltip));
    box.append(el('p', { class: 'muted' }, 'One band per segment (for an expandable segment, per mapped range), stacked in the order they were reserved; the stack\u2019s height is the reserved bytes. Wheel to zoom, drag to pan, double-click to reset; red lines mark out-of-memory events.'));
    this.bind();
    new ResizeObserver(() => this.redraw.schedule()).observe(this.canvas);
    this.selectDevice(0);
  }

  private readonly legend: HTMLElement;

  private dev(): DeviceBands {
    return this.devices[this.current];
  }

  selectDevice(i: number): void {
    if (i < 0 || i >= this.devices.length) return;
    this.current = i;
    const d = this.dev();
    this.view = { t0: d.timeline.tMin, t1: d.timeline.tMax };
    this.legend.replaceChildren(el('span', { class: 'muted' }, 'colour by pool and stream:'));
    d.bands.groups.forEach((g, k) => {
      const sw = el('span', { class: 'swatch' });
      sw.style.background = d.timeline.siteColor(k + 1);
      this.legend.append(el('span', { class: 'legend-item' }, sw, ` ${g}`));
    });
    this.redraw.schedule();
  }

  peak(): number {
    return this.dev().bands.memory.peakReserved;
  }

  private setRange(t0: number, t1: number): void {
    const tl = this.dev().timeline;
    this.view = clampRange(t0, t1, tl.tMin, tl.tMax, this.data.timeUnit === 'event' ? 4 : 0.004);
    this.redraw.schedule();
  }

  private bind(): void {
    this.rehover = bindPanZoom(this.canvas, {
      view: () => this.view,
      setRange: (t0, t1) => this.setRange(t0, t1),
      reset: () => this.setRange(this.dev().timeline.tMin, this.dev().timeline.tMax),
      hover: (e) => this.hover(e),
      leave: () => (this.tooltip.hidden = true),
    });
  }

  private hover(e: MouseEvent): void {
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const px = (e.clientX - rect.left) * dpr;
    const py = (e.clientY - rect.top) * dpr;
    const d = this.dev();
    const lp = this.last;
    const lines: Node[] = [];
    const oom = oomAt(d.ooms, this.view, lp, px, dpr);
    const col = Math.floor(px - lp.x);
    const row = py - lp.y;
    const band = col >= 0 && col < lp.w && row >= 0 && row < lp.h ? d.timeline.lastFrame.at(col, ((lp.h - row) / lp.h) * lp.yMax) : -1;
    if (oom) lines.push(el('div', { class: 'tip-head oom-tip' }, oomText(oom, this.data.timeUnit)));
    if (band >= 0) {
      const seg = d.bands.segment[band];
      const tl = d.timeline;
      const when = (ev: number, none: string): string => (ev < 0 || ev >= tl.n ? none : `${formatTime(tl.timeAt(ev), this.data.timeUnit)} (event ${wholeNumber(ev)})`);
      lines.push(el('div', { class: 'tip-head' }, `${humanBytes(tl.bytes[band])} reserved at ${hexAddress(d.bands.memory.address[band])}`));
      lines.push(el('div', {}, segmentText(seg, streamName(seg.stream))));
      lines.push(el('div', {}, `reserved ${when(d.bands.memory.start[band], 'before the trace began')} · released ${when(d.bands.memory.end[band], 'never (reserved at the end)')}`));
    } else if (band === SUMMARISED || summedGroup(band) >= 0) {
      // Segments thinner than a pixel are drawn summed: their total, and the largest of them.
      const tl = d.timeline;
      const m = tl.lastFrame.moment[col] ?? 0;
      const { count, bytes, largest } = tl.smallLiveAt(m, tl.lastFrame.threshold, summedGroup(band), 5);
      lines.push(el('div', { class: 'tip-head' }, `${humanBytes(bytes)} reserved in ${wholeNumber(count)} segment${count === 1 ? '' : 's'} under a pixel each, summed`));
      if (m > 0) lines.push(el('div', { class: 'muted' }, `at ${formatTime(tl.timeAt(m - 1), this.data.timeUnit)}; the largest:`));
      const list = el('ol', { class: 'tip-allocs' });
      for (const x of largest) list.append(el('li', {}, segmentText(d.bands.segment[x], streamName(d.bands.segment[x].stream))));
      lines.push(list);
    }
    if (!lines.length) {
      this.tooltip.hidden = true;
      return;
    }
    this.tooltip.replaceChildren(...lines);
    this.tooltip.hidden = false;
    const wrap = this.canvas.parentElement!.getBoundingClientRect();
    this.tooltip.style.left = `${Math.max(0, Math.min(e.clientX - wrap.left + 14, wrap.width - this.tooltip.offsetWidth - 4))}px`;
    this.tooltip.style.top = `${e.clientY - wrap.top + 10}px`;
  }

  /** Page point in the middle of the first drawn band at `address`; null when not drawn. */
  locate(address: number): { x: number; y: number } | null {
    const d = this.dev();
    const band = d.bands.memory.address.indexOf(address);
    if (band < 0) return null;
    const hit = d.timeline.lastFrame.find(band);
    if (!hit) return null;
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const lp = this.last;
    const mid = (hit.bottom + hit.top) / 2;
    return { x: rect.left + (lp.x + hit.col + 0.5) / dpr, y: rect.top + (lp.y + lp.h - (mid / lp.yMax) * lp.h) / dpr };
  }

  /** Page point on the k-th OOM mark; null when there is none in view. */
  locateOom(k: number): { x: number; y: number } | null {
    const m = this.dev().ooms[k];
    if (!m) return null;
    const rect = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const lp = this.last;
    const x = lp.x + ((m.time - this.view.t0) / (this.view.t1 - this.view.t0)) * lp.w;
    return { x: rect.left + x / dpr, y: rect.top + (lp.y + lp.h * 0.1) / dpr };
  }

  render(): void {
    const c = this.canvas;
    const dpr = fitCanvas(c);
    // The bands are pixels the app writes (putImageData), as in the Active Memory Timeline.
    const ctx = c.getContext('2d', { willReadFrequently: true })!;
    const p = plotArea(c);
    const d = this.dev();
    const peak = Math.max(1, d.bands.memory.peakReserved);
    const yStep = niceBytesStep(peak / 4);
    const yMax = Math.ceil(peak / yStep) * yStep;
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, c.width, c.height);
    if (!this.image || this.image.width !== p.w || this.image.height !== p.h) this.image = ctx.createImageData(p.w, p.h);
    const pixels = new Uint32Array(this.image.data.buffer);
    pixels.fill(0xffffffff);
    d.timeline.render({ t0: this.view.t0, t1: this.view.t1, cols: p.w, rows: p.h, y0: 0, yMax, pinned: -1, matches: null }, pixels);
    ctx.putImageData(this.image, p.x, p.y);
    this.last = { x: p.x, y: p.y, w: p.w, h: p.h, yMax };
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let v = 0; v <= yMax; v += yStep) {
      const y = p.y + p.h - (v / yMax) * p.h;
      ctx.fillStyle = 'rgba(0,0,0,0.08)';
      ctx.fillRect(p.x, Math.round(y), p.w, 1);
      ctx.fillStyle = '#555';
      ctx.fillText(axisBytes(v), p.x - 6 * dpr, y);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const span = this.view.t1 - this.view.t0;
    if (d.timeline.n > 0) {
      const tStep = timeStep(span, 6, this.data.timeUnit);
      for (let k = Math.ceil(this.view.t0 / tStep); k * tStep <= this.view.t1; k++) {
        const x = p.x + ((k * tStep - this.view.t0) / span) * p.w;
        ctx.fillStyle = '#555';
        ctx.fillRect(Math.round(x), p.y + p.h, 1, 4 * dpr);
        ctx.fillText(formatTick(k * tStep, tStep, this.data.timeUnit), x, p.y + p.h + 8 * dpr);
      }
    }
    drawOomMarks(ctx, d.ooms, this.view, p, dpr);
    c.dataset.device = d.bands.memory.device;
    c.dataset.peak = String(d.bands.memory.peakReserved);
    c.dataset.ooms = String(d.ooms.length);
    this.label.textContent = `${d.bands.memory.device} · ${wholeNumber(d.bands.memory.bytes.length)} segment bands · peak ${humanBytes(d.bands.memory.peakReserved)} reserved`;
    this.frames++;
    this.rehover();
  }
}
