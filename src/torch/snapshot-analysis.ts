/**
 * Analyses of a normalised CUDA memory snapshot (src/torch/snapshot.ts), the
 * questions PyTorch's torch/cuda/_memory_viz.py answers — totals, segment
 * fill and fragmentation, live memory by allocating frame, flame-graph stacks,
 * readable trace lines — as plain functions over the model, so the CLI, the
 * allocator's saveSegmentUsage/saveMemoryUsage and the browser viewer share them.
 */
import { escapeControl } from '../report/escape.js';
import { humanBytes, humanBytes as formatHumanBytes } from '../core/units.js';
import type { FlameStack } from '../report/flamegraph-svg.js';
import type { DeviceMemoryTimeline, MemoryTrace } from './memory-trace.js';
import { EMPTY_OPERATORS } from './memory-trace.js';
import { SMALL_BUFFER, SMALL_SIZE, type Frame } from './pytorch-vocabulary.js';
import { stackFrameIds, type BlockTable, type MemorySnapshot, type Segment, type TraceTable } from './snapshot.js';

// ---------------------------------------------------------------- frames

/** A C++ symbol without its parameter list (`ns::f(int, long) const` → `ns::f`). */
function withoutParameters(name: string): string {
  let end = name.length;
  if (name.endsWith(' const')) end -= 6;
  if (name[end - 1] !== ')') return name;
  let depth = 0;
  for (let i = end - 1; i >= 0; i--) {
    const c = name[i];
    if (c === ')') depth++;
    else if (c === '(') {
      depth--;
      if (depth === 0) return i > 0 ? name.slice(0, i) : name;
    }
  }
  return name;
}

/** Longest frame label kept (C++ template names run to kilobytes). */
const MAX_FRAME_LABEL = 160;

/**
 * `file:line:function` with the file's base name (Windows or POSIX paths), like _memory_viz;
 * C++ frames without a file or line are shown as the bare symbol without its parameters, and an
 * unknown line (-1) as `?`.
 */
export function formatFrame(f: Frame, fullFilename = false): string {
  const file = fullFilename ? f.filename : (f.filename.split(/[\\/]/).pop() ?? f.filename);
  const line = f.line < 0 ? '?' : String(f.line);
  const label = escapeControl((file === '' || file === '??') && f.line === 0 ? withoutParameters(f.name) : `${file}:${line}:${isPythonFrame(f) ? f.name : withoutParameters(f.name)}`);
  return label.length > MAX_FRAME_LABEL ? label.slice(0, MAX_FRAME_LABEL - 1) + '…' : label;
}

/** Frames of the unwinder, the interpreter loop and dispatcher plumbing say nothing about who allocated. */
const NOISE_FUNCTIONS = ['unwind::unwind', 'CapturedTraceback::gather', 'gather_with_cpp', '_start', '__libc_start_main', '__libc_init_first', 'PyEval_', 'PyObject_', 'PyFunction_', 'Py_RunMain', 'Py_BytesMain', 'pymain_', '_PyRun_', 'pyrun_file', 'run_mod', 'run_eval_code_obj', 'cfunction_vectorcall'];
const NOISE_FILES = ['core/boxing', '/Register', '/Redispatch', 'pythonrun.c', 'Modules/main.c', 'Objects/call.c', 'Objects/methodobject.c', 'pycore_ceval.h', 'ceval.c', 'cpython/abstract.h'];

export function isInformativeFrame(f: Frame): boolean {
  for (const s of NOISE_FUNCTIONS) if (f.name.includes(s)) return false;
  for (const s of NOISE_FILES) if (f.filename.includes(s)) return false;
  return true;
}

function isPythonFrame(f: Frame): boolean {
  return f.filename.endsWith('.py');
}

/** Python frames inside the torch package itself (site-packages/torch/…, or a source checkout's torch/…). */
function isTorchInternal(f: Frame): boolean {
  return /(^|[\\/])torch[\\/]/.test(f.filename);
}

/** C++ frames of the allocator and tensor factories: every allocation passes through them. */
function isAllocatorPlumbing(f: Frame): boolean {
  return /^(c10::cuda::CUDACachingAllocator|c10::|at::detail::|at::TensorBase at::detail::|at::empty|at::native::empty|at::\(anonymous namespace\)::create_out)/.test(f.name);
}

