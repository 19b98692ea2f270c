/**
 * The Allocator State History section (PyTorch snapshots), after torch/utils/viz/MemoryViz.js's
 * view of the same name: the segment and block map of one device at any trace event, with the
 * event list beside it and the selected event's stack below. A slider, the arrow keys (←/→ one
 * event, PgUp/PgDn a hundred, Home/End the ends) and clicks on the list pick the event; the state
 * comes from state-history-model.ts. Segments are packed into rows by size as memory_viz packs
 * them; blocks are coloured by state; private pools and expandable segments carry a mark.
 */
import type { ReportData } from '../report-data.js';
import type { ReportHistoryDevice } from '../snapshot-history-data.js';
import { el } from './dom.js';
import { FrameScheduler, fitCanvas } from './canvas.js';
import { formatTime, humanBytes, wholeNumber } from './timeline.js';
import { stateSummary, type AllocatorHistory, type BlockState, type SegmentState } from './state-history-model.js';
import { OOM_COLOR, eventTimes, oomMarks, oomText, type OomMark } from './state-history-oom.js';
import { BLOCK_STATE_COLORS } from './segments.js';
import { hexAddress, segmentText, streamName, userFrame } from './state-history-text.js';

declare global {
  interface Window {
    /** For tests and the benchmark: the state history's selection and state. */
    memscopeHistory?: {
      select(device: number, event: number): void;
      position(): number;
      state(): ReturnType<typeof stateSummary>;
      locate(address: number): { x: number; y: number } | null;
      /** Time the last selection took: moving the model and drawing the map and the list. */
      lastStepMs: number;
      steps: number;
      /** Time the devices' models took to make (the backward walk and its checkpoints). */
      modelMs: number;
    };
  }
}

const PAGE = 100;
const LIST_ROWS = 24;
const PRIVATE_POOL_COLOR = '#b07aa1';
const EXPANDABLE_COLOR = '#59a14f';

interface Placed {
  seg: SegmentState;
  row: number;
  /** Bytes from the row's left edge. */
  offset: number;
  blocks: BlockState[];
}

/** memory_viz's layout: segments smallest first, packed left to right into rows as wide as the largest. */
function layout(segs: readonly SegmentState[]): { placed: Placed[]; rows: number; width: number } {
  const order = [...segs].sort((a, b) => a.size - b.size || a.address - b.address);
  const width = order.length ? order[order.length - 1].size : 1;
  const gap = width / 400;
  const placed: Placed[] = [];
  let row = 0;
  let used = 0;
  for (const seg of order) {
    if (used > 0 && used + seg.size > width) {
      row++;
      used = 0;
    }
    placed.push({ seg, row, offset: used, blocks: [] });
    used += seg.size + gap;
  }
  return { placed, rows: order.length ? row + 1 : 0, width };
}

class DeviceHistoryView {
  readonly model: AllocatorHistory;
  readonly times: Float64Array;
  readonly ooms: OomMark[];
  private layoutVersion = -1;
  private placed: Placed[] = [];
  private rows = 0;
  private width = 1;
  private byAddress: Placed[] = [];

  constructor(
    readonly data: ReportData,
    readonly dev: ReportHistoryDevice,
    model: AllocatorHistory,
  ) {
    this.model = model;
    this.times = eventTimes(data, dev.memory);
    this.ooms = oomMarks(data, dev.memory, (e) => this.times[e]!);
  }

  /** The layout of the current segments, their blocks assigned (by address). */
  arrange(): { placed: Placed[]; rows: number; width: number } {
    const m = this.model;
    if (this.layoutVersion !== m.segmentVersion) {
      const l = layout(m.segments());
      this.placed = l.placed;
      this.rows = l.rows;
      this.width = l.width;
      this.byAddress = [...l.placed].sort((a, b) => a.seg.address - b.seg.address);
      this.layoutVersion = m.segmentVersion;
    }
    for (const p of this.placed) p.blocks.length = 0;
    const by = this.byAddress;
    for (const b of m.activeBlocks()) {
      let lo = 0;
      let hi = by.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (by[mid].seg.address <= b.address) lo = mid + 1;
        else hi = mid;
      }
      const p = by[lo - 1];
      if (p && b.address < p.seg.address + p.seg.size) p.blocks.push(b);
    }
    return { placed: this.placed, rows: this.rows, width: this.width };
  }

  stream(i: number): string {
    return streamName(this.dev.streams[this.dev.events.stream[i]] ?? 0);
  }
}


