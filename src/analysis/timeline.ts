/**
 * MemoryProfileTimeline: the memory timeline of a MemoryProfile as data, JSON
 * and a self-contained HTML page (PyTorch's `MemoryProfileTimeline`). File
 * writing lives in timeline-node.ts so this module runs in browsers.
 *
 * Units: sizes are bytes; the chart picks a binary unit (KiB/MiB/GiB) and
 * labels it as such. PyTorch divided by 1024³ but labelled the axis "GB"
 * (pytorch#120171 fixed the title's figures, not the axis label).
 */

import { MemscopeError } from '../core/errors.js';
import type { DeviceName } from '../core/events.js';
import { humanBytes, type Unit } from '../core/units.js';
import { escapeHtml } from '../render/escape.js';
import { renderHtmlPage } from '../render/html-page.js';
import type { Action, Category, CategoryDict, MemoryProfile, TimelineEntry, TimelineKey } from './memory-profile.js';
import { ACTION_INDEX, CATEGORY_COLORS, CATEGORY_ORDER, categoryIndex } from './memory-profile.js';

/** The stacked series a chart needs: one row of sizes per time, one column per category. */
export interface MemoryTimelineSeries {
  readonly device: DeviceName;
  /** Microseconds (PyTorch's unit for this export); PREEXISTING entries take the earliest time. */
  readonly times: readonly number[];
  /** `sizes[i][0]` is always 0; `sizes[i][categoryIndex(c) + 1]` is bytes of category `c` at `times[i]`. */
  readonly sizes: readonly (readonly number[])[];
  readonly categories: readonly { readonly category: Category | null; readonly label: string; readonly color: string }[];
  /** Peak bytes allocated on the device while recording, when known. */
  readonly maxAllocatedBytes: number | null;
}

/** One raw event: [time ns, action index, bytes (negative for a release), category index]. */
export type RawTimelineEvent = [number, number, number, number];

export interface TimelineHtmlOptions {
  readonly title?: string;
  /** Pixels. Defaults 1200 × 640. */
  readonly width?: number;
  readonly height?: number;
  /** Overrides the recorded peak. */
  readonly maxAllocatedBytes?: number;
  /** What the device reserved at its peak; omitted where the backend keeps no pool (TFJS cpu). */
  readonly maxReservedBytes?: number;
}

export class MemoryProfileTimeline {
  readonly timeline: readonly TimelineEntry[];
  readonly categories: CategoryDict;

  constructor(private readonly profile: MemoryProfile) {
    this.timeline = profile.timeline;
    this.categories = profile.categories;
  }

  /** Devices that appear in the timeline. */
  devices(): DeviceName[] {
    return [...new Set(this.timeline.map(([, , [key]]) => key.device))].sort();
  }

  private category(key: TimelineKey, version: number): Category | null {
    return key.kind === 'tensor' ? this.categories.get(key, version) : null;
  }

  /** [times, sizes by category] for one device (PyTorch's `_coalesce_timeline`). */
  coalesce(device: DeviceName): { times: number[]; sizes: number[][] } {
    const times: number[] = [];
    const sizes: number[][] = [];
    const update = (key: TimelineKey, version: number, delta: number) => {
      sizes[sizes.length - 1]![categoryIndex(this.category(key, version)) + 1]! += delta;
    };
    let tMin = -1;
    for (const [time, action, [key, version], bytes] of this.timeline) {
      if (key.device !== device) continue;
      const t = time === -1 ? -1 : Math.trunc(time / 1000);
      if (tMin === -1 || (t < tMin && t > 0)) tMin = t;
      if (times.length === 0) {
        times.push(t);
        sizes.push(new Array(CATEGORY_ORDER.length + 1).fill(0));
      } else if (t !== times[times.length - 1]) {
        times.push(t);
        sizes.push([...sizes[sizes.length - 1]!]);
      }
      applyAction(action, key, version, bytes, update);
    }
    return { times: times.map((t) => (t < 0 ? tMin : t)), sizes };
  }

