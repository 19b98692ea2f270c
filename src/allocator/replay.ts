import { MemscopeError } from '../core/errors.js';
import { AddressMap } from './address-map.js';
import { CachingAllocatorModel, hexAddress, type ExpandableLayout, type SegmentLayout, type TraceEntry } from './caching-allocator.js';
import type { DeviceBackend } from './device.js';
import { SimulatedDevice } from './device.js';
import { divisionsFor, settingsFromSnapshot, type AllocatorSettings } from './settings.js';
import { LARGE_BUFFER, MIN_BLOCK_SIZE, roundSize, SMALL_BUFFER, SMALL_SIZE } from './sizes.js';
import type { MemorySnapshot } from '../torch/snapshot.js';

/**
 * Replay of a PyTorch memory snapshot's trace through the allocator model.
 *
 * The snapshot is the allocator's state at the END of its trace. Walking the
 * trace backwards recovers the state at its START (which segments and mapped
 * expandable ranges existed, which blocks were allocated); the model is loaded
 * with that state and every alloc/free/oom is replayed with the snapshot's
 * settings, one device at a time. The device answers the model's cudaMalloc and
 * page-mapping calls from the trace (the address cudaMalloc returned or the
 * first segment_map landed at, and whether it failed first, which the trace
 * shows as segment_free / segment_unmap events before the allocation); every
 * decision — which cached block, whether to split, whether to ask the device at
 * all, which segments to release or pages to unmap — is the model's. Each step
 * is one pass over the trace (docs/ALLOCATOR.md, "Replay").
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
  /** Trace index of the free_completed that ended this allocation (-1: still live at the end). */
  freedAt: number;
}

/**
 * An allocation live when the trace began whose block size no retained event records, and which
 * a later allocation's address shows to be bigger than the size rules alone give.
 */
export interface ImpliedBlock {
  address: number;
  requestedSize: number;
  /** The size the rules give from the requested size and the room after the block. */
  ruleSize: number;
  /** The size the trace implies: up to where the alloc at `shownBy` landed. */
  impliedSize: number;
  /** Trace index of the alloc that shows it. */
  shownBy: number;
}

export interface StartState {
  /** The first trace event the state precedes (0 unless the trace is incomplete before some event). */
  from: number;
  layout: SegmentLayout[];
  /** Expandable segments (expandable_segments:True) with their mapped ranges. */
  expandable: ExpandableLayout[];
  /** Allocations whose start size the trace implies (see ImpliedBlock). */
  implied: ImpliedBlock[];
  /** Things the backward walk could not reconcile (each lowers fidelity and is reported). */
  problems: string[];
  /** The latest trace index that contradicts the end state (-1: none): events up to it cannot be replayed. */
  contradictedAt: number;
}

/** Address space PyTorch reserves per expandable segment: 1 1/8 of the device, in whole pages. */
export function expandableAddressSpace(totalMemory: number, pageSize: number): number {
  return Math.ceil((totalMemory + Math.floor(totalMemory / 8)) / pageSize) * pageSize;
}

/** Expandable segments map 2 MiB pages in the small pool and 20 MiB pages in the large one. */
function pageSizeOf(isSmall: boolean): number {
  return isSmall ? SMALL_BUFFER : LARGE_BUFFER;
}

/** How big the block serving an allocation of `requested` was, given the room up to the next block. */
function inferBlockSize(requested: number, room: number, alwaysSplit: boolean, settings: AllocatorSettings): number {
  const rounded = roundSize(requested, (s) => divisionsFor(settings, s));
  if (room <= rounded) return room;
  const remaining = room - rounded;
  if (alwaysSplit) return remaining >= MIN_BLOCK_SIZE ? rounded : room;
  if (rounded >= settings.maxSplitSize) return remaining < settings.maxNonSplitRoundingSize ? room : rounded;
  // A large block is split only when more than 1 MiB would remain, so a
  // smaller gap after it is part of it.
  return remaining > SMALL_SIZE ? rounded : room;
}

interface MappedRange {
  start: number;
  end: number;
  stream: number;
  isSmall: boolean;
}