/** The ATen operator a C++ stack is running (`at::_ops::NAME::call`), if any. */
const ATEN_OP = /at::_ops::(\w+)::(call|redispatch)\(/;

export const NO_FRAMES = '<no frames recorded>';

interface StackInfo {
  /** Informative frames, innermost first. */
  readonly frames: Frame[];
  /** Index in `frames` of the allocating frame (−1 when there are none). */
  readonly allocating: number;
  readonly allocatingLabel: string;
}

/** Per-snapshot caches: stacks repeat on thousands of blocks. */
class FrameLabels {
  private readonly info = new Map<number, StackInfo>();
  private readonly rootFirstLabels = new Map<number, string[]>();
  constructor(private readonly snapshot: MemorySnapshot) {}

  /**
   * The frame an allocation is charged to: the innermost Python frame outside
   * torch itself (the user's line), else the innermost Python frame, else (a
   * C++-only stack, e.g. the autograd thread) the ATen operator it runs, else
   * the innermost C++ frame past the allocator's own.
   */
  private stackInfo(stack: number): StackInfo {
    let info = this.info.get(stack);
    if (info) return info;
    const frames = Array.from(stackFrameIds(this.snapshot, stack), (id) => this.snapshot.frames[id]!).filter(isInformativeFrame);
    // The allocator's and tensor factories' own frames sit innermost on every C++ stack.
    let plumbing = 0;
    while (plumbing < frames.length && !isPythonFrame(frames[plumbing]!) && isAllocatorPlumbing(frames[plumbing]!)) plumbing++;
    if (plumbing > 0 && plumbing < frames.length) frames.splice(0, plumbing);
    let allocating = frames.findIndex((f) => isPythonFrame(f) && !isTorchInternal(f));
    if (allocating < 0) allocating = frames.findIndex(isPythonFrame);
    let label: string | null = null;
    if (allocating < 0) {
      const op = frames.findIndex((f) => ATEN_OP.test(f.name));
      if (op >= 0) {
        allocating = op;
        label = `aten::${ATEN_OP.exec(frames[op]!.name)![1]} (C++ stack)`;
      } else {
        allocating = frames.findIndex((f) => !isAllocatorPlumbing(f));
        if (allocating < 0 && frames.length) allocating = 0;
      }
    }
    info = { frames, allocating, allocatingLabel: label ?? (allocating >= 0 ? formatFrame(frames[allocating]!) : NO_FRAMES) };
    this.info.set(stack, info);
    return info;
  }

  allocatingFrame(stack: number): string {
    return this.stackInfo(stack).allocatingLabel;
  }

  /** Informative frames, outermost first (flame-graph order). */
  rootFirst(stack: number): string[] {
    let labels = this.rootFirstLabels.get(stack);
    if (!labels) {
      labels = this.stackInfo(stack).frames.map((f) => formatFrame(f)).reverse();
      this.rootFirstLabels.set(stack, labels);
    }
    return labels;
  }

  /** The allocating frame and up to `n − 1` of its callers, innermost first. */
  top(stack: number, n: number): string[] {
    const info = this.stackInfo(stack);
    if (info.allocating < 0) return [];
    return info.frames.slice(info.allocating, info.allocating + n).map((f) => formatFrame(f));
  }
}

const labelCache = new WeakMap<MemorySnapshot, FrameLabels>();
function labels(snapshot: MemorySnapshot): FrameLabels {
  let l = labelCache.get(snapshot);
  if (!l) labelCache.set(snapshot, (l = new FrameLabels(snapshot)));
  return l;
}

export function allocatingFrame(snapshot: MemorySnapshot, stack: number): string {
  return labels(snapshot).allocatingFrame(stack);
}

// ---------------------------------------------------------------- totals

export interface PoolTotals {
  segments: number;
  /** Σ total_size */
  reserved: number;
  /** Σ allocated_size as PyTorch wrote it. */
  allocated: number;
  /** Σ active_size as PyTorch wrote it. */
  active: number;
  /** Σ requested_size; null when the file has none. */
  requested: number | null;
  /** The same figures recomputed from the blocks (they should agree with the fields above). */
  blocks: number;
  allocatedFromBlocks: number;
  activeFromBlocks: number;
  requestedFromBlocks: number;
  /** Blocks in active_allocated state. */
  allocations: number;
  /** Blocks in an active state (allocated or pending free). */
  activeBlocks: number;
  /** Inactive blocks inside split segments (PyTorch's "non-releasable" memory). */
  inactiveSplit: number;
  inactiveSplitBytes: number;
  /** Inactive bytes in all segments. */
  inactiveBytes: number;
}

export interface SnapshotTotals {
  readonly device: number | null;
  readonly all: PoolTotals;
  readonly large: PoolTotals;
  readonly small: PoolTotals;
}

function emptyPool(): PoolTotals {
  return {
    segments: 0,
    reserved: 0,
    allocated: 0,
    active: 0,
    requested: 0,
    blocks: 0,
    allocatedFromBlocks: 0,
    activeFromBlocks: 0,
    requestedFromBlocks: 0,
    allocations: 0,
    activeBlocks: 0,
    inactiveSplit: 0,
    inactiveSplitBytes: 0,
    inactiveBytes: 0,
  };
}

/** Devices that have segments or trace events, ascending. */
export function snapshotDevices(snapshot: MemorySnapshot): number[] {
  const set = new Set<number>();
  for (const s of snapshot.segments) set.add(s.device);
  for (const t of snapshot.traces) if (t.count > 0) set.add(t.device);
  return [...set].sort((a, b) => a - b);
}

/**
 * Totals already computed, per snapshot and device (null: all devices). `memscope summary` asks
 * for the whole snapshot's and then, for memory_stats, each device's: on a one-device snapshot
 * they are the same walk over every block, ~25 ms on the 97 MB bench file in a fresh process. A
 * snapshot is not changed after it is read; the cached totals are frozen.
 */
const totalsCache = new WeakMap<MemorySnapshot, Map<number | null, SnapshotTotals>>();

/** Reserved / allocated / active / requested totals, per pool, from segment fields and from blocks. */
export function snapshotTotals(snapshot: MemorySnapshot, device: number | null = null): SnapshotTotals {
  let cached = totalsCache.get(snapshot);
  if (cached === undefined) totalsCache.set(snapshot, (cached = new Map()));
  let totals = cached.get(device);
  if (totals === undefined) {
    const whole = device === null ? undefined : cached.get(null);
    // Every segment on this device: its totals are the whole snapshot's.
    totals = whole !== undefined && snapshot.segments.every((s) => s.device === device) ? { ...whole, device } : computeTotals(snapshot, device);
    for (const pool of [totals.all, totals.large, totals.small]) Object.freeze(pool);
    cached.set(device, Object.freeze(totals));
  }
  return totals;
}

function computeTotals(snapshot: MemorySnapshot, device: number | null): SnapshotTotals {
  const pools = { all: emptyPool(), large: emptyPool(), small: emptyPool() };
  const stateAllocated = snapshot.stateNames.indexOf('active_allocated');
  // Per state code, once: is it an active state?
  const activeState = Uint8Array.from(snapshot.stateNames, (name) => (name.startsWith('active') ? 1 : 0));
  const b = snapshot.blocks;
  // One segment's figures, from one walk over its blocks, then added to "all" and to its pool.
  const one = emptyPool();
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    segmentFigures(one, seg, b, stateAllocated, activeState);
    addFigures(pools.all, one);
    addFigures(seg.segmentType === 'small' ? pools.small : pools.large, one);
  }
  return { device, ...pools };
}