export class StateHistoryView {
  private readonly views: DeviceHistoryView[];
  private current = 0;
  private readonly slider: HTMLInputElement;
  private readonly label: HTMLElement;
  private readonly list: HTMLElement;
  private readonly stackBox: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly marks: HTMLCanvasElement;
  private readonly tooltip: HTMLElement;
  private readonly redraw = new FrameScheduler(() => this.draw());
  private listTop = 0;
  private readonly widths = new Map<Element, number>();
  /** First row of the map in view, and how many rows there are and fit. */
  private mapTop = 0;
  private mapRows = { rows: 0, visible: 0 };
  private hitRows: { placed: Placed[]; rowH: number; scale: number; dpr: number } | null = null;
  lastStepMs = 0;
  steps = 0;

  constructor(
    private readonly data: ReportData,
    private readonly box: HTMLElement,
    models: AllocatorHistory[],
  ) {
    this.views = models.map((m) => new DeviceHistoryView(data, m.device, m));
    const toolbar = el('div', { class: 'toolbar' });
    if (this.views.length > 1) {
      const select = el('select', { id: 'history-device', 'aria-label': 'device' });
      this.views.forEach((v, i) => select.append(el('option', { value: String(i) }, v.dev.device)));
      select.addEventListener('change', () => this.selectDevice(Number(select.value)));
      toolbar.append(el('label', {}, 'device ', select));
    }
    this.slider = el('input', { id: 'history-slider', type: 'range', min: '-1', max: '0', step: '1', value: '0', 'aria-label': 'trace event' });
    this.slider.addEventListener('input', () => this.select(Number(this.slider.value)));
    this.label = el('span', { id: 'history-label' });
    toolbar.append(this.slider, this.label);
    this.marks = el('canvas', { id: 'history-marks', 'aria-label': 'out-of-memory events along the trace' });
    this.list = el('div', { id: 'history-events', class: 'history-events', role: 'listbox', 'aria-label': 'trace events' });
    this.canvas = el('canvas', { id: 'history-map', 'aria-label': 'segments and blocks at the selected event' });
    this.tooltip = el('div', { class: 'history-tip', hidden: '' });
    const mapWrap = el('div', { class: 'history-map-wrap' }, this.canvas);
    this.stackBox = el('div', { id: 'history-stack', class: 'history-stack' });
    box.append(
      toolbar,
      this.marks,
      el('div', { class: 'history-grid' }, this.list, mapWrap),
      legend(),
      this.stackBox,
      this.tooltip,
      el('p', { class: 'muted' }, 'The state after the selected event, rebuilt from the snapshot\u2019s final state by undoing the events after it. ←/→ one event, PgUp/PgDn a hundred, Home/End the ends; click an event to select it, hover the map for a segment or block.'),
    );
    box.tabIndex = 0;
    box.addEventListener('keydown', (e) => this.key(e));
    this.list.addEventListener('wheel', (e) => {
      e.preventDefault();
      this.listTop += Math.sign(e.deltaY) * 3;
      this.fillList();
    }, { passive: false });
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('wheel', (e) => {
      if (this.mapRows.rows <= this.mapRows.visible) return;
      e.preventDefault();
      this.mapTop += Math.sign(e.deltaY) * 3;
      this.draw();
    }, { passive: false });
    this.canvas.addEventListener('mouseleave', () => (this.tooltip.hidden = true));
    this.marks.addEventListener('mousemove', (e) => this.hoverMarks(e));
    this.marks.addEventListener('mouseleave', () => (this.tooltip.hidden = true));
    this.marks.addEventListener('click', (e) => {
      const m = this.markAt(e);
      if (m) this.select(m.event);
    });
    // Widths come from the observer, so a step never forces the page's layout to read them.
    const sizes = new ResizeObserver((entries) => {
      for (const e of entries) this.widths.set(e.target, e.contentRect.width);
      this.redraw.schedule();
    });
    sizes.observe(mapWrap);
    sizes.observe(this.marks);
    this.selectDevice(0);
  }

