import { MemscopeError } from '../core/errors.js';
import type { TraceEntry } from './caching-allocator.js';
import { KNOWN_TRACE_ACTIONS } from '../torch/pytorch-vocabulary.js';
import { settingsFromSnapshot, type AllocatorSettings } from './settings.js';
import type { MemorySnapshot, TraceTable } from '../torch/snapshot.js';

/**
 * Replay's input: the parts of a PyTorch snapshot that replay and the what-if runs read (end-state
 * segments and blocks, device traces, allocator settings), validated once, from plain objects
 * (`parseSnapshot`) or from memscope's columnar reader (`parsedFromSnapshot`).
 */

export interface RawBlock {
  address: number;
  size: number;
  requested_size: number;
  state: string;
}

export interface RawSegment {
  device: number;
  address: number;
  total_size: number;
  stream: number;
  segment_type?: string;
  is_expandable?: boolean;
  /** `segment_pool_id`: (0, 0) or absent for the default pool; anything else is a private pool. */
  pool?: readonly [number, number];
  blocks: RawBlock[];
}

/**
 * Trace actions, in the order of their codes in `TraceColumns.action`: PyTorch's vocabulary order,
 * which is also the columnar reader's, so its action column is used as it is.
 */
export const TRACE_ACTIONS = KNOWN_TRACE_ACTIONS;
const TRACE_ACTION_CODES = new Map<string, number>(TRACE_ACTIONS.map((a, k) => [a, k]));
export const ALLOC = TRACE_ACTIONS.indexOf('alloc');
export const FREE_REQUESTED = TRACE_ACTIONS.indexOf('free_requested');
export const FREE_COMPLETED = TRACE_ACTIONS.indexOf('free_completed');
export const SEGMENT_ALLOC = TRACE_ACTIONS.indexOf('segment_alloc');
export const SEGMENT_FREE = TRACE_ACTIONS.indexOf('segment_free');
export const SEGMENT_MAP = TRACE_ACTIONS.indexOf('segment_map');
export const SEGMENT_UNMAP = TRACE_ACTIONS.indexOf('segment_unmap');
export const OOM = TRACE_ACTIONS.indexOf('oom');
export const SNAPSHOT = TRACE_ACTIONS.indexOf('snapshot');

/**
 * One device's trace as columns, entry i at index i: what replay reads on every event, without an
 * object per event (a pass over hundreds of thousands of scattered entry objects costs cache
 * misses on each; the columnar reader's arrays are used as they are).
 */
export type TraceColumns = Pick<TraceTable, 'count' | 'addr' | 'size' | 'stream' | 'timeUs' | 'deviceFree'> & {
  /** Index into TRACE_ACTIONS (a TraceTable's codes index its snapshot's actionNames). */
  readonly action: Uint8Array;
};

export function deviceFreeAt(c: TraceColumns, i: number): number {
  const v = c.deviceFree ? c.deviceFree[i] : 0;
  return Number.isNaN(v) ? 0 : v;
}

/** Entry i as an object, as PyTorch's device_traces shape it. */
function entryAt(c: TraceColumns, i: number): TraceEntry {
  const action = TRACE_ACTIONS[c.action[i]];
  const time = c.timeUs[i];
  const entry: TraceEntry = { action, size: c.size[i], stream: c.stream[i], time_us: Number.isNaN(time) ? 0 : time };
  if (action === 'oom') entry.device_free = deviceFreeAt(c, i);
  else if (action !== 'snapshot') entry.addr = c.addr[i];
  return entry;
}

export interface ParsedSnapshot {
  segments: RawSegment[];
  /** Each device's trace as columns (what replay and the what-if runs read). */
  columns: TraceColumns[];
  /** Each device's trace as entry objects (made from the columns on first use when the reader gave columns). */
  readonly traces: TraceEntry[][];
  settings: AllocatorSettings;
  hasSettings: boolean;
  /** What the reader read other than exactly as written (MemorySnapshot.warnings); empty for plain objects. */
  readonly warnings: readonly string[];
}

/** Columns of trace entries that are already objects (the plain-object path). */
function columnsOf(entries: TraceEntry[]): TraceColumns {
  const n = entries.length;
  const c = {
    count: n,
    action: new Uint8Array(n),
    addr: new Float64Array(n),
    size: new Float64Array(n),
    stream: new Float64Array(n),
    timeUs: new Float64Array(n),
    deviceFree: new Float64Array(n),
  };
  for (let i = 0; i < n; i++) {
    const e = entries[i];
    c.action[i] = TRACE_ACTION_CODES.get(e.action)!;
    c.addr[i] = e.addr ?? 0;
    c.size[i] = e.size;
    c.stream[i] = e.stream;
    c.timeUs[i] = e.time_us;
    c.deviceFree[i] = e.device_free ?? 0;
  }
  return c;
}

