import { MemscopeError } from '../core/errors.js';
import { CachingAllocatorModel } from './caching-allocator.js';
import { SimulatedDevice } from './device.js';
import { AddressMap } from './address-map.js';
import {
  ALLOC,
  asParsed,
  EMPTY_COLUMNS,
  FREE_COMPLETED,
  FREE_REQUESTED,
  OOM,
  SEGMENT_ALLOC,
  SEGMENT_FREE,
  SEGMENT_MAP,
  SEGMENT_UNMAP,
  type ParsedSnapshot,
  type TraceColumns,
} from './replay-input.js';
import type { OomAnswer, ReplayOom, TraceRunOoms } from './replay-report.js';
import { impliedStartState, type StartState } from './replay-start-state.js';
import type { AllocatorSettings } from './settings.js';

/**
 * What-if runs: a snapshot's allocation sequence under other allocator settings or another device
 * capacity, on a simulated device; and the answer to whether another configuration would have
 * avoided a recorded OOM.
 */

/** The recorded settings with expandable segments switched (on, or off when the run had them on). */
export function expandableAlternative(settings: AllocatorSettings): AllocatorSettings {
  const on = !settings.expandableSegments;
  const conf = settings.conf.replace(/(^|,)\s*expandable_segments:\s*\w+\s*(?=,|$)/g, '').replace(/^,/, '');
  return Object.freeze({ ...settings, expandableSegments: on, conf: `${conf ? `${conf},` : ''}expandable_segments:${on ? 'True' : 'False'}` });
}

/** The capacity PyTorch had at a recorded OOM: what it reserved plus what the device still had free. */
export function capacityAtOom(oom: ReplayOom): number {
  return oom.reservedBytes + oom.deviceFreeBytes;
}

export function answerOom(snap: ParsedSnapshot, device: number, oom: ReplayOom): OomAnswer {
  const capacityBytes = capacityAtOom(oom);
  const alternative = expandableAlternative(snap.settings);
  const oomAt = (r: WhatIfResult): number | null => r.oom?.traceIndex ?? null;
  const recorded = whatIf(snap, snap.settings, capacityBytes, device);
  const other = whatIf(snap, alternative, capacityBytes, device);
  const otherAt = oomAt(other);
  return {
    traceIndex: oom.traceIndex,
    capacityBytes,
    alternative: alternative.conf,
    recordedOomAt: oomAt(recorded),
    alternativeOomAt: otherAt,
    avoided: otherAt === null || otherAt > oom.traceIndex,
  };
}

export interface WhatIfResult extends TraceRunOoms {
  settings: string;
  capacity: number | null;
  peakReservedBytes: number;
  peakAllocatedBytes: number;
  /** 1 − allocated/reserved at the moment reserved memory peaked. */
  fragmentationAtPeak: number;
  peakSegments: number;
  deviceAllocs: number;
  deviceFrees: number;
  allocRetries: number;
  endReservedBytes: number;
}

/**
 * Runs the same allocation sequence under other settings/capacity on a fresh
 * simulated device. Blocks live when the trace began are allocated first (in
 * address order), then the trace's allocs and frees follow; explicit
 * empty_cache calls (segment_free runs not followed by a segment_alloc) are
 * repeated. Stops at the first OOM.
 */
export function whatIf(raw: unknown, settings: AllocatorSettings, capacity: number | null, device = 0): WhatIfResult {
  return new WhatIfRun(asParsed(raw), settings, capacity, device).run();
}

/** One what-if run; its peaks are observed after every allocation. */
class WhatIfRun {
  private readonly model: CachingAllocatorModel;
  private readonly trace: TraceColumns;
  /** The trace's address → the run's. */
  private readonly addrMap = new AddressMap<number>();
  private readonly recordedOoms: WhatIfResult['recordedOoms'] = [];
  private peakReserved = 0;
  private fragmentationAtPeak = 0;
  private peakSegments = 0;
  /** Set when the run has run out of memory. */
  private oom: WhatIfResult['oom'] = null;

  constructor(
    private readonly snap: ParsedSnapshot,
    private readonly settings: AllocatorSettings,
    private readonly capacity: number | null,
    private readonly device: number,
  ) {
    this.model = new CachingAllocatorModel({ device, settings, backend: new SimulatedDevice(capacity ?? 2 ** 50) });
    this.trace = snap.columns[device] ?? EMPTY_COLUMNS;
  }

