import { AddressMap } from './address-map.js';
import { hexAddress, type ExpandableLayout, type SegmentLayout } from './caching-allocator.js';
import {
  ALLOC,
  FREE_COMPLETED,
  SEGMENT_ALLOC,
  SEGMENT_FREE,
  SEGMENT_MAP,
  SEGMENT_UNMAP,
  EMPTY_COLUMNS,
  type ParsedSnapshot,
  type TraceColumns,
} from './replay-input.js';
import { divisionsFor, type AllocatorSettings } from './settings.js';
import { LARGE_BUFFER, MIN_BLOCK_SIZE, roundSize, SMALL_BUFFER, SMALL_SIZE } from './sizes.js';

/**
 * The allocator's state when a snapshot's trace began, recovered from the snapshot's end state by
 * walking the trace backwards: which segments and mapped expandable ranges existed, which blocks
 * were allocated and how big they were. Replay and the what-if runs start from it.
 */

/** The trace device's memory: large enough that only the trace decides when memory runs out. */
export const TRACE_DEVICE_MEMORY = 2 ** 50;

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

/** Where a block can sit at the trace's start: an ordinary segment or a mapped expandable range. */
interface Holder {
  address: number;
  size: number;
  stream: number;
  isSmall: boolean;
  expandable: boolean;
}

/** A live block placed in its holder. */
interface Placed {
  address: number;
  block: LiveBlock;
  size: number;
  /** End of the room the block and the free gap after it share. */
  roomEnd: number;
  /** A later allocation already showed where this block ends (see impliedSizes). */
  settled: boolean;
}

/** What the backward walk tracks, from the end state back to the start. */
interface WalkState {
  trace: TraceColumns;
  segs: AddressMap<{ size: number; stream: number; isSmall: boolean }>;
  /** Segments the walk removed (allocated by the trace), to name the event a stray block contradicts. */
  removedSegs: { address: number; size: number; index: number }[];
  /** Live blocks by address: a trace index (the free_completed that ends it) or -(k + 1) for endLive[k]. */
  live: AddressMap<number>;
  endLive: LiveBlock[];
  mapped: MappedRange[];
  /** Every address an expandable segment of each (stream, pool) is seen to hold: its base is the lowest. */
  expandableSeen: Map<string, { stream: number; isSmall: boolean; lowest: number }>;
  problems: string[];
  contradictedAt: number;
}

function seeExpandable(state: WalkState, stream: number, isSmall: boolean, address: number): void {
  const key = `${stream}:${isSmall}`;
  const seen = state.expandableSeen.get(key);
  if (!seen) state.expandableSeen.set(key, { stream, isSmall, lowest: address });
  else seen.lowest = Math.min(seen.lowest, address);
}

/** Frees in the walked part of the trace: each may add a live block, so the live table is sized for them at once. */
function countFrees(trace: TraceColumns, from: number): number {
  const action = trace.action;
  let n = 0;
  for (let i = from; i < trace.count; i++) if (action[i] === FREE_COMPLETED) n++;
  return n;
}

/** The end state of one device: its segments, mapped expandable ranges and live blocks. */
function endState(snap: ParsedSnapshot, device: number, trace: TraceColumns, from: number): WalkState {
  const state: WalkState = {
    trace,
    segs: new AddressMap(),
    removedSegs: [],
    live: new AddressMap<number>(1024 + countFrees(trace, from)),
    endLive: [],
    mapped: [],
    expandableSeen: new Map(),
    problems: [],
    contradictedAt: -1,
  };
  for (const s of snap.segments) {
    if (s.device !== device) continue;
    const isSmall = s.segment_type ? s.segment_type === 'small' : s.total_size === SMALL_BUFFER;
    if (s.is_expandable) {
      state.mapped.push({ start: s.address, end: s.address + s.total_size, stream: s.stream, isSmall });
      seeExpandable(state, s.stream, isSmall, s.address);
    } else state.segs.set(s.address, { size: s.total_size, stream: s.stream, isSmall });
    for (const b of s.blocks) {
      if (b.state !== 'inactive') {
        state.endLive.push({ requested: b.requested_size, stream: s.stream, exactSize: b.size, freedAt: -1 });
        state.live.set(b.address, -state.endLive.length);
      }
    }
  }
  // Expandable events before `from` also locate a segment's base (the walk sees those after it).
  for (let i = 0; i < from; i++) {
    const action = trace.action[i];
    if (action === SEGMENT_MAP || action === SEGMENT_UNMAP) seeExpandable(state, trace.stream[i], trace.size[i] % LARGE_BUFFER !== 0, trace.addr[i]);
  }
  return state;
}

/** An event that only a missing earlier event explains: nothing up to it can be replayed. */
function contradiction(state: WalkState, index: number, message: string): void {
  state.problems.push(message);
  state.contradictedAt = Math.max(state.contradictedAt, index);
}

