/**
 * The Active Memory Timeline's model and its pixel renderer: one band per allocation, stacked in
 * allocation order on top of the blocks live before the trace (as PyTorch's
 * torch/utils/viz/MemoryViz.js stacks them: freeing one lowers every band above it), allocations
 * thinner than a pixel summarised in one grey band at the bottom (MemoryViz.js's "summarized"
 * band). Each pixel column shows the state at the column's highest total, so a short-lived peak
 * is never averaged away; a frame replays the device's events once, so its cost is the number
 * of events plus the bands drawn, whatever the zoom.
 */
import type { ReportData, ReportDeviceMemory } from '../report-data.js';
import { lowerBound } from './canvas.js';

/** Entry id of the summarised band in a column's hover list. */
export const SUMMARISED = -2;

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#fabfd2', '#8cd17d', '#b6992d', '#499894', '#79706e', '#d4a6c8', '#a0cbe8', '#ffbe7d', '#f1ce63'];
const SUMMARY_RGB = 0xc8c8c8;
const RESERVED_RGB = 0x333333;
const PINNED_RGB = 0x111111;
const MATCH_MARK_RGB = 0xd62728;

/** 0xRRGGBB → the little-endian RGBA word ImageData's Uint32 view takes. */
function rgba(rgb: number, alpha = 255): number {
  return ((alpha << 24) | ((rgb & 0xff) << 16) | (rgb & 0xff00) | ((rgb >> 16) & 0xff)) >>> 0;
}

function darker(rgb: number, f: number): number {
  const ch = (v: number): number => Math.round(v * (1 - f));
  return (ch((rgb >> 16) & 255) << 16) | (ch((rgb >> 8) & 255) << 8) | ch(rgb & 255);
}

function towardWhite(rgb: number, f: number): number {
  const ch = (v: number): number => Math.round(v + (255 - v) * f);
  return (ch((rgb >> 16) & 255) << 16) | (ch((rgb >> 8) & 255) << 8) | ch(rgb & 255);
}

/** Allocations without frames (string 0) are slate; sites take the palette in turn. */
export function siteColor(site: number): string {
  return site === 0 ? '#8e9aaf' : PALETTE[site % PALETTE.length];
}

export interface PlotView {
  /** Time of the view's left and right edges. */
  t0: number;
  t1: number;
  cols: number;
  rows: number;
  /** Bytes at the bottom and the top of the plot. */
  y0: number;
  yMax: number;
  /** Allocation drawn highlighted (-1: none). */
  pinned: number;
  /** Search matches (null: no search): matching bands keep their colour, the others fade. */
  matches: Uint8Array | null;
}

/** One device's allocations as typed arrays, ready to replay. */
export class DeviceTimeline {
  readonly n: number;
  readonly time: Float64Array;
  readonly count: number;
  readonly start: Int32Array;
  /** Event that frees each allocation; `n` when it is live at the end. */
  readonly end: Int32Array;
  readonly bytes: Float64Array;
  /** Per event: the allocation it makes or frees (-1: neither). */
  private readonly allocAt: Int32Array;
  private readonly freeAt: Int32Array;
  /** Per event: reserved bytes after it. */
  readonly reserved: Float64Array;
  readonly reservedBase: number;
  private readonly color: Uint32Array;
  private readonly faded: Uint32Array;
  /** A band's top edge, darker, so neighbouring bands of one site stay apart. */
  private readonly edge: Uint32Array;
  readonly tMin: number;
  readonly tMax: number;
  /** The linked list of drawn bands, reused by every frame. */
  private readonly prev: Int32Array;
  private readonly next: Int32Array;

  constructor(
    readonly data: ReportDeviceMemory,
    sitesOf: number[],
  ) {
    const n = data.eventDt.length;
    this.n = n;
    this.time = new Float64Array(n);
    let us = 0;
    for (let i = 0; i < n; i++) {
      us += data.eventDt[i];
      this.time[i] = us / 1000;
    }
    const count = data.bytes.length;
    this.count = count;
    this.start = new Int32Array(count);
    this.end = new Int32Array(count);
    this.bytes = new Float64Array(count);
    this.allocAt = new Int32Array(n).fill(-1);
    this.freeAt = new Int32Array(n).fill(-1);
    for (let a = 0; a < count; a++) {
      const s = data.start[a];
      const e = data.end[a];
      this.start[a] = s;
      this.end[a] = e < 0 ? n : e;
      this.bytes[a] = data.bytes[a];
      if (s >= 0) this.allocAt[s] = a;
      if (e >= 0 && e < n) this.freeAt[e] = a;
    }
    this.prev = new Int32Array(count);
    this.next = new Int32Array(count);
    this.reservedBase = data.reservedBase;
    this.reserved = new Float64Array(n);
    let r = data.reservedBase;
    let k = 0;
    for (let i = 0; i < n; i++) {
      while (k < data.reservedAt.length && data.reservedAt[k] === i) r += data.reservedDelta[k++];
      this.reserved[i] = r;
    }
    this.color = new Uint32Array(count);
    this.faded = new Uint32Array(count);
    this.edge = new Uint32Array(count);
    this.recolor(sitesOf, siteColor);
    this.tMin = 0;
    this.tMax = Math.max(n ? this.time[n - 1] * 1.0001 : 1, 1e-3);
  }