/** A device without a trace. */
export const EMPTY_COLUMNS: TraceColumns = columnsOf([]);

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


/** Snapshots already validated (by parseSnapshot or parsedFromSnapshot): replaySnapshot and whatIf take them as they are. */
const parsedSnapshots = new WeakSet<ParsedSnapshot>();

function parsed(snap: ParsedSnapshot): ParsedSnapshot {
  parsedSnapshots.add(snap);
  return snap;
}

/** A plain-object snapshot, or one parseSnapshot / parsedFromSnapshot already returned. */
export function asParsed(raw: unknown): ParsedSnapshot {
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
      ...(seg.poolId ? { pool: seg.poolId } : {}),
      blocks,
    };
  });
  const columns: TraceColumns[] = [];
  const skipped = new Map<string, number>();
  for (const t of snapshot.traces) columns[t.device] = columnsOfTable(snapshot, t, skipped);
  for (let d = 0; d < columns.length; d++) columns[d] ??= EMPTY_COLUMNS;
  const pools = leavePrivatePoolsOut(segments, columns);
  return withTraces({
    segments: pools.segments,
    columns: pools.columns,
    settings: settingsFromSnapshot(snapshot.allocatorSettings ?? undefined, 'allocator_settings'),
    hasSettings: snapshot.format.hasAllocatorSettings,
    warnings: [...snapshot.warnings, ...skippedActionWarnings(skipped), ...pools.warnings],
  });
}

function isPrivatePool(s: RawSegment): boolean {
  return s.pool !== undefined && (s.pool[0] !== 0 || s.pool[1] !== 0);
}

/**
 * Replay without the snapshot's private-pool segments (CUDA graphs, torch.compile's cudagraph
 * trees, MemPool): the model has only the default pools, and a private pool's free blocks would
 * serve allocations PyTorch never let them serve. Those segments are left out of the start and end
 * states, and the trace entries at their addresses are replayed as nothing (their indices kept).
 * A private pool's segment released before the snapshot cannot be told from a default one.
 */
function leavePrivatePoolsOut(segments: RawSegment[], columns: TraceColumns[]): { segments: RawSegment[]; columns: TraceColumns[]; warnings: string[] } {
  const privateSegments = segments.filter(isPrivatePool);
  if (privateSegments.length === 0) return { segments, columns, warnings: [] };
  let entries = 0;
  const out = columns.map((c, device) => {
    const ranges = privateSegments.filter((s) => s.device === device).map((s) => [s.address, s.address + s.total_size] as const);
    if (ranges.length === 0 || c.count === 0) return c;
    let action: Uint8Array | null = null;
    for (let i = 0; i < c.count; i++) {
      const a = c.action[i]!;
      if (a === OOM || a === SNAPSHOT) continue;
      const addr = c.addr[i]!;
      if (!ranges.some(([lo, hi]) => addr >= lo && addr < hi)) continue;
      action ??= c.action.slice();
      action[i] = SNAPSHOT;
      entries++;
    }
    return action === null ? c : { ...c, action };
  });
  const pools = [...new Set(privateSegments.map((s) => `(${s.pool![0]}, ${s.pool![1]})`))];
  return {
    segments: segments.filter((s) => !isPrivatePool(s)),
    columns: out,
    warnings: [
      `replay leaves out ${privateSegments.length} private-pool segment${privateSegments.length === 1 ? '' : 's'} (segment_pool_id ${pools.join(', ')}: CUDA graphs, cudagraph trees or MemPool; memscope's model has the default pools only) ` +
        `and the ${entries.toLocaleString('en-US')} trace ${entries === 1 ? 'entry' : 'entries'} at their addresses; a private pool's segments released before the snapshot cannot be told apart and may show as mismatches`,
    ],
  };
}

/**
 * Trace actions replay does not know are replayed as nothing (as a `snapshot` entry is): a newer
 * PyTorch's action that only records something (as `annotate` does) changes no memory, and one
 * that does shows as mismatches from its first entry on — the file is not refused for it.
 */
function skippedActionWarnings(skipped: ReadonlyMap<string, number>): string[] {
  return [...skipped].map(
    ([action, n]) =>
      `replay skips the ${n.toLocaleString('en-US')} trace ${n === 1 ? 'entry' : 'entries'} of action ${JSON.stringify(action)}, unknown to memscope: if ${n === 1 ? 'it changes' : 'they change'} memory, replay mismatches from the first of them`,
  );
}