/** Removes [start, end) from a list of disjoint ranges. */
function subtractRange(ranges: MappedRange[], start: number, end: number): MappedRange[] {
  const out: MappedRange[] = [];
  for (const r of ranges) {
    if (r.end <= start || r.start >= end) out.push(r);
    else {
      if (r.start < start) out.push({ ...r, end: start });
      if (r.end > end) out.push({ ...r, start: end });
    }
  }
  return out;
}

/** Joins touching ranges of the same stream and pool. */
function mergeRanges(ranges: MappedRange[]): MappedRange[] {
  const sorted = [...ranges].sort((a, b) => a.start - b.start);
  const out: MappedRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && last.end >= r.start && last.stream === r.stream && last.isSmall === r.isSmall) last.end = Math.max(last.end, r.end);
    else out.push({ ...r });
  }
  return out;
}

/** The ordinary segments at the trace's start as places blocks can sit (unordered: the caller sorts them by address). */
function segsAsHolders(
  segs: AddressMap<{ size: number; stream: number; isSmall: boolean }>,
): { address: number; size: number; stream: number; isSmall: boolean; expandable: boolean }[] {
  const out: { address: number; size: number; stream: number; isSmall: boolean; expandable: boolean }[] = [];
  segs.forEach((s, address) => out.push({ address, size: s.size, stream: s.stream, isSmall: s.isSmall, expandable: false }));
  return out;
}

/**
 * Walks the trace backwards from the snapshot's end state to the state just before event `from`
 * (the whole trace by default). Live blocks are the end state's plus every allocation the walk
 * sees freed; segments are the end state's less those the trace allocated, plus those it freed;
 * expandable segments' mapped ranges likewise undo segment_map / segment_unmap.
 */
