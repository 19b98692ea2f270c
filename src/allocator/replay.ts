import { MemscopeError } from '../core/errors.js';
import { CachingAllocatorModel, hexAddress, type SegmentLayout, type TraceEntry } from './caching-allocator.js';
import type { DeviceBackend } from './device.js';
import { SimulatedDevice } from './device.js';
import { divisionsFor, settingsFromSnapshot, type AllocatorSettings } from './settings.js';
import { MIN_BLOCK_SIZE, roundSize, SMALL_BUFFER, SMALL_SIZE } from './sizes.js';
import { snapshotSegments } from './snapshot.js';
import type { MemorySnapshot } from '../torch/snapshot.js';

/**
 * Replay of a PyTorch memory snapshot's trace through the allocator model.
 *
 * The snapshot is the allocator's state at the END of its trace. Walking the
 * trace backwards recovers the state at its START (which segments existed,
 * which blocks were allocated); the model is loaded with that state and every
 * alloc/free is replayed with the snapshot's settings. The device answers the
 * model's cudaMalloc calls from the trace (the address cudaMalloc returned, and
 * whether it failed first, which the trace shows as segment_free events before
 * the segment_alloc); every decision — which cached block, whether to split,
 * whether to ask the device at all, which segments to release — is the model's.
 */

interface RawBlock {
  address: number;
  size: number;
  requested_size: number;
  state: string;
}

interface RawSegment {
  device: number;
  address: number;
  total_size: number;
  stream: number;
  segment_type?: string;
  is_expandable?: boolean;
  blocks: RawBlock[];
}

export interface ParsedSnapshot {
  segments: RawSegment[];
  traces: TraceEntry[][];
  settings: AllocatorSettings;
  hasSettings: boolean;
}

function fail(where: string, message: string): MemscopeError {
  return new MemscopeError('bad-snapshot', `${where}: ${message}`);
}

function isObj(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function int(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw fail(where, `expected an integer, got ${JSON.stringify(v)}`);
  return v;
}

const ACTIONS = new Set(['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap', 'oom', 'snapshot']);

/** Snapshots already validated (by parseSnapshot or parsedFromSnapshot): replaySnapshot and whatIf take them as they are. */
const parsedSnapshots = new WeakSet<ParsedSnapshot>();

function parsed(snap: ParsedSnapshot): ParsedSnapshot {
  parsedSnapshots.add(snap);
  return snap;
}

/** A plain-object snapshot, or one parseSnapshot / parsedFromSnapshot already returned. */
function asParsed(raw: unknown): ParsedSnapshot {
  return typeof raw === 'object' && raw !== null && parsedSnapshots.has(raw as ParsedSnapshot) ? (raw as ParsedSnapshot) : parseSnapshot(raw);
}

/**
 * What replay needs from a snapshot read by memscope's columnar reader (`readSnapshot` /
 * `readSnapshotFile` in src/torch): the same result as parseSnapshot on the plain objects, without
 * building a JS object per block and trace event (the generic pickle path costs several times the
 * time and memory on big files). Differences from parseSnapshot: a block without `requested_size`
 * gets its size (or PyTorch ≤ 2.0's `history[0].real_size`) rather than 0, and the docstring state
 * name `active_awaiting_free` arrives as `active_pending_free`.
 */
export function parsedFromSnapshot(snapshot: MemorySnapshot): ParsedSnapshot {
  const b = snapshot.blocks;
  const segments = snapshot.segments.map((seg): RawSegment => {
    const blocks: RawBlock[] = [];
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      blocks.push({ address: b.address[i]!, size: b.size[i]!, requested_size: b.requestedSize[i]!, state: snapshot.stateNames[b.state[i]!]! });
    }
    return {
      device: seg.device < 0 ? 0 : seg.device,
      address: seg.address,
      total_size: seg.totalSize,
      stream: seg.stream,
      segment_type: seg.segmentType,
      is_expandable: seg.isExpandable,
      blocks,
    };
  });
  const traces: TraceEntry[][] = [];
  for (const t of snapshot.traces) {
    const entries: TraceEntry[] = [];
    for (let i = 0; i < t.count; i++) {
      const action = snapshot.actionNames[t.action[i]!]!;
      if (!ACTIONS.has(action)) throw fail(`device_traces[${t.device}][${i}].action`, `unknown action ${JSON.stringify(action)}`);
      const time = t.timeUs[i]!;
      const entry: TraceEntry = { action: action as TraceEntry['action'], size: t.size[i]!, stream: t.stream[i]!, time_us: Number.isNaN(time) ? 0 : time };
      if (action === 'oom') entry.device_free = t.deviceFree && !Number.isNaN(t.deviceFree[i]!) ? t.deviceFree[i]! : 0;
      else if (action !== 'snapshot') entry.addr = t.addr[i]!;
      entries.push(entry);
    }
    traces[t.device] = entries;
  }
  for (let d = 0; d < traces.length; d++) traces[d] ??= [];
  return parsed({
    segments,
    traces,
    settings: settingsFromSnapshot(snapshot.allocatorSettings ?? undefined, 'allocator_settings'),
    hasSettings: snapshot.format.hasAllocatorSettings,
  });
}

