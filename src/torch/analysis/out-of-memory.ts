/** Out-of-memory events in a snapshot's trace, with what was live on their device at that point. */
import type { MemorySnapshot, TraceTable } from '../snapshot.js';
import { DEFAULT_SITE_RULE, type SiteRule } from '../../core/site-rule.js';
import { frameLabels } from './frame-labels.js';
import { snapshotTimeline } from './timeline.js';
import { deviceLabel } from '../device-type.js';

/** One allocation live when an OOM was raised. */
export interface OomLiveAllocation {
  readonly address: number;
  readonly size: number;
  /** The allocating frame and its callers, innermost first; empty when no stack was recorded. */
  readonly frames: string[];
}

/** An `oom` trace entry with the state of its device at that point. */
export interface OomEvent {
  readonly device: number;
  /** Index of the entry in its device's trace. */
  readonly index: number;
  /** Microseconds since the epoch; null when the entry has no time_us. */
  readonly timeUs: number | null;
  /** Bytes the failing allocation asked for. */
  readonly requestedSize: number;
  /** Free bytes the device reported (`device_free`); null when the entry has none. */
  readonly deviceFree: number | null;
  /**
   * Bytes allocated and reserved just before the OOM, from the trace anchored at the snapshot's
   * state (as in `snapshotTimeline`): what the allocator held when it gave up.
   */
  readonly allocated: number;
  readonly reserved: number;
  /** Where the failing allocation was requested (its top frames); empty when not recorded. */
  readonly frames: string[];
  /** The largest allocations live then, largest first. */
  readonly largestLive: OomLiveAllocation[];
}

/**
 * Every `oom` entry of every device trace, with allocated / reserved bytes at that point and the
 * largest allocations live then. Live allocations come from replaying the trace up to the OOM,
 * starting from those it implies were live before it began: blocks allocated in the snapshot that
 * no trace entry allocates, and addresses whose first entry is a free. PyTorch records a free with
 * the stack of the allocation it frees (CUDACachingAllocator.cpp `record_trace` with
 * `context_when_allocated`), so those carry their allocating stack too.
 */
export function outOfMemoryEvents(snapshot: MemorySnapshot, top = 5, topFrames = 3, site: SiteRule = DEFAULT_SITE_RULE): OomEvent[] {
  const oom = snapshot.actionNames.indexOf('oom');
  if (oom < 0) return [];
  const hasOom = (trace: TraceTable): boolean => {
    for (let i = 0; i < trace.count; i++) if (trace.action[i] === oom) return true;
    return false;
  };
  // The timeline costs five columns per event: made only for a file with an OOM.
  if (!snapshot.traces.some(hasOom)) return [];
  const out: OomEvent[] = [];
  const l = frameLabels(snapshot, site);
  const timeline = snapshotTimeline(snapshot);
  for (const trace of snapshot.traces) {
    if (!hasOom(trace)) continue;
    const line = timeline.devices.find((d) => d.device === deviceLabel(snapshot.deviceType, trace.device))!;
    const code = (name: string): number => snapshot.actionNames.indexOf(name);
    const alloc = code('alloc');
    const freeRequested = code('free_requested');
    const freeCompleted = code('free_completed');
    // Live at the start of the trace.
    const live = new Map<number, { size: number; stack: number }>();
    const allocatedInTrace = new Set<number>();
    const seen = new Set<number>();
    for (let i = 0; i < trace.count; i++) {
      const a = trace.action[i]!;
      const addr = trace.addr[i]!;
      if (a === alloc) allocatedInTrace.add(addr);
      if ((a === freeRequested || a === freeCompleted) && !seen.has(addr)) live.set(addr, { size: trace.size[i]!, stack: trace.stack[i]! });
      if (a === alloc || a === freeRequested || a === freeCompleted) seen.add(addr);
    }
    const b = snapshot.blocks;
    const activeAllocated = snapshot.stateNames.indexOf('active_allocated');
    for (let i = 0; i < b.count; i++) {
      if (b.state[i] !== activeAllocated || snapshot.segments[b.segment[i]!]!.device !== trace.device) continue;
      if (!allocatedInTrace.has(b.address[i]!) && !live.has(b.address[i]!)) live.set(b.address[i]!, { size: b.size[i]!, stack: b.stack[i]! });
    }
    for (let i = 0; i < trace.count; i++) {
      const a = trace.action[i]!;
      if (a === alloc) live.set(trace.addr[i]!, { size: trace.size[i]!, stack: trace.stack[i]! });
      else if (a === freeCompleted) live.delete(trace.addr[i]!);
      else if (a === oom) {
        const largest = [...live].sort((x, y) => y[1].size - x[1].size || x[0] - y[0]).slice(0, top);
        const time = trace.timeUs[i]!;
        const free = trace.deviceFree ? trace.deviceFree[i]! : NaN;
        out.push({
          device: trace.device,
          index: i,
          timeUs: Number.isNaN(time) ? null : time,
          requestedSize: trace.size[i]!,
          deviceFree: Number.isNaN(free) ? null : free,
          allocated: line.allocated[i]!,
          reserved: line.reserved![i]!,
          frames: l.top(trace.stack[i]!, topFrames),
          largestLive: largest.map(([address, x]) => ({ address, size: x.size, frames: l.top(x.stack, topFrames) })),
        });
      }
    }
  }
  return out;
}