/** Sets `p` to one segment's figures. */
function segmentFigures(p: PoolTotals, seg: Segment, b: BlockTable, stateAllocated: number, activeState: Uint8Array): void {
  p.segments = 1;
  p.reserved = seg.totalSize;
  p.allocated = seg.allocatedSize;
  p.active = seg.activeSize;
  p.requested = seg.requestedSize;
  let allocations = 0;
  let allocatedFromBlocks = 0;
  let requestedFromBlocks = 0;
  let activeBlocks = 0;
  let activeFromBlocks = 0;
  let inactiveBytes = 0;
  let inactiveBlocks = 0;
  const end = seg.firstBlock + seg.blockCount;
  for (let i = seg.firstBlock; i < end; i++) {
    const state = b.state[i]!;
    const size = b.size[i]!;
    if (state === stateAllocated) {
      allocations++;
      allocatedFromBlocks += size;
      requestedFromBlocks += b.requestedSize[i]!;
    }
    if (activeState[state] === 1) {
      activeBlocks++;
      activeFromBlocks += size;
    } else {
      inactiveBytes += size;
      inactiveBlocks++;
    }
  }
  p.blocks = seg.blockCount;
  p.allocations = allocations;
  p.allocatedFromBlocks = allocatedFromBlocks;
  p.requestedFromBlocks = requestedFromBlocks;
  p.activeBlocks = activeBlocks;
  p.activeFromBlocks = activeFromBlocks;
  p.inactiveBytes = inactiveBytes;
  // Inactive blocks of a split segment are what PyTorch calls non-releasable.
  const split = seg.blockCount > 1;
  p.inactiveSplit = split ? inactiveBlocks : 0;
  p.inactiveSplitBytes = split ? inactiveBytes : 0;
}

/** Adds one segment's figures to a pool's (requested stays null once a segment lacks it). */
function addFigures(p: PoolTotals, one: PoolTotals): void {
  p.segments += one.segments;
  p.reserved += one.reserved;
  p.allocated += one.allocated;
  p.active += one.active;
  p.requested = p.requested === null || one.requested === null ? null : p.requested + one.requested;
  p.blocks += one.blocks;
  p.allocatedFromBlocks += one.allocatedFromBlocks;
  p.activeFromBlocks += one.activeFromBlocks;
  p.requestedFromBlocks += one.requestedFromBlocks;
  p.allocations += one.allocations;
  p.activeBlocks += one.activeBlocks;
  p.inactiveSplit += one.inactiveSplit;
  p.inactiveSplitBytes += one.inactiveSplitBytes;
  p.inactiveBytes += one.inactiveBytes;
}

// ---------------------------------------------------------------- memory_stats-style figures

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
  r.ooms = replayEvents(trace, kindOf, r, events, bytes);
  addReplayTotals(r, events, bytes);
  return r;
}

/**
 * The loop of `replayTrace`, alone in its function: V8 optimises it while it runs (on-stack
 * replacement), and code after the loop would be compiled with it, unseen, and thrown away
 * when first reached. Returns the number of OOM events.
 */
