import { isMemscopeError, MemscopeError } from '../core/errors.js';
import { allocatorName, isValidAddress, NativeAllocator, type DeviceAllocator } from './allocator-interface.js';
import { CudaMallocAsyncAllocator } from './async-allocator.js';
import { CachingAllocatorModel, hexAddress } from './caching-allocator.js';
import { SimulatedDevice } from './device.js';
import { impliedStartState, type ParsedSnapshot } from './replay.js';
import type { AllocatorSettings } from './settings.js';
import type { TraceRunOoms } from './replay-report.js';

/** What a policy factory is told about the run it serves. */
export interface PolicyContext {
  /** Device capacity in bytes (the policy returns null from alloc past it), or null for unlimited. */
  capacity: number | null;
  /** The device whose trace is replayed (alloc/free receive it as `device`). */
  device: number;
  /** The snapshot's recorded allocator settings. */
  settings: AllocatorSettings;
}

export type AllocatorFactory = (context: PolicyContext) => DeviceAllocator;

/** Capacity used when none is given: large enough that only the policy decides. */
const UNLIMITED = 2 ** 50;

/** The two built-in policies, by the names `--allocator` takes. */
export const BUILTIN_POLICIES: Readonly<Record<'native' | 'cudaMallocAsync', AllocatorFactory>> = {
  native: ({ capacity, device, settings }) => {
    const models: CachingAllocatorModel[] = [];
    models[device] = new CachingAllocatorModel({ device, settings, backend: new SimulatedDevice(capacity ?? UNLIMITED) });
    return new NativeAllocator(models);
  },
  cudaMallocAsync: ({ capacity, device }) => new CudaMallocAsyncAllocator({ deviceCount: device + 1, capacity: capacity ?? UNLIMITED }),
};

export interface PolicyFigures {
  peakReservedBytes: number;
  /** Trace index where reserved memory first reached its peak (-1: while loading the start state). */
  peakReservedAt: number;
  /** Requested bytes of live allocations at their peak. */
  peakLiveBytes: number;
  /** 1 − live/reserved at the moment reserved memory peaked. */
  fragmentationAtPeak: number;
}

export interface PolicyReplayResult extends PolicyFigures, TraceRunOoms {
  policy: string;
  device: number;
  capacity: number | null;
  /** 'allocator': the policy's own reservedBytes; 'address span': from the lowest to the highest live byte. */
  reservedSource: 'allocator' | 'address span';
  allocs: number;
  frees: number;
  emptyCacheCalls: number;
  endReservedBytes: number;
  /** The same figures for what PyTorch did, from the trace's segment events and requested sizes. */
  pytorch: PolicyFigures & { ooms: number };
}

interface Held {
  address: number;
  size: number;
  stream: number;
}

/** Live intervals of one device, sorted by start; non-overlapping, so also sorted by end. */
class LiveIntervals {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];

  private index(address: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid] <= address) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The live interval [start, end) that [address, address+size) would overlap, or null. */
  overlap(address: number, size: number): [number, number] | null {
    const i = this.index(address);
    if (i > 0 && this.ends[i - 1] > address) return [this.starts[i - 1], this.ends[i - 1]];
    if (i < this.starts.length && this.starts[i] < address + size) return [this.starts[i], this.ends[i]];
    return null;
  }

  add(address: number, size: number): void {
    const i = this.index(address);
    this.starts.splice(i, 0, address);
    this.ends.splice(i, 0, address + size);
  }

  remove(address: number): void {
    const i = this.index(address) - 1;
    if (i >= 0 && this.starts[i] === address) {
      this.starts.splice(i, 1);
      this.ends.splice(i, 1);
    }
  }

  get span(): number {
    return this.starts.length === 0 ? 0 : this.ends[this.ends.length - 1] - this.starts[0];
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0];
}

