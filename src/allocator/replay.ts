import { MemscopeError } from '../core/errors.js';
import { AddressMap } from './address-map.js';
import { CachingAllocatorModel, hexAddress } from './caching-allocator.js';
import {
  ALLOC,
  asParsed,
  deviceFreeAt,
  FREE_COMPLETED,
  FREE_REQUESTED,
  OOM,
  SEGMENT_ALLOC,
  SEGMENT_FREE,
  SEGMENT_MAP,
  SEGMENT_UNMAP,
  TRACE_ACTIONS,
  type ParsedSnapshot,
  type TraceColumns,
} from './replay-input.js';
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
  snap.columns.forEach((trace, device) => {
    if (trace.count === 0) return;
    devices.push(new DeviceReplay(snap, device).run());
  });
  const traced = new Set(devices.map((d) => d.device));
  const untracedDevices = [...new Set(snap.segments.map((s) => s.device))].filter((d) => !traced.has(d)).sort((a, b) => a - b);
  for (let d = 0; d < snap.columns.length; d++) if (!traced.has(d) && !untracedDevices.includes(d)) untracedDevices.push(d);
  untracedDevices.sort((a, b) => a - b);
  return { settings: snap.settings.conf, hasSettings: snap.hasSettings, devices, untracedDevices };
}

/**
 * One device's replay. Per-event state lives in fields, not in closures over the event loop's
 * variables: such a closure makes the engine allocate a fresh scope for every event.
 */
class DeviceReplay {
  private readonly trace: TraceColumns;
  private readonly start: StartState;
  private readonly backend = new TraceDevice();
  private readonly model: CachingAllocatorModel;
  /** Segment events the model emitted, as parallel columns: action (TRACE_ACTIONS code), address, size, trace index being replayed. */
  private readonly emittedAction: number[] = [];
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
    this.trace = snap.columns[device];
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

