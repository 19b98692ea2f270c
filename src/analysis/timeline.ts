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
import { humanBytes } from '../core/units.js';
import { renderHtmlPage } from '../render/html-page.js';
import { renderStackedAreaSvg } from '../render/stacked-area-svg.js';
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
    // Column 0 of `sizes` is the zero base under the first category.
    const bands = { times: series.times, values: series.sizes.map((row) => row.slice(1)), bands: series.categories };
    const svg = renderStackedAreaSvg(bands, titleLines, options.width ?? 1200, options.height ?? 640);
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