  /** The chart's data, with category names and colours, for report writers. */
  series(device: DeviceName): MemoryTimelineSeries {
    const { times, sizes } = this.coalesce(device);
    return {
      device,
      times,
      sizes,
      categories: CATEGORY_ORDER.map((category) => ({
        category,
        label: category ?? 'Unknown',
        color: CATEGORY_COLORS.get(category)!,
      })),
      maxAllocatedBytes: this.profile.recording.peakAllocatedBytes.get(device) ?? null,
    };
  }

  /** `[times, sizes]` as JSON (PyTorch's `export_memory_timeline` file content). */
  toJson(device: DeviceName): string {
    const { times, sizes } = this.coalesce(device);
    return JSON.stringify([times, sizes]);
  }

  /** Raw events for one device (PyTorch's `export_memory_timeline_raw`). */
  raw(device: DeviceName): RawTimelineEvent[] {
    const out: RawTimelineEvent[] = [];
    for (const [t, action, [key, version], bytes] of this.timeline) {
      if (key.device !== device) continue;
      const a = ACTION_INDEX[action];
      const cat = (v: number) => categoryIndex(this.category(key, v));
      if (action === 'PREEXISTING' || action === 'CREATE') out.push([t, a, bytes, cat(version)]);
      else if (action === 'INCREMENT_VERSION') out.push([t, a, -bytes, cat(version)], [t, a, bytes, cat(version + 1)]);
      else out.push([t, a, -bytes, cat(version)]);
    }
    return out;
  }

  toRawJson(device: DeviceName): string {
    return JSON.stringify(this.raw(device));
  }

  /** A self-contained HTML page with a stacked-area SVG chart by category; no scripts, no network. */
  toHtml(device: DeviceName, options: TimelineHtmlOptions = {}): string {
    const series = this.series(device);
    if (series.times.length === 0) {
      throw new MemscopeError('no-timeline', `memory timeline: no memory events on device ${JSON.stringify(device)} (devices: ${this.devices().join(', ') || 'none'})`);
    }
    const maxAllocated = options.maxAllocatedBytes ?? series.maxAllocatedBytes;
    const titleLines = [
      ...(options.title ? [options.title] : []),
      `Max memory allocated: ${maxAllocated === null ? 'not recorded' : humanBytes(maxAllocated)}`,
      `Max memory reserved: ${options.maxReservedBytes === undefined ? 'not reported by this backend' : humanBytes(options.maxReservedBytes)}`,
    ];
    const svg = renderStackedAreaSvg(series, titleLines, options.width ?? 1200, options.height ?? 640);
    return renderHtmlPage({
      title: options.title ?? `Memory Timeline (${device})`,
      css: 'body{font-family:sans-serif;margin:16px;background:#fff;color:#222}',
      body: svg,
    });
  }
}

function applyAction(
  action: Action,
  key: TimelineKey,
  version: number,
  bytes: number,
  update: (key: TimelineKey, version: number, delta: number) => void,
): void {
  switch (action) {
    case 'PREEXISTING':
    case 'CREATE':
      update(key, version, bytes);
      return;
    case 'INCREMENT_VERSION':
      update(key, version, -bytes);
      update(key, version + 1, bytes);
      return;
    case 'DESTROY':
      update(key, version, -bytes);
      return;
  }
}

const UNIT_BYTES: [Unit, number][] = [
  ['GiB', 1024 ** 3],
  ['MiB', 1024 ** 2],
  ['KiB', 1024],
  ['B', 1],
];

function niceStep(range: number, target: number): number {
  if (range <= 0) return 1;
  const raw = range / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const m = raw / pow;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * pow;
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(Math.min(6, Math.max(0, -Math.floor(Math.log10(Math.abs(n) || 1)) + 2))).replace(/\.?0+$/, '');
}