  private view(): DeviceHistoryView {
    return this.views[this.current];
  }

  selectDevice(i: number): void {
    if (i < 0 || i >= this.views.length) return;
    this.current = i;
    const v = this.view();
    this.slider.max = String(v.model.n - 1);
    this.slider.disabled = v.model.n === 0;
    this.select(v.model.n - 1);
  }

  /** Selects the state after event `n` (-1: before the trace's first event). */
  select(n: number): void {
    const started = performance.now();
    const v = this.view();
    v.model.goTo(n);
    const pos = v.model.position;
    this.slider.value = String(pos);
    if (pos < this.listTop || pos >= this.listTop + LIST_ROWS) this.listTop = pos - Math.floor(LIST_ROWS / 2);
    // The canvas first: the list's DOM changes then wait for the frame's layout instead of forcing one.
    this.draw();
    this.fillList();
    this.fillStack();
    this.lastStepMs = performance.now() - started;
    this.steps++;
  }

  position(): number {
    return this.view().model.position;
  }

  /** Page point on the map at `address` (inside a block or a segment's free space); null when no segment holds it. */
  locate(address: number): { x: number; y: number } | null {
    let hit = this.hitRows;
    const p = hit?.placed.find((q) => address >= q.seg.address && address < q.seg.address + q.seg.size);
    if (!hit || !p) return null;
    if (p.row < this.mapTop || p.row >= this.mapTop + this.mapRows.visible) {
      this.mapTop = p.row;
      this.draw();
      hit = this.hitRows!;
    }
    const b = p.blocks.find((q) => address >= q.address && address < q.address + q.size);
    const mid = b ? b.address + b.size / 2 : address;
    const rect = this.canvas.getBoundingClientRect();
    return { x: rect.left + (hit.dpr + (p.offset + mid - p.seg.address) * hit.scale) / hit.dpr, y: rect.top + (2 * hit.dpr + (p.row - this.mapTop) * hit.rowH + hit.rowH * 0.4) / hit.dpr };
  }

  state(): ReturnType<typeof stateSummary> {
    return stateSummary(this.view().model);
  }