  private onSegmentEvent(action: 'segment_alloc' | 'segment_free' | 'segment_map' | 'segment_unmap', addr: number, size: number): void {
    this.emittedAction.push(action === 'segment_alloc' ? SEGMENT_ALLOC : action === 'segment_free' ? SEGMENT_FREE : action === 'segment_map' ? SEGMENT_MAP : SEGMENT_UNMAP);
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
    const actions = this.trace.action;
    for (let i = this.start.from; i < this.trace.count; i++) {
      const action = actions[i];
      if (action === ALLOC) {
        this.prepareDevice(i, action);
        this.alloc(i);
      } else if (action === FREE_REQUESTED || action === FREE_COMPLETED) this.free(i, action);
      else if (action >= SEGMENT_ALLOC && action <= SEGMENT_UNMAP) {
        if (this.groupCount === 0) this.groupStart = i;
        this.groupCount++;
        this.traceSeg.push(i);
      } else if (action === OOM) {
        this.prepareDevice(i, action);
        this.oom(i);
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
  private prepareDevice(i: number, action: number): void {
    this.setIndex(i);
    const backend = this.backend;
    const trace = this.trace;
    if (this.groupCount === 0 && action === ALLOC) {
      // Most allocations: no segment event before them, so the device has nothing to give.
      if (backend.expectedAllocs.length > 0 || backend.expectedMapAt !== null || backend.failUntilFrees > 0 || backend.failAll) this.resetDevice();
      backend.modelFrees = 0;
      return;
    }
    let frees = 0;
    let firstMap: number | null = null;
    const expectedAllocs: { addr: number; size: number }[] = [];
    for (let k = this.groupStart; this.groupCount > 0 && k < i; k++) {
      const g = trace.action[k];
      if (g === SEGMENT_FREE || g === SEGMENT_UNMAP) frees++;
      else if (g === SEGMENT_ALLOC) expectedAllocs.push({ addr: trace.addr[k], size: trace.size[k] });
      else if (g === SEGMENT_MAP && firstMap === null) firstMap = trace.addr[k];
    }
    if (frees > 0 && action === ALLOC && this.model.wouldReuseCachedBlock(trace.size[i], trace.stream[i])) {
      // The program emptied the cache before this allocation (a malloc that finds a cached block never frees segments).
      this.model.emptyCache();
    }
    this.resetDevice();
    backend.expectedAllocs = expectedAllocs;
    backend.expectedMapAt = firstMap;
    backend.failUntilFrees = frees;
    backend.modelFrees = this.freesAtCurrent;
    backend.failAll = action === OOM;
    this.groupCount = 0;
  }

  private oom(i: number): void {
    const model = this.model;
    const size = this.trace.size[i];
    let reproduced = false;
    try {
      model.malloc(size, this.trace.stream[i]);
      if (this.noting()) this.note(i, 'oom', `PyTorch ran out of memory for ${size} bytes; the model did not`);
    } catch (err) {
      if (!(err instanceof MemscopeError) || err.code !== 'oom') throw err;
      reproduced = true;
    }
    this.ooms.push({
      traceIndex: i,
      requestedBytes: size,
      deviceFreeBytes: deviceFreeAt(this.trace, i),
      reproduced,
      allocatedBytes: model.allocatedBytes,
      reservedBytes: model.reservedBytes,
    });
  }

  private alloc(i: number): void {
    this.allocs++;
    const size = this.trace.size[i];
    const want = this.trace.addr[i];
    let got: number;
    try {
      got = this.model.malloc(size, this.trace.stream[i]);
    } catch (err) {
      if (!(err instanceof MemscopeError)) throw err;
      if (this.noting()) this.note(i, 'oom', `model failed to allocate ${size} bytes: ${err.message.slice(0, 120)}`);
      return;
    }
    // Frees name PyTorch's address: map it to the model's only where the two differ.
    if (got === want) {
      this.allocMatched++;
      if (this.addrMap.size > 0) this.addrMap.delete(got);
    } else {
      this.addrMap.set(want, got);
      if (this.noting()) this.note(i, 'address', `alloc of ${size} bytes: PyTorch gave ${hexAddress(want)}, the model ${hexAddress(got)}`);
    }
  }

  private free(i: number, action: number): void {
    this.flushAsEmptyCache();
    this.setIndex(i);
    const addrMap = this.addrMap;
    const traced = this.trace.addr[i];
    const addr = addrMap.size > 0 ? (addrMap.get(traced) ?? traced) : traced;
    try {
      if (action === FREE_REQUESTED) this.model.requestFree(addr);
      else this.model.completeFreeOrFree(addr);
    } catch (err) {
      if (!(err instanceof MemscopeError)) throw err;
      if (this.noting()) this.note(i, 'free', `${TRACE_ACTIONS[action]} of ${hexAddress(traced)}: ${err.message}`);
    }
  }

  /** Segment events, position by position: PyTorch's against the model's. */
  private compareSegmentEvents(): { matched: number; total: number } {
    const { trace, traceSeg, emittedAction, emittedAddr, emittedSize, emittedIndex } = this;
    let matched = 0;
    const n = Math.max(traceSeg.length, emittedAction.length);
    for (let k = 0; k < n; k++) {
      const t = k < traceSeg.length ? traceSeg[k] : -1;
      const m = k < emittedAction.length;
      if (t >= 0 && m && trace.action[t] === emittedAction[k] && trace.addr[t] === emittedAddr[k] && trace.size[t] === emittedSize[k]) matched++;
      else if (this.noting()) {
        const pytorch = t >= 0 ? `${TRACE_ACTIONS[trace.action[t]]} ${hexAddress(trace.addr[t])} ${trace.size[t]}` : 'none';
        const model = m ? `${TRACE_ACTIONS[emittedAction[k]]} ${hexAddress(emittedAddr[k])} ${emittedSize[k]}` : 'none';
        this.note(t >= 0 ? t : m ? emittedIndex[k] : -1, 'segment-event', `segment event #${k}: PyTorch ${pytorch}, model ${model}`);
      }
    }
    return { matched, total: traceSeg.length === 0 && emittedAction.length === 0 ? 0 : n };
  }

  private report(): DeviceReplayReport {
    const { start, trace } = this;
    const segmentEvents = this.compareSegmentEvents();
    const end = compareEndState(this.snap, this.device, this.model);
    if (end.firstMissing !== null && this.noting()) this.note(trace.count, 'layout', `end state: PyTorch has block ${end.firstMissing}, the model does not`);
    const incomplete = describeIncomplete(start);
    let startLiveBlocks = 0;
    for (const s of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)]) for (const b of s.blocks) if (b.allocated) startLiveBlocks++;
    return {
      device: this.device,
      traceEvents: trace.count,
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
