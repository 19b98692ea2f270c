/**
 * `torch.cuda.memory_stats()` figures from a snapshot: current values from its segments and blocks,
 * peaks and totals from one pass over its device trace (the same pass counts trace actions).
 */
import type { MemorySnapshot, TraceTable } from '../snapshot.js';
import { SMALL_SIZE } from '../pytorch-vocabulary.js';
import { smallSegmentSizes } from '../device-type.js';
import { snapshotTotals, type PoolTotals } from './totals.js';

export interface SnapshotStatsResult {
  /** Flat torch.cuda.memory_stats keys (`allocated_bytes.all.current`, …). */
  readonly stats: Record<string, number>;
  /** Trace events replayed for the peak / total columns (0: no trace, peaks equal current). */
  readonly traceEvents: number;
  /** What the figures cannot say, for a note under the table. */
  readonly notes: string[];
}

const POOL_ALL = 0;
const POOL_LARGE = 1;
const POOL_SMALL = 2;

/** The memory_stats families a trace moves; slot = index × 3 + pool (all / large / small). */
const REPLAYED_FAMILIES = ['allocation', 'allocated_bytes', 'active', 'active_bytes', 'segment', 'reserved_bytes'];
const ALLOCATION = 0;
const ALLOCATED_BYTES = 3;
const ACTIVE = 6;
const ACTIVE_BYTES = 9;
const SEGMENT = 12;
const RESERVED_BYTES = 15;

// What a trace event does to the families (0: nothing).
const ALLOC = 1;
const FREE_REQUESTED = 2;
const FREE_COMPLETED = 3;
const SEGMENT_ALLOC = 4;
const SEGMENT_FREE = 5;
const SEGMENT_MAP = 6;
const SEGMENT_UNMAP = 7;
const OOM = 8;
const EVENT_KINDS = 9;
const EVENT_KIND_OF_ACTION = new Map<string, number>([
  ['alloc', ALLOC],
  ['free_requested', FREE_REQUESTED],
  ['free_completed', FREE_COMPLETED],
  ['segment_alloc', SEGMENT_ALLOC],
  ['segment_free', SEGMENT_FREE],
  ['segment_map', SEGMENT_MAP],
  ['segment_unmap', SEGMENT_UNMAP],
  ['oom', OOM],
]);

/** One pass over a device's trace: what memory_stats and the action counts need from it. */
interface TraceReplay {
  /** Events per action code, and the codes in the order they first occur. */
  readonly byCode: Float64Array;
  readonly order: readonly number[];
  /** Per slot of REPLAYED_FAMILIES: the sum of the trace's deltas, its highest prefix, and the positive / negative totals. */
  readonly sum: Float64Array;
  readonly highest: Float64Array;
  readonly allocatedTotal: Float64Array;
  readonly freedTotal: Float64Array;
  readonly ooms: number;
}

/** Replays already made, per trace (a snapshot is not changed after it is read). */
const replayCache = new WeakMap<TraceTable, TraceReplay>();

function traceReplay(snapshot: MemorySnapshot, trace: TraceTable): TraceReplay {
  let replay = replayCache.get(trace);
  if (replay === undefined) replayCache.set(trace, (replay = replayTrace(snapshot, trace)));
  return replay;
}

/**
 * The forward pass over one trace. It runs once per read in a fresh process (`memscope summary`),
 * mostly before V8 has optimised it, so each event does as little as it can: running sums and
 * their highest prefix (only an increase can raise one); the totals come after the loop from
 * events and bytes per event kind and pool. An event with a negative or NaN size (no pickler
 * writes one) goes the general way, `replayEvent`.
 */
function replayTrace(snapshot: MemorySnapshot, trace: TraceTable): TraceReplay {
  const slots = REPLAYED_FAMILIES.length * 3;
  const r = {
    byCode: new Float64Array(256),
    order: [] as number[],
    sum: new Float64Array(slots),
    highest: new Float64Array(slots),
    allocatedTotal: new Float64Array(slots),
    freedTotal: new Float64Array(slots),
    ooms: 0,
  };
  const kindOf = new Uint8Array(256);
  snapshot.actionNames.forEach((name, code) => {
    if (code < 256) kindOf[code] = EVENT_KIND_OF_ACTION.get(name) ?? 0;
  });
  const events = new Float64Array(EVENT_KINDS * 3);
  const bytes = new Float64Array(EVENT_KINDS * 3);
  const [smallMin, smallMax] = smallSegmentSizes(snapshot.deviceType);
  r.ooms = replayEvents(trace, kindOf, r, events, bytes, smallMin, smallMax);
  addReplayTotals(r, events, bytes);
  return r;
}

