import { humanBytes } from '../../core/units.js';
import type { ReportData } from '../report-data.js';
import { lowerBound } from './canvas.js';

/** Events per checkpoint of per-series live bytes (the cost of a random-access lookup). */
const CHECKPOINT = 2048;
/** Events per summary block: a pixel column spanning whole blocks reads their summaries, not their events. */
const BLOCK = 64;

export interface ViewRange {
  t0: number;
  t1: number;
}

/**
 * The timeline's decoded data: event times, series and signed bytes as typed
 * arrays, plus per-series live bytes every CHECKPOINT events, so the live
 * state at any time is one checkpoint plus at most CHECKPOINT replayed events.
 */
export class TimelineModel {
  readonly n: number;
  readonly nSeries: number;
  readonly time: Float64Array;
  readonly series: Uint16Array;
  readonly bytes: Float64Array;
  private readonly checkpoints: Float64Array;
  /** Per block: the highest running total within it, relative to the block start. */
  private readonly blockMaxRel: Float64Array;
  /** Per block and series: bytes added from the block start up to that highest point. */
  private readonly blockMaxState: Float64Array;
  /** Per block and series: bytes the whole block adds. */
  private readonly blockDelta: Float64Array;
  readonly tMin: number;
  readonly tMax: number;
  readonly peak: number;
  /** Per series: the most it held at once. */
  readonly seriesPeak: Float64Array;

  constructor(data: ReportData) {
    const { dt, series, bytes } = data.timeline;
    const n = dt.length;
    const nSeries = Math.max(1, data.series.length);
    this.n = n;
    this.nSeries = nSeries;
    this.time = new Float64Array(n);
    this.series = new Uint16Array(n);
    this.bytes = new Float64Array(n);
    this.checkpoints = new Float64Array((Math.floor(n / CHECKPOINT) + 1) * nSeries);
    const nBlocks = Math.ceil(n / BLOCK);
    this.blockMaxRel = new Float64Array(nBlocks);
    this.blockMaxState = new Float64Array(nBlocks * nSeries);
    this.blockDelta = new Float64Array(nBlocks * nSeries);
    const live = new Float64Array(nSeries);
    const seriesPeak = new Float64Array(nSeries);
    let us = 0;
    let total = 0;
    let peak = 0;
    let rel = 0;
    let block = -1;
    for (let i = 0; i < n; i++) {
      if (i % CHECKPOINT === 0) this.checkpoints.set(live, (i / CHECKPOINT) * nSeries);
      if (i % BLOCK === 0) {
        block++;
        rel = 0;
        this.blockMaxRel[block] = -Infinity;
      }
      us += dt[i];
      const s = series[i];
      const b = bytes[i];
      this.time[i] = us / 1000;
      this.series[i] = s;
      this.bytes[i] = b;
      live[s] += b;
      if (live[s] > seriesPeak[s]) seriesPeak[s] = live[s];
      total += b;
      if (total > peak) peak = total;
      const base = block * nSeries;
      this.blockDelta[base + s] += b;
      rel += b;
      if (rel > this.blockMaxRel[block]) {
        this.blockMaxRel[block] = rel;
        this.blockMaxState.set(this.blockDelta.subarray(base, base + nSeries), base);
      }
    }
    this.peak = peak;
    this.seriesPeak = seriesPeak;
    const lastStep = data.steps.length ? data.steps[data.steps.length - 1].t : 0;
    this.tMax = Math.max(n ? this.time[n - 1] : 0, lastStep, 1e-3) * 1.0001;
    // Start just before the first event: a program's start-up (module loading) holds no tensors.
    const first = Math.min(n ? this.time[0] : 0, data.steps.length ? data.steps[0].t : Infinity);
    this.tMin = Math.max(0, first - (this.tMax - first) * 0.01);
  }

  /** Index of the first event at or after `t`. */
  lowerBound(t: number): number {
    return lowerBound(this.time, this.n, t);
  }

  /** Live bytes per series after the first `count` events. */
  liveAfter(count: number, out: Float64Array = new Float64Array(this.nSeries)): Float64Array {
    const c = Math.floor(count / CHECKPOINT);
    out.set(this.checkpoints.subarray(c * this.nSeries, (c + 1) * this.nSeries));
    for (let i = c * CHECKPOINT; i < count; i++) out[this.series[i]] += this.bytes[i];
    return out;
  }