function replayEvents(trace: TraceTable, kindOf: Uint8Array, r: TraceReplay, events: Float64Array, bytes: Float64Array): number {
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
      replayEvent(r, kind, size);
      continue;
    }
    // Blocks up to 1 MiB come from the small pool, whose segments are 2 MiB.
    const pool = kind <= FREE_COMPLETED ? (size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE) : kind <= SEGMENT_FREE && size === SMALL_BUFFER ? POOL_SMALL : POOL_LARGE;
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
function replayEvent(r: TraceReplay, kind: number, size: number): void {
  const { sum, highest, allocatedTotal, freedTotal } = r;
  const blockPool = size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
  const segmentPool = size === SMALL_BUFFER ? POOL_SMALL : POOL_LARGE;
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
 * trace window only). Families a trace cannot move (requested bytes,
 * non-releasable splits) keep peak = current and zero totals, and say so.
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
      `Peak, Tot Alloc and Tot Freed cover the ${trace.count} events of the snapshot's trace (the allocator's history ring buffer), not the whole process; requested and non-releasable memory are not in the trace, so their peak is the current value.`,
    );
  } else {
    notes.push('This snapshot has no trace: Peak Usage equals Cur Usage and Tot Alloc / Tot Freed are 0 (not recorded).');
  }
  const stats: Record<string, number> = {};
  for (const family of Object.keys(families)) {
    const replayed = REPLAYED_FAMILIES.indexOf(family);
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

// ---------------------------------------------------------------- live allocations

export interface LiveAllocation {
  readonly block: number;
  readonly device: number;
  readonly address: number;
  readonly size: number;
  readonly requestedSize: number;
  readonly stream: number;
  /** Informative frames, innermost first (up to the requested count). */
  readonly frames: string[];
  readonly allocatingFrame: string;
}

/** The `n` largest active_allocated blocks, largest first (address breaks ties). */
export function largestAllocations(snapshot: MemorySnapshot, n: number, topFrames = 3, device: number | null = null): LiveAllocation[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const rows = largestAllocatedBlocks(snapshot, n, device);
  const l = labels(snapshot);
  return rows.map((i) => {
    const seg = snapshot.segments[b.segment[i]!]!;
    return {
      block: i,
      device: seg.device,
      address: b.address[i]!,
      size: b.size[i]!,
      requestedSize: b.requestedSize[i]!,
      stream: seg.stream,
      frames: l.top(b.stack[i]!, topFrames),
      allocatingFrame: l.allocatingFrame(b.stack[i]!),
    };
  });
}

/**
 * Rows of the `n` largest active_allocated blocks, in the order of a stable sort by size
 * (descending) then address. For a small `n`, one pass keeping a short sorted list: `memscope
 * summary` asks for 10 of maybe 100 000, in a fresh process where a sort with a comparator runs
 * mostly unoptimised.
 */
function largestAllocatedBlocks(snapshot: MemorySnapshot, n: number, device: number | null): number[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const size = b.size;
  const address = b.address;
  const rows: number[] = [];
  if (n <= 0) return rows;
  const few = n <= 64;
  for (let i = 0; i < b.count; i++) {
    if (b.state[i] !== allocated) continue;
    if (device !== null && snapshot.segments[b.segment[i]!]!.device !== device) continue;
    if (!few) {
      rows.push(i);
      continue;
    }
    // Insert i after every row that is not smaller (equal size and address: earlier rows first).
    const si = size[i]!;
    const ai = address[i]!;
    let k = rows.length;
    while (k > 0) {
      const j = rows[k - 1]!;
      if (size[j]! > si || (size[j] === si && address[j]! <= ai)) break;
      k--;
    }
    if (k === n) continue;
    rows.splice(k, 0, i);
    if (rows.length > n) rows.pop();
  }
  if (!few) {
    rows.sort((x, y) => size[y]! - size[x]! || address[x]! - address[y]!);
    rows.length = Math.min(rows.length, n);
  }
  return rows;
}

export interface FrameTotal {
  readonly frame: string;
  readonly blocks: number;
  readonly bytes: number;
  readonly requested: number;
}

/** Live (active_allocated) memory grouped by allocating frame, largest first. */
export function totalsByFrame(snapshot: MemorySnapshot, device: number | null = null): FrameTotal[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const l = labels(snapshot);
  // Per stack first (typed arrays: blocks outnumber stacks a hundredfold), then per frame.
  const stacks = snapshot.stacks.count;
  const blocksOf = new Float64Array(stacks);
  const bytesOf = new Float64Array(stacks);
  const requestedOf = new Float64Array(stacks);
  for (let i = 0; i < b.count; i++) {
    if (b.state[i] !== allocated) continue;
    if (device !== null && snapshot.segments[b.segment[i]!]!.device !== device) continue;
    const stack = b.stack[i]!;
    blocksOf[stack]++;
    bytesOf[stack] += b.size[i]!;
    requestedOf[stack] += b.requestedSize[i]!;
  }
  const acc = new Map<string, { blocks: number; bytes: number; requested: number }>();
  for (let stack = 0; stack < stacks; stack++) {
    if (blocksOf[stack] === 0) continue;
    const frame = l.allocatingFrame(stack);
    let a = acc.get(frame);
    if (!a) acc.set(frame, (a = { blocks: 0, bytes: 0, requested: 0 }));
    a.blocks += blocksOf[stack]!;
    a.bytes += bytesOf[stack]!;
    a.requested += requestedOf[stack]!;
  }
  return [...acc]
    .map(([frame, a]) => ({ frame, ...a }))
    .sort((x, y) => y.bytes - x.bytes || (x.frame < y.frame ? -1 : 1));
}

// ---------------------------------------------------------------- fragmentation (`_memory_viz.py stats`)

/** Page size of the segment map (20 MiB), as in _memory_viz.py's segsum. */
export const SEGMENT_MAP_PAGE = 20 << 20;

export interface SegmentFill {
  readonly segment: number;
  readonly device: number;
  readonly address: number;
  readonly totalSize: number;
  readonly stream: number;
  readonly segmentType: string;
  /** Requested bytes of active_allocated blocks. */
  readonly allocated: number;
  /** Rounding waste inside active_allocated blocks (size − requested). */
  readonly freeInternal: number;
  /** Bytes in blocks not allocated (inactive or pending free): gaps between allocations. */
  readonly freeExternal: number;
  readonly largestFreeBlock: number;
  /** One character per 20 MiB page (see SEGMENT_MAP_LEGEND). */
  readonly map: string;
}

export interface FragmentationReport {
  readonly segments: SegmentFill[];
  readonly totalReserved: number;
  readonly totalAllocated: number;
  readonly freeInternal: number;
  readonly freeExternal: number;
  /** freeExternal / totalReserved: reserved memory unusable for a request larger than its gaps. */
  readonly externalFragmentation: number;
  /** 1 − largest free block / all external free: how scattered the free memory is. */
  readonly freeScatter: number;
  readonly largestFreeBlock: number;
  /** The snapshot's reading warnings (MemorySnapshot.warnings). */
  readonly warnings: readonly string[];
}

export const SEGMENT_MAP_LEGEND = [
  'Legend:',
  '    [a     ] - a segment in the allocator',
  `     ^-- a page (${humanBytes(SEGMENT_MAP_PAGE)}) of memory in the segment`,
  "    a-z: pages filled with a single block's content",
  "    ' ': page is completely free",
  '    *: page is completely full with multiple blocks',
  '    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)',
  '    (X% internal) - of the free memory, X% is free because the allocator rounded the allocation size up.',
].join('\n');

/** Per-segment fill and internal/external free memory, like `_memory_viz.py stats`. */
export function fragmentation(snapshot: MemorySnapshot, device: number | null = null): FragmentationReport {
  const b = snapshot.blocks;
  const allocatedState = snapshot.stateNames.indexOf('active_allocated');
  const fills: SegmentFill[] = [];
  let totalReserved = 0;
  let totalAllocated = 0;
  let freeInternal = 0;
  let freeExternal = 0;
  let largestFree = 0;
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    let allocated = 0;
    let internal = 0;
    let external = 0;
    let largest = 0;
    const ranges: [number, number][] = [];
    let offset = 0;
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const size = b.size[i]!;
      if (b.state[i] === allocatedState) {
        const req = b.requestedSize[i]!;
        ranges.push([offset, req]);
        allocated += req;
        internal += size - req;
      } else {
        external += size;
        if (size > largest) largest = size;
      }
      offset += size;
    }
    totalReserved += seg.totalSize;
    totalAllocated += allocated;
    freeInternal += internal;
    freeExternal += external;
    if (largest > largestFree) largestFree = largest;
    fills.push({
      segment: seg.index,
      device: seg.device,
      address: seg.address,
      totalSize: seg.totalSize,
      stream: seg.stream,
      segmentType: seg.segmentType,
      allocated,
      freeInternal: internal,
      freeExternal: external,
      largestFreeBlock: largest,
      map: segmentMap(seg, ranges),
    });
  }
  return {
    segments: fills,
    totalReserved,
    totalAllocated,
    freeInternal,
    freeExternal,
    externalFragmentation: totalReserved > 0 ? freeExternal / totalReserved : 0,
    freeScatter: freeExternal > 0 ? 1 - largestFree / freeExternal : 0,
    largestFreeBlock: largestFree,
    warnings: snapshot.warnings,
  };
}