export function reconstructStartState(snap: ParsedSnapshot, device: number, from = 0, totalMemory = TRACE_DEVICE_MEMORY): StartState {
  const problems: string[] = [];
  let contradictedAt = -1;
  const trace = snap.traces[device] ?? [];
  const segs = new AddressMap<{ size: number; stream: number; isSmall: boolean }>();
  /** Segments the walk removed (allocated by the trace), to name the event a stray block contradicts. */
  const removedSegs: { address: number; size: number; index: number }[] = [];
  /** Live blocks by address: a trace index (the free_completed that ends it) or -(k + 1) for endLive[k]. */
  const live = new AddressMap<number>(1024);
  const endLive: LiveBlock[] = [];
  let mapped: MappedRange[] = [];
  /** Every address an expandable segment of each (stream, pool) is seen to hold: its base is the lowest. */
  const expandableSeen = new Map<string, { stream: number; isSmall: boolean; lowest: number }>();
  const seeExpandable = (stream: number, isSmall: boolean, address: number): void => {
    const key = `${stream}:${isSmall}`;
    const seen = expandableSeen.get(key);
    if (!seen) expandableSeen.set(key, { stream, isSmall, lowest: address });
    else seen.lowest = Math.min(seen.lowest, address);
  };
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    const isSmall = s.segment_type ? s.segment_type === 'small' : s.total_size === SMALL_BUFFER;
    if (s.is_expandable) {
      mapped.push({ start: s.address, end: s.address + s.total_size, stream: s.stream, isSmall });
      seeExpandable(s.stream, isSmall, s.address);
    } else segs.set(s.address, { size: s.total_size, stream: s.stream, isSmall });
    for (const b of s.blocks) {
      if (b.state !== 'inactive') {
        endLive.push({ requested: b.requested_size, stream: s.stream, exactSize: b.size, freedAt: -1 });
        live.set(b.address, -endLive.length);
      }
    }
  }
  // Expandable events before `from` also locate a segment's base (the walk sees those after it).
  for (let i = 0; i < from; i++) {
    const e = trace[i];
    if (e.action === 'segment_map' || e.action === 'segment_unmap') seeExpandable(e.stream, e.size % LARGE_BUFFER !== 0, e.addr ?? 0);
  }
  for (let i = trace.length - 1; i >= from; i--) {
    const e = trace[i];
    const addr = e.addr ?? 0;
    switch (e.action) {
      case 'alloc':
        if (!live.delete(addr)) {
          problems.push(`trace[${i}] alloc at ${hexAddress(addr)}: no such live block after it`);
          contradictedAt = Math.max(contradictedAt, i);
        }
        break;
      case 'free_completed':
        live.set(addr, i);
        break;
      case 'segment_alloc':
        if (!segs.delete(addr)) {
          problems.push(`trace[${i}] segment_alloc at ${hexAddress(addr)}: no such segment after it`);
          contradictedAt = Math.max(contradictedAt, i);
        } else removedSegs.push({ address: addr, size: e.size, index: i });
        break;
      case 'segment_free':
        segs.set(addr, { size: e.size, stream: e.stream, isSmall: e.size === SMALL_BUFFER });
        break;
      case 'segment_map':
        seeExpandable(e.stream, e.size % LARGE_BUFFER !== 0, addr);
        mapped = subtractRange(mapped, addr, addr + e.size);
        break;
      case 'segment_unmap':
        seeExpandable(e.stream, e.size % LARGE_BUFFER !== 0, addr);
        mapped.push({ start: addr, end: addr + e.size, stream: e.stream, isSmall: e.size % LARGE_BUFFER !== 0 });
        break;
      default:
        break;
    }
  }
  mapped = mergeRanges(mapped);

  // Every place a block can sit at the start: ordinary segments and mapped expandable ranges.
  type Holder = { address: number; size: number; stream: number; isSmall: boolean; expandable: boolean };
  const holders: Holder[] = [
    ...segsAsHolders(segs),
    ...mapped.map((r) => ({ address: r.start, size: r.end - r.start, stream: r.stream, isSmall: r.isSmall, expandable: true })),
  ].sort((a, b) => a.address - b.address);
  const liveAddresses = new Float64Array(live.size);
  let liveCount = 0;
  live.forEach((_, addr) => {
    liveAddresses[liveCount++] = addr;
  });
  liveAddresses.sort();
  const liveSorted: [number, LiveBlock][] = Array.from(liveAddresses, (addr): [number, LiveBlock] => {
    const v = live.get(addr)!;
    return [addr, v < 0 ? endLive[-v - 1] : { requested: trace[v].size, stream: trace[v].stream, exactSize: null, freedAt: v }];
  });

  // Blocks whose size the rules infer (exactSize null) and that leave free room after them: the
  // first allocation that lands in that room, before the block is freed, starts where it ends.
  interface Placed {
    address: number;
    block: LiveBlock;
    size: number;
    /** End of the room the block and the free gap after it share. */
    roomEnd: number;
  }
  const placedPerHolder: Placed[][] = [];
  const gaps: Placed[] = [];
  let li = 0;
  for (const h of holders) {
    const end = h.address + h.size;
    while (li < liveSorted.length && liveSorted[li][0] < h.address) {
      problems.push(`live block ${hexAddress(liveSorted[li][0])} at trace start lies outside every segment`);
      li++;
    }
    const inside: [number, LiveBlock][] = [];
    while (li < liveSorted.length && liveSorted[li][0] < end) inside.push(liveSorted[li++]);
    const placed: Placed[] = inside.map(([addr, b], k) => {
      const nextStart = k + 1 < inside.length ? inside[k + 1][0] : end;
      const alwaysSplit = h.isSmall || h.expandable;
      let size = b.exactSize ?? inferBlockSize(b.requested, nextStart - addr, alwaysSplit, snap.settings);
      if (size > nextStart - addr) {
        problems.push(`block ${hexAddress(addr)} (${size} bytes) overlaps the next block`);
        size = nextStart - addr;
      }
      const p = { address: addr, block: b, size, roomEnd: nextStart };
      if (b.exactSize === null && addr + size < nextStart) gaps.push(p);
      return p;
    });
    placedPerHolder.push(placed);
  }
  for (; li < liveSorted.length; li++) problems.push(`live block ${hexAddress(liveSorted[li][0])} at trace start lies outside every segment`);
  // A stray live block sits in a segment the trace allocated: the allocation that made it is not
  // in the trace, so nothing up to that segment_alloc can be replayed.
  for (const p of problems) {
    const m = /^live block (0x[0-9a-f]+) at trace start lies outside every segment$/.exec(p);
    if (!m) continue;
    const addr = Number.parseInt(m[1], 16);
    const seg = removedSegs.find((s) => s.address <= addr && addr < s.address + s.size);
    if (seg) contradictedAt = Math.max(contradictedAt, seg.index);
  }

  const implied: ImpliedBlock[] = [];
  if (gaps.length > 0) {
    gaps.sort((a, b) => a.address - b.address);
    const settled = new Set<Placed>();
    for (let i = from; i < trace.length && settled.size < gaps.length; i++) {
      const e = trace[i];
      if (e.action !== 'alloc') continue;
      const a = e.addr ?? 0;
      // The last gap block starting below a.
      let lo = 0;
      let hi = gaps.length - 1;
      let at = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (gaps[mid].address < a) {
          at = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      if (at < 0) continue;
      const g = gaps[at];
      if (a >= g.roomEnd || settled.has(g)) continue;
      settled.add(g);
      if (g.block.freedAt >= 0 && g.block.freedAt < i) continue;
      const impliedSize = a - g.address;
      if (impliedSize > g.size) {
        implied.push({ address: g.address, requestedSize: g.block.requested, ruleSize: g.size, impliedSize, shownBy: i });
        g.size = impliedSize;
      }
    }
  }

  const toLayout = (h: Holder, placed: Placed[]): SegmentLayout => {
    const end = h.address + h.size;
    const blocks: SegmentLayout['blocks'] = [];
    let cursor = h.address;
    for (const p of placed) {
      if (p.address > cursor) blocks.push({ address: cursor, size: p.address - cursor, allocated: false, requestedSize: 0 });
      blocks.push({ address: p.address, size: p.size, allocated: true, requestedSize: p.block.requested });
      cursor = p.address + p.size;
    }
    if (cursor < end) blocks.push({ address: cursor, size: end - cursor, allocated: false, requestedSize: 0 });
    return { address: h.address, totalSize: h.size, stream: h.stream, isSmall: h.isSmall, blocks };
  };
  const layout: SegmentLayout[] = [];
  const expandableRanges = new Map<string, SegmentLayout[]>();
  holders.forEach((h, k) => {
    const seg = toLayout(h, placedPerHolder[k]);
    if (!h.expandable) layout.push(seg);
    else {
      const key = `${h.stream}:${h.isSmall}`;
      const list = expandableRanges.get(key) ?? [];
      list.push(seg);
      expandableRanges.set(key, list);
    }
  });
  const expandable: ExpandableLayout[] = [];
  for (const [key, ranges] of expandableRanges) {
    const seen = expandableSeen.get(key)!;
    const pageSize = pageSizeOf(seen.isSmall);
    const base = seen.lowest;
    const misaligned = ranges.find((r) => (r.address - base) % pageSize !== 0 || r.totalSize % pageSize !== 0);
    if (misaligned) {
      problems.push(`expandable range ${hexAddress(misaligned.address)} (${misaligned.totalSize} bytes) is not whole ${pageSize}-byte pages from ${hexAddress(base)}`);
      continue;
    }
    expandable.push({ base, size: expandableAddressSpace(totalMemory, pageSize), pageSize, stream: seen.stream, isSmall: seen.isSmall, ranges });
  }
  return { from, layout, expandable, implied, problems, contradictedAt };
}

