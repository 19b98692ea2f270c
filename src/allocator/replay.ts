import { MemscopeError } from '../core/errors.js';
import { AddressMap } from './address-map.js';
import { CachingAllocatorModel, hexAddress, type TraceEntry } from './caching-allocator.js';
import { asParsed, type ParsedSnapshot } from './replay-input.js';
import {
  compareEndState,
  describeIncomplete,
  MAX_MISMATCHES,
  rate,
  type DeviceReplayReport,
  type ReplayMismatch,
  type ReplayOom,
  type ReplayReport,
} from './replay-report.js';
import { impliedStartState, type StartState } from './replay-start-state.js';
import { TraceDevice } from './replay-trace-device.js';
import { answerOom } from './replay-what-if.js';

/**
 * Replay of a PyTorch memory snapshot's trace through the allocator model.
 *
 * The snapshot is the allocator's state at the END of its trace. Walking the trace backwards
 * recovers the state at its START (replay-start-state.ts); the model is loaded with that state and
 * every alloc/free/oom is replayed with the snapshot's settings, one device at a time, on a device
 * that answers from the trace (replay-trace-device.ts). Every decision — which cached block,
 * whether to split, whether to ask the device at all, which segments to release or pages to
 * unmap — is the model's; the report (replay-report.ts) compares each with PyTorch's. Each step is
 * one pass over the trace (docs/ALLOCATOR.md, "Replay").
 *
 * The files: replay-input.ts (what is read from a snapshot), replay-start-state.ts,
 * replay-trace-device.ts, replay-report.ts, replay-what-if.ts (other settings and capacities);
 * this module runs the replay and is the one to import.
 */

export { parsedFromSnapshot, parseSnapshot, type ParsedSnapshot } from './replay-input.js';
export {
  expandableAddressSpace,
  impliedStartState,
  reconstructStartState,
  type ImpliedBlock,
  type StartState,
} from './replay-start-state.js';
export type {
  DeviceReplayReport,
  OomAnswer,
  Rate,
  ReplayMismatch,
  ReplayOom,
  ReplayReport,
  TraceIncomplete,
} from './replay-report.js';
export { capacityAtOom, expandableAlternative, whatIf, type WhatIfResult } from './replay-what-if.js';

/** Replays every device trace of a snapshot that has one and compares with PyTorch. */
export function replaySnapshot(raw: unknown): ReplayReport {
  const snap = asParsed(raw);
  const devices: DeviceReplayReport[] = [];
  snap.traces.forEach((trace, device) => {
    if (trace.length === 0) return;
    devices.push(new DeviceReplay(snap, device).run());
  });
  const traced = new Set(devices.map((d) => d.device));
  const untracedDevices = [...new Set(snap.segments.map((s) => s.device))].filter((d) => !traced.has(d)).sort((a, b) => a - b);
  for (let d = 0; d < snap.traces.length; d++) if (!traced.has(d) && !untracedDevices.includes(d)) untracedDevices.push(d);
  untracedDevices.sort((a, b) => a - b);
  return { settings: snap.settings.conf, hasSettings: snap.hasSettings, devices, untracedDevices };
}

/**
 * One device's replay. Per-event state lives in fields, not in closures over the event loop's
 * variables: such a closure makes the engine allocate a fresh scope for every event.
 */
class DeviceReplay {
  private readonly trace: TraceEntry[];
  private readonly start: StartState;
  private readonly backend = new TraceDevice();
  private readonly model: CachingAllocatorModel;
  /** Segment events the model emitted, as parallel columns: action, address, size, trace index being replayed. */
  private readonly emittedAction: string[] = [];
  private readonly emittedAddr: number[] = [];
  private readonly emittedSize: number[] = [];
  private readonly emittedIndex: number[] = [];
  /** Trace index of the event being replayed. */
  private currentIndex = -1;
  /** Segments / page runs the model released while replaying the current event. */
  private freesAtCurrent = 0;
  private readonly mismatches: ReplayMismatch[] = [];
  /** Trace indexes of the segment events replayed. */
  private readonly traceSeg: number[] = [];
  /** PyTorch's address → the model's, for allocations where the two differ (frees name PyTorch's). */
  private readonly addrMap = new AddressMap<number>(1024);
  private readonly ooms: ReplayOom[] = [];
  private allocs = 0;
  private allocMatched = 0;
  /**
   * The run of segment events since the last alloc/free (they belong to the next allocation): its
   * first trace index and how many there are. Only segment and snapshot events lie in between.
   */
  private groupStart = 0;
  private groupCount = 0;