/** Most pages a segment map draws (80 GiB at 20 MiB a page); a larger total_size ends the map with '…'. */
const SEGMENT_MAP_MAX_PAGES = 4096;

function segmentMap(seg: Segment, ranges: readonly [number, number][]): string {
  const allPages = Math.max(1, Math.ceil(seg.totalSize / SEGMENT_MAP_PAGE));
  const pages = Math.min(allPages, SEGMENT_MAP_MAX_PAGES);
  const chars: string[] = new Array(pages).fill(' ');
  const frac = new Float64Array(pages);
  ranges.forEach(([start, size], k) => {
    if (size <= 0) return;
    const end = start + size;
    const mark = String.fromCharCode(97 + (k % 26));
    for (let p = Math.floor(start / SEGMENT_MAP_PAGE), last = Math.min(pages, Math.ceil(end / SEGMENT_MAP_PAGE)); p < last; p++) {
      const s = Math.max(start, p * SEGMENT_MAP_PAGE);
      const e = Math.min(end, (p + 1) * SEGMENT_MAP_PAGE);
      frac[p]! += (e - s) / SEGMENT_MAP_PAGE;
      chars[p] = chars[p] === ' ' ? mark : '0123456789*'[Math.min(10, Math.floor(frac[p]! * 10))]!;
    }
  });
  return allPages > pages ? `${chars.join('')}…` : chars.join('');
}

// ---------------------------------------------------------------- flame-graph stacks

/**
 * `_memory_viz.py segments`/`memory` stacks: [stream, (segment,) state, frames…]
 * weighted by requested bytes, plus a `<gaps>` leaf for what the block holds
 * beyond them (rounding, or a whole inactive block).
 */
export function blockFlameStacks(
  snapshot: MemorySnapshot,
  bySegment: boolean,
  device: number | null = null,
  options: { rootFrame?: string; segments?: (seg: Segment) => boolean } = {},
): FlameStack[] {
  const b = snapshot.blocks;
  const l = labels(snapshot);
  const out: FlameStack[] = [];
  const multiDevice = new Set(snapshot.segments.map((s) => s.device)).size > 1;
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    if (options.segments && !options.segments(seg)) continue;
    const prefix = [
      ...(options.rootFrame ? [options.rootFrame] : []),
      ...(multiDevice ? [`device_${seg.device}`] : []),
      `stream_${seg.stream}`,
      ...(bySegment ? [`seg_${seg.index} @0x${seg.address.toString(16)} (${humanBytes(seg.totalSize)}, ${seg.segmentType})`] : []),
    ];
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const state = snapshot.stateNames[b.state[i]!]!;
      const size = b.size[i]!;
      const active = state.startsWith('active');
      const accounted = active ? Math.min(size, b.requestedSize[i]!) : 0;
      if (accounted > 0) {
        const frames = l.rootFirst(b.stack[i]!);
        out.push({ frames: [...prefix, state, ...(frames.length ? frames : ['<non-python>'])], weight: accounted });
      }
      if (size - accounted > 0) out.push({ frames: [...prefix, state, '<gaps>'], weight: size - accounted });
    }
  }
  return out;
}

// ---------------------------------------------------------------- compare

export interface FrameChange {
  readonly frame: string;
  readonly before: number;
  readonly after: number;
  readonly delta: number;
  readonly blocksBefore: number;
  readonly blocksAfter: number;
}

export interface SnapshotComparison {
  readonly changes: FrameChange[];
  readonly allocatedBefore: number;
  readonly allocatedAfter: number;
  readonly reservedBefore: number;
  readonly reservedAfter: number;
  /** Segments (by address and size) present in only one of the snapshots. */
  readonly segmentsOnlyBefore: { address: number; totalSize: number }[];
  readonly segmentsOnlyAfter: { address: number; totalSize: number }[];
  /** Both snapshots' reading warnings, each marked `before:` or `after:`. */
  readonly warnings: string[];
}

