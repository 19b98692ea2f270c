import { MemscopeError } from '../core/errors.js';
import type { TraceEntry } from './caching-allocator.js';
import { settingsFromSnapshot, type AllocatorSettings } from './settings.js';
import type { MemorySnapshot } from '../torch/snapshot.js';

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
