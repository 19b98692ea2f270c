/**
 * File exports of the memory timeline (Node only; the data and page builders
 * are in timeline.ts): PyTorch's `export_memory_timeline`,
 * `export_memory_timeline_raw` and `export_memory_timeline_html`.
 */

import { writeFileSync } from 'node:fs';
import { MemscopeError } from '../core/errors.js';
import type { DeviceName } from '../core/events.js';
import type { MemoryProfile } from './memory-profile.js';
import { MemoryProfileTimeline as TimelineData, type TimelineHtmlOptions } from './timeline.js';

function write(path: string, text: string): void {
  try {
    writeFileSync(path, text, 'utf8');
  } catch (cause) {
    throw new MemscopeError('write-failed', `cannot write memory timeline to ${path}: ${(cause as Error).message}`, { cause });
  }
}

export class MemoryProfileTimeline extends TimelineData {
  constructor(profile: MemoryProfile) {
    super(profile);
  }

  /** Writes `[times, sizes by category]` as JSON. */
  exportMemoryTimeline(path: string, device: DeviceName): void {
    write(path, this.toJson(device));
  }

  /** Writes raw `(time, action, bytes, category)` events as JSON. */
  exportMemoryTimelineRaw(path: string, device: DeviceName): void {
    write(path, this.toRawJson(device));
  }

  /** Writes a self-contained HTML page with the stacked-area chart. */
  exportMemoryTimelineHtml(path: string, device: DeviceName, options: TimelineHtmlOptions = {}): void {
    write(path, this.toHtml(device, options));
  }
}