const segmentKey = (s: Segment): string => `${s.device}:${s.address}:${s.totalSize}`;

/**
 * `_memory_viz.py compare`'s flame graph: the blocks of segments present only
 * before (under `only_before`) or only after (under `only_after`), by segment.
 */
export function compareFlameStacks(before: MemorySnapshot, after: MemorySnapshot): FlameStack[] {
  const beforeKeys = new Set(before.segments.map(segmentKey));
  const afterKeys = new Set(after.segments.map(segmentKey));
  return [
    ...blockFlameStacks(before, true, null, { rootFrame: 'only_before', segments: (s) => !afterKeys.has(segmentKey(s)) }),
    ...blockFlameStacks(after, true, null, { rootFrame: 'only_after', segments: (s) => !beforeKeys.has(segmentKey(s)) }),
  ];
}

/** What changed between two snapshots, by allocating frame (live bytes), largest change first. */
export function compareSnapshots(before: MemorySnapshot, after: MemorySnapshot): SnapshotComparison {
  const a = new Map(totalsByFrame(before).map((r) => [r.frame, r]));
  const b = new Map(totalsByFrame(after).map((r) => [r.frame, r]));
  const frames = new Set([...a.keys(), ...b.keys()]);
  const changes: FrameChange[] = [];
  for (const frame of frames) {
    const x = a.get(frame);
    const y = b.get(frame);
    const delta = (y?.bytes ?? 0) - (x?.bytes ?? 0);
    if (delta === 0 && (x?.blocks ?? 0) === (y?.blocks ?? 0)) continue;
    changes.push({ frame, before: x?.bytes ?? 0, after: y?.bytes ?? 0, delta, blocksBefore: x?.blocks ?? 0, blocksAfter: y?.blocks ?? 0 });
  }
  changes.sort((p, q) => Math.abs(q.delta) - Math.abs(p.delta) || (p.frame < q.frame ? -1 : 1));
  const key = segmentKey;
  const beforeKeys = new Set(before.segments.map(key));
  const afterKeys = new Set(after.segments.map(key));
  const ta = snapshotTotals(before);
  const tb = snapshotTotals(after);
  return {
    changes,
    allocatedBefore: ta.all.allocatedFromBlocks,
    allocatedAfter: tb.all.allocatedFromBlocks,
    reservedBefore: ta.all.reserved,
    reservedAfter: tb.all.reserved,
    segmentsOnlyBefore: before.segments.filter((s) => !afterKeys.has(key(s))).map((s) => ({ address: s.address, totalSize: s.totalSize })),
    segmentsOnlyAfter: after.segments.filter((s) => !beforeKeys.has(key(s))).map((s) => ({ address: s.address, totalSize: s.totalSize })),
    warnings: [...before.warnings.map((w) => `before: ${w}`), ...after.warnings.map((w) => `after: ${w}`)],
  };
}

// ---------------------------------------------------------------- trace

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

/**
 * The trace as readable lines (`_memory_viz.py trace`): allocations get short
 * names (a, b, …, reused after their free completes), addresses are shown as
 * offsets into the segment that holds them.
 */
export function traceLines(snapshot: MemorySnapshot, options: { frames?: boolean } = {}): string[] {
  const out: string[] = [];
  emitTraceLines(snapshot, options, (line) => out.push(line));
  return out;
}

/**
 * traceLines one line at a time, in order: a caller that writes them out as they come holds no
 * array of every line (on a large trace, keeping them all costs more in garbage collection than
 * making them).
 */