  constructor(
    private readonly snap: ParsedSnapshot,
    private readonly device: number,
  ) {
    this.trace = snap.traces[device];
    this.start = impliedStartState(snap, device);
    this.model = new CachingAllocatorModel({
      device,
      settings: snap.settings,
      backend: this.backend,
      onSegmentEvent: (action, addr, size) => this.onSegmentEvent(action, addr, size),
    });
    this.backend.preload = this.start.layout.map((s) => s.address);
    this.model.loadState(this.start.layout);
    for (const es of this.start.expandable) this.model.loadExpandableState(es);
    this.backend.preload = [];
  }

  private onSegmentEvent(action: string, addr: number, size: number): void {
    this.emittedAction.push(action);
    this.emittedAddr.push(addr);
    this.emittedSize.push(size);
    this.emittedIndex.push(this.currentIndex);
    if (action === 'segment_free' || action === 'segment_unmap') {
      this.backend.modelFrees++;
      this.freesAtCurrent++;
    }
  }

  private setIndex(i: number): void {
    this.currentIndex = i;
    this.freesAtCurrent = 0;
  }

  /** Callers build a mismatch's message only while this holds, so that a replay full of mismatches builds few strings. */
  private noting(): boolean {
    return this.mismatches.length < MAX_MISMATCHES;
  }

  private note(traceIndex: number, kind: ReplayMismatch['kind'], message: string): void {
    this.mismatches.push({ traceIndex, kind, message });
  }

  run(): DeviceReplayReport {
    const trace = this.trace;
    for (let i = this.start.from; i < trace.length; i++) {
      const e = trace[i];
      switch (e.action) {
        case 'segment_free':
        case 'segment_alloc':
        case 'segment_map':
        case 'segment_unmap':
          if (this.groupCount === 0) this.groupStart = i;
          this.groupCount++;
          this.traceSeg.push(i);
          break;
        case 'snapshot':
          break;
        case 'oom':
          this.prepareDevice(i, e);
          this.oom(i, e);
          break;
        case 'alloc':
          this.prepareDevice(i, e);
          this.alloc(i, e);
          break;
        case 'free_requested':
        case 'free_completed':
          this.free(i, e);
          break;
      }
    }
    this.flushAsEmptyCache();
    return this.report();
  }

  private resetDevice(): void {
    const backend = this.backend;
    backend.expectedAllocs = [];
    backend.expectedMapAt = null;
    backend.failUntilFrees = 0;
    backend.modelFrees = 0;
    backend.failAll = false;
  }

  /** Segment events not followed by an allocation: the program emptied the cache. */
  private flushAsEmptyCache(): void {
    if (this.groupCount === 0) return;
    this.setIndex(this.groupStart);
    this.resetDevice();
    this.model.emptyCache();
    this.groupCount = 0;
  }

  /** Sets the device up to answer allocation `i` as the segment events before it show. */
  private prepareDevice(i: number, e: TraceEntry): void {
    this.setIndex(i);
    const backend = this.backend;
    if (this.groupCount === 0 && e.action === 'alloc') {
      // Most allocations: no segment event before them, so the device has nothing to give.
      if (backend.expectedAllocs.length > 0 || backend.expectedMapAt !== null || backend.failUntilFrees > 0 || backend.failAll) this.resetDevice();
      backend.modelFrees = 0;
      return;
    }
    let frees = 0;
    let firstMap: number | null = null;
    const expectedAllocs: { addr: number; size: number }[] = [];
    for (let k = this.groupStart; this.groupCount > 0 && k < i; k++) {
      const g = this.trace[k];
      if (g.action === 'segment_free' || g.action === 'segment_unmap') frees++;
      else if (g.action === 'segment_alloc') expectedAllocs.push({ addr: g.addr ?? 0, size: g.size });
      else if (g.action === 'segment_map' && firstMap === null) firstMap = g.addr ?? 0;
    }
    if (frees > 0 && e.action === 'alloc' && this.model.wouldReuseCachedBlock(e.size, e.stream)) {
      // The program emptied the cache before this allocation (a malloc that finds a cached block never frees segments).
      this.model.emptyCache();
    }
    this.resetDevice();
    backend.expectedAllocs = expectedAllocs;
    backend.expectedMapAt = firstMap;
    backend.failUntilFrees = frees;
    backend.modelFrees = this.freesAtCurrent;
    backend.failAll = e.action === 'oom';
    this.groupCount = 0;
  }