  private key(e: KeyboardEvent): void {
    const moves: Record<string, number> = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1, PageDown: PAGE, PageUp: -PAGE };
    const pos = this.position();
    let to: number | null = null;
    if (e.key in moves) to = pos + moves[e.key];
    else if (e.key === 'Home') to = -1;
    else if (e.key === 'End') to = this.view().model.n - 1;
    if (to === null) return;
    e.preventDefault();
    this.select(to);
  }

  private fillList(): void {
    const v = this.view();
    const m = v.model;
    const n = m.n;
    this.listTop = Math.max(-1, Math.min(this.listTop, n - LIST_ROWS));
    const rows: HTMLElement[] = [listHeader()];
    const first = this.data.timeUnit === 'event';
    for (let i = Math.max(-1, this.listTop); i < Math.min(n, this.listTop + LIST_ROWS); i++) {
      const row = el('div', { class: 'history-event', role: 'option', 'data-event': String(i) });
      if (i === m.position) {
        row.classList.add('selected');
        row.setAttribute('aria-selected', 'true');
      }
      if (i < 0) row.append(el('span', { class: 'ev-idx' }, ''), el('span', { class: 'ev-wide' }, n === 0 ? 'the final state (the snapshot recorded no trace)' : 'before the first event: what the trace found'));
      else {
        const action = m.action(i);
        const size = v.dev.events.size[i];
        const site = userFrame(this.data, v.dev.events.stack[i]) ?? '';
        row.append(el('span', { class: 'ev-idx' }, String(i)), el('span', { class: 'ev-time' }, first ? '' : formatTime(v.times[i] ?? 0, this.data.timeUnit)));
        if (action === 'oom') {
          row.classList.add('oom');
          row.append(el('span', { class: 'ev-wide' }, oomText(v.ooms.find((o) => o.event === i) ?? { event: i, time: v.times[i], requested: size, deviceFree: null }, this.data.timeUnit)));
        } else {
          row.append(
            el('span', { class: 'ev-action' }, action),
            el('span', { class: 'ev-addr' }, hexAddress(m.address(i))),
            el('span', { class: 'ev-size' }, humanBytes(size)),
            el('span', { class: 'ev-stream' }, v.stream(i)),
          );
        }
        row.append(el('span', { class: 'ev-site', title: site }, site.split(/[\\/]/).pop() ?? ''));
      }
      row.addEventListener('click', () => {
        this.box.focus({ preventScroll: true });
        this.select(i);
      });
      rows.push(row);
    }
    this.list.replaceChildren(...rows);
  }

  private fillStack(): void {
    const v = this.view();
    const i = v.model.position;
    if (i < 0) {
      this.stackBox.replaceChildren(el('div', { class: 'tip-head' }, v.model.n === 0 ? 'The snapshot\u2019s final state: no trace events were recorded' : 'Before the first event'));
      return;
    }
    const stack = v.dev.events.stack[i];
    const frames = stack >= 0 ? (this.data.stacks[stack] ?? []).map((s) => this.data.strings[s] ?? '') : [];
    const folded = stack >= 0 ? (this.data.memory?.stackFolded[stack] ?? 0) : 0;
    const head = el('div', { class: 'tip-head' }, `Event ${wholeNumber(i)}: ${v.model.action(i)} ${hexAddress(v.model.address(i))} · ${humanBytes(v.dev.events.size[i])} · stream ${v.stream(i)}`);
    const ol = el('ol', { class: 'stack' });
    for (const f of frames.slice(folded)) ol.append(el('li', {}, f));
    const parts: Node[] = [head];
    if (frames.length > folded) parts.push(ol);
    else parts.push(el('div', { class: 'muted' }, 'no frames recorded for this event'));
    if (folded > 0) {
      const inner = el('ol', { class: 'stack' });
      for (const f of frames.slice(0, folded)) inner.append(el('li', {}, f));
      parts.push(el('details', { class: 'folded' }, el('summary', {}, `${folded} allocator/framework frame${folded === 1 ? '' : 's'} (innermost)`), inner));
    }
    this.stackBox.replaceChildren(...parts);
  }

  private draw(): void {
    const v = this.view();
    const m = v.model;
    const { placed, rows, width } = v.arrange();
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    // Rows are 18 px tall while they fit; thinner (down to 6 px) for more, then the map scrolls.
    const rowCss = rows <= 30 ? 18 : Math.max(6, Math.min(18, Math.floor(536 / rows)));
    const cssH = Math.max(40, Math.min(rows * rowCss, 536) + 4);
    const visible = Math.max(1, Math.floor((cssH - 4) / rowCss));
    this.mapTop = Math.max(0, Math.min(this.mapTop, rows - visible));
    if (c.style.height !== `${cssH}px`) c.style.height = `${cssH}px`;
    this.size(c, this.widths.get(c.parentElement!) ?? 0, cssH);
    const ctx = c.getContext('2d')!;
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, c.width, c.height);
    const scale = (c.width - 2 * dpr) / width;
    const rowH = rowCss * dpr;
    const barH = Math.max(2, rowH * 0.8);
    // Only the rows in view are drawn: a step costs what is on screen, not every segment.
    let first = 0;
    let hi = placed.length;
    while (first < hi) {
      const mid = (first + hi) >>> 1;
      if (placed[mid].row < this.mapTop) first = mid + 1;
      else hi = mid;
    }
    for (let k = first; k < placed.length && placed[k].row < this.mapTop + visible; k++) {
      const p = placed[k];
      const x = dpr + p.offset * scale;
      const y = 2 * dpr + (p.row - this.mapTop) * rowH;
      const w = Math.max(1, p.seg.size * scale);
      ctx.fillStyle = BLOCK_STATE_COLORS.inactive;
      ctx.fillRect(x, y, w, barH);
      for (const b of p.blocks) {
        ctx.fillStyle = b.pending ? BLOCK_STATE_COLORS.active_pending_free : BLOCK_STATE_COLORS.active_allocated;
        ctx.fillRect(x + (b.address - p.seg.address) * scale, y, Math.max(0.5, b.size * scale), barH);
      }
      const privatePool = p.seg.pool && (p.seg.pool[0] !== 0 || p.seg.pool[1] !== 0);
      if (privatePool || p.seg.expandable) {
        ctx.fillStyle = privatePool ? PRIVATE_POOL_COLOR : EXPANDABLE_COLOR;
        ctx.fillRect(x, y + barH - Math.max(1, Math.round(rowH * 0.2)), w, Math.max(1, Math.round(rowH * 0.2)));
        if (rowH >= 10 * dpr) ctx.fillRect(x, y, Math.max(1, dpr * 2), barH);
      }
    }
    this.mapRows = { rows, visible };
    this.hitRows = { placed, rowH, scale, dpr };
    c.dataset.segments = String(placed.length);
    const blocks = placed.reduce((s, p) => s + p.blocks.length, 0);
    c.dataset.blocks = String(blocks);
    const pos = m.position;
    const when = m.n === 0 ? 'final state (the snapshot has no trace)' : pos < 0 ? 'before the first event' : `event ${wholeNumber(pos)} of ${wholeNumber(m.n)}${this.data.timeUnit === 'ms' ? ` · ${formatTime(v.times[pos] ?? 0, 'ms')}` : ''}`;
    this.label.textContent = `${v.dev.device} · ${when} · ${humanBytes(m.allocatedBytes)} in ${wholeNumber(blocks)} active blocks · ${humanBytes(m.reservedTotal)} reserved in ${wholeNumber(placed.length)} segments${rows > visible ? ` · map rows ${this.mapTop + 1}–${this.mapTop + visible} of ${wholeNumber(rows)} (wheel over the map to scroll)` : ''}`;
    this.drawMarks();
  }

  /** Sizes a canvas's pixels to a CSS size known without reading the layout (the observer's width; its own until the first report). */
  private size(c: HTMLCanvasElement, cssW: number, cssH: number): void {
    if (!cssW) {
      fitCanvas(c);
      return;
    }
    const dpr = window.devicePixelRatio || 1;
    const w = Math.round(cssW * dpr);
    const h = Math.round(cssH * dpr);
    if (c.width !== w || c.height !== h) {
      c.width = w;
      c.height = h;
    }
  }

  /** The strip above the grid: where the selected event is along the trace, and the OOMs. */
  private drawMarks(): void {
    const v = this.view();
    const c = this.marks;
    const dpr = window.devicePixelRatio || 1;
    this.size(c, this.widths.get(c) ?? 0, 12);
    const ctx = c.getContext('2d')!;
    ctx.clearRect(0, 0, c.width, c.height);
    const n = Math.max(1, v.model.n);
    const xOf = (i: number): number => ((i + 1) / n) * (c.width - 2 * dpr) + dpr;
    ctx.fillStyle = '#eee';
    ctx.fillRect(0, c.height / 2 - dpr, c.width, 2 * dpr);
    ctx.fillStyle = OOM_COLOR;
    for (const o of v.ooms) ctx.fillRect(Math.round(xOf(o.event)) - dpr, 0, 3 * dpr, c.height);
    ctx.fillStyle = '#222';
    ctx.fillRect(Math.round(xOf(v.model.position)) - dpr, c.height / 4, 2 * dpr, c.height / 2);
    c.dataset.ooms = String(v.ooms.length);
  }

  private markAt(e: MouseEvent): OomMark | null {
    const v = this.view();
    const rect = this.marks.getBoundingClientRect();
    const n = Math.max(1, v.model.n);
    let best: OomMark | null = null;
    let bestD = 5;
    for (const o of v.ooms) {
      const d = Math.abs(((o.event + 1) / n) * rect.width - (e.clientX - rect.left));
      if (d <= bestD) {
        best = o;
        bestD = d;
      }
    }
    return best;
  }

  private hoverMarks(e: MouseEvent): void {
    const m = this.markAt(e);
    if (!m) {
      this.tooltip.hidden = true;
      return;
    }
    this.showTip(e, [el('div', { class: 'tip-head' }, oomText(m, this.data.timeUnit)), el('div', { class: 'muted' }, 'click to select it')]);
  }

  private hover(e: MouseEvent): void {
    const hit = this.hitRows;
    if (!hit) return;
    const rect = this.canvas.getBoundingClientRect();
    const x = (e.clientX - rect.left) * hit.dpr;
    const y = (e.clientY - rect.top) * hit.dpr - 2 * hit.dpr;
    const row = this.mapTop + Math.floor(y / hit.rowH);
    const p = hit.placed.find((q) => q.row === row && x >= hit.dpr + q.offset * hit.scale && x <= hit.dpr + (q.offset + q.seg.size) * hit.scale + 1);
    if (!p || y - (row - this.mapTop) * hit.rowH > hit.rowH * 0.85) {
      this.tooltip.hidden = true;
      return;
    }
    const addr = p.seg.address + (x - hit.dpr - p.offset * hit.scale) / hit.scale;
    const b = p.blocks.find((q) => addr >= q.address && addr < q.address + q.size);
    const used = p.blocks.reduce((s, q) => s + q.size, 0);
    const lines: Node[] = [];
    if (b) {
      lines.push(el('div', { class: 'tip-head' }, `${b.pending ? 'active, pending free (freed, waiting on a stream)' : 'active allocated'} block ${hexAddress(b.address)} · ${humanBytes(b.size)}${b.requested !== b.size ? ` (${humanBytes(b.requested)} requested)` : ''}`));
      const site = userFrame(this.data, b.stack);
      lines.push(el('div', {}, 'site ', el('code', {}, site ?? '(no frames recorded)')));
    } else lines.push(el('div', { class: 'tip-head' }, 'inactive (cached, free) space'));
    lines.push(el('div', {}, `in ${segmentText(p.seg, streamName(p.seg.stream))}`));
    lines.push(el('div', { class: 'muted' }, `${humanBytes(used)} active in ${p.blocks.length} block${p.blocks.length === 1 ? '' : 's'}, ${humanBytes(p.seg.size - used)} inactive`));
    this.showTip(e, lines);
  }

  private showTip(e: MouseEvent, lines: Node[]): void {
    const tip = this.tooltip;
    tip.replaceChildren(...lines);
    tip.hidden = false;
    const wrap = tip.parentElement!.getBoundingClientRect();
    tip.style.left = `${Math.max(0, Math.min(e.clientX - wrap.left + 14, wrap.width - tip.offsetWidth - 4))}px`;
    tip.style.top = `${e.clientY - wrap.top + 12}px`;
  }
}