/** The chart: one filled band per category, stacked in PyTorch's order, time (ms) across, memory up. */
export function renderStackedAreaSvg(series: MemoryTimelineSeries, titleLines: readonly string[], width: number, height: number): string {
  const left = 90;
  const right = 190;
  const top = 24 + 20 * titleLines.length;
  const bottom = 56;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const t0 = Math.min(...series.times);
  const xs = series.times.map((t) => (t - t0) / 1e3); // ms
  const cumulative = series.sizes.map((row) => {
    const acc: number[] = [];
    let sum = 0;
    for (const v of row) acc.push((sum += v));
    return acc;
  });
  const maxBytes = Math.max(1, ...cumulative.map((c) => c[c.length - 1]!));
  const [unit, divisor] = UNIT_BYTES.find(([, d]) => maxBytes >= d) ?? UNIT_BYTES[UNIT_BYTES.length - 1]!;
  const yMax = maxBytes / divisor;
  const xMax = Math.max(xs[xs.length - 1]!, 1e-3);
  const px = (x: number) => left + (x / xMax) * plotW;
  const py = (y: number) => top + plotH - (y / divisor / yMax) * plotH;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img">`);
  titleLines.forEach((line, i) => {
    parts.push(`<text x="${left + plotW / 2}" y="${20 + 20 * i}" text-anchor="middle" font-size="15">${escapeHtml(line)}</text>`);
  });
  series.categories.forEach((c, i) => {
    const upper = xs.map((x, j) => `${px(x).toFixed(2)},${py(cumulative[j]![i + 1]!).toFixed(2)}`);
    const lower = xs.map((x, j) => `${px(x).toFixed(2)},${py(cumulative[j]![i]!).toFixed(2)}`).reverse();
    // A single sample would draw nothing; widen it to a sliver so it shows.
    if (xs.length === 1) {
      upper.push(`${(px(xs[0]!) + 2).toFixed(2)},${py(cumulative[0]![i + 1]!).toFixed(2)}`);
      lower.unshift(`${(px(xs[0]!) + 2).toFixed(2)},${py(cumulative[0]![i]!).toFixed(2)}`);
    }
    parts.push(
      `<polygon points="${[...upper, ...lower].join(' ')}" fill="${escapeHtml(c.color)}" fill-opacity="0.7" stroke="none"><title>${escapeHtml(c.label)}</title></polygon>`,
    );
  });
  // Axes and ticks.
  parts.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  const yStep = niceStep(yMax, 6);
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    const yy = py(y * divisor).toFixed(2);
    parts.push(`<line x1="${left - 5}" y1="${yy}" x2="${left}" y2="${yy}" stroke="#333"/>`);
    parts.push(`<text x="${left - 8}" y="${yy}" text-anchor="end" dominant-baseline="middle" font-size="12">${escapeHtml(fmt(y))}</text>`);
  }
  const xStep = niceStep(xMax, 8);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    const xx = px(x).toFixed(2);
    parts.push(`<line x1="${xx}" y1="${top + plotH}" x2="${xx}" y2="${top + plotH + 5}" stroke="#333"/>`);
    parts.push(`<text x="${xx}" y="${top + plotH + 20}" text-anchor="middle" font-size="12">${escapeHtml(fmt(x))}</text>`);
  }
  parts.push(`<text x="${left + plotW / 2}" y="${height - 12}" text-anchor="middle" font-size="13">Time (ms)</text>`);
  parts.push(
    `<text x="18" y="${top + plotH / 2}" text-anchor="middle" font-size="13" transform="rotate(-90 18 ${top + plotH / 2})">${escapeHtml(`Memory (${unit})`)}</text>`,
  );
  // Legend, in the stacking order.
  series.categories.forEach((c, i) => {
    const y = top + 10 + i * 22;
    parts.push(`<rect x="${left + plotW + 16}" y="${y}" width="14" height="14" fill="${escapeHtml(c.color)}" fill-opacity="0.7"/>`);
    parts.push(`<text x="${left + plotW + 36}" y="${y + 11}" font-size="12">${escapeHtml(c.label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}