/**
 * The loop of `replayTrace`, alone in its function: V8 optimises it while it runs (on-stack
 * replacement), and code after the loop would be compiled with it, unseen, and thrown away
 * when first reached. Returns the number of OOM events.
 */
function replayEvents(trace: TraceTable, kindOf: Uint8Array, r: TraceReplay, events: Float64Array, bytes: Float64Array, smallMin: number, smallMax: number): number {
  const { byCode, order, sum, highest } = r;
  const actions = trace.action;
  const sizes = trace.size;
  let ooms = 0;
  for (let i = 0; i < trace.count; i++) {
    const code = actions[i]!;
    if (byCode[code]++ === 0) (order as number[]).push(code);
    const kind = kindOf[code]!;
    if (kind === 0) continue;
    if (kind === OOM) {
      ooms++;
      continue;
    }
    const size = sizes[i]!;
    if (!(size >= 0)) {
      replayEvent(r, kind, size, smallMin, smallMax);
      continue;
    }
    // Blocks up to 1 MiB come from the small pool, whose segments are 2 MiB (CUDA's).
    const pool = kind <= FREE_COMPLETED ? (size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE) : kind <= SEGMENT_FREE && size >= smallMin && size <= smallMax ? POOL_SMALL : POOL_LARGE;
    events[kind * 3 + pool]++;
    bytes[kind * 3 + pool] += size;
    if (kind === ALLOC) {
      rise(sum, highest, ALLOCATION, 1);
      rise(sum, highest, ALLOCATION + pool, 1);
      rise(sum, highest, ALLOCATED_BYTES, size);
      rise(sum, highest, ALLOCATED_BYTES + pool, size);
      rise(sum, highest, ACTIVE, 1);
      rise(sum, highest, ACTIVE + pool, 1);
      rise(sum, highest, ACTIVE_BYTES, size);
      rise(sum, highest, ACTIVE_BYTES + pool, size);
    } else if (kind === FREE_REQUESTED) {
      sum[ALLOCATION]!--;
      sum[ALLOCATION + pool]!--;
      sum[ALLOCATED_BYTES]! -= size;
      sum[ALLOCATED_BYTES + pool]! -= size;
    } else if (kind === FREE_COMPLETED) {
      sum[ACTIVE]!--;
      sum[ACTIVE + pool]!--;
      sum[ACTIVE_BYTES]! -= size;
      sum[ACTIVE_BYTES + pool]! -= size;
    } else if (kind === SEGMENT_ALLOC || kind === SEGMENT_MAP) {
      if (kind === SEGMENT_ALLOC) {
        rise(sum, highest, SEGMENT, 1);
        rise(sum, highest, SEGMENT + pool, 1);
      }
      rise(sum, highest, RESERVED_BYTES, size);
      rise(sum, highest, RESERVED_BYTES + pool, size);
    } else {
      // segment_free, segment_unmap
      if (kind === SEGMENT_FREE) {
        sum[SEGMENT]!--;
        sum[SEGMENT + pool]!--;
      }
      sum[RESERVED_BYTES]! -= size;
      sum[RESERVED_BYTES + pool]! -= size;
    }
  }
  return ooms;
}

/**
 * Adds v (≥ 0) to a running sum and raises its highest prefix. A function of its own on purpose:
 * it is optimised within a few thousand events, and it keeps `replayEvents` small enough for V8 to
 * compile (on-stack) in half the time, which halves the part of the pass run unoptimised.
 */
function rise(sum: Float64Array, highest: Float64Array, slot: number, v: number): void {
  const s = (sum[slot]! += v);
  if (s > highest[slot]!) highest[slot] = s;
}

