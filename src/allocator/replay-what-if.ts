import { MemscopeError } from '../core/errors.js';
import { CachingAllocatorModel } from './caching-allocator.js';
import { SimulatedDevice } from './device.js';
import { asParsed, type ParsedSnapshot } from './replay-input.js';
import type { OomAnswer, ReplayOom } from './replay-report.js';
import { impliedStartState } from './replay-start-state.js';
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

export interface WhatIfResult {
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
  oom: null | { traceIndex: number; requestedBytes: number; message: string };
  /** The trace's own OOMs this run went past: each request was tried here and, when it fit, freed again at once. */
  recordedOoms: { traceIndex: number; requestedBytes: number; avoided: boolean }[];
}

/**
 * Runs the same allocation sequence under other settings/capacity on a fresh
 * simulated device. Blocks live when the trace began are allocated first (in
 * address order), then the trace's allocs and frees follow; explicit
 * empty_cache calls (segment_free runs not followed by a segment_alloc) are
 * repeated. Stops at the first OOM.
 */
export function whatIf(raw: unknown, settings: AllocatorSettings, capacity: number | null, device = 0): WhatIfResult {
  const snap = asParsed(raw);
  const trace = snap.traces[device] ?? [];
  const start = impliedStartState(snap, device);
  const recordedOoms: WhatIfResult['recordedOoms'] = [];
  const backend = new SimulatedDevice(capacity ?? 2 ** 50);
  const model = new CachingAllocatorModel({ device, settings, backend });
  const addrMap = new Map<number, number>();
  let peakReserved = 0;
  let fragmentationAtPeak = 0;
  let peakSegments = 0;
  const observe = (): void => {
    const reserved = model.reservedBytes;
    if (reserved > peakReserved) {
      peakReserved = reserved;
      fragmentationAtPeak = reserved === 0 ? 0 : 1 - model.allocatedBytes / reserved;
    }
    peakSegments = Math.max(peakSegments, model.stats.segment[0].current);
  };
  const result = (oom: WhatIfResult['oom']): WhatIfResult => ({
    settings: settings.conf,
    capacity,
    peakReservedBytes: peakReserved,
    peakAllocatedBytes: model.stats.allocated_bytes[0].peak,
    fragmentationAtPeak,
    peakSegments,
    deviceAllocs: model.stats.num_device_alloc,
    deviceFrees: model.stats.num_device_free,
    allocRetries: model.stats.num_alloc_retries,
    endReservedBytes: model.reservedBytes,
    oom,
    recordedOoms,
  });
  const tryMalloc = (size: number, stream: number, index: number): number | WhatIfResult => {
    try {
      const a = model.malloc(size, stream);
      observe();
      return a;
    } catch (err) {
      if (err instanceof MemscopeError && err.code === 'oom') return result({ traceIndex: index, requestedBytes: size, message: err.message });
      throw err;
    }
  };
  for (const seg of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)].sort((a, b) => a.address - b.address)) {
    for (const b of seg.blocks) {
      if (!b.allocated) continue;
      const got = tryMalloc(b.requestedSize, seg.stream, -1);
      if (typeof got !== 'number') return got;
      addrMap.set(b.address, got);
    }
  }
  for (let i = start.from; i < trace.length; i++) {
    const e = trace[i];
    if (e.action === 'alloc') {
      const got = tryMalloc(e.size, e.stream, i);
      if (typeof got !== 'number') return got;
      addrMap.set(e.addr!, got);
    } else if (e.action === 'oom') {
      // The program asked for this and PyTorch could not give it: a run that can goes on as the trace did.
      const got = tryMalloc(e.size, e.stream, i);
      if (typeof got !== 'number') {
        recordedOoms.push({ traceIndex: i, requestedBytes: e.size, avoided: false });
        return { ...got, recordedOoms };
      }
      recordedOoms.push({ traceIndex: i, requestedBytes: e.size, avoided: true });
      model.free(got);
    } else if (e.action === 'free_requested' || e.action === 'free_completed') {
      const addr = addrMap.get(e.addr!);
      if (addr === undefined) continue;
      if (e.action === 'free_requested') model.requestFree(addr);
      else if (model.isPendingFree(addr)) {
        model.completeFree(addr);
        addrMap.delete(e.addr!);
      }
    } else if (e.action === 'segment_free' || e.action === 'segment_unmap') {
      let j = i;
      while (j < trace.length && (trace[j].action === 'segment_free' || trace[j].action === 'segment_unmap')) j++;
      const next = j < trace.length ? trace[j].action : null;
      if (next !== 'segment_alloc' && next !== 'segment_map' && next !== 'oom') model.emptyCache();
      i = j - 1;
    }
  }
  return result(null);
}

