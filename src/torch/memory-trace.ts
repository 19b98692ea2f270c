/**
 * The framework-free model of a memory *trace*: what happened to device
 * memory over time, as read from a Kineto profiler trace (`[memory]` events),
 * from `export_memory_timeline` JSON, or from a snapshot's `device_traces`.
 *
 * Columns are typed arrays (one entry per event, sorted by time) because a
 * real training-step trace has tens of thousands of events per device and
 * every consumer (summary, plot, operator attribution) scans them linearly.
 */
import { humanBytes } from '../core/units.js';

/** Where a trace came from; decides which columns are real and which were derived. */
export type TraceSource =
  /** Kineto with Addr / Total Allocated / Total Reserved in every `[memory]` event (PyTorch ≥ 1.10). */
  | 'kineto'
  /** Kineto 2021 layout: only Device Type, Device Id and a signed Bytes; totals are running sums. */
  | 'kineto-2021'
  /** `MemoryProfileTimeline.export_memory_timeline`: `[times, sizes-by-category]`. */
  | 'memory-timeline'
  /** `export_memory_timeline_raw`: `[time_ns, action, bytes, category]` tuples. */
  | 'memory-timeline-raw'
  /** A CUDA memory snapshot's `device_traces` (alloc / free_completed / segment_* entries). */
  | 'snapshot';

/** All memory events of one device, sorted by time (ties keep the recorder's order). */
export interface DeviceMemoryTimeline {
  /** 'cuda:1', 'cpu', … — PyTorch's device string. */
  readonly device: string;
  readonly count: number;
  /** Microseconds (Kineto's clock); relative or absolute as the source wrote them. */
  readonly time: Float64Array;
  /** Signed change of allocated bytes at this event (+ allocation, − free). */
  readonly bytes: Float64Array;
  /** Bytes allocated after this event (recorded by the source, or summed by the reader). */
  readonly allocated: Float64Array;
  /** Bytes reserved by the caching allocator after this event, when the source records it. */
  readonly reserved: Float64Array | null;
  /** Address of the block, when the source records it. */
  readonly addr: Float64Array | null;
  /** Index into `MemoryTrace.operators` of the innermost CPU operator enclosing the event, or −1. */
  readonly operator: Int32Array;
  /**
   * Bytes allocated before the first event. Kineto ≥ 1.10 tells us (first total minus first
   * delta); older layouts cannot, so it is 0 and `allocated` is relative to the trace start.
   */
  readonly baseline: number;
  /** True when `allocated` is a running sum the reader computed (no totals in the source). */
  readonly allocatedIsRelative: boolean;
  /**
   * Events whose recorded total disagrees with the previous total plus the delta (0 for a
   * consistent trace). Non-zero means events were lost or the recorder reordered them.
   */
  readonly inconsistentTotals: number;
  /** Per-category stacked sizes (export_memory_timeline only): `categoryBytes[c][i]`. */
  readonly categoryBytes?: readonly Float64Array[];
}

/** CPU-side operator spans (cpu_op / Operator / user_annotation), columnar. */
export interface OperatorSpans {
  readonly count: number;
  /** Interned names: `names[nameIndex[i]]`. */
  readonly names: readonly string[];
  readonly nameIndex: Int32Array;
  /** Interned `cat` values ('cpu_op', 'Operator', 'user_annotation'). */
  readonly categories: readonly string[];
  readonly categoryIndex: Int32Array;
  readonly start: Float64Array;
  readonly end: Float64Array;
  /** Enclosing span on the same thread, or −1. */
  readonly parent: Int32Array;
}

export interface MemoryTrace {
  readonly source: TraceSource;
  readonly devices: readonly DeviceMemoryTimeline[];
  readonly operators: OperatorSpans;
  /** Total trace events read (all phases and categories). */
  readonly eventCount: number;
  /** `[memory]` events read (all devices). */
  readonly memoryEventCount: number;
  /** Event counts by `cat` (or `ph` when there is no cat), for orientation. */
  readonly eventsByCategory: Readonly<Record<string, number>>;
  /** GPU names from Kineto's deviceProperties, by device id. */
  readonly deviceNames: Readonly<Record<number, string>>;
  /** Category names for `categoryBytes` (export_memory_timeline only). */
  readonly categoryNames?: readonly string[];
  /** The profiler's `[OutOfMemory]` events, in time order (Kineto traces; empty for other sources). */
  readonly outOfMemory: readonly TraceOutOfMemory[];
}