/** Tot Alloc / Tot Freed from the events and bytes per event kind and pool: per pool, and the same again in the "all" row. */
function addReplayTotals(r: TraceReplay, events: Float64Array, bytes: Float64Array): void {
  const { allocatedTotal, freedTotal } = r;
  const total = (slot: number, pool: number, allocated: number, freed: number): void => {
    allocatedTotal[slot + pool]! += allocated;
    allocatedTotal[slot + POOL_ALL]! += allocated;
    freedTotal[slot + pool]! += freed;
    freedTotal[slot + POOL_ALL]! += freed;
  };
  for (const pool of [POOL_LARGE, POOL_SMALL]) {
    const n = (kind: number): number => events[kind * 3 + pool]!;
    const b = (kind: number): number => bytes[kind * 3 + pool]!;
    total(ALLOCATION, pool, n(ALLOC), n(FREE_REQUESTED));
    total(ALLOCATED_BYTES, pool, b(ALLOC), b(FREE_REQUESTED));
    total(ACTIVE, pool, n(ALLOC), n(FREE_COMPLETED));
    total(ACTIVE_BYTES, pool, b(ALLOC), b(FREE_COMPLETED));
    total(SEGMENT, pool, n(SEGMENT_ALLOC), n(SEGMENT_FREE));
    total(RESERVED_BYTES, pool, b(SEGMENT_ALLOC) + b(SEGMENT_MAP), b(SEGMENT_FREE) + b(SEGMENT_UNMAP));
  }
}

/** One event the general way, for any size: each delta moves the running sum and, by its sign, one of the totals. */
function replayEvent(r: TraceReplay, kind: number, size: number, smallMin: number, smallMax: number): void {
  const { sum, highest, allocatedTotal, freedTotal } = r;
  const blockPool = size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
  const segmentPool = size >= smallMin && size <= smallMax ? POOL_SMALL : POOL_LARGE;
  const move = (family: number, pool: number, v: number): void => {
    for (const slot of [family + POOL_ALL, family + pool]) {
      const s = (sum[slot]! += v);
      if (s > highest[slot]!) highest[slot] = s;
      if (v > 0) allocatedTotal[slot]! += v;
      else freedTotal[slot]! -= v;
    }
  };
  if (kind === ALLOC) {
    move(ALLOCATION, blockPool, 1);
    move(ALLOCATED_BYTES, blockPool, size);
    move(ACTIVE, blockPool, 1);
    move(ACTIVE_BYTES, blockPool, size);
  } else if (kind === FREE_REQUESTED) {
    move(ALLOCATION, blockPool, -1);
    move(ALLOCATED_BYTES, blockPool, -size);
  } else if (kind === FREE_COMPLETED) {
    move(ACTIVE, blockPool, -1);
    move(ACTIVE_BYTES, blockPool, -size);
  } else if (kind === SEGMENT_ALLOC) {
    move(SEGMENT, segmentPool, 1);
    move(RESERVED_BYTES, segmentPool, size);
  } else if (kind === SEGMENT_FREE) {
    move(SEGMENT, segmentPool, -1);
    move(RESERVED_BYTES, segmentPool, -size);
  } else if (kind === SEGMENT_MAP) move(RESERVED_BYTES, POOL_LARGE, size);
  else if (kind === SEGMENT_UNMAP) move(RESERVED_BYTES, POOL_LARGE, -size);
}

/**
 * torch.cuda.memory_stats reconstructed from a snapshot: "current" from the
 * segments and blocks; "peak", "allocated" and "freed" by replaying the
 * device's trace backwards from the current state (so they cover the recorded
 * trace window only). The trace's sizes are requested sizes, so requested bytes replay exactly and
 * allocated / active bytes by those sizes (the notes say so); non-releasable splits, which a trace
 * cannot move, keep peak = current and zero totals.
 */