export function emitTraceLines(snapshot: MemorySnapshot, options: { frames?: boolean }, emit: (line: string) => void): void {
  const l = labels(snapshot);
  // Traces repeat a few sizes many times: each is formatted once.
  const sizeText = new Map<number, string>();
  const humanBytes = (n: number): string => {
    let t = sizeText.get(n);
    if (t === undefined) {
      t = formatHumanBytes(n);
      sizeText.set(n, t);
    }
    return t;
  };
  /** OOM details by `device:index`, made at the first `oom` entry; the lines that follow its line. */
  let ooms: Map<string, OomEvent> | undefined;
  const oomLines: string[] = [];
  for (const trace of snapshot.traces) {
    if (trace.count === 0) continue;
    emit(`Device ${trace.device} ---------------- ${trace.count} entries`);
    const free: string[] = [];
    let next = 0;
    const newName = (): string => {
      const reused = free.pop();
      if (reused !== undefined) return reused;
      const n = next++;
      return String.fromCharCode(97 + (n % 26)) + (n >= 26 ? String(Math.floor(n / 26)) : '');
    };
    const allocations = new Map<number, string>();
    // Segments the trace allocated (oldest first among equal addresses) and the end state's, both by
    // address: each allocation finds its segment by binary search, not by a scan of every segment.
    const liveSegments: { name: string; addr: number; size: number }[] = [];
    const segmentNames = new Map<number, string>();
    const known = snapshot.segments.filter((s) => s.device === trace.device).sort((a, b) => a.address - b.address || a.index - b.index);
    /** Index of the last element whose start is ≤ addr (-1 when none). */
    const lastAtOrBelow = (n: number, start: (k: number) => number, addr: number): number => {
      let lo = 0;
      let hi = n - 1;
      let at = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (start(mid) <= addr) {
          at = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      return at;
    };
    /** The segment holding addr, left in segmentName / segmentAddress (no pair made per allocation); false when none. */
    let segmentName = '';
    let segmentAddress = 0;
    const findSegment = (addr: number): boolean => {
      let k = lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr);
      while (k > 0 && liveSegments[k - 1].addr === liveSegments[k].addr) k--;
      if (k >= 0 && addr < liveSegments[k].addr + liveSegments[k].size) {
        segmentName = liveSegments[k].name;
        segmentAddress = liveSegments[k].addr;
        return true;
      }
      let j = lastAtOrBelow(known.length, (x) => known[x].address, addr);
      while (j > 0 && known[j - 1].address === known[j].address) j--;
      if (j >= 0 && addr < known[j].address + known[j].totalSize) {
        segmentName = `seg_${known[j].index}`;
        segmentAddress = known[j].address;
        return true;
      }
      return false;
    };
    let live = 0;
    for (let i = 0; i < trace.count; i++) {
      const action = snapshot.actionNames[trace.action[i]!]!;
      const addr = trace.addr[i]!;
      const size = trace.size[i]!;
      let line: string;
      switch (action) {
        case 'alloc': {
          const name = newName();
          line = findSegment(addr)
            ? `${name} = ${segmentName}[${addr - segmentAddress}:${humanBytes(size)}]`
            : `${name} = MEM[0x${addr.toString(16)}:${humanBytes(size)}]`;
          allocations.set(addr, name);
          live += size;
          break;
        }
        case 'free_requested':
          line = `del ${allocations.get(addr) ?? `0x${addr.toString(16)}`} # ${humanBytes(size)}`;
          break;
        case 'free_completed': {
          const name = allocations.get(addr);
          line = `# free completed for ${name ?? `0x${addr.toString(16)}`} ${humanBytes(size)}`;
          live -= size;
          if (name !== undefined) {
            allocations.delete(addr);
            free.push(name);
          }
          break;
        }
        case 'segment_alloc': {
          const name = newName();
          line = `${name} = cudaMalloc(0x${addr.toString(16)}, ${humanBytes(size)})`;
          liveSegments.splice(lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr) + 1, 0, { name, addr, size });
          segmentNames.set(addr, name);
          break;
        }
        case 'segment_free': {
          const name = segmentNames.get(addr);
          line = `cudaFree(${name ?? `0x${addr.toString(16)}`}) # ${humanBytes(size)}`;
          if (name !== undefined) {
            segmentNames.delete(addr);
            let k = lastAtOrBelow(liveSegments.length, (j) => liveSegments[j].addr, addr);
            while (k > 0 && liveSegments[k - 1].addr === addr) k--;
            if (k >= 0 && liveSegments[k].addr === addr) liveSegments.splice(k, 1);
            free.push(name);
          }
          break;
        }
        case 'segment_map':
          line = `cuMemMap(0x${addr.toString(16)}, ${humanBytes(size)})`;
          break;
        case 'segment_unmap':
          line = `cuMemUnmap(0x${addr.toString(16)}, ${humanBytes(size)})`;
          break;
        case 'oom': {
          const df = trace.deviceFree ? trace.deviceFree[i]! : NaN;
          line = `raise OutOfMemoryError() # ${humanBytes(size)} requested, ${Number.isNaN(df) ? '?' : humanBytes(df)} free on the device`;
          ooms ??= new Map(outOfMemoryEvents(snapshot, 3, 2).map((o) => [`${o.device}:${o.index}`, o]));
          const o = ooms.get(`${trace.device}:${i}`);
          if (o) {
            line += `; allocated ${humanBytes(o.allocated)}, reserved ${humanBytes(o.reserved)}`;
            for (const a of o.largestLive) oomLines.push(`#   live then: ${humanBytes(a.size)} at 0x${a.address.toString(16)}${a.frames.length ? ` @ ${a.frames.join(' ← ')}` : ''}`);
          }
          break;
        }
        case 'snapshot':
          line = '# snapshot taken';
          break;
        default:
          line = `# ${action} 0x${addr.toString(16)} ${humanBytes(size)}`;
      }
      if (options.frames) {
        const top = l.top(trace.stack[i]!, 1)[0];
        if (top) line += `    @ ${top}`;
      }
      emit(line);
      if (oomLines.length > 0) {
        for (const o of oomLines) emit(o);
        oomLines.length = 0;
      }
    }
    emit(`net change over the trace: ${humanBytes(live)} (allocations minus completed frees)`);
  }
}

// ---------------------------------------------------------------- timeline

/**
 * The snapshot's device traces as memory timelines (for plots): allocated
 * moves on alloc / free_completed, reserved on segment events. Both are
 * anchored so they end at the snapshot's current state; events without
 * `time_us` (older PyTorch) are placed at their index.
 */
export function snapshotTimeline(snapshot: MemorySnapshot): MemoryTrace {
  const devices: DeviceMemoryTimeline[] = [];
  let count = 0;
  for (const t of snapshot.traces) {
    if (t.count === 0) continue;
    const n = t.count;
    const time = new Float64Array(n);
    const bytes = new Float64Array(n);
    const allocated = new Float64Array(n);
    const reserved = new Float64Array(n);
    const addr = new Float64Array(n);
    let net = 0;
    let reservedNet = 0;
    const reservedDelta = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const action = snapshot.actionNames[t.action[i]!];
      const size = t.size[i]!;
      time[i] = Number.isNaN(t.timeUs[i]!) ? i : t.timeUs[i]!;
      addr[i] = t.addr[i]!;
      if (action === 'alloc') bytes[i] = size;
      else if (action === 'free_completed') bytes[i] = -size;
      if (action === 'segment_alloc' || action === 'segment_map') reservedDelta[i] = size;
      else if (action === 'segment_free' || action === 'segment_unmap') reservedDelta[i] = -size;
      net += bytes[i]!;
      reservedNet += reservedDelta[i]!;
    }
    const totals = snapshotTotals(snapshot, t.device);
    const baseline = totals.all.allocatedFromBlocks - net;
    let a = baseline;
    let r = totals.all.reserved - reservedNet;
    for (let i = 0; i < n; i++) {
      a += bytes[i]!;
      r += reservedDelta[i]!;
      allocated[i] = a;
      reserved[i] = r;
    }
    devices.push({
      device: `cuda:${t.device}`,
      count: n,
      time,
      bytes,
      allocated,
      reserved,
      addr,
      operator: new Int32Array(n).fill(-1),
      baseline,
      allocatedIsRelative: false,
      inconsistentTotals: 0,
    });
    count += n;
  }
  return {
    source: 'snapshot',
    devices,
    operators: EMPTY_OPERATORS,
    eventCount: count,
    memoryEventCount: count,
    eventsByCategory: {},
    deviceNames: {},
  };
}