/** Validates the parts of a (plain-object) PyTorch snapshot that replay needs. */
export function parseSnapshot(raw: unknown): ParsedSnapshot {
  if (!isObj(raw)) throw fail('snapshot', 'expected a dict with segments and device_traces');
  if (!Array.isArray(raw.segments)) throw fail('snapshot', "missing 'segments' list");
  const segments = raw.segments.map((s, i): RawSegment => {
    const where = `segments[${i}]`;
    if (!isObj(s)) throw fail(where, 'expected a dict');
    if (!Array.isArray(s.blocks)) throw fail(where, "missing 'blocks' list");
    return {
      device: int(s.device ?? 0, `${where}.device`),
      address: int(s.address, `${where}.address`),
      total_size: int(s.total_size, `${where}.total_size`),
      stream: int(s.stream ?? 0, `${where}.stream`),
      segment_type: typeof s.segment_type === 'string' ? s.segment_type : undefined,
      is_expandable: s.is_expandable === true,
      blocks: s.blocks.map((b, j): RawBlock => {
        const w = `${where}.blocks[${j}]`;
        if (!isObj(b)) throw fail(w, 'expected a dict');
        if (typeof b.state !== 'string') throw fail(`${w}.state`, 'expected a string');
        return {
          address: int(b.address, `${w}.address`),
          size: int(b.size, `${w}.size`),
          requested_size: int(b.requested_size ?? 0, `${w}.requested_size`),
          state: b.state,
        };
      }),
    };
  });
  const rawTraces = raw.device_traces ?? [];
  if (!Array.isArray(rawTraces)) throw fail('snapshot.device_traces', 'expected a list');
  const traces = rawTraces.map((t, d) => {
    if (!Array.isArray(t)) throw fail(`device_traces[${d}]`, 'expected a list');
    return t.map((e, i): TraceEntry => {
      const where = `device_traces[${d}][${i}]`;
      if (!isObj(e)) throw fail(where, 'expected a dict');
      if (typeof e.action !== 'string' || !ACTIONS.has(e.action)) throw fail(`${where}.action`, `unknown action ${JSON.stringify(e.action)}`);
      const action = e.action as TraceEntry['action'];
      const entry: TraceEntry = {
        action,
        size: int(e.size ?? 0, `${where}.size`),
        stream: int(e.stream ?? 0, `${where}.stream`),
        time_us: typeof e.time_us === 'number' ? e.time_us : 0,
      };
      if (action === 'oom') entry.device_free = int(e.device_free ?? 0, `${where}.device_free`);
      else if (action !== 'snapshot') entry.addr = int(e.addr, `${where}.addr`);
      return entry;
    });
  });
  return parsed({ segments, traces, settings: settingsFromSnapshot(raw.allocator_settings, 'allocator_settings'), hasSettings: raw.allocator_settings !== undefined });
}

// ------------------------------------------------------------------ start state