/** What PyTorch did on this device: reserved memory from the segment events, live bytes from the requested sizes. */
export function recordedFigures(snap: ParsedSnapshot, device: number): PolicyReplayResult['pytorch'] {
  const trace = snap.traces[device] ?? [];
  const start = impliedStartState(snap, device);
  let reserved = 0;
  let live = 0;
  for (const seg of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)]) {
    reserved += seg.totalSize;
    for (const b of seg.blocks) if (b.allocated) live += b.requestedSize;
  }
  const figures: PolicyFigures = { peakReservedBytes: reserved, peakReservedAt: -1, peakLiveBytes: live, fragmentationAtPeak: reserved === 0 ? 0 : 1 - live / reserved };
  let ooms = 0;
  for (let i = start.from; i < trace.length; i++) {
    const e = trace[i];
    if (e.action === 'segment_alloc' || e.action === 'segment_map') reserved += e.size;
    else if (e.action === 'segment_free' || e.action === 'segment_unmap') reserved -= e.size;
    else if (e.action === 'alloc') live += e.size;
    else if (e.action === 'free_completed') live -= e.size;
    else if (e.action === 'oom') ooms++;
    // A segment_alloc / segment_map belongs to the alloc that follows it: measure after that alloc.
    const growing = e.action === 'segment_alloc' || e.action === 'segment_map';
    if (growing && i + 1 < trace.length) continue;
    if (reserved > figures.peakReservedBytes) {
      figures.peakReservedBytes = reserved;
      figures.peakReservedAt = i;
      figures.fragmentationAtPeak = reserved === 0 ? 0 : 1 - live / reserved;
    }
    if (live > figures.peakLiveBytes) figures.peakLiveBytes = live;
  }
  return { ...figures, ooms };
}

/**
 * Replays one device's trace through any allocator: the blocks live when the
 * trace began are allocated first (in address order), then every `alloc` is
 * `alloc(requested size, device, stream)` and every `free_completed` is
 * `free(address, size, device, stream)` with the allocation's own size and
 * stream (the moment PyTorch's caching allocator could reuse the memory).
 * A run of `segment_free` not followed by a `segment_alloc` is the program's
 * empty_cache and calls `emptyCache()`. Stops at the first allocation the
 * policy cannot serve (alloc returns null, or a built-in model's OOM).
 *
 * Every address is checked: a policy that throws, or returns a non-integer,
 * negative, or overlapping address, stops the replay with MemscopeError code
 * 'policy-error' naming the device, trace index, action and size.
 */