  private oom(i: number, e: TraceEntry): void {
    const model = this.model;
    let reproduced = false;
    try {
      model.malloc(e.size, e.stream);
      if (this.noting()) this.note(i, 'oom', `PyTorch ran out of memory for ${e.size} bytes; the model did not`);
    } catch (err) {
      if (!(err instanceof MemscopeError) || err.code !== 'oom') throw err;
      reproduced = true;
    }
    this.ooms.push({
      traceIndex: i,
      requestedBytes: e.size,
      deviceFreeBytes: e.device_free ?? 0,
      reproduced,
      allocatedBytes: model.allocatedBytes,
      reservedBytes: model.reservedBytes,
    });
  }

  private alloc(i: number, e: TraceEntry): void {
    this.allocs++;
    let got: number;
    try {
      got = this.model.malloc(e.size, e.stream);
    } catch (err) {
      if (!(err instanceof MemscopeError)) throw err;
      if (this.noting()) this.note(i, 'oom', `model failed to allocate ${e.size} bytes: ${err.message.slice(0, 120)}`);
      return;
    }
    // Frees name PyTorch's address: map it to the model's only where the two differ.
    if (got === e.addr) {
      this.allocMatched++;
      if (this.addrMap.size > 0) this.addrMap.delete(got);
    } else {
      this.addrMap.set(e.addr!, got);
      if (this.noting()) this.note(i, 'address', `alloc of ${e.size} bytes: PyTorch gave ${hexAddress(e.addr!)}, the model ${hexAddress(got)}`);
    }
  }

  private free(i: number, e: TraceEntry): void {
    this.flushAsEmptyCache();
    this.setIndex(i);
    const addrMap = this.addrMap;
    const addr = addrMap.size > 0 ? (addrMap.get(e.addr!) ?? e.addr!) : e.addr!;
    try {
      if (e.action === 'free_requested') this.model.requestFree(addr);
      else this.model.completeFreeOrFree(addr);
    } catch (err) {
      if (!(err instanceof MemscopeError)) throw err;
      if (this.noting()) this.note(i, 'free', `${e.action} of ${hexAddress(e.addr!)}: ${err.message}`);
    }
  }

  /** Segment events, position by position: PyTorch's against the model's. */
  private compareSegmentEvents(): { matched: number; total: number } {
    const { trace, traceSeg, emittedAction, emittedAddr, emittedSize, emittedIndex } = this;
    let matched = 0;
    const n = Math.max(traceSeg.length, emittedAction.length);
    for (let k = 0; k < n; k++) {
      const t = k < traceSeg.length ? trace[traceSeg[k]] : undefined;
      const m = k < emittedAction.length;
      if (t && m && t.action === emittedAction[k] && (t.addr ?? 0) === emittedAddr[k] && t.size === emittedSize[k]) matched++;
      else if (this.noting()) {
        const model = m ? `${emittedAction[k]} ${hexAddress(emittedAddr[k])} ${emittedSize[k]}` : 'none';
        this.note(
          k < traceSeg.length ? traceSeg[k] : m ? emittedIndex[k] : -1,
          'segment-event',
          `segment event #${k}: PyTorch ${t ? `${t.action} ${hexAddress(t.addr ?? 0)} ${t.size}` : 'none'}, model ${model}`,
        );
      }
    }
    return { matched, total: traceSeg.length === 0 && emittedAction.length === 0 ? 0 : n };
  }

  private report(): DeviceReplayReport {
    const { start, trace } = this;
    const segmentEvents = this.compareSegmentEvents();
    const end = compareEndState(this.snap, this.device, this.model);
    if (end.firstMissing !== null && this.noting()) this.note(trace.length, 'layout', `end state: PyTorch has block ${end.firstMissing}, the model does not`);
    const incomplete = describeIncomplete(start);
    let startLiveBlocks = 0;
    for (const s of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)]) for (const b of s.blocks) if (b.allocated) startLiveBlocks++;
    return {
      device: this.device,
      traceEvents: trace.length,
      replayedFrom: start.from,
      allocs: this.allocs,
      startSegments: start.layout.length,
      startExpandableRanges: start.expandable.reduce((c, es) => c + es.ranges.length, 0),
      startLiveBlocks,
      allocAddresses: rate(this.allocMatched, this.allocs),
      segmentEvents: { ...rate(segmentEvents.matched, segmentEvents.total), model: this.emittedAction.length },
      finalSegments: end.finalSegments,
      finalBlocks: end.finalBlocks,
      verdict: incomplete ? 'incomplete' : 'complete',
      incomplete,
      ooms: this.ooms,
      oomAnswer: this.ooms.length > 0 ? answerOom(this.snap, this.device, this.ooms[0]) : null,
      startStateProblems: start.problems.slice(0, MAX_MISMATCHES),
      mismatches: this.mismatches,
    };
  }
}
