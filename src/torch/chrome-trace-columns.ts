/**
 * The columns the Kineto trace reader (chrome-trace.ts) fills while it scans, and how they become
 * a MemoryTrace: each device's memory events sorted by time with running totals, and attributed to
 * the innermost operator span open on their thread.
 */
import type { DeviceMemoryTimeline, OperatorSpans } from './memory-trace.js';

/** Which of Kineto's memory-event layouts a trace uses (see chrome-trace.ts). */
export type Layout = 'kineto' | 'kineto-2021';

export class GrowableF64 {
  data = new Float64Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const d = new Float64Array(this.data.length * 2);
      d.set(this.data);
      this.data = d;
    }
    this.data[this.length++] = v;
  }
  view(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}

export class GrowableI32 {
  data = new Int32Array(1024);
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const d = new Int32Array(this.data.length * 2);
      d.set(this.data);
      this.data = d;
    }
    this.data[this.length++] = v;
  }
  view(): Int32Array {
    return this.data.subarray(0, this.length);
  }
}

export class Interner {
  readonly values: string[] = [];
  private readonly index = new Map<string, number>();
  id(s: string): number {
    let i = this.index.get(s);
    if (i === undefined) {
      i = this.values.length;
      this.values.push(s);
      this.index.set(s, i);
    }
    return i;
  }
}

/** Operator spans (CPU-side events that can enclose a memory event), in file order. */
export class OperatorColumns {
  readonly names = new Interner();
  readonly categories = new Interner();
  readonly name = new GrowableI32();
  readonly category = new GrowableI32();
  readonly start = new GrowableF64();
  readonly end = new GrowableF64();
  readonly thread = new GrowableI32();
}

/** Operator spans sorted per thread, and each thread's span indexes in start order. */
export interface OperatorsByThread {
  readonly spans: OperatorSpans;
  readonly byThread: Map<number, Int32Array>;
}

/** Raw memory events of one device, in file order, until `finish` sorts them. */
export class DeviceColumns {
  readonly time = new GrowableF64();
  readonly bytes = new GrowableF64();
  readonly allocated = new GrowableF64();
  readonly reserved = new GrowableF64();
  readonly addr = new GrowableF64();
  /** Kineto's Ev Idx (or the file position when absent): the tiebreak for equal timestamps. */
  readonly order = new GrowableF64();
  readonly thread = new GrowableI32();
  constructor(readonly device: string) {}
}

/** Operator spans per thread, ordered by start, each with its enclosing span. */
export function buildOperators(ops: OperatorColumns): OperatorsByThread {
  const count = ops.start.length;
  const start = ops.start.view();
  const end = ops.end.view();
  const thread = ops.thread.view();
  // Per thread, order spans by start (longer first on ties, so parents precede children).
  const order = Array.from({ length: count }, (_, i) => i).sort(
    (x, y) => thread[x]! - thread[y]! || start[x]! - start[y]! || end[y]! - end[x]! || x - y,
  );
  const sortedName = new Int32Array(count);
  const sortedCat = new Int32Array(count);
  const sortedStart = new Float64Array(count);
  const sortedEnd = new Float64Array(count);
  const parent = new Int32Array(count).fill(-1);
  const byThread = new Map<number, Int32Array>();
  const stack: number[] = [];
  let runStart = 0;
  for (let k = 0; k < count; k++) {
    const i = order[k]!;
    sortedName[k] = ops.name.data[i]!;
    sortedCat[k] = ops.category.data[i]!;
    sortedStart[k] = start[i]!;
    sortedEnd[k] = end[i]!;
    if (k > 0 && thread[order[k - 1]!] !== thread[i]) {
      byThread.set(thread[order[k - 1]!]!, rangeArray(runStart, k));
      runStart = k;
      stack.length = 0;
    }
    // The top of the stack is a parent only if it outlasts this span; one that ends
    // exactly where this one starts is a finished sibling.
    while (stack.length) {
      const topEnd = sortedEnd[stack[stack.length - 1]!]!;
      if (topEnd < end[i]! || topEnd <= start[i]!) stack.pop();
      else break;
    }
    parent[k] = stack.length ? stack[stack.length - 1]! : -1;
    stack.push(k);
  }
  if (count > 0) byThread.set(thread[order[count - 1]!]!, rangeArray(runStart, count));
  return {
    spans: {
      count,
      names: ops.names.values,
      nameIndex: sortedName,
      categories: ops.categories.values,
      categoryIndex: sortedCat,
      start: sortedStart,
      end: sortedEnd,
      parent,
    },
    byThread,
  };
}