/**
 * An allocation the device could not make, as torch.profiler records it (`[OutOfMemory]` instant
 * events: the request and the device's totals then; torch/csrc/autograd/profiler_kineto.cpp).
 */
export interface TraceOutOfMemory {
  readonly device: string;
  /** Microseconds, on the trace's clock. */
  readonly time: number;
  /** Bytes requested. */
  readonly bytes: number;
  /** Bytes allocated on the device then; null when the event does not say. */
  readonly allocated: number | null;
  readonly reserved: number | null;
  /** The innermost CPU operator enclosing the event (same thread), or null. */
  readonly operator: string | null;
}

/** The time every device's times count from in text: the trace's first memory event. */
export function traceStartTime(trace: MemoryTrace): number {
  let t0 = Infinity;
  for (const d of trace.devices) if (d.count > 0 && d.time[0]! < t0) t0 = d.time[0]!;
  for (const o of trace.outOfMemory) if (o.time < t0) t0 = o.time;
  return Number.isFinite(t0) ? t0 : 0;
}

export const EMPTY_OPERATORS: OperatorSpans = {
  count: 0,
  names: [],
  nameIndex: new Int32Array(0),
  categories: [],
  categoryIndex: new Int32Array(0),
  start: new Float64Array(0),
  end: new Float64Array(0),
  parent: new Int32Array(0),
};

export interface DevicePeak {
  readonly device: string;
  readonly events: number;
  readonly allocations: number;
  readonly frees: number;
  readonly peakAllocated: number;
  /** Time of the first event that reached the peak. */
  readonly peakAllocatedTime: number;
  readonly peakReserved: number | null;
  readonly finalAllocated: number;
  readonly baseline: number;
  readonly allocatedIsRelative: boolean;
  readonly bytesAllocated: number;
  readonly bytesFreed: number;
}

/** Peak and totals of one device's timeline (the baseline counts: it is memory in use). */
export function devicePeak(t: DeviceMemoryTimeline): DevicePeak {
  let peak = t.baseline;
  let peakTime = t.count > 0 ? t.time[0]! : 0;
  let peakReserved: number | null = t.reserved ? 0 : null;
  let allocations = 0;
  let frees = 0;
  let added = 0;
  let freed = 0;
  for (let i = 0; i < t.count; i++) {
    const a = t.allocated[i]!;
    if (a > peak) {
      peak = a;
      peakTime = t.time[i]!;
    }
    if (t.reserved && t.reserved[i]! > peakReserved!) peakReserved = t.reserved[i]!;
    const b = t.bytes[i]!;
    if (b > 0) {
      allocations++;
      added += b;
    } else if (b < 0) {
      frees++;
      freed -= b;
    }
  }
  return {
    device: t.device,
    events: t.count,
    allocations,
    frees,
    peakAllocated: peak,
    peakAllocatedTime: peakTime,
    peakReserved,
    finalAllocated: t.count > 0 ? t.allocated[t.count - 1]! : t.baseline,
    baseline: t.baseline,
    allocatedIsRelative: t.allocatedIsRelative,
    bytesAllocated: added,
    bytesFreed: freed,
  };
}

export interface OperatorMemoryRow {
  readonly name: string;
  /** Events whose innermost enclosing operator has this name. */
  readonly allocations: number;
  readonly frees: number;
  /** Bytes allocated / freed directly in this operator (not in an operator nested in it). */
  readonly selfAllocated: number;
  readonly selfFreed: number;
  /** selfAllocated − selfFreed: memory this operator added and did not give back itself. */
  readonly selfNet: number;
  /** Net bytes of all events inside this operator, nested operators included (each event once per name). */
  readonly inclusiveNet: number;
  /** Bytes allocated inside it, nested operators included. */
  readonly inclusiveAllocated: number;
}

/** Name used for events that no CPU operator encloses. */
export const NO_OPERATOR = '<no operator>';