export function replayThroughAllocator(snap: ParsedSnapshot, factory: AllocatorFactory, options: { capacity?: number | null; device?: number } = {}): PolicyReplayResult {
  const device = options.device ?? 0;
  const capacity = options.capacity ?? null;
  const trace = snap.traces[device] ?? [];
  const start = impliedStartState(snap, device);
  const policy = factory({ capacity, device, settings: snap.settings });
  if (policy === null || typeof policy !== 'object' || typeof policy.alloc !== 'function' || typeof policy.free !== 'function') {
    throw new MemscopeError('policy-error', 'the allocator factory did not return an object with alloc(size, device, stream) and free(address, size, device, stream)');
  }
  const name = allocatorName(policy);
  const hasReserved = typeof policy.reservedBytes === 'function';
  const intervals = new LiveIntervals();
  const held = new Map<number, Held>();
  let live = 0;
  let allocs = 0;
  let frees = 0;
  let emptyCacheCalls = 0;
  const figures: PolicyFigures = { peakReservedBytes: 0, peakReservedAt: -1, peakLiveBytes: 0, fragmentationAtPeak: 0 };
  const recordedOoms: PolicyReplayResult['recordedOoms'] = [];

  const where = (index: number, action: string, size: number, stream: number): string =>
    `${name}: device ${device}, ${index < 0 ? 'start state' : `trace event ${index}`} (${action}, ${size} bytes, stream ${stream})`;
  const reservedNow = (index: number): number => {
    if (!hasReserved) return intervals.span;
    let r: unknown;
    try {
      r = policy.reservedBytes!(device);
    } catch (err) {
      throw new MemscopeError('policy-error', `${name}: device ${device}, ${index < 0 ? 'start state' : `trace event ${index}`}: reservedBytes threw: ${firstLine(err)}`);
    }
    if (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 0) {
      throw new MemscopeError('policy-error', `${name}: device ${device}, ${index < 0 ? 'start state' : `trace event ${index}`}: reservedBytes returned ${String(r)}, not a non-negative integer`);
    }
    return r;
  };
  const observe = (index: number): void => {
    const reserved = reservedNow(index);
    if (reserved > figures.peakReservedBytes) {
      figures.peakReservedBytes = reserved;
      figures.peakReservedAt = index;
      figures.fragmentationAtPeak = reserved === 0 ? 0 : 1 - live / reserved;
    }
    if (live > figures.peakLiveBytes) figures.peakLiveBytes = live;
  };
  const result = (oom: PolicyReplayResult['oom']): PolicyReplayResult => ({
    policy: name,
    device,
    capacity,
    reservedSource: hasReserved ? 'allocator' : 'address span',
    ...figures,
    allocs,
    frees,
    emptyCacheCalls,
    endReservedBytes: reservedNow(trace.length),
    oom,
    recordedOoms,
    pytorch: recordedFigures(snap, device),
  });

  /** The policy's address for a request, or an OOM message. */
  const allocate = (size: number, stream: number, index: number, action: string): number | { message: string } => {
    let address: unknown;
    try {
      address = policy.alloc(size, device, stream);
    } catch (err) {
      if (isMemscopeError(err) && err.code === 'oom') return { message: firstLine(err) };
      throw new MemscopeError('policy-error', `${where(index, action, size, stream)}: alloc threw: ${firstLine(err)}`);
    }
    if (address === null) return { message: `${name} returned no memory for ${size} bytes` };
    if (!isValidAddress(address)) {
      throw new MemscopeError('policy-error', `${where(index, action, size, stream)}: alloc returned ${typeof address === 'number' ? String(address) : JSON.stringify(address) ?? String(address)}, not a non-negative integer address`);
    }
    if (size > 0) {
      const clash = intervals.overlap(address, size);
      if (clash) {
        throw new MemscopeError(
          'policy-error',
          `${where(index, action, size, stream)}: alloc returned ${hexAddress(address)}, overlapping the live allocation ${hexAddress(clash[0])}..${hexAddress(clash[1])}`,
        );
      }
      intervals.add(address, size);
    }
    allocs++;
    live += size;
    return address;
  };
  const release = (h: Held, index: number, action: string): void => {
    try {
      policy.free(h.address, h.size, device, h.stream);
    } catch (err) {
      throw new MemscopeError('policy-error', `${where(index, action, h.size, h.stream)}: free of ${hexAddress(h.address)} threw: ${firstLine(err)}`);
    }
    if (h.size > 0) intervals.remove(h.address);
    frees++;
    live -= h.size;
  };

  for (const seg of [...start.layout, ...start.expandable.flatMap((es) => es.ranges)].sort((a, b) => a.address - b.address)) {
    for (const b of seg.blocks) {
      if (!b.allocated) continue;
      const got = allocate(b.requestedSize, seg.stream, -1, 'alloc');
      if (typeof got !== 'number') return result({ traceIndex: -1, requestedBytes: b.requestedSize, message: got.message });
      held.set(b.address, { address: got, size: b.requestedSize, stream: seg.stream });
      observe(-1);
    }
  }
  for (let i = start.from; i < trace.length; i++) {
    const e = trace[i];
    if (e.action === 'alloc') {
      const got = allocate(e.size, e.stream, i, 'alloc');
      if (typeof got !== 'number') return result({ traceIndex: i, requestedBytes: e.size, message: got.message });
      held.set(e.addr!, { address: got, size: e.size, stream: e.stream });
      observe(i);
    } else if (e.action === 'oom') {
      // PyTorch could not serve this request; a policy that can goes on as the trace did.
      const got = allocate(e.size, e.stream, i, 'oom');
      if (typeof got !== 'number') {
        recordedOoms.push({ traceIndex: i, requestedBytes: e.size, avoided: false });
        return result({ traceIndex: i, requestedBytes: e.size, message: got.message });
      }
      recordedOoms.push({ traceIndex: i, requestedBytes: e.size, avoided: true });
      observe(i);
      release({ address: got, size: e.size, stream: e.stream }, i, 'oom');
    } else if (e.action === 'free_completed') {
      const h = held.get(e.addr!);
      if (h === undefined) continue;
      held.delete(e.addr!);
      release(h, i, 'free_completed');
      observe(i);
    } else if (e.action === 'segment_free' || e.action === 'segment_unmap') {
      let j = i;
      while (j < trace.length && (trace[j].action === 'segment_free' || trace[j].action === 'segment_unmap')) j++;
      const next = j < trace.length ? trace[j].action : null;
      if (next !== 'segment_alloc' && next !== 'segment_map' && next !== 'oom' && policy.emptyCache) {
        try {
          policy.emptyCache();
        } catch (err) {
          throw new MemscopeError('policy-error', `${name}: device ${device}, trace event ${i} (empty_cache): emptyCache threw: ${firstLine(err)}`);
        }
        emptyCacheCalls++;
        observe(i);
      }
      i = j - 1;
    }
  }
  return result(null);
}