interface LiveBlock {
  requested: number;
  stream: number;
  /** Block size when known exactly (the block is the same at the end of the trace). */
  exactSize: number | null;
}

export interface StartState {
  layout: SegmentLayout[];
  /** Things the backward walk could not reconcile (each lowers fidelity and is reported). */
  problems: string[];
}

/** How big the block serving an allocation of `requested` was, given the room up to the next block. */
function inferBlockSize(requested: number, room: number, isSmall: boolean, settings: AllocatorSettings): number {
  const rounded = roundSize(requested, (s) => divisionsFor(settings, s));
  if (room <= rounded) return room;
  const remaining = room - rounded;
  if (isSmall) return remaining >= MIN_BLOCK_SIZE ? rounded : room;
  if (rounded >= settings.maxSplitSize) return remaining < settings.maxNonSplitRoundingSize ? room : rounded;
  // A large block is split only when more than 1 MiB would remain, so a
  // smaller gap after it is part of it.
  return remaining > SMALL_SIZE ? rounded : room;
}

/** Walks the trace backwards from the snapshot's end state to the state when the trace began. */
export function reconstructStartState(snap: ParsedSnapshot, device: number): StartState {
  const problems: string[] = [];
  const trace = snap.traces[device] ?? [];
  const segs = new Map<number, { size: number; stream: number; isSmall: boolean }>();
  const live = new Map<number, LiveBlock>();
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    if (s.is_expandable) problems.push(`segment ${hexAddress(s.address)} is expandable; replay of expandable segments is not supported`);
    segs.set(s.address, { size: s.total_size, stream: s.stream, isSmall: s.segment_type ? s.segment_type === 'small' : s.total_size === SMALL_BUFFER });
    for (const b of s.blocks) {
      if (b.state !== 'inactive') live.set(b.address, { requested: b.requested_size, stream: s.stream, exactSize: b.size });
    }
  }
  for (let i = trace.length - 1; i >= 0; i--) {
    const e = trace[i];
    const addr = e.addr ?? 0;
    switch (e.action) {
      case 'alloc':
        if (!live.delete(addr)) problems.push(`trace[${i}] alloc at ${hexAddress(addr)}: no such live block after it`);
        break;
      case 'free_completed':
        live.set(addr, { requested: e.size, stream: e.stream, exactSize: null });
        break;
      case 'segment_alloc':
        if (!segs.delete(addr)) problems.push(`trace[${i}] segment_alloc at ${hexAddress(addr)}: no such segment after it`);
        break;
      case 'segment_free':
        segs.set(addr, { size: e.size, stream: e.stream, isSmall: e.size === SMALL_BUFFER });
        break;
      default:
        break;
    }
  }
  const liveSorted = [...live.entries()].sort((a, b) => a[0] - b[0]);
  const layout: SegmentLayout[] = [];
  let li = 0;
  for (const [address, seg] of [...segs.entries()].sort((a, b) => a[0] - b[0])) {
    const end = address + seg.size;
    while (li < liveSorted.length && liveSorted[li][0] < address) {
      problems.push(`live block ${hexAddress(liveSorted[li][0])} at trace start lies outside every segment`);
      li++;
    }
    const inside: [number, LiveBlock][] = [];
    while (li < liveSorted.length && liveSorted[li][0] < end) inside.push(liveSorted[li++]);
    const blocks: SegmentLayout['blocks'] = [];
    let cursor = address;
    inside.forEach(([addr, b], k) => {
      if (addr > cursor) blocks.push({ address: cursor, size: addr - cursor, allocated: false, requestedSize: 0 });
      const nextStart = k + 1 < inside.length ? inside[k + 1][0] : end;
      let size = b.exactSize ?? inferBlockSize(b.requested, nextStart - addr, seg.isSmall, snap.settings);
      if (size > nextStart - addr) {
        problems.push(`block ${hexAddress(addr)} (${size} bytes) overlaps the next block`);
        size = nextStart - addr;
      }
      blocks.push({ address: addr, size, allocated: true, requestedSize: b.requested });
      cursor = addr + size;
    });
    if (cursor < end) blocks.push({ address: cursor, size: end - cursor, allocated: false, requestedSize: 0 });
    layout.push({ address, totalSize: seg.size, stream: seg.stream, isSmall: seg.isSmall, blocks });
  }
  for (; li < liveSorted.length; li++) problems.push(`live block ${hexAddress(liveSorted[li][0])} at trace start lies outside every segment`);
  return { layout, problems };
}

