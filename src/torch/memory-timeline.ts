/**
 * Reader for the JSON that torch.profiler's `MemoryProfileTimeline` exports:
 *
 * - `export_memory_timeline(path, device)`: `[times_us, sizes]`, where each
 *   `sizes[i]` is `[0, PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY,
 *   ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, unknown]` bytes at `times_us[i]`
 *   (the leading 0 is the base of PyTorch's stacked plot).
 * - `export_memory_timeline_raw(path, device)`: `[[time_ns, action, bytes,
 *   category_index], …]` with action 1 PREEXISTING, 2 CREATE,
 *   3 INCREMENT_VERSION, 4 DESTROY, signed bytes, time −1 for memory that
 *   existed before profiling.
 *
 * Neither names its device (the exporter was called with one), so the
 * timeline's device is reported as `DEVICE_UNNAMED`.
 */
import { MemscopeError } from '../core/errors.js';
import { EMPTY_OPERATORS, type DeviceMemoryTimeline, type MemoryTrace } from './memory-trace.js';

/** PyTorch's `_CATEGORY_TO_INDEX` order (torch/profiler/_memory_profiler.py). */
export const TIMELINE_CATEGORIES = [
  'parameter',
  'optimizer_state',
  'input',
  'temporary',
  'activation',
  'gradient',
  'autograd_detail',
  'unknown',
] as const;

export const DEVICE_UNNAMED = 'device (not named in export_memory_timeline)';

const ACTIONS = ['?', 'preexisting', 'create', 'increment_version', 'destroy'];

function bad(where: string, what: string): never {
  throw new MemscopeError('bad-memory-timeline', `${where}: ${what}`);
}

function isNumberArray(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x));
}

/** Reads either export_memory_timeline form from a parsed JSON value. */
export function readMemoryTimeline(value: unknown, where = 'memory timeline'): MemoryTrace {
  if (!Array.isArray(value)) bad(where, `expected a JSON array, found ${typeof value}`);
  if (value.length === 2 && isNumberArray(value[0]) && Array.isArray(value[1]) && (value[1].length === 0 || Array.isArray(value[1][0]))) {
    return readCoalesced(value[0], value[1] as unknown[], where);
  }
  if (value.length === 0 || Array.isArray(value[0])) return readRaw(value, where);
  bad(where, 'expected [times, sizes] (export_memory_timeline) or [[time, action, bytes, category], …] (export_memory_timeline_raw)');
}

function readCoalesced(times: number[], sizes: unknown[], where: string): MemoryTrace {
  if (times.length !== sizes.length) bad(where, `${times.length} times but ${sizes.length} size rows`);
  const n = times.length;
  const categories = TIMELINE_CATEGORIES.length;
  const categoryBytes = Array.from({ length: categories }, () => new Float64Array(n));
  const time = new Float64Array(n);
  const bytes = new Float64Array(n);
  const allocated = new Float64Array(n);
  let previous = 0;
  for (let i = 0; i < n; i++) {
    const row = sizes[i];
    if (!isNumberArray(row) || row.length !== categories + 1) {
      bad(where, `size row ${i} is not ${categories + 1} numbers ([0, ${TIMELINE_CATEGORIES.join(', ')}])`);
    }
    if (i > 0 && times[i]! < times[i - 1]!) bad(where, `times are not sorted at row ${i}`);
    let total = 0;
    for (let c = 0; c < categories; c++) {
      categoryBytes[c]![i] = row[c + 1]!;
      total += row[c + 1]!;
    }
    time[i] = times[i]!;
    allocated[i] = total;
    bytes[i] = total - previous;
    previous = total;
  }
  return timelineTrace('memory-timeline', { time, bytes, allocated, categoryBytes, n });
}

function readRaw(events: unknown[], where: string): MemoryTrace {
  const n = events.length;
  let tMin = Infinity;
  for (let i = 0; i < n; i++) {
    const e = events[i];
    if (!isNumberArray(e) || e.length !== 4) bad(where, `raw event ${i} is not [time_ns, action, bytes, category]`);
    if (!(e[1]! >= 1 && e[1]! <= 4)) bad(where, `raw event ${i} has unknown action ${e[1]} (expected 1–4: ${ACTIONS.slice(1).join(', ')})`);
    if (!(e[3]! >= 0 && e[3]! < TIMELINE_CATEGORIES.length && Number.isInteger(e[3]))) bad(where, `raw event ${i} has unknown category index ${e[3]}`);
    if (e[0]! >= 0 && e[0]! < tMin) tMin = e[0]!;
  }
  if (!Number.isFinite(tMin)) tMin = 0;
  const categories = TIMELINE_CATEGORIES.length;
  // Pre-existing memory (time −1) counts from the first real timestamp, as PyTorch plots it.
  const order = Array.from({ length: n }, (_, i) => i);
  const at = (i: number): number => {
    const t = (events[i] as number[])[0]!;
    return t < 0 ? tMin : t;
  };
  order.sort((x, y) => at(x) - at(y) || x - y);
  const time = new Float64Array(n);
  const bytes = new Float64Array(n);
  const allocated = new Float64Array(n);
  const categoryBytes = Array.from({ length: categories }, () => new Float64Array(n));
  const running = new Float64Array(categories);
  let total = 0;
  for (let k = 0; k < n; k++) {
    const e = events[order[k]!] as number[];
    time[k] = at(order[k]!) / 1000; // ns → µs, the unit of the coalesced form and of Kineto
    bytes[k] = e[2]!;
    total += e[2]!;
    allocated[k] = total;
    running[e[3]!] += e[2]!;
    for (let c = 0; c < categories; c++) categoryBytes[c]![k] = running[c]!;
  }
  return timelineTrace('memory-timeline-raw', { time, bytes, allocated, categoryBytes, n });
}

function timelineTrace(
  source: 'memory-timeline' | 'memory-timeline-raw',
  c: { time: Float64Array; bytes: Float64Array; allocated: Float64Array; categoryBytes: Float64Array[]; n: number },
): MemoryTrace {
  const device: DeviceMemoryTimeline = {
    device: DEVICE_UNNAMED,
    count: c.n,
    time: c.time,
    bytes: c.bytes,
    allocated: c.allocated,
    reserved: null,
    addr: null,
    operator: new Int32Array(c.n).fill(-1),
    baseline: 0,
    allocatedIsRelative: false,
    inconsistentTotals: 0,
    categoryBytes: c.categoryBytes,
  };
  return {
    source,
    devices: c.n > 0 ? [device] : [],
    operators: EMPTY_OPERATORS,
    eventCount: c.n,
    memoryEventCount: c.n,
    outOfMemory: [],
    eventsByCategory: {},
    deviceNames: {},
    categoryNames: TIMELINE_CATEGORIES,
  };
}