  /** Live bytes per series at time `t` (events at exactly `t` included). */
  liveAt(t: number): Float64Array {
    return this.liveAfter(this.lowerBound(t + 1e-9));
  }

  /**
   * Per-pixel-column stacked values for [t0, t1] over `cols` columns: for a
   * column with events, the state at its highest total (so short peaks stay
   * visible at any zoom); for an empty column, the state carried from the left.
   */
  buckets(range: ViewRange, cols: number): { values: Float64Array; max: number } {
    const S = this.nSeries;
    const values = new Float64Array(cols * S);
    const colMax = new Float64Array(cols).fill(-1);
    const span = range.t1 - range.t0;
    let i = this.lowerBound(range.t0);
    const live = this.liveAfter(i);
    let total = 0;
    for (let s = 0; s < S; s++) total += live[s];
    let lastCol = -1;
    let max = 0;
    const fillTo = (col: number): void => {
      // Columns up to `col` (exclusive) with no events hold the current state.
      for (let c = lastCol + 1; c < col; c++) {
        values.set(live, c * S);
        colMax[c] = total;
        if (total > max) max = total;
      }
    };
    const colOf = (t: number): number => {
      const c = Math.floor(((t - range.t0) / span) * cols);
      return c >= cols ? cols - 1 : c;
    };
    while (i < this.n) {
      const t = this.time[i];
      if (t > range.t1) break;
      const col = colOf(t);
      if (col !== lastCol) {
        fillTo(col);
        // The column starts from the state before its first event.
        values.set(live, col * S);
        colMax[col] = total;
        if (total > max) max = total;
        lastCol = col;
      }
      // A whole block inside this column: use its summary instead of its events.
      const last = i + BLOCK - 1;
      if (i % BLOCK === 0 && last < this.n && this.time[last] <= range.t1 && colOf(this.time[last]) === col) {
        const b = i / BLOCK;
        const base = b * S;
        const top = total + this.blockMaxRel[b];
        if (top > colMax[col]) {
          colMax[col] = top;
          for (let s = 0; s < S; s++) values[col * S + s] = live[s] + this.blockMaxState[base + s];
          if (top > max) max = top;
        }
        for (let s = 0; s < S; s++) {
          live[s] += this.blockDelta[base + s];
          total += this.blockDelta[base + s];
        }
        i += BLOCK;
        continue;
      }
      const s = this.series[i];
      live[s] += this.bytes[i];
      total += this.bytes[i];
      if (total > colMax[col]) {
        colMax[col] = total;
        values.set(live, col * S);
        if (total > max) max = total;
      }
      i++;
    }
    fillTo(cols);
    return { values, max };
  }
}

/** A step label to draw: the step's index in the input, and the left edge of its text. */
export interface StepLabel {
  readonly index: number;
  readonly x: number;
}

/**
 * Which step labels fit, and where: each label sits right of its line (left of it near the plot's
 * right edge) and is drawn only if it clears the previous drawn label by `gap`, so labels of
 * steps that crowd together never print over each other; their dashed lines still show every
 * step. `lines` are the steps' x positions, ascending; `widths` their labels' widths.
 */
export function placeStepLabels(lines: readonly number[], widths: readonly number[], right: number, pad: number, gap: number): StepLabel[] {
  const out: StepLabel[] = [];
  let end = -Infinity;
  for (let i = 0; i < lines.length; i++) {
    const w = widths[i]!;
    let x = lines[i]! + pad;
    if (x + w > right) x = lines[i]! - pad - w;
    if (x < end + gap) continue;
    out.push({ index: i, x });
    end = x + w;
  }
  return out;
}

const CATEGORY_COLORS: Record<string, string> = {
  Parameter: '#4e79a7',
  Buffer: '#76b7b2',
  Gradient: '#f28e2b',
  Activation: '#59a14f',
  Temp: '#e15759',
  Optstate: '#b07aa1',
  Other: '#9c755f',
  active_allocated: '#4e79a7',
  active_pending_free: '#f28e2b',
  inactive: '#bab0ac',
  allocated: '#4e79a7',
  reserved: '#bab0ac',
};
const FALLBACK = ['#edc948', '#ff9da7', '#bab0ac', '#86bcb6', '#d37295', '#a0cbe8'];