function listHeader(): HTMLElement {
  const row = el('div', { class: 'history-event history-head' });
  for (const [cls, text] of [['ev-idx', '#'], ['ev-time', 'time'], ['ev-action', 'action'], ['ev-addr', 'address'], ['ev-size', 'size'], ['ev-stream', 'stream'], ['ev-site', 'site']]) row.append(el('span', { class: cls }, text));
  return row;
}

function legend(): HTMLElement {
  const item = (color: string, text: string, bar = false): HTMLElement => {
    const sw = el('span', { class: 'swatch' });
    sw.style.background = color;
    if (bar) sw.style.height = '4px';
    return el('span', { class: 'legend-item' }, sw, text);
  };
  return el(
    'div',
    { class: 'toolbar history-legend' },
    item(BLOCK_STATE_COLORS.active_allocated, 'active allocated'),
    item(BLOCK_STATE_COLORS.active_pending_free, 'active, pending free'),
    item(BLOCK_STATE_COLORS.inactive, 'inactive (cached)'),
    item(PRIVATE_POOL_COLOR, 'private pool (e.g. a CUDA graph\u2019s)', true),
    item(EXPANDABLE_COLOR, 'expandable segment', true),
    item(OOM_COLOR, 'out of memory (strip above)', true),
  );
}