/** Undoes segment event i (segment_alloc / segment_free / segment_map / segment_unmap). */
function undoSegmentEvent(state: WalkState, i: number): void {
  const { trace, segs } = state;
  const addr = trace.addr[i];
  const size = trace.size[i];
  const stream = trace.stream[i];
  switch (trace.action[i]) {
    case SEGMENT_ALLOC:
      if (!segs.delete(addr)) contradiction(state, i, `trace[${i}] segment_alloc at ${hexAddress(addr)}: no such segment after it`);
      else state.removedSegs.push({ address: addr, size, index: i });
      break;
    case SEGMENT_FREE:
      segs.set(addr, { size, stream, isSmall: size === SMALL_BUFFER });
      break;
    case SEGMENT_MAP:
      seeExpandable(state, stream, size % LARGE_BUFFER !== 0, addr);
      state.mapped = subtractRange(state.mapped, addr, addr + size);
      break;
    case SEGMENT_UNMAP:
      seeExpandable(state, stream, size % LARGE_BUFFER !== 0, addr);
      state.mapped.push({ start: addr, end: addr + size, stream, isSmall: size % LARGE_BUFFER !== 0 });
      break;
  }
}

/** Undoes the trace's events, last to `from`, on the end state. */
function walkBackwards(state: WalkState, from: number): void {
  const { trace, live, segs } = state;
  const { action: actions, addr: addrs } = trace;
  for (let i = trace.count - 1; i >= from; i--) {
    const action = actions[i];
    if (action === ALLOC) {
      if (!live.delete(addrs[i])) contradiction(state, i, `trace[${i}] alloc at ${hexAddress(addrs[i])}: no such live block after it`);
    } else if (action === FREE_COMPLETED) live.set(addrs[i], i);
    else if (action >= SEGMENT_ALLOC && action <= SEGMENT_UNMAP) undoSegmentEvent(state, i);
  }
  state.mapped = mergeRanges(state.mapped);
}

/** Every place a block can sit at the start, by address. */
function startHolders(state: WalkState): Holder[] {
  return [
    ...segsAsHolders(state.segs),
    ...state.mapped.map((r) => ({ address: r.start, size: r.end - r.start, stream: r.stream, isSmall: r.isSmall, expandable: true })),
  ].sort((a, b) => a.address - b.address);
}

/** The blocks live at the start, by address (two parallel arrays). */
function sortedLive(state: WalkState): { addresses: Float64Array; blocks: LiveBlock[] } {
  const { live, endLive, trace } = state;
  const addresses = new Float64Array(live.size);
  let count = 0;
  live.forEach((_, addr) => {
    addresses[count++] = addr;
  });
  addresses.sort();
  const blocks = new Array<LiveBlock>(count);
  for (let k = 0; k < count; k++) {
    const v = live.get(addresses[k])!;
    blocks[k] = v < 0 ? endLive[-v - 1] : { requested: trace.size[v], stream: trace.stream[v], exactSize: null, freedAt: v };
  }
  return { addresses, blocks };
}

function outsideEverySegment(state: WalkState, address: number, strays: number[]): void {
  state.problems.push(`live block ${hexAddress(address)} at trace start lies outside every segment`);
  strays.push(address);
}

/**
 * Places the live blocks in their holders, each with its exact size or the size the rules infer
 * from the room up to the next block. Blocks whose size is inferred and that leave free room after
 * them are also returned as `gaps` (see impliedSizes).
 */
function placeBlocks(
  state: WalkState,
  holders: Holder[],
  settings: AllocatorSettings,
): { placedPerHolder: Placed[][]; gaps: Placed[]; strays: number[] } {
  const { addresses, blocks } = sortedLive(state);
  const placedPerHolder: Placed[][] = [];
  const gaps: Placed[] = [];
  const strays: number[] = [];
  let li = 0;
  for (const h of holders) {
    const end = h.address + h.size;
    while (li < addresses.length && addresses[li] < h.address) outsideEverySegment(state, addresses[li++], strays);
    const first = li;
    while (li < addresses.length && addresses[li] < end) li++;
    const placed: Placed[] = [];
    for (let k = first; k < li; k++) {
      const addr = addresses[k];
      const b = blocks[k];
      const nextStart = k + 1 < li ? addresses[k + 1] : end;
      let size = b.exactSize ?? inferBlockSize(b.requested, nextStart - addr, h.isSmall || h.expandable, settings);
      if (size > nextStart - addr) {
        state.problems.push(`block ${hexAddress(addr)} (${size} bytes) overlaps the next block`);
        size = nextStart - addr;
      }
      const p: Placed = { address: addr, block: b, size, roomEnd: nextStart, settled: false };
      if (b.exactSize === null && addr + size < nextStart) gaps.push(p);
      placed.push(p);
    }
    placedPerHolder.push(placed);
  }
  while (li < addresses.length) outsideEverySegment(state, addresses[li++], strays);
  return { placedPerHolder, gaps, strays };
}