  /** Colours each allocation by its key (a site, or an inferred category for the query box): `colorOf` gives "#rrggbb". */
  recolor(keys: ArrayLike<number>, colorOf: (key: number) => string): void {
    const byKey = new Map<number, [number, number, number]>();
    for (let a = 0; a < this.count; a++) {
      let c = byKey.get(keys[a]);
      if (!c) {
        const rgb = parseInt(colorOf(keys[a]).slice(1), 16);
        c = [rgba(rgb), rgba(towardWhite(rgb, 0.82)), rgba(darker(rgb, 0.3))];
        byKey.set(keys[a], c);
      }
      this.color[a] = c[0];
      this.faded[a] = c[1];
      this.edge[a] = c[2];
    }
  }

  /** Index of the first event at or after `t`. */
  lowerBound(t: number): number {
    return lowerBound(this.time, this.n, t);
  }

  /** Allocations under `threshold` bytes live after the first `events` events: how many, their bytes, the `k` largest. */
  smallLiveAfter(events: number, threshold: number, k: number): { count: number; bytes: number; largest: number[] } {
    let count = 0;
    let sum = 0;
    const largest: number[] = [];
    for (let a = 0; a < this.count; a++) {
      const b = this.bytes[a];
      if (b >= threshold || this.start[a] >= events || this.end[a] < events) continue;
      count++;
      sum += b;
      if (largest.length < k || b > this.bytes[largest[largest.length - 1]]) {
        let p = largest.length < k ? largest.length : k - 1;
        while (p > 0 && this.bytes[largest[p - 1]] < b) p--;
        largest.splice(p, 0, a);
        if (largest.length > k) largest.pop();
      }
    }
    return { count, bytes: sum, largest };
  }

  /** Allocations live after the first `events` events (all of them before any event when 0). */
  liveAfter(events: number): number[] {
    const out: number[] = [];
    for (let a = 0; a < this.count; a++) if (this.start[a] < events && this.end[a] >= events) out.push(a);
    return out;
  }