/**
 * A columnar reader's trace table as TraceColumns: its arrays as they are when its action codes are
 * TRACE_ACTIONS'. Entries of an action replay does not know become `snapshot` entries, counted by
 * name into `skipped`.
 */
function columnsOfTable(snapshot: MemorySnapshot, t: TraceTable, skipped: Map<string, number>): TraceColumns {
  const names = snapshot.actionNames;
  const codes = names.map((name) => TRACE_ACTION_CODES.get(name) ?? -1);
  const n = t.count;
  const raw = t.action.subarray(0, n);
  if (codes.some((code) => code < 0)) {
    for (let i = 0; i < n; i++) {
      const name = names[raw[i]]!;
      if (codes[raw[i]] < 0) skipped.set(name, (skipped.get(name) ?? 0) + 1);
    }
    for (let k = 0; k < codes.length; k++) if (codes[k]! < 0) codes[k] = SNAPSHOT;
  }
  const same = codes.every((code, k) => code === k);
  return {
    count: n,
    action: same ? raw : Uint8Array.from(raw, (k) => codes[k]),
    addr: t.addr.subarray(0, n),
    size: t.size.subarray(0, n),
    stream: t.stream.subarray(0, n),
    timeUs: t.timeUs.subarray(0, n),
    deviceFree: t.deviceFree ? t.deviceFree.subarray(0, n) : null,
  };
}

/** The snapshot with its traces as objects too: those given, or made from the columns on first use. */
function withTraces(snap: Omit<ParsedSnapshot, 'traces'>, traces?: TraceEntry[][]): ParsedSnapshot {
  let entries = traces ?? null;
  return parsed({
    ...snap,
    get traces(): TraceEntry[][] {
      entries ??= snap.columns.map((c) => Array.from({ length: c.count }, (_, i) => entryAt(c, i)));
      return entries;
    },
  });
}

/** `segment_pool_id` as RawSegment's `pool`, when it is a pair of ints. */
function poolOf(v: unknown): { pool: readonly [number, number] } | null {
  if (!Array.isArray(v) || v.length !== 2 || !v.every((x) => Number.isSafeInteger(x))) return null;
  return { pool: [v[0] as number, v[1] as number] };
}

function parseSegment(s: unknown, i: number): RawSegment {
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
    ...(poolOf(s.segment_pool_id) ?? {}),
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
}

function parseEntry(e: unknown, where: string, skipped: Map<string, number>): TraceEntry {
  if (!isObj(e)) throw fail(where, 'expected a dict');
  if (typeof e.action !== 'string') throw fail(`${where}.action`, `expected a string, found ${JSON.stringify(e.action) ?? typeof e.action}`);
  const known = TRACE_ACTION_CODES.has(e.action);
  if (!known) skipped.set(e.action, (skipped.get(e.action) ?? 0) + 1);
  const action = (known ? e.action : 'snapshot') as TraceEntry['action'];
  const entry: TraceEntry = {
    action,
    size: int(e.size ?? 0, `${where}.size`),
    stream: int(e.stream ?? 0, `${where}.stream`),
    time_us: typeof e.time_us === 'number' ? e.time_us : 0,
  };
  if (action === 'oom') entry.device_free = int(e.device_free ?? 0, `${where}.device_free`);
  else if (action !== 'snapshot') entry.addr = int(e.addr, `${where}.addr`);
  return entry;
}

/** Validates the parts of a (plain-object) PyTorch snapshot that replay needs. */
export function parseSnapshot(raw: unknown): ParsedSnapshot {
  if (!isObj(raw)) throw fail('snapshot', 'expected a dict with segments and device_traces');
  if (!Array.isArray(raw.segments)) throw fail('snapshot', "missing 'segments' list");
  const segments = raw.segments.map(parseSegment);
  const rawTraces = raw.device_traces ?? [];
  if (!Array.isArray(rawTraces)) throw fail('snapshot.device_traces', 'expected a list');
  const skipped = new Map<string, number>();
  const traces = rawTraces.map((t, d) => {
    if (!Array.isArray(t)) throw fail(`device_traces[${d}]`, 'expected a list');
    return t.map((e, i) => parseEntry(e, `device_traces[${d}][${i}]`, skipped));
  });
  const columns = traces.map(columnsOf);
  const pools = leavePrivatePoolsOut(segments, columns);
  return withTraces(
    {
      segments: pools.segments,
      columns: pools.columns,
      settings: settingsFromSnapshot(raw.allocator_settings, 'allocator_settings'),
      hasSettings: raw.allocator_settings !== undefined,
      warnings: [...skippedActionWarnings(skipped), ...pools.warnings],
    },
    // The entry objects are made again from the columns when private pools changed some.
    pools.columns.every((c, d) => c === columns[d]) ? traces : undefined,
  );
}