// ------------------------------------------------------------------ replay against PyTorch

/** Device answers taken from the trace (see module comment). */
class TraceDevice implements DeviceBackend {
  readonly totalMemory = 2 ** 50;
  /** segment_alloc events of the trace that the current allocation may consume. */
  expectedAllocs: { addr: number; size: number }[] = [];
  /** cudaMalloc fails until the model has released this many segments (the trace's segment_free count). */
  failUntilFrees = 0;
  modelFrees = 0;
  failAll = false;
  /** Addresses for loadState. */
  preload: number[] = [];
  private synthetic = 2 ** 52;

  freeMemory(): number {
    return 0;
  }
  malloc(size: number): number | null {
    if (this.preload.length > 0) return this.preload.shift()!;
    if (this.failAll || this.modelFrees < this.failUntilFrees) return null;
    const i = this.expectedAllocs.findIndex((a) => a.size === size);
    if (i >= 0) return this.expectedAllocs.splice(i, 1)[0].addr;
    const addr = this.synthetic;
    this.synthetic += Math.ceil(size / (2 << 20)) * (2 << 20);
    return addr;
  }
  free(): void {}
  reserveAddressSpace(size: number): number {
    const addr = this.synthetic;
    this.synthetic += size;
    return addr;
  }
  mapPage(): boolean {
    return !this.failAll;
  }
  unmapPage(): void {}
}

export interface Rate {
  matched: number;
  total: number;
  rate: number;
}

function rate(matched: number, total: number): Rate {
  return { matched, total, rate: total === 0 ? 1 : matched / total };
}

export interface ReplayMismatch {
  traceIndex: number;
  kind: 'address' | 'segment-event' | 'free' | 'oom' | 'layout';
  message: string;
}

export interface DeviceReplayReport {
  device: number;
  traceEvents: number;
  allocs: number;
  startSegments: number;
  startLiveBlocks: number;
  /** Each alloc got the address PyTorch gave it. */
  allocAddresses: Rate;
  /** segment_alloc / segment_free events, in order, with address and size. */
  segmentEvents: Rate & { model: number };
  /** End-state segments (address, size) and blocks (address, size, state; requested size of live blocks). */
  finalSegments: Rate;
  finalBlocks: Rate;
  startStateProblems: string[];
  unsupported: string[];
  mismatches: ReplayMismatch[];
}

export interface ReplayReport {
  settings: string;
  hasSettings: boolean;
  devices: DeviceReplayReport[];
}

type SegEvent = { action: string; addr: number; size: number; index: number };

function segKey(e: { action: string; addr?: number; size: number }): string {
  return `${e.action}@${e.addr ?? 0}:${e.size}`;
}

const MAX_MISMATCHES = 20;

/** Replays every device trace of a snapshot that has one and compares with PyTorch. */
export function replaySnapshot(raw: unknown): ReplayReport {
  const snap = asParsed(raw);
  const devices: DeviceReplayReport[] = [];
  snap.traces.forEach((trace, device) => {
    if (trace.length === 0) return;
    devices.push(replayDevice(snap, device));
  });
  return { settings: snap.settings.conf, hasSettings: snap.hasSettings, devices };
}