/**
 * A count with thousands separators ("1,234,567"). Not `toLocaleString`: its first call loads the
 * browser's number-format data, tens of milliseconds that would fall before the chart's first frame.
 */
export function wholeNumber(n: number): string {
  const digits = Math.abs(Math.round(n)).toString();
  let out = digits.slice(0, ((digits.length - 1) % 3) + 1);
  for (let i = out.length; i < digits.length; i += 3) out += `,${digits.slice(i, i + 3)}`;
  return n < 0 && digits !== '0' ? `-${out}` : out;
}

/** A count and its noun, plural unless one ("1 event", "2,048 events"). */
export function countOf(n: number, noun: string): string {
  return `${wholeNumber(n)} ${noun}${n === 1 ? '' : 's'}`;
}

/** A color per series: the category's color, darker for each further device. */
export function seriesColors(data: ReportData): string[] {
  const devices = [...new Set(data.series.map((s) => s.device))];
  let fallback = 0;
  return data.series.map((s) => {
    const base = CATEGORY_COLORS[s.category] ?? FALLBACK[fallback++ % FALLBACK.length];
    const d = devices.indexOf(s.device);
    return d === 0 ? base : shade(base, 1 - 0.25 * Math.min(d, 3));
  });
}

function shade(hex: string, f: number): string {
  const n = parseInt(hex.slice(1), 16);
  const ch = (v: number) => Math.round(Math.max(0, Math.min(255, v * f)));
  return `rgb(${ch((n >> 16) & 255)},${ch((n >> 8) & 255)},${ch(n & 255)})`;
}

export function formatTime(t: number, unit: ReportData['timeUnit']): string {
  if (unit === 'event') return `event ${wholeNumber(Math.round(t))}`;
  if (Math.abs(t) >= 1000) return `${(t / 1000).toFixed(t >= 100000 ? 1 : 3)} s`;
  return `${t.toFixed(t >= 100 ? 1 : 3)} ms`;
}

/** 1, 2 or 5 × a power of ten, at least `x`. */
export function niceStep(x: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** Time axis step for a span: round, at least 1 µs (the trace clock) or 1 event. */
export function timeStep(span: number, ticks: number, unit: ReportData['timeUnit']): number {
  return Math.max(niceStep(span / ticks), unit === 'event' ? 1 : 0.001);
}

/** A time axis label with as many decimals as the step needs, so neighbouring ticks differ. */
export function formatTick(t: number, step: number, unit: ReportData['timeUnit']): string {
  if (unit === 'event') return wholeNumber(Math.round(t));
  const decimals = (s: number): number => Math.min(6, Math.max(0, -Math.floor(Math.log10(s) + 1e-9)));
  if (step >= 1000 || Math.abs(t) >= 10000) return `${(t / 1000).toFixed(decimals(step / 1000))} s`;
  return `${t.toFixed(decimals(step))} ms`;
}

const BYTE_UNITS: [number, string][] = [
  [1024 ** 4, 'TiB'],
  [1024 ** 3, 'GiB'],
  [1024 ** 2, 'MiB'],
  [1024, 'KiB'],
  [1, 'B'],
];

/** Byte axis steps: 1, 2 or 5 × 1024^k up to 500, then the next unit ("1 MiB", never "1000 KiB"). */
export function niceBytesStep(x: number): number {
  if (!(x > 0)) return 1;
  for (const [u] of [...BYTE_UNITS].reverse()) {
    for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) if (m * u >= x && (m < 1000 || u === 1024 ** 4)) return m * u;
  }
  return niceStep(x / 1024 ** 4) * 1024 ** 4;
}

/**
 * A byte axis label, exact: the value in the largest unit that states it with at most one decimal
 * ("1.5 GiB", "512 KiB", "7,400 MiB" for a tick of a 200 MiB step, never a rounded "7.23 GiB").
 */
export function axisBytes(v: number): string {
  if (v === 0) return '0 B';
  for (const [u, name] of BYTE_UNITS) {
    if (Math.abs(v) >= u && (v * 10) % u === 0) {
      const tenths = Math.round((Math.abs(v) * 10) / u) % 10;
      return `${wholeNumber(Math.trunc(v / u))}${tenths ? `.${tenths}` : ''} ${name}`;
    }
  }
  return `${v} B`;
}

export { humanBytes };