/** One device's events sorted by time (Ev Idx breaks ties), with running totals and operators. */
export function buildDevice(cols: DeviceColumns, operators: OperatorsByThread, layout: Layout | null): DeviceMemoryTimeline {
  const n = cols.time.length;
  const t = cols.time.view();
  const ord = cols.order.view();
  // Kineto writes events per thread, so the file is not in time order; Ev Idx breaks ties.
  const order = Array.from({ length: n }, (_, i) => i).sort((x, y) => t[x]! - t[y]! || ord[x]! - ord[y]! || x - y);
  const time = new Float64Array(n);
  const bytes = new Float64Array(n);
  const allocated = new Float64Array(n);
  const thread = new Int32Array(n);
  const modern = cols.allocated.length === n && n > 0 && layout === 'kineto';
  const reserved = modern ? new Float64Array(n) : null;
  const addr = modern ? new Float64Array(n) : null;
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    time[k] = t[i]!;
    bytes[k] = cols.bytes.data[i]!;
    thread[k] = cols.thread.data[i]!;
    if (modern) {
      allocated[k] = cols.allocated.data[i]!;
      reserved![k] = cols.reserved.data[i]!;
      addr![k] = cols.addr.data[i]!;
    }
  }
  let baseline = 0;
  let inconsistent = 0;
  if (modern) {
    baseline = n > 0 ? allocated[0]! - bytes[0]! : 0;
    for (let k = 1; k < n; k++) if (allocated[k - 1]! + bytes[k]! !== allocated[k]!) inconsistent++;
  } else {
    let sum = 0;
    for (let k = 0; k < n; k++) allocated[k] = sum += bytes[k]!;
  }
  return {
    device: cols.device,
    count: n,
    time,
    bytes,
    allocated,
    reserved,
    addr,
    operator: attribute(time, thread, operators),
    baseline,
    allocatedIsRelative: !modern,
    inconsistentTotals: inconsistent,
  };
}

function rangeArray(from: number, to: number): Int32Array {
  const a = new Int32Array(to - from);
  for (let i = 0; i < a.length; i++) a[i] = from + i;
  return a;
}

/**
 * Innermost operator span on the event's own thread whose [start, end]
 * contains the event time (a free at an operator's last microsecond belongs to it;
 * at a boundary shared by two siblings, the one starting wins).
 */
export function attribute(
  time: Float64Array,
  thread: Int32Array,
  operators: OperatorsByThread,
): Int32Array {
  const n = time.length;
  const result = new Int32Array(n).fill(-1);
  const { start, end, parent } = operators.spans;
  // Events per thread, in time order (time is sorted already).
  const perThread = new Map<number, number[]>();
  for (let k = 0; k < n; k++) {
    let list = perThread.get(thread[k]!);
    if (!list) perThread.set(thread[k]!, (list = []));
    list.push(k);
  }
  for (const [tid, events] of perThread) {
    const spans = operators.byThread.get(tid);
    if (!spans || spans.length === 0) continue;
    let next = 0; // next span (by start) not yet opened
    let open = -1; // innermost open span
    for (const k of events) {
      const t = time[k]!;
      while (next < spans.length && start[spans[next]!]! <= t) {
        open = spans[next]!;
        next++;
      }
      // Walk out of spans that ended before t.
      let s = open;
      while (s >= 0 && end[s]! < t) s = parent[s]!;
      open = s;
      result[k] = s;
    }
  }
  return result;
}

/** cpu first, then cuda:0, cuda:1, … */
export function compareDevices(a: string, b: string): number {
  const [ta, ia] = a.split(':');
  const [tb, ib] = b.split(':');
  if (ta !== tb) return ta === 'cpu' ? -1 : tb === 'cpu' ? 1 : ta! < tb! ? -1 : 1;
  return Number(ia ?? -1) - Number(ib ?? -1);
}