/**
 * A stray live block sitting in a segment the trace allocated: the allocation that made it is not
 * in the trace, so nothing up to that segment_alloc can be replayed.
 */
function contradictStrays(state: WalkState, strays: number[]): void {
  for (const addr of strays) {
    const seg = state.removedSegs.find((s) => s.address <= addr && addr < s.address + s.size);
    if (seg) state.contradictedAt = Math.max(state.contradictedAt, seg.index);
  }
}

/** The last gap block starting below `address` (-1: none). */
function gapBelow(gaps: Placed[], address: number): number {
  let lo = 0;
  let hi = gaps.length - 1;
  let at = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (gaps[mid].address < address) {
      at = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return at;
}

/**
 * Blocks whose size the rules infer and that leave free room after them: the first allocation that
 * lands in that room, before the block is freed, starts where the block ends. Grows those blocks.
 */
function impliedSizes(trace: TraceColumns, from: number, gaps: Placed[]): ImpliedBlock[] {
  const implied: ImpliedBlock[] = [];
  if (gaps.length === 0) return implied;
  gaps.sort((a, b) => a.address - b.address);
  let settled = 0;
  for (let i = from; i < trace.count && settled < gaps.length; i++) {
    if (trace.action[i] !== ALLOC) continue;
    const a = trace.addr[i];
    const at = gapBelow(gaps, a);
    if (at < 0) continue;
    const g = gaps[at];
    if (a >= g.roomEnd || g.settled) continue;
    g.settled = true;
    settled++;
    if (g.block.freedAt >= 0 && g.block.freedAt < i) continue;
    const impliedSize = a - g.address;
    if (impliedSize > g.size) {
      implied.push({ address: g.address, requestedSize: g.block.requested, ruleSize: g.size, impliedSize, shownBy: i });
      g.size = impliedSize;
    }
  }
  return implied;
}

/** A holder with its placed blocks and the free blocks between them. */
function toLayout(h: Holder, placed: Placed[]): SegmentLayout {
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
}

/** Mapped expandable ranges grouped into their segments (one per stream and pool), whole pages from the segment's base. */
function expandableLayouts(state: WalkState, rangesByKey: Map<string, SegmentLayout[]>, totalMemory: number): ExpandableLayout[] {
  const expandable: ExpandableLayout[] = [];
  for (const [key, ranges] of rangesByKey) {
    const seen = state.expandableSeen.get(key)!;
    const pageSize = pageSizeOf(seen.isSmall);
    const base = seen.lowest;
    const misaligned = ranges.find((r) => (r.address - base) % pageSize !== 0 || r.totalSize % pageSize !== 0);
    if (misaligned) {
      state.problems.push(`expandable range ${hexAddress(misaligned.address)} (${misaligned.totalSize} bytes) is not whole ${pageSize}-byte pages from ${hexAddress(base)}`);
      continue;
    }
    expandable.push({ base, size: expandableAddressSpace(totalMemory, pageSize), pageSize, stream: seen.stream, isSmall: seen.isSmall, ranges });
  }
  return expandable;
}

/**
 * Walks the trace backwards from the snapshot's end state to the state just before event `from`
 * (the whole trace by default). Live blocks are the end state's plus every allocation the walk
 * sees freed; segments are the end state's less those the trace allocated, plus those it freed;
 * expandable segments' mapped ranges likewise undo segment_map / segment_unmap.
 */
export function reconstructStartState(snap: ParsedSnapshot, device: number, from = 0, totalMemory = TRACE_DEVICE_MEMORY): StartState {
  const trace = snap.columns[device] ?? EMPTY_COLUMNS;
  const state = endState(snap, device, trace, from);
  walkBackwards(state, from);
  const holders = startHolders(state);
  const { placedPerHolder, gaps, strays } = placeBlocks(state, holders, snap.settings);
  contradictStrays(state, strays);
  const implied = impliedSizes(trace, from, gaps);
  const layout: SegmentLayout[] = [];
  const rangesByKey = new Map<string, SegmentLayout[]>();
  holders.forEach((h, k) => {
    const seg = toLayout(h, placedPerHolder[k]);
    if (!h.expandable) layout.push(seg);
    else {
      const key = `${h.stream}:${h.isSmall}`;
      const list = rangesByKey.get(key) ?? [];
      list.push(seg);
      rangesByKey.set(key, list);
    }
  });
  const expandable = expandableLayouts(state, rangesByKey, totalMemory);
  return { from, layout, expandable, implied, problems: state.problems, contradictedAt: state.contradictedAt };
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