/**
 * Memory added per operator name on one device, PyTorch profiler style: "self"
 * counts an event for its innermost operator only, "inclusive" for every
 * distinct operator name on its enclosing chain (a recursive name counts once).
 * Sorted by selfNet, largest first.
 */
export function memoryByOperator(trace: MemoryTrace, device: DeviceMemoryTimeline): OperatorMemoryRow[] {
  const ops = trace.operators;
  interface Acc {
    allocations: number;
    frees: number;
    selfAllocated: number;
    selfFreed: number;
    inclusiveNet: number;
    inclusiveAllocated: number;
  }
  const byName = new Map<string, Acc>();
  const acc = (name: string): Acc => {
    let a = byName.get(name);
    if (!a) {
      a = { allocations: 0, frees: 0, selfAllocated: 0, selfFreed: 0, inclusiveNet: 0, inclusiveAllocated: 0 };
      byName.set(name, a);
    }
    return a;
  };
  const seen = new Set<number>();
  for (let i = 0; i < device.count; i++) {
    const b = device.bytes[i]!;
    let op = device.operator[i]!;
    const self = acc(op < 0 ? NO_OPERATOR : ops.names[ops.nameIndex[op]!]!);
    if (b >= 0) {
      self.allocations++;
      self.selfAllocated += b;
    } else {
      self.frees++;
      self.selfFreed -= b;
    }
    if (op < 0) {
      self.inclusiveNet += b;
      if (b > 0) self.inclusiveAllocated += b;
      continue;
    }
    seen.clear();
    for (; op >= 0; op = ops.parent[op]!) {
      const n = ops.nameIndex[op]!;
      if (seen.has(n)) continue;
      seen.add(n);
      const a = acc(ops.names[n]!);
      a.inclusiveNet += b;
      if (b > 0) a.inclusiveAllocated += b;
    }
  }
  return [...byName]
    .map(([name, a]) => ({
      name,
      allocations: a.allocations,
      frees: a.frees,
      selfAllocated: a.selfAllocated,
      selfFreed: a.selfFreed,
      selfNet: a.selfAllocated - a.selfFreed,
      inclusiveNet: a.inclusiveNet,
      inclusiveAllocated: a.inclusiveAllocated,
    }))
    .sort((x, y) => y.selfNet - x.selfNet || y.selfAllocated - x.selfAllocated || (x.name < y.name ? -1 : 1));
}

/** PyTorch's c10::DeviceType numbering, as Kineto writes it in `Device Type`. */
const DEVICE_TYPE_NAMES: Record<number, string> = {
  0: 'cpu',
  1: 'cuda',
  2: 'mkldnn',
  3: 'opengl',
  4: 'opencl',
  5: 'ideep',
  6: 'hip',
  7: 'fpga',
  8: 'maia',
  9: 'xla',
  10: 'vulkan',
  11: 'metal',
  12: 'xpu',
  13: 'mps',
  14: 'meta',
  15: 'hpu',
  16: 've',
  17: 'lazy',
  18: 'ipu',
  19: 'mtia',
  20: 'privateuseone',
};

/** 'cuda:1', 'cpu' (Kineto writes Device Id −1 for the CPU). */
export function deviceString(type: number, id: number): string {
  const name = DEVICE_TYPE_NAMES[type] ?? `device_type_${type}`;
  return id < 0 ? name : `${name}:${id}`;
}

/**
 * One profiler OOM in words: the device and the time since `t0` (null: the caller shows the time),
 * the request, the device's totals then, and the operator that asked.
 */
export function outOfMemoryLine(o: TraceOutOfMemory, t0: number | null): string {
  const when = t0 === null ? '' : ` at ${Number.isFinite(o.time) ? `${((o.time - t0) / 1000).toFixed(3)} ms` : 'an unknown time'}`;
  const totals = [o.allocated === null ? null : `allocated ${humanBytes(o.allocated)}`, o.reserved === null ? null : `reserved ${humanBytes(o.reserved)}`].filter((x) => x !== null);
  return (
    `out of memory on ${o.device}${when}: ${Number.isFinite(o.bytes) ? humanBytes(o.bytes) : 'an unknown size'} requested` +
    (totals.length ? `; ${totals.join(', ')} then` : '') +
    (o.operator ? `; in ${o.operator}` : '')
  );
}