  /**
   * Draws the bands into `pixels` (cols × rows, row 0 at the top) and fills `hit` with each
   * column's bands, bottom first, for hover.
   */
  render(f: PlotView, pixels: Uint32Array, hit: ColumnHits): { totals: Float64Array } {
    const { cols, rows } = f;
    const n = this.n;
    const span = f.t1 - f.t0;
    const scale = rows / (f.yMax - f.y0);
    const thr = (f.yMax - f.y0) / rows;
    const bytes = this.bytes;
    const big = (a: number): boolean => bytes[a] >= thr;
    // Live bands at least a pixel tall, a linked list in stacking order (new ones go on top).
    const prev = this.prev;
    const next = this.next;
    let head = -1;
    let tail = -1;
    let small = 0;
    let smallMatched = 0;
    let total = 0;
    const matches = f.matches;
    const add = (a: number): void => {
      total += this.bytes[a];
      if (!big(a)) {
        small += this.bytes[a];
        if (matches && matches[a]) smallMatched++;
        return;
      }
      prev[a] = tail;
      next[a] = -1;
      if (tail >= 0) next[tail] = a;
      else head = a;
      tail = a;
    };
    const remove = (a: number): void => {
      total -= this.bytes[a];
      if (!big(a)) {
        small -= this.bytes[a];
        if (matches && matches[a]) smallMatched--;
        return;
      }
      const p = prev[a];
      const q = next[a];
      if (p >= 0) next[p] = q;
      else head = q;
      if (q >= 0) prev[q] = p;
      else tail = p;
    };
    const apply = (i: number): void => {
      const a = this.allocAt[i];
      if (a >= 0) add(a);
      const d = this.freeAt[i];
      if (d >= 0) remove(d);
    };
    for (let a = 0; a < this.count; a++) if (this.start[a] < 0) add(a);

    const summaryColor = rgba(matches ? towardWhite(SUMMARY_RGB, 0.6) : SUMMARY_RGB);
    const reservedColor = rgba(RESERVED_RGB);
    const pinnedColor = rgba(PINNED_RGB);
    const markColor = rgba(MATCH_MARK_RGB);
    const totals = new Float64Array(cols);
    hit.reset(cols);
    const rowOf = (bytes: number): number => rows - Math.round((bytes - f.y0) * scale);
    const fill = (col: number, fromBytes: number, toBytes: number, color: number): void => {
      const top = Math.max(0, rowOf(toBytes));
      const bottom = Math.min(rows, rowOf(fromBytes));
      for (let y = top; y < bottom; y++) pixels[y * cols + col] = color;
    };
    const drawColumn = (col: number, reserved: number): void => {
      totals[col] = total;
      hit.begin(col);
      let y = 0;
      if (small > 0) {
        fill(col, 0, small, summaryColor);
        y = small;
        hit.push(SUMMARISED, y);
      }
      for (let a = head; a >= 0; a = next[a]) {
        const top = y + this.bytes[a];
        const faded = matches !== null && !matches[a];
        const color = a === f.pinned ? pinnedColor : faded ? this.faded[a] : this.color[a];
        fill(col, y, top, color);
        const edgeRow = rowOf(top);
        if (!faded && a !== f.pinned && rowOf(y) - edgeRow >= 3 && edgeRow >= 0 && edgeRow < rows) pixels[edgeRow * cols + col] = this.edge[a];
        hit.push(a, top);
        y = top;
      }
      const r = rowOf(reserved);
      if (r >= 0 && r < rows) pixels[r * cols + col] = reservedColor;
      if (smallMatched > 0) for (let yy = 0; yy < Math.min(4, rows); yy++) pixels[yy * cols + col] = markColor;
    };

    let i = 0;
    const firstIn = this.lowerBound(f.t0);
    // Events left of the view: only the stacking order and the sums matter.
    const allocAt = this.allocAt;
    const freeAt = this.freeAt;
    for (; i < firstIn; i++) {
      const a = allocAt[i];
      if (a >= 0) {
        const b = bytes[a];
        total += b;
        if (b < thr) {
          small += b;
          if (matches !== null && matches[a]) smallMatched++;
        } else {
          prev[a] = tail;
          next[a] = -1;
          if (tail >= 0) next[tail] = a;
          else head = a;
          tail = a;
        }
      }
      const d = freeAt[i];
      if (d >= 0) remove(d);
    }
    let col = 0;
    while (col < cols) {
      // Events that fall in this column (none for a column between events).
      const colEnd = f.t0 + ((col + 1) / cols) * span;
      let j = i;
      while (j < n && this.time[j] < colEnd && this.time[j] <= f.t1) j++;
      if (j === i) {
        drawColumn(col, i > 0 ? this.reserved[i - 1] : this.reservedBase);
        col++;
        continue;
      }
      // The column shows the moment of its highest total: find it, replay to it, draw, replay the rest.
      let t = total;
      let best = t;
      let at = i;
      for (let k = i; k < j; k++) {
        const a = this.allocAt[k];
        if (a >= 0) t += this.bytes[a];
        const d = this.freeAt[k];
        if (d >= 0) t -= this.bytes[d];
        if (t > best) {
          best = t;
          at = k + 1;
        }
      }
      let maxReserved = i > 0 ? this.reserved[i - 1] : this.reservedBase;
      for (let k = i; k < j; k++) if (this.reserved[k] > maxReserved) maxReserved = this.reserved[k];
      for (; i < at; i++) apply(i);
      drawColumn(col, maxReserved);
      for (; i < j; i++) apply(i);
      col++;
    }
    return { totals };
  }
}

/** Per pixel column, the bands drawn there bottom first: allocation id and the bytes at its top. */
export class ColumnHits {
  private offsets = new Int32Array(1);
  private ids = new Int32Array(1024);
  private tops = new Float64Array(1024);
  private size = 0;
  private current = -1;

  reset(cols: number): void {
    if (this.offsets.length < cols + 1) this.offsets = new Int32Array(cols + 1);
    this.offsets.fill(-1);
    this.size = 0;
    this.current = -1;
  }

  begin(col: number): void {
    this.offsets[col] = this.size;
    this.current = col;
    this.offsets[col + 1] = this.size;
  }

  push(id: number, top: number): void {
    if (this.size === this.ids.length) {
      const ids = new Int32Array(this.size * 2);
      ids.set(this.ids);
      this.ids = ids;
      const tops = new Float64Array(this.size * 2);
      tops.set(this.tops);
      this.tops = tops;
    }
    this.ids[this.size] = id;
    this.tops[this.size] = top;
    this.size++;
    this.offsets[this.current + 1] = this.size;
  }

  /** The first column where `id` is drawn, with the bytes at its bottom and top; null if nowhere. */
  find(id: number, cols: number): { col: number; bottom: number; top: number } | null {
    for (let col = 0; col < cols; col++) {
      const from = this.offsets[col];
      if (from < 0) continue;
      for (let k = from; k < this.offsets[col + 1]; k++) {
        if (this.ids[k] === id) return { col, bottom: k > from ? this.tops[k - 1] : 0, top: this.tops[k] };
      }
    }
    return null;
  }

  /** The band at `bytes` height in column `col`, or -1 above the stack. */
  at(col: number, bytes: number): number {
    const from = this.offsets[col];
    if (from < 0) return -1;
    const to = this.offsets[col + 1];
    let lo = from;
    let hi = to;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.tops[mid] <= bytes) lo = mid + 1;
      else hi = mid;
    }
    return lo < to ? this.ids[lo] : -1;
  }
}

/** The devices of a snapshot report, with their allocations' sites as string indexes. */
export function deviceTimelines(data: ReportData): DeviceTimeline[] {
  return (data.memory?.devices ?? []).map((d) => new DeviceTimeline(d, d.site));
}