function replayDevice(snap: ParsedSnapshot, device: number): DeviceReplayReport {
  const trace = snap.traces[device];
  const start = reconstructStartState(snap, device);
  const backend = new TraceDevice();
  const emitted: SegEvent[] = [];
  let currentIndex = -1;
  const model = new CachingAllocatorModel({
    device,
    settings: snap.settings,
    backend,
    onTrace: (e) => {
      if (e.action === 'segment_free' || e.action === 'segment_alloc' || e.action === 'segment_map' || e.action === 'segment_unmap') {
        emitted.push({ action: e.action, addr: e.addr ?? 0, size: e.size, index: currentIndex });
        if (e.action === 'segment_free') backend.modelFrees++;
      }
    },
  });
  backend.preload = start.layout.map((s) => s.address);
  model.loadState(start.layout);
  backend.preload = [];

  const mismatches: ReplayMismatch[] = [];
  const unsupported = new Set<string>();
  const note = (m: ReplayMismatch): void => {
    if (mismatches.length < MAX_MISMATCHES) mismatches.push(m);
  };
  const traceSeg: SegEvent[] = [];
  const addrMap = new Map<number, number>();
  let allocs = 0;
  let allocMatched = 0;
  let group: TraceEntry[] = [];
  let groupStart = 0;

  const resetDevice = (): void => {
    backend.expectedAllocs = [];
    backend.failUntilFrees = 0;
    backend.modelFrees = 0;
    backend.failAll = false;
  };
  const flushAsEmptyCache = (): void => {
    if (group.length === 0) return;
    currentIndex = groupStart;
    resetDevice();
    model.emptyCache();
    group = [];
  };

  trace.forEach((e, i) => {
    switch (e.action) {
      case 'segment_free':
      case 'segment_alloc':
        if (group.length === 0) groupStart = i;
        group.push(e);
        traceSeg.push({ action: e.action, addr: e.addr ?? 0, size: e.size, index: i });
        return;
      case 'segment_map':
      case 'segment_unmap':
        unsupported.add(`${e.action} events (expandable segments) are not replayed`);
        return;
      case 'snapshot':
        return;
      case 'oom':
      case 'alloc': {
        currentIndex = i;
        const frees = group.filter((g) => g.action === 'segment_free').length;
        if (frees > 0 && e.action === 'alloc' && model.wouldReuseCachedBlock(e.size, e.stream)) {
          // The program emptied the cache before this allocation (a malloc that finds a cached block never frees segments).
          model.emptyCache();
        }
        resetDevice();
        backend.expectedAllocs = group.filter((g) => g.action === 'segment_alloc').map((g) => ({ addr: g.addr ?? 0, size: g.size }));
        backend.failUntilFrees = frees;
        backend.modelFrees = emitted.filter((x) => x.index === i && x.action === 'segment_free').length;
        backend.failAll = e.action === 'oom';
        group = [];
        if (e.action === 'oom') {
          try {
            model.malloc(e.size, e.stream);
            note({ traceIndex: i, kind: 'oom', message: `PyTorch ran out of memory for ${e.size} bytes; the model did not` });
          } catch (err) {
            if (!(err instanceof MemscopeError) || err.code !== 'oom') throw err;
          }
          return;
        }
        allocs++;
        let got: number;
        try {
          got = model.malloc(e.size, e.stream);
        } catch (err) {
          if (!(err instanceof MemscopeError)) throw err;
          note({ traceIndex: i, kind: 'oom', message: `model failed to allocate ${e.size} bytes: ${err.message.slice(0, 120)}` });
          return;
        }
        addrMap.set(e.addr!, got);
        if (got === e.addr) allocMatched++;
        else note({ traceIndex: i, kind: 'address', message: `alloc of ${e.size} bytes: PyTorch gave ${hexAddress(e.addr!)}, the model ${hexAddress(got)}` });
        return;
      }
      case 'free_requested':
      case 'free_completed': {
        flushAsEmptyCache();
        currentIndex = i;
        const addr = addrMap.get(e.addr!) ?? e.addr!;
        try {
          if (e.action === 'free_requested') model.requestFree(addr);
          else if (model.blockSize(addr) !== undefined && !model.isPendingFree(addr)) model.free(addr);
          else model.completeFree(addr);
        } catch (err) {
          if (!(err instanceof MemscopeError)) throw err;
          note({ traceIndex: i, kind: 'free', message: `${e.action} of ${hexAddress(e.addr!)}: ${err.message}` });
        }
        return;
      }
    }
  });
  flushAsEmptyCache();

  // Segment events, position by position.
  let segMatched = 0;
  const n = Math.max(traceSeg.length, emitted.length);
  for (let k = 0; k < n; k++) {
    const t = traceSeg[k];
    const m = emitted[k];
    if (t && m && segKey(t) === segKey(m)) segMatched++;
    else if (t || m) {
      note({
        traceIndex: t?.index ?? m?.index ?? -1,
        kind: 'segment-event',
        message: `segment event #${k}: PyTorch ${t ? `${t.action} ${hexAddress(t.addr)} ${t.size}` : 'none'}, model ${m ? `${m.action} ${hexAddress(m.addr)} ${m.size}` : 'none'}`,
      });
    }
  }

  // End state against the snapshot.
  const blockKey = (addr: number, size: number, state: string, requested: number): string =>
    `${addr}:${size}:${state}:${state === 'inactive' ? '' : requested}`;
  const want = new Map<string, number>();
  const wantBlocks = new Set<string>();
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    want.set(`${s.address}:${s.total_size}`, s.address);
    for (const b of s.blocks) wantBlocks.add(blockKey(b.address, b.size, b.state, b.requested_size));
  }
  const have = snapshotSegments(model);
  const haveSegs = new Set(have.map((s) => `${s.address}:${s.total_size}`));
  const haveBlocks = new Set<string>();
  for (const s of have) for (const b of s.blocks) haveBlocks.add(blockKey(b.address, b.size, b.state, b.requested_size));
  const segUnion = new Set([...want.keys(), ...haveSegs]);
  const segBoth = [...want.keys()].filter((k) => haveSegs.has(k)).length;
  const blockUnion = new Set([...wantBlocks, ...haveBlocks]);
  const blockBoth = [...wantBlocks].filter((k) => haveBlocks.has(k)).length;
  for (const k of wantBlocks) {
    if (!haveBlocks.has(k)) {
      note({ traceIndex: trace.length, kind: 'layout', message: `end state: PyTorch has block ${k}, the model does not` });
      break;
    }
  }

  return {
    device,
    traceEvents: trace.length,
    allocs,
    startSegments: start.layout.length,
    startLiveBlocks: start.layout.reduce((c, s) => c + s.blocks.filter((b) => b.allocated).length, 0),
    allocAddresses: rate(allocMatched, allocs),
    segmentEvents: { ...rate(segMatched, traceSeg.length === 0 && emitted.length === 0 ? 0 : n), model: emitted.length },
    finalSegments: rate(segBoth, segUnion.size),
    finalBlocks: rate(blockBoth, blockUnion.size),
    startStateProblems: start.problems.slice(0, MAX_MISMATCHES),
    unsupported: [...unsupported],
    mismatches,
  };
}