  run(): WhatIfResult {
    const start = impliedStartState(this.snap, this.device);
    if (!this.loadStart(start)) return this.result();
    const { action: actions, addr, size, count } = this.trace;
    for (let i = start.from; i < count; i++) {
      const action = actions[i];
      if (action === ALLOC) {
        const got = this.tryMalloc(size[i], this.trace.stream[i], i);
        if (got === null) return this.result();
        this.addrMap.set(addr[i], got);
      } else if (action === OOM) {
        if (!this.retryRecordedOom(i)) return this.result();
      } else if (action === FREE_REQUESTED || action === FREE_COMPLETED) this.free(addr[i], action);
      else if (action === SEGMENT_FREE || action === SEGMENT_UNMAP) i = this.releaseRun(i);
    }
    return this.result();
  }

  /** Allocates the blocks live when the trace began, in address order; false on an OOM. */
  private loadStart(start: StartState): boolean {
    for (const seg of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)].sort((a, b) => a.address - b.address)) {
      for (const b of seg.blocks) {
        if (!b.allocated) continue;
        const got = this.tryMalloc(b.requestedSize, seg.stream, -1);
        if (got === null) return false;
        this.addrMap.set(b.address, got);
      }
    }
    return true;
  }

  /** The address the model gave, or null (and `oom` set) when it ran out of memory. */
  private tryMalloc(size: number, stream: number, index: number): number | null {
    try {
      const a = this.model.malloc(size, stream);
      this.observe();
      return a;
    } catch (err) {
      if (err instanceof MemscopeError && err.code === 'oom') {
        this.oom = { traceIndex: index, requestedBytes: size, message: err.message };
        return null;
      }
      throw err;
    }
  }

  /** The program asked for this and PyTorch could not give it: a run that can goes on as the trace did. False when this run cannot either. */
  private retryRecordedOom(i: number): boolean {
    const size = this.trace.size[i];
    const got = this.tryMalloc(size, this.trace.stream[i], i);
    this.recordedOoms.push({ traceIndex: i, requestedBytes: size, avoided: got !== null });
    if (got === null) return false;
    this.model.free(got);
    return true;
  }

  private free(traced: number, action: number): void {
    const addr = this.addrMap.get(traced);
    if (addr === undefined) return;
    if (action === FREE_REQUESTED) this.model.requestFree(addr);
    else if (this.model.isPendingFree(addr)) {
      this.model.completeFree(addr);
      this.addrMap.delete(traced);
    }
  }

  /** A run of segment_free / segment_unmap from i: an empty_cache unless the next event allocates. Returns the run's last index. */
  private releaseRun(i: number): number {
    const { action: actions, count } = this.trace;
    let j = i;
    while (j < count && (actions[j] === SEGMENT_FREE || actions[j] === SEGMENT_UNMAP)) j++;
    const next = j < count ? actions[j] : -1;
    if (next !== SEGMENT_ALLOC && next !== SEGMENT_MAP && next !== OOM) this.model.emptyCache();
    return j - 1;
  }

  private observe(): void {
    const model = this.model;
    const reserved = model.reservedBytes;
    if (reserved > this.peakReserved) {
      this.peakReserved = reserved;
      this.fragmentationAtPeak = reserved === 0 ? 0 : 1 - model.allocatedBytes / reserved;
    }
    this.peakSegments = Math.max(this.peakSegments, model.stats.segment[0].current);
  }

  private result(): WhatIfResult {
    const stats = this.model.stats;
    return {
      settings: this.settings.conf,
      capacity: this.capacity,
      peakReservedBytes: this.peakReserved,
      peakAllocatedBytes: stats.allocated_bytes[0].peak,
      fragmentationAtPeak: this.fragmentationAtPeak,
      peakSegments: this.peakSegments,
      deviceAllocs: stats.num_device_alloc,
      deviceFrees: stats.num_device_free,
      allocRetries: stats.num_alloc_retries,
      endReservedBytes: this.model.reservedBytes,
      oom: this.oom,
      recordedOoms: this.recordedOoms,
    };
  }
}
