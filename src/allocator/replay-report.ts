import { AddressMap } from './address-map.js';
import { hexAddress, type CachingAllocatorModel } from './caching-allocator.js';
import type { ParsedSnapshot, RawBlock } from './replay-input.js';
import type { StartState } from './replay-start-state.js';

/**
 * What replay reports per device — how many allocations landed where PyTorch put them, how many
 * segment events and end-state segments and blocks agree, OOMs, incomplete traces — and the
 * comparisons that produce those figures.
 */

/** At most this many mismatches are kept per device (their count is in the rates). */
export const MAX_MISMATCHES = 20;

export interface Rate {
  matched: number;
  total: number;
  rate: number;
}

export function rate(matched: number, total: number): Rate {
  return { matched, total, rate: total === 0 ? 1 : matched / total };
}

export interface ReplayMismatch {
  traceIndex: number;
  kind: 'address' | 'segment-event' | 'free' | 'oom' | 'layout';
  message: string;
}

/** One recorded OOM, as PyTorch saw it and as the model reproduced it. */
export interface ReplayOom {
  traceIndex: number;
  requestedBytes: number;
  /** cudaMemGetInfo's free bytes when PyTorch gave up (the trace's device_free). */
  deviceFreeBytes: number;
  /** The model, driven to the same point, also found no memory (after the same releases). */
  reproduced: boolean;
  /** The model's allocated and reserved bytes at that moment. */
  allocatedBytes: number;
  reservedBytes: number;
}

/** Why and from where a trace cannot account for the end state. */
export interface TraceIncomplete {
  /** First replayed event: earlier events are left out, or the start state is the one the trace implies. */
  fromEvent: number;
  reason: string;
  /** The allocations concerned (address, requested size, what is missing). */
  allocations: { address: number; requestedSize: number; detail: string }[];
}

/** Whether another allocator configuration would have avoided the device's first recorded OOM. */
export interface OomAnswer {
  traceIndex: number;
  /** The memory PyTorch could have had: its reserved bytes plus the device's free bytes at the OOM. */
  capacityBytes: number;
  /** Settings tried: the recorded ones with expandable_segments:True (or False when they already had it). */
  alternative: string;
  /** Where each run first ran out of memory on a device of that capacity (null: it never did). */
  recordedOomAt: number | null;
  alternativeOomAt: number | null;
  avoided: boolean;
}

export interface DeviceReplayReport {
  device: number;
  traceEvents: number;
  /** First replayed event (0 unless the trace is incomplete). */
  replayedFrom: number;
  allocs: number;
  startSegments: number;
  startExpandableRanges: number;
  startLiveBlocks: number;
  /** Each alloc got the address PyTorch gave it. */
  allocAddresses: Rate;
  /** segment_alloc / segment_free / segment_map / segment_unmap events, in order, with address and size. */
  segmentEvents: Rate & { model: number };
  /** End-state segments (address, size) and blocks (address, size, state; requested size of live blocks). */
  finalSegments: Rate;
  finalBlocks: Rate;
  /** 'complete': the trace accounts for the end state; 'incomplete': see `incomplete`. */
  verdict: 'complete' | 'incomplete';
  incomplete: TraceIncomplete | null;
  ooms: ReplayOom[];
  oomAnswer: OomAnswer | null;
  startStateProblems: string[];
  mismatches: ReplayMismatch[];
}

export interface ReplayReport {
  settings: string;
  hasSettings: boolean;
  devices: DeviceReplayReport[];
  /** Devices with segments in the snapshot but no trace events (nothing to replay). */
  untracedDevices: number[];
}

/** Why and from where the trace cannot account for the end state (null: it can). */
export function describeIncomplete(start: StartState): TraceIncomplete | null {
  if (start.from > 0) {
    return {
      fromEvent: start.from,
      reason: `the trace before event ${start.from} does not account for the end state (it holds an allocation or segment that no retained event made); replay starts at event ${start.from}`,
      allocations: start.problems
        .map((p) => /(0x[0-9a-f]+)/.exec(p))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => ({ address: Number.parseInt(m[1], 16), requestedSize: 0, detail: m.input })),
    };
  }
  if (start.implied.length > 0) {
    const first = start.implied.reduce((m, b) => Math.min(m, b.shownBy), Infinity);
    return {
      fromEvent: 0,
      reason:
        `${start.implied.length} allocation${start.implied.length === 1 ? '' : 's'} live when the trace began held more than the size rules give ` +
        `(the events that shaped ${start.implied.length === 1 ? 'it' : 'them'} are older than the trace; first shown by event ${first}); replay starts from the sizes the trace implies`,
      allocations: start.implied.map((b) => ({
        address: b.address,
        requestedSize: b.requestedSize,
        detail: `${b.impliedSize} bytes, not ${b.ruleSize}: the alloc at event ${b.shownBy} lands at ${hexAddress(b.address + b.impliedSize)}`,
      })),
    };
  }
  return null;
}

/** How the model's end state compares with the snapshot's. */
export interface EndStateComparison {
  finalSegments: Rate;
  finalBlocks: Rate;
  /** The first snapshot block the model does not have, described (null: none). */
  firstMissing: string | null;
}

function blockState(b: { allocated: boolean; pendingFree: boolean }): string {
  return b.allocated ? 'active_allocated' : b.pendingFree ? 'active_pending_free' : 'inactive';
}

/** End state against the snapshot: segments by (address, size), blocks by (address, size, state; requested size when live). */
export function compareEndState(snap: ParsedSnapshot, device: number, model: CachingAllocatorModel): EndStateComparison {
  const wantSegs = new AddressMap<number>();
  /** The snapshot's blocks in order (a later block at the same address replaces an earlier one in its place), by address. */
  const wantBlocks: RawBlock[] = [];
  const wantAt = new AddressMap<number>();
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    wantSegs.set(s.address, s.total_size);
    for (const b of s.blocks) {
      const k = wantAt.get(b.address);
      if (k === undefined) {
        wantAt.set(b.address, wantBlocks.length);
        wantBlocks.push(b);
      } else wantBlocks[k] = b;
    }
  }
  const matched = new Uint8Array(wantBlocks.length);
  let haveSegCount = 0;
  let haveBlockCount = 0;
  let segBoth = 0;
  let blockBoth = 0;
  for (const { head, blocks } of model.segments()) {
    haveSegCount++;
    let total = 0;
    for (const b of blocks) {
      total += b.size;
      haveBlockCount++;
      const k = wantAt.get(b.address);
      if (k === undefined) continue;
      const w = wantBlocks[k];
      const state = blockState(b);
      if (w.size === b.size && w.state === state && (state === 'inactive' || w.requested_size === b.requestedSize)) {
        blockBoth++;
        matched[k] = 1;
      }
    }
    if (wantSegs.get(head.address) === total) segBoth++;
  }
  const missing = matched.indexOf(0);
  const b = missing < 0 ? null : wantBlocks[missing];
  return {
    finalSegments: rate(segBoth, wantSegs.size + haveSegCount - segBoth),
    finalBlocks: rate(blockBoth, wantBlocks.length + haveBlockCount - blockBoth),
    firstMissing: b && `${hexAddress(b.address)} (${b.size} bytes, ${b.state}${b.state === 'inactive' ? '' : `, ${b.requested_size} requested`})`,
  };
}

/** How a run of the trace through an allocator ended: its first OOM (null: none), and the trace's own OOMs it went past (each request tried and, when it fit, freed again at once). */
export interface TraceRunOoms {
  oom: null | { traceIndex: number; requestedBytes: number; message: string };
  recordedOoms: { traceIndex: number; requestedBytes: number; avoided: boolean }[];
}