export function snapshotMemoryStats(snapshot: MemorySnapshot, device: number): SnapshotStatsResult {
  const totals = snapshotTotals(snapshot, device);
  const pools = ['all', 'large_pool', 'small_pool'] as const;
  const byPool = { all: totals.all, large_pool: totals.large, small_pool: totals.small };
  const current: Record<string, Record<(typeof pools)[number], number>> = {};
  const families: Record<string, (p: PoolTotals) => number> = {
    allocation: (p) => p.allocations,
    segment: (p) => p.segments,
    active: (p) => p.activeBlocks,
    inactive_split: (p) => p.inactiveSplit,
    allocated_bytes: (p) => p.allocatedFromBlocks,
    reserved_bytes: (p) => p.reserved,
    active_bytes: (p) => p.activeFromBlocks,
    inactive_split_bytes: (p) => p.inactiveSplitBytes,
    requested_bytes: (p) => p.requestedFromBlocks,
  };
  for (const [family, get] of Object.entries(families)) {
    current[family] = { all: get(byPool.all), large_pool: get(byPool.large_pool), small_pool: get(byPool.small_pool) };
  }
  // The trace replayed forward (traceReplay): per family and pool, the sum of its deltas, its
  // highest prefix, and the positive / negative totals. The value before the trace is current −
  // sum, so the peak over the window is that plus the highest prefix (0 and the whole sum
  // included: the start and the current state are both instants of the window).
  const trace = snapshot.traces.find((t) => t.device === device && t.count > 0);
  const replay = trace ? traceReplay(snapshot, trace) : null;
  const notes: string[] = [];
  if (trace) {
    notes.push(
      `Peak, Tot Alloc and Tot Freed cover the ${trace.count} events of the snapshot's trace (the allocator's history ring buffer), not the whole process. ` +
        'The trace records each allocation at its requested size: Requested memory is exact; Allocated and Active memory move by those sizes from their current value, ' +
        "leaving out how much larger each block was (its rounding and any unsplit remainder), which the trace does not record for blocks freed since. Non-releasable memory is not in the trace, so its peak is the current value.",
    );
  } else {
    notes.push(`${snapshot.traces.some((t) => t.count > 0) ? 'This device has no trace in the snapshot' : 'This snapshot has no trace'}: Peak Usage equals Cur Usage and Tot Alloc / Tot Freed are 0 (not recorded).`);
  }
  const stats: Record<string, number> = {};
  for (const family of Object.keys(families)) {
    // The trace's sizes are requested sizes: its allocated-bytes slots are requested bytes.
    const replayed = REPLAYED_FAMILIES.indexOf(family === 'requested_bytes' ? 'allocated_bytes' : family);
    pools.forEach((pool, p) => {
      const slot = replayed * 3 + p;
      const cur = current[family]![pool];
      const moved = replay !== null && replayed >= 0;
      stats[`${family}.${pool}.current`] = cur;
      stats[`${family}.${pool}.peak`] = moved ? cur - replay.sum[slot]! + replay.highest[slot]! : cur;
      stats[`${family}.${pool}.allocated`] = moved ? replay.allocatedTotal[slot]! : 0;
      stats[`${family}.${pool}.freed`] = moved ? replay.freedTotal[slot]! : 0;
    });
  }
  // Oversize: larger than max_split_size, which is unlimited unless the settings say otherwise.
  const maxSplit = Number(snapshot.allocatorSettings?.['max_split_size'] ?? -1);
  let oversizeAllocations = 0;
  let oversizeSegments = 0;
  if (maxSplit > 0) {
    for (const seg of snapshot.segments) {
      if (seg.device !== device) continue;
      if (seg.totalSize > maxSplit) oversizeSegments++;
      for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
        if (snapshot.stateNames[snapshot.blocks.state[i]!] === 'active_allocated' && snapshot.blocks.size[i]! > maxSplit) oversizeAllocations++;
      }
    }
  }
  for (const [key, v] of [
    ['oversize_allocations', oversizeAllocations],
    ['oversize_segments', oversizeSegments],
  ] as const) {
    stats[`${key}.current`] = v;
    stats[`${key}.peak`] = v;
    stats[`${key}.allocated`] = 0;
    stats[`${key}.freed`] = 0;
  }
  stats['num_ooms'] = replay?.ooms ?? 0;
  stats['num_alloc_retries'] = 0;
  notes.push('cudaMalloc retries are not recorded in snapshots (shown as 0).');
  return { stats, traceEvents: trace?.count ?? 0, notes };
}

export interface TraceActionCounts {
  readonly device: number;
  readonly counts: Record<string, number>;
}

export function traceActionCounts(snapshot: MemorySnapshot): TraceActionCounts[] {
  return snapshot.traces
    .filter((t) => t.count > 0)
    .map((t) => {
      // Counted by action code (a byte) in the pass memory_stats makes too, named in order of first appearance.
      const { byCode, order } = traceReplay(snapshot, t);
      const counts: Record<string, number> = {};
      for (const a of order) counts[snapshot.actionNames[a]!] = byCode[a]!;
      return { device: t.device, counts };
    });
}