// ---------------------------------------------------------------- out-of-memory events

/** One allocation live when an OOM was raised. */
export interface OomLiveAllocation {
  readonly address: number;
  readonly size: number;
  /** The allocating frame and its callers, innermost first; empty when no stack was recorded. */
  readonly frames: string[];
}

/** An `oom` trace entry with the state of its device at that point. */
export interface OomEvent {
  readonly device: number;
  /** Index of the entry in its device's trace. */
  readonly index: number;
  /** Microseconds since the epoch; null when the entry has no time_us. */
  readonly timeUs: number | null;
  /** Bytes the failing allocation asked for. */
  readonly requestedSize: number;
  /** Free bytes the device reported (`device_free`); null when the entry has none. */
  readonly deviceFree: number | null;
  /**
   * Bytes allocated and reserved just before the OOM, from the trace anchored at the snapshot's
   * state (as in `snapshotTimeline`): what the allocator held when it gave up.
   */
  readonly allocated: number;
  readonly reserved: number;
  /** Where the failing allocation was requested (its top frames); empty when not recorded. */
  readonly frames: string[];
  /** The largest allocations live then, largest first. */
  readonly largestLive: OomLiveAllocation[];
}

/**
 * Every `oom` entry of every device trace, with allocated / reserved bytes at that point and the
 * largest allocations live then. Live allocations come from replaying the trace up to the OOM,
 * starting from those it implies were live before it began: blocks allocated in the snapshot that
 * no trace entry allocates, and addresses whose first entry is a free. PyTorch records a free with
 * the stack of the allocation it frees (CUDACachingAllocator.cpp `record_trace` with
 * `context_when_allocated`), so those carry their allocating stack too.
 */
export function outOfMemoryEvents(snapshot: MemorySnapshot, top = 5, topFrames = 3): OomEvent[] {
  const oom = snapshot.actionNames.indexOf('oom');
  if (oom < 0) return [];
  const hasOom = (trace: TraceTable): boolean => {
    for (let i = 0; i < trace.count; i++) if (trace.action[i] === oom) return true;
    return false;
  };
  // The timeline costs five columns per event: made only for a file with an OOM.
  if (!snapshot.traces.some(hasOom)) return [];
  const out: OomEvent[] = [];
  const l = labels(snapshot);
  const timeline = snapshotTimeline(snapshot);
  for (const trace of snapshot.traces) {
    if (!hasOom(trace)) continue;
    const line = timeline.devices.find((d) => d.device === `cuda:${trace.device}`)!;
    const code = (name: string): number => snapshot.actionNames.indexOf(name);
    const alloc = code('alloc');
    const freeRequested = code('free_requested');
    const freeCompleted = code('free_completed');
    // Live at the start of the trace.
    const live = new Map<number, { size: number; stack: number }>();
    const allocatedInTrace = new Set<number>();
    const seen = new Set<number>();
    for (let i = 0; i < trace.count; i++) {
      const a = trace.action[i]!;
      const addr = trace.addr[i]!;
      if (a === alloc) allocatedInTrace.add(addr);
      if ((a === freeRequested || a === freeCompleted) && !seen.has(addr)) live.set(addr, { size: trace.size[i]!, stack: trace.stack[i]! });
      if (a === alloc || a === freeRequested || a === freeCompleted) seen.add(addr);
    }
    const b = snapshot.blocks;
    const activeAllocated = snapshot.stateNames.indexOf('active_allocated');
    for (let i = 0; i < b.count; i++) {
      if (b.state[i] !== activeAllocated || snapshot.segments[b.segment[i]!]!.device !== trace.device) continue;
      if (!allocatedInTrace.has(b.address[i]!) && !live.has(b.address[i]!)) live.set(b.address[i]!, { size: b.size[i]!, stack: b.stack[i]! });
    }
    for (let i = 0; i < trace.count; i++) {
      const a = trace.action[i]!;
      if (a === alloc) live.set(trace.addr[i]!, { size: trace.size[i]!, stack: trace.stack[i]! });
      else if (a === freeCompleted) live.delete(trace.addr[i]!);
      else if (a === oom) {
        const largest = [...live].sort((x, y) => y[1].size - x[1].size || x[0] - y[0]).slice(0, top);
        const time = trace.timeUs[i]!;
        const free = trace.deviceFree ? trace.deviceFree[i]! : NaN;
        out.push({
          device: trace.device,
          index: i,
          timeUs: Number.isNaN(time) ? null : time,
          requestedSize: trace.size[i]!,
          deviceFree: Number.isNaN(free) ? null : free,
          allocated: line.allocated[i]!,
          reserved: line.reserved![i]!,
          frames: l.top(trace.stack[i]!, topFrames),
          largestLive: largest.map(([address, x]) => ({ address, size: x.size, frames: l.top(x.stack, topFrames) })),
        });
      }
    }
  }
  return out;
}