// ------------------------------------------------------------------ what-if

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
  const start = reconstructStartState(snap, device);
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
  for (const seg of start.layout) {
    for (const b of seg.blocks) {
      if (!b.allocated) continue;
      const got = tryMalloc(b.requestedSize, seg.stream, -1);
      if (typeof got !== 'number') return got;
      addrMap.set(b.address, got);
    }
  }
  for (let i = 0; i < trace.length; i++) {
    const e = trace[i];
    if (e.action === 'alloc') {
      const got = tryMalloc(e.size, e.stream, i);
      if (typeof got !== 'number') return got;
      addrMap.set(e.addr!, got);
    } else if (e.action === 'free_requested' || e.action === 'free_completed') {
      const addr = addrMap.get(e.addr!);
      if (addr === undefined) continue;
      if (e.action === 'free_requested') model.requestFree(addr);
      else if (model.isPendingFree(addr)) {
        model.completeFree(addr);
        addrMap.delete(e.addr!);
      }
    } else if (e.action === 'segment_free') {
      let j = i;
      while (j < trace.length && trace[j].action === 'segment_free') j++;
      if (j >= trace.length || (trace[j].action !== 'segment_alloc' && trace[j].action !== 'oom')) model.emptyCache();
      i = j - 1;
    }
  }
  return result(null);
}