/**
 * The start state replay uses: when the trace contradicts the end state (an event only a missing
 * earlier event explains), replay starts just after the latest contradicting event.
 */
export function impliedStartState(snap: ParsedSnapshot, device: number): StartState {
  let start = reconstructStartState(snap, device);
  for (let round = 0; round < 8 && start.contradictedAt >= start.from; round++) {
    const next = reconstructStartState(snap, device, start.contradictedAt + 1);
    start = { ...next, problems: [...start.problems, ...next.problems] };
  }
  return start;
}

// ------------------------------------------------------------------ replay against PyTorch

/** The trace device's memory: large enough that only the trace decides when memory runs out. */
const TRACE_DEVICE_MEMORY = 2 ** 50;

/** Device answers taken from the trace (see module comment). */
class TraceDevice implements DeviceBackend {
  readonly totalMemory = TRACE_DEVICE_MEMORY;
  /** segment_alloc events of the trace that the current allocation may consume. */
  expectedAllocs: { addr: number; size: number }[] = [];
  /** Where the current allocation's first segment_map lands (the base of a fresh expandable segment). */
  expectedMapAt: number | null = null;
  /** cudaMalloc / page mapping fails until the model has released this many segments or page runs (the trace's count). */
  failUntilFrees = 0;
  modelFrees = 0;
  failAll = false;
  /** Addresses for loadState, taken in order. */
  preload: number[] = [];
  private preloadNext = 0;
  private synthetic = 2 ** 52;

