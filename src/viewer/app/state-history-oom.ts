/**
 * Out-of-memory events (the trace's `oom` entries) as marks on the report's time charts: the
 * Active Memory Timeline, the Active Cached Segment Timeline and the state history's event strip.
 * A mark is a red line at the OOM's time; hovering near it tells the time, the requested size and
 * what the device had free (`device_free`).
 */
import type { ReportData } from '../report-data.js';
import { formatTime, humanBytes, wholeNumber } from './timeline.js';

export interface OomMark {
  /** Index of the event in its device's trace. */
  readonly event: number;
  /** Time on the chart's axis (ms from the first event, or the event number). */
  readonly time: number;
  readonly requested: number;
  /** Free bytes the device reported; null when the entry has none. */
  readonly deviceFree: number | null;
}

/** Event times of one device of `data.memory` (the axis every snapshot chart uses). */
export function eventTimes(data: ReportData, memoryDevice: number): Float64Array {
  const dt = data.memory?.devices[memoryDevice]?.eventDt ?? [];
  const time = new Float64Array(dt.length);
  let us = 0;
  for (let i = 0; i < dt.length; i++) {
    us += dt[i];
    time[i] = us / 1000;
  }
  return time;
}

/** The OOMs of the device shown as `data.memory.devices[memoryDevice]`. */
export function oomMarks(data: ReportData, memoryDevice: number, timeAt: (event: number) => number): OomMark[] {
  const dev = data.history?.devices.find((d) => d.memory === memoryDevice);
  if (!dev) return [];
  const n = data.memory?.devices[memoryDevice]?.eventDt.length ?? 0;
  return dev.ooms.event.map((e, k) => ({
    event: e,
    time: e >= 0 && e < n ? timeAt(e) : 0,
    requested: dev.ooms.requested[k] ?? 0,
    deviceFree: dev.ooms.deviceFree[k] >= 0 ? dev.ooms.deviceFree[k] : null,
  }));
}

export function oomText(m: OomMark, unit: ReportData['timeUnit']): string {
  const free = m.deviceFree === null ? 'device free not recorded' : `${humanBytes(m.deviceFree)} free on the device`;
  return `Out of memory at ${formatTime(m.time, unit)} (event ${wholeNumber(m.event)}): ${humanBytes(m.requested)} requested, ${free}`;
}

export const OOM_COLOR = '#d62728';

/** Draws each mark inside the view as a red line across the plot, with a small flag on top. */
export function drawOomMarks(ctx: CanvasRenderingContext2D, marks: readonly OomMark[], view: { t0: number; t1: number }, plot: { x: number; y: number; w: number; h: number }, dpr: number): void {
  const span = view.t1 - view.t0;
  if (!(span > 0)) return;
  ctx.fillStyle = OOM_COLOR;
  for (const m of marks) {
    const x = Math.round(plot.x + ((m.time - view.t0) / span) * plot.w);
    if (x < plot.x || x > plot.x + plot.w) continue;
    ctx.fillRect(x - Math.floor(dpr / 2), plot.y, Math.max(1, Math.round(dpr)), plot.h);
    ctx.fillRect(x - 3 * dpr, plot.y, 7 * dpr, 5 * dpr);
  }
}

/** The mark within a few pixels of canvas x `px` (device pixels), or null. */
export function oomAt(marks: readonly OomMark[], view: { t0: number; t1: number }, plot: { x: number; w: number }, px: number, dpr: number): OomMark | null {
  const span = view.t1 - view.t0;
  let best: OomMark | null = null;
  let bestD = 4 * dpr;
  for (const m of marks) {
    const d = Math.abs(plot.x + ((m.time - view.t0) / span) * plot.w - px);
    if (d <= bestD) {
      best = m;
      bestD = d;
    }
  }
  return best;
}