  freeMemory(): number {
    return 0;
  }
  private refuses(): boolean {
    return this.failAll || this.modelFrees < this.failUntilFrees;
  }
  malloc(size: number): number | null {
    if (this.preloadNext < this.preload.length) return this.preload[this.preloadNext++];
    if (this.refuses()) return null;
    const i = this.expectedAllocs.findIndex((a) => a.size === size);
    if (i >= 0) return this.expectedAllocs.splice(i, 1)[0].addr;
    const addr = this.synthetic;
    this.synthetic += Math.ceil(size / (2 << 20)) * (2 << 20);
    return addr;
  }
  free(): void {}
  reserveAddressSpace(size: number): number {
    if (this.expectedMapAt !== null) {
      const at = this.expectedMapAt;
      this.expectedMapAt = null;
      return at;
    }
    const addr = this.synthetic;
    this.synthetic += size;
    return addr;
  }
  mapPage(): boolean {
    return !this.refuses();
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

const MAX_MISMATCHES = 20;

/** Replays every device trace of a snapshot that has one and compares with PyTorch. */
export function replaySnapshot(raw: unknown): ReplayReport {
  const snap = asParsed(raw);
  const devices: DeviceReplayReport[] = [];
  snap.traces.forEach((trace, device) => {
    if (trace.length === 0) return;
    devices.push(replayDevice(snap, device));
  });
  const traced = new Set(devices.map((d) => d.device));
  const untracedDevices = [...new Set(snap.segments.map((s) => s.device))].filter((d) => !traced.has(d)).sort((a, b) => a - b);
  for (let d = 0; d < snap.traces.length; d++) if (!traced.has(d) && !untracedDevices.includes(d)) untracedDevices.push(d);
  untracedDevices.sort((a, b) => a - b);
  return { settings: snap.settings.conf, hasSettings: snap.hasSettings, devices, untracedDevices };
}

function describeIncomplete(start: StartState): TraceIncomplete | null {
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
    const first = Math.min(...start.implied.map((b) => b.shownBy));
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

function replayDevice(snap: ParsedSnapshot, device: number): DeviceReplayReport {
  const trace = snap.traces[device];
  const start = impliedStartState(snap, device);
  const backend = new TraceDevice();
  /** Segment events the model emitted: action, address, size and the trace index being replayed. */
  const emitted: { action: string; addr: number; size: number; index: number }[] = [];
  let currentIndex = -1;
  /** Segments / page runs the model released while replaying the current event. */
  let freesAtCurrent = 0;
  const setIndex = (i: number): void => {
    currentIndex = i;
    freesAtCurrent = 0;
  };
  const model = new CachingAllocatorModel({
    device,
    settings: snap.settings,
    backend,
    onSegmentEvent: (action, addr, size) => {
      emitted.push({ action, addr, size, index: currentIndex });
      if (action === 'segment_free' || action === 'segment_unmap') {
        backend.modelFrees++;
        freesAtCurrent++;
      }
    },
  });
  backend.preload = start.layout.map((s) => s.address);
  model.loadState(start.layout);
  for (const es of start.expandable) model.loadExpandableState(es);
  backend.preload = [];

  const mismatches: ReplayMismatch[] = [];
  /**
   * Callers build a mismatch's message only while fewer than MAX_MISMATCHES are kept (`noting()`).
   * No closure in the event loop captures its per-event variables: such a closure makes the engine
   * allocate a fresh scope for every event, whether or not a mismatch is recorded.
   */
  const noting = (): boolean => mismatches.length < MAX_MISMATCHES;
  const note = (traceIndex: number, kind: ReplayMismatch['kind'], message: string): void => {
    mismatches.push({ traceIndex, kind, message });
  };
  /** Trace indexes of the segment events replayed. */
  const traceSeg: number[] = [];
  const addrMap = new AddressMap<number>(1024);
  const ooms: ReplayOom[] = [];
  let allocs = 0;
  let allocMatched = 0;
  /** The run of segment events since the last alloc/free (they belong to the next allocation). */
  let group: TraceEntry[] = [];
  let groupStart = 0;

  const resetDevice = (): void => {
    backend.expectedAllocs = [];
    backend.expectedMapAt = null;
    backend.failUntilFrees = 0;
    backend.modelFrees = 0;
    backend.failAll = false;
  };
  const flushAsEmptyCache = (): void => {
    if (group.length === 0) return;
    setIndex(groupStart);
    resetDevice();
    model.emptyCache();
    group = [];
  };

  for (let i = start.from; i < trace.length; i++) {
    const e = trace[i];
    switch (e.action) {
      case 'segment_free':
      case 'segment_alloc':
      case 'segment_map':
      case 'segment_unmap':
        if (group.length === 0) groupStart = i;
        group.push(e);
        traceSeg.push(i);
        break;
      case 'snapshot':
        break;
      case 'oom':
      case 'alloc': {
        setIndex(i);
        if (group.length === 0 && e.action === 'alloc') {
          // Most allocations: no segment event before them, so the device has nothing to give.
          if (backend.expectedAllocs.length > 0 || backend.expectedMapAt !== null || backend.failUntilFrees > 0 || backend.failAll) resetDevice();
          backend.modelFrees = 0;
        } else {
          let frees = 0;
          let firstMap: number | null = null;
          const expectedAllocs: { addr: number; size: number }[] = [];
          for (const g of group) {
            if (g.action === 'segment_free' || g.action === 'segment_unmap') frees++;
            else if (g.action === 'segment_alloc') expectedAllocs.push({ addr: g.addr ?? 0, size: g.size });
            else if (g.action === 'segment_map' && firstMap === null) firstMap = g.addr ?? 0;
          }
          if (frees > 0 && e.action === 'alloc' && model.wouldReuseCachedBlock(e.size, e.stream)) {
            // The program emptied the cache before this allocation (a malloc that finds a cached block never frees segments).
            model.emptyCache();
          }
          resetDevice();
          backend.expectedAllocs = expectedAllocs;
          backend.expectedMapAt = firstMap;
          backend.failUntilFrees = frees;
          backend.modelFrees = freesAtCurrent;
          backend.failAll = e.action === 'oom';
          group = [];
        }
        if (e.action === 'oom') {
          let reproduced = false;
          try {
            model.malloc(e.size, e.stream);
            if (noting()) note(i, 'oom', `PyTorch ran out of memory for ${e.size} bytes; the model did not`);
          } catch (err) {
            if (!(err instanceof MemscopeError) || err.code !== 'oom') throw err;
            reproduced = true;
          }
          ooms.push({
            traceIndex: i,
            requestedBytes: e.size,
            deviceFreeBytes: e.device_free ?? 0,
            reproduced,
            allocatedBytes: model.allocatedBytes,
            reservedBytes: model.reservedBytes,
          });
          break;
        }
        allocs++;
        let got: number;
        try {
          got = model.malloc(e.size, e.stream);
        } catch (err) {
          if (!(err instanceof MemscopeError)) throw err;
          if (noting()) note(i, 'oom', `model failed to allocate ${e.size} bytes: ${err.message.slice(0, 120)}`);
          break;
        }
        // Frees name PyTorch's address: map it to the model's only where the two differ.
        if (got === e.addr) {
          allocMatched++;
          if (addrMap.size > 0) addrMap.delete(got);
        } else {
          addrMap.set(e.addr!, got);
          if (noting()) note(i, 'address', `alloc of ${e.size} bytes: PyTorch gave ${hexAddress(e.addr!)}, the model ${hexAddress(got)}`);
        }
        break;
      }
      case 'free_requested':
      case 'free_completed': {
        flushAsEmptyCache();
        setIndex(i);
        const addr = addrMap.size > 0 ? (addrMap.get(e.addr!) ?? e.addr!) : e.addr!;
        try {
          if (e.action === 'free_requested') model.requestFree(addr);
          else model.completeFreeOrFree(addr);
        } catch (err) {
          if (!(err instanceof MemscopeError)) throw err;
          if (noting()) note(i, 'free', `${e.action} of ${hexAddress(e.addr!)}: ${err.message}`);
        }
        break;
      }
    }
  }
  flushAsEmptyCache();

  // Segment events, position by position.
  let segMatched = 0;
  const n = Math.max(traceSeg.length, emitted.length);
  for (let k = 0; k < n; k++) {
    const t = k < traceSeg.length ? trace[traceSeg[k]] : undefined;
    const m = emitted[k];
    if (t && m && t.action === m.action && (t.addr ?? 0) === m.addr && t.size === m.size) segMatched++;
    else if ((t || m) && noting()) {
      note(
        k < traceSeg.length ? traceSeg[k] : (m?.index ?? -1),
        'segment-event',
        `segment event #${k}: PyTorch ${t ? `${t.action} ${hexAddress(t.addr ?? 0)} ${t.size}` : 'none'}, model ${m ? `${m.action} ${hexAddress(m.addr)} ${m.size}` : 'none'}`,
      );
    }
  }

  // End state against the snapshot: segments by (address, size), blocks by (address, size, state, requested size when live).
  const wantSegs = new Map<number, number>();
  const wantBlocks = new Map<number, RawBlock>();
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    wantSegs.set(s.address, s.total_size);
    for (const b of s.blocks) wantBlocks.set(b.address, b);
  }
  let haveSegCount = 0;
  let haveBlockCount = 0;
  let segBoth = 0;
  let blockBoth = 0;
  let firstMissing: string | null = null;
  const seen = new Set<number>();
  for (const { head, blocks } of model.segments()) {
    haveSegCount++;
    let total = 0;
    for (const b of blocks) {
      total += b.size;
      haveBlockCount++;
      const w = wantBlocks.get(b.address);
      const state = b.allocated ? 'active_allocated' : b.pendingFree ? 'active_pending_free' : 'inactive';
      if (w && w.size === b.size && w.state === state && (state === 'inactive' || w.requested_size === b.requestedSize)) {
        blockBoth++;
        seen.add(b.address);
      }
    }
    if (wantSegs.get(head.address) === total) segBoth++;
  }
  for (const [address, b] of wantBlocks) {
    if (!seen.has(address)) {
      firstMissing = `${hexAddress(address)} (${b.size} bytes, ${b.state}${b.state === 'inactive' ? '' : `, ${b.requested_size} requested`})`;
      break;
    }
  }
  if (firstMissing !== null && noting()) note(trace.length, 'layout', `end state: PyTorch has block ${firstMissing}, the model does not`);

  const incomplete = describeIncomplete(start);
  return {
    device,
    traceEvents: trace.length,
    replayedFrom: start.from,
    allocs,
    startSegments: start.layout.length,
    startExpandableRanges: start.expandable.reduce((c, es) => c + es.ranges.length, 0),
    startLiveBlocks: [...start.layout, ...start.expandable.flatMap((es) => es.ranges)].reduce((c, s) => c + s.blocks.filter((b) => b.allocated).length, 0),
    allocAddresses: rate(allocMatched, allocs),
    segmentEvents: { ...rate(segMatched, traceSeg.length === 0 && emitted.length === 0 ? 0 : n), model: emitted.length },
    finalSegments: rate(segBoth, wantSegs.size + haveSegCount - segBoth),
    finalBlocks: rate(blockBoth, wantBlocks.size + haveBlockCount - blockBoth),
    verdict: incomplete ? 'incomplete' : 'complete',
    incomplete,
    ooms,
    oomAnswer: ooms.length > 0 ? answerOom(snap, device, ooms[0]) : null,
    startStateProblems: start.problems.slice(0, MAX_MISMATCHES),
    mismatches,
  };
}

// ------------------------------------------------------------------ what-if

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

function answerOom(snap: ParsedSnapshot, device: number, oom: ReplayOom): OomAnswer {
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
