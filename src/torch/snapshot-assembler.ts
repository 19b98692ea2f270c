/**
 * The checks both snapshot readers share: `Assembler` walks segments, blocks and device traces
 * (generic dict/list nodes, or rows the recognising builder already placed in the tables), checks
 * every field's type and names the path of anything wrong (`segments[3].blocks[7].size`), so the
 * fast and the general path accept and refuse the same files.
 */
import { MemscopeError } from '../core/errors.js';
import { isTuple, makeTuple } from './pickle/builder.js';
import { toPlain, type PickleValue, type PlainValue } from './pickle/reader.js';
import { I32Column, nodeFor, NodeKind, RawDict, RawList, safeInt, SEGMENT_KEY_BIT, SEGMENT_KEYS, SnapshotTables, TRACE_KEYS } from './snapshot-tables.js';
import { traceTableOf, type BlockTable, type Segment, type TraceNumberColumns, type TraceTable } from './snapshot.js';

/** Block keys PyTorch writes: today's, and `history` (PyTorch 2.0, which had no `address` or `frames`). */
const BLOCK_KEYS = new Set<unknown>(['address', 'size', 'requested_size', 'state', 'frames', 'history']);

export function shapeError(path: string, message: string): MemscopeError {
  return new MemscopeError('snapshot-shape', `snapshot: ${path}: ${message}`);
}

export function describe(v: unknown): string {
  if (v === null) return 'None';
  if (v === undefined) return 'missing';
  if (typeof v === 'bigint') return `int ${v} (beyond 2^53)`;
  if (typeof v === 'string') return 'a str';
  if (typeof v === 'number') return Number.isInteger(v) ? `int ${v}` : `float ${v}`;
  if (typeof v === 'boolean') return 'a bool';
  if (v instanceof RawDict || v instanceof Map) return 'a dict';
  if (v instanceof RawList || Array.isArray(v)) return isTuple(v) ? 'a tuple' : 'a list';
  if (v instanceof Uint8Array) return 'bytes';
  return 'an unexpected value';
}

export class Assembler {
  /** Frame dicts are shared objects in real files (the pickle memo): resolve each once. */
  private readonly frameIdByObject = new Map<unknown, number>();
  /** Stack ids of the frames lists interned so far, by list (a shared list is one stack). */
  private readonly stackIdByObject = new Map<unknown, number>();
  constructor(private readonly t: SnapshotTables) {}

  /** Map view of a generic dict node (RawDict or Map), or null if not a dict. */
  dict(v: unknown): Map<unknown, unknown> | null {
    if (v instanceof Map) return v;
    if (v instanceof RawDict) return v.kind === NodeKind.Generic ? (v.map ?? new Map()) : this.recognisedToMap(v);
    return null;
  }

  list(v: unknown, path: string): readonly unknown[] {
    if (Array.isArray(v)) return v;
    if (v instanceof RawList) {
      if (v.stack >= 0) return this.stackToFrameDicts(v.stack);
      if (v.ids !== null) return Array.from(v.ids.view(), (id) => nodeFor(v.idKind, id));
      return v.items ?? [];
    }
    throw shapeError(path, `expected a list, found ${describe(v)}`);
  }

  /** Raw ids of a list of recognised blocks / trace entries; other lists go through `each`. */
  rows(v: unknown, kind: number, path: string, each: (node: unknown, path: string) => number): Int32Array {
    if (v instanceof RawList && v.ids !== null && v.idKind === kind) return v.ids.view();
    const items = this.list(v, path);
    const out = new Int32Array(items.length);
    for (let i = 0; i < items.length; i++) out[i] = each(items[i], `${path}[${i}]`);
    return out;
  }

  // `key` is appended to `path` only when reporting an error (no string building per field).
  int(v: unknown, path: string, key?: string): number {
    if (safeInt(v)) return v;
    const where = key === undefined ? path : `${path}.${key}`;
    if (typeof v === 'bigint') throw shapeError(where, `${v} is beyond 2^53, which memscope's columns cannot hold exactly`);
    throw shapeError(where, `expected an int, found ${describe(v)}`);
  }

  optInt(v: unknown, fallback: number, path: string, key?: string): number {
    return v === undefined || v === null ? fallback : this.int(v, path, key);
  }

  str(v: unknown, path: string, key?: string): string {
    if (typeof v === 'string') return v;
    throw shapeError(key === undefined ? path : `${path}.${key}`, `expected a str, found ${describe(v)}`);
  }

  /**
   * A frame's line number. CPython reports -1 where it has none (generated code, torch.compile
   * frames) and PyTorch writes that as an unsigned 64-bit int (2^64 - 1): any line beyond 2^53 or
   * below 0 is an unknown line, -1 (SnapshotTables.internFrame stores every negative line as -1;
   * `readWarnings` counts them).
   */
  line(v: unknown, path: string): number {
    if (safeInt(v)) return v;
    if (typeof v === 'bigint') return -1;
    if (v === undefined || v === null) return -1;
    throw shapeError(`${path}.line`, `expected an int, found ${describe(v)}`);
  }

  frameId(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === NodeKind.Frame) return v.id;
    const known = this.frameIdByObject.get(v);
    if (known !== undefined) return known;
    const d = this.dict(v);
    if (!d) throw shapeError(path, `expected a frame dict, found ${describe(v)}`);
    const id = this.t.internFrame(this.str(d.get('name'), path, 'name'), this.str(d.get('filename'), path, 'filename'), this.line(d.get('line'), path));
    this.frameIdByObject.set(v, id);
    if (d.size > 3 || !d.has('name') || !d.has('filename') || !d.has('line')) {
      let other = false;
      for (const k of d.keys()) {
        if (k === 'name' || k === 'filename' || k === 'line') continue;
        other = true;
        if (this.t.otherFrameKeys.size < 20) this.t.otherFrameKeys.add(String(k));
      }
      if (other) this.t.framesWithOtherKeys++;
    }
    return id;
  }

  stack(v: unknown, path: string): number {
    if (v === undefined || v === null) return 0;
    if (v instanceof RawList && v.stack >= 0) return v.stack;
    if (v instanceof RawList && v.items === null && v.ids === null) return 0;
    // A frames list shared by many entries is interned once: the readers charge no memory for
    // placing it again, so reading it again must cost no time either.
    const known = this.stackIdByObject.get(v);
    if (known !== undefined) return known;
    const items = this.list(v, path);
    const ids = new Int32Array(items.length);
    items.forEach((f, i) => (ids[i] = this.frameId(f, `${path}[${i}]`)));
    const id = this.t.internStack(ids, ids.length);
    this.stackIdByObject.set(v, id);
    if (v instanceof RawList) {
      v.stack = id;
      v.items = null;
      v.ids = null;
    }
    return id;
  }

  /** Raw block id of a block node. */
  block(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === NodeKind.Block) return v.id;
    const d = this.dict(v);
    if (!d) throw shapeError(path, `expected a block dict, found ${describe(v)}`);
    const size = this.int(d.get('size'), path, 'size');
    for (const k of d.keys()) if (!BLOCK_KEYS.has(k)) this.t.otherBlockKeys.add(String(k));
    let requested = this.optInt(d.get('requested_size'), size, path, 'requested_size');
    let stack = this.stack(d.get('frames'), `${path}.frames`);
    const history = d.get('history');
    if (history !== undefined && history !== null) {
      // PyTorch ≤ 2.0: the allocation's stack and requested size live in history[0].
      this.t.legacyHistory = true;
      const entries = this.list(history, `${path}.history`);
      const first = entries.length > 0 ? this.dict(entries[0]) : null;
      if (first) {
        if (!d.has('frames')) stack = this.stack(first.get('frames'), `${path}.history[0].frames`);
        if (!d.has('requested_size')) requested = this.optInt(first.get('real_size'), size, path, 'history[0].real_size');
      }
    }
    // PyTorch 2.0 blocks have no address: NaN until the segment fills it in (genericSegment).
    const address = d.get('address');
    return this.t.pushBlock(
      address === undefined ? NaN : this.int(address, path, 'address'),
      size,
      requested,
      this.t.stateCode(this.str(d.get('state'), path, 'state')),
      stack,
    );
  }

  /** Raw trace id of a trace entry node. */
  traceEntry(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === NodeKind.Trace) return v.id;
    const d = this.dict(v);
    if (!d) throw shapeError(path, `expected a trace entry dict, found ${describe(v)}`);
    const t = this.t;
    let mask = 0;
    for (const k of d.keys()) {
      const bit = TRACE_KEYS.indexOf(k as (typeof TRACE_KEYS)[number]);
      if (bit >= 0) mask |= 1 << bit;
      else t.otherTraceKeys.add(String(k));
    }
    t.traceKeyMask |= mask;
    const opt = (key: string): number => {
      const x = d.get(key);
      return x === undefined || x === null ? -1 : t.string(this.str(x, `${path}.${key}`));
    };
    const time = d.get('time_us');
    const deviceFree = d.get('device_free');
    const action = this.str(d.get('action'), path, 'action');
    // PyTorch writes an `oom` entry's device_free where other entries have addr, and no addr
    // (torch/csrc/cuda/memory_snapshot.cpp): its addr is 0 in the model. Any other entry without
    // one is read as 0 too, with a warning, since only replay needs it.
    const addr = d.get('addr');
    if ((addr === undefined || addr === null) && action !== 'oom') t.entriesWithoutAddr++;
    const size = d.get('size');
    if (size === undefined || size === null) t.entriesWithoutSize++;
    return t.pushTrace(
      t.actionCode(action),
      this.optInt(addr, 0, path, 'addr'),
      this.optInt(size, 0, path, 'size'),
      this.optInt(d.get('stream'), 0, path, 'stream'),
      time === undefined || time === null ? NaN : typeof time === 'number' ? time : this.int(time, path, 'time_us'),
      this.stack(d.get('frames'), `${path}.frames`),
      opt('compile_context'),
      opt('user_metadata'),
      deviceFree === undefined || deviceFree === null ? NaN : this.int(deviceFree, path, 'device_free'),
    );
  }

  segments(v: unknown): { segments: Segment[]; blocks: BlockTable } {
    // Per block of the model, in segment order: its row in the builder's block columns, and its
    // segment. Typed columns sized for the recognised blocks: as growing JS arrays they were
    // ~7 MB of garbage on the 97 MB bench file, copied by the scavenges at the end of the read.
    const t = this.t;
    const raw = new I32Column(Math.max(16, t.segmentBlocks.length));
    const owner = new I32Column(Math.max(16, t.segmentBlocks.length));
    const segments: Segment[] = [];
    if (v instanceof RawList && v.ids !== null && v.idKind === NodeKind.Segment) {
      // Recognised segments (the normal case): straight from the columns, no node per segment.
      const ids = v.ids.view();
      for (let i = 0; i < ids.length; i++) segments.push(this.recognisedSegment(ids[i]!, i, raw, owner));
    } else {
      this.list(v, 'segments').forEach((node, index) => {
        segments.push(node instanceof RawDict && node.kind === NodeKind.Segment ? this.recognisedSegment(node.id, index, raw, owner) : this.genericSegment(node, index, raw, owner));
      });
    }
    // Sizes are byte counts: a negative one would print as negative memory reserved.
    for (const s of segments) if (s.totalSize < 0) throw shapeError(`segments[${s.index}].total_size`, `${s.totalSize} is negative`);
    const n = raw.length;
    const rows = raw.data.subarray(0, n);
    const state = new Uint8Array(n);
    const stack = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      state[i] = t.bState.data[rows[i]!]!;
      stack[i] = t.bStack.data[rows[i]!]!;
    }
    const blocks: BlockTable = {
      count: n,
      segment: owner.finish(),
      address: gatherF64(t.bAddress.data, rows),
      size: gatherF64(t.bSize.data, rows),
      requestedSize: gatherF64(t.bRequested.data, rows),
      state,
      stack,
    };
    return { segments, blocks };
  }

  /** Sum of the sizes of blocks raw[from..] whose state passes `pred` (for files without the segment's own sums). */
  private sumBlocks(raw: I32Column, from: number, pred: (state: string) => boolean): number {
    const t = this.t;
    let s = 0;
    for (let k = from; k < raw.length; k++) if (pred(t.stateNames[t.bState.data[raw.data[k]!]!]!)) s += t.bSize.data[raw.data[k]!]!;
    return s;
  }

  private lastPoolId: readonly [number, number] | null = null;

  /** A segment the builder recognised (snapshot-node-builder.ts `segment`): the same defaults as below. */
  private recognisedSegment(id: number, index: number, raw: I32Column, owner: I32Column): Segment {
    const t = this.t;
    const firstBlock = raw.length;
    const blockIds = t.segmentBlocks.data;
    for (let k = t.sBlockStart.data[id]!, end = t.sBlockStart.data[id + 1]!; k < end; k++) {
      raw.push(blockIds[k]!);
      owner.push(index);
    }
    const device = t.sDevice.data[id]!;
    const stream = t.sStream.data[id]!;
    const allocated = t.sAllocated.data[id]!;
    const active = t.sActive.data[id]!;
    const requested = t.sRequested.data[id]!;
    const type = t.sType.data[id]!;
    const pool0 = t.sPool0.data[id]!;
    const pool1 = t.sPool1.data[id]!;
    // Consecutive segments of one pool share its (frozen) id tuple: one array per run of a pool,
    // not one per segment.
    let poolId = this.lastPoolId;
    if (Number.isNaN(pool0)) poolId = null;
    else if (poolId === null || poolId[0] !== pool0 || poolId[1] !== pool1) this.lastPoolId = poolId = makeTuple([pool0, pool1]) as readonly [number, number];
    return {
      index,
      device: Number.isNaN(device) ? -1 : device,
      address: t.sAddress.data[id]!,
      totalSize: t.sTotal.data[id]!,
      allocatedSize: Number.isNaN(allocated) ? this.sumBlocks(raw, firstBlock, (s) => s === 'active_allocated') : allocated,
      activeSize: Number.isNaN(active) ? this.sumBlocks(raw, firstBlock, (s) => s.startsWith('active')) : active,
      requestedSize: Number.isNaN(requested) ? null : requested,
      stream: Number.isNaN(stream) ? 0 : stream,
      segmentType: type < 0 ? 'large' : t.segmentTypes[type]!,
      poolId,
      isExpandable: t.sExpandable.data[id] === 1,
      stack: t.sStack.data[id]!,
      firstBlock,
      blockCount: raw.length - firstBlock,
    };
  }

  private genericSegment(node: unknown, index: number, raw: I32Column, owner: I32Column): Segment {
    const path = `segments[${index}]`;
    const d = this.dict(node);
    if (!d) throw shapeError(path, `expected a segment dict, found ${describe(node)}`);
    const t = this.t;
    const firstBlock = raw.length;
    const blockList = d.get('blocks') ?? [];
    if (blockList instanceof RawList && blockList.ids !== null && blockList.idKind === NodeKind.Block) {
      // Recognised blocks: their raw ids, without a copy per segment.
      const ids = blockList.ids.view();
      for (let j = 0; j < ids.length; j++) {
        raw.push(ids[j]!);
        owner.push(index);
      }
    } else {
      const rows = this.rows(blockList, NodeKind.Block, `${path}.blocks`, (b, p) => this.block(b, p));
      for (let j = 0; j < rows.length; j++) {
        raw.push(rows[j]!);
        owner.push(index);
      }
    }
    const address = this.int(d.get('address'), path, 'address');
    // PyTorch 2.0 blocks carry no address: each starts where the blocks before it in the segment end.
    let offset = address;
    for (let k = firstBlock; k < raw.length; k++) {
      const row = raw.data[k]!;
      if (Number.isNaN(t.bAddress.data[row]!)) {
        t.bAddress.data[row] = offset;
        t.derivedBlockAddresses++;
      }
      offset += t.bSize.data[row]!;
    }
    for (const k of d.keys()) if (!SEGMENT_KEY_BIT.has(k)) t.otherSegmentKeys.add(String(k));
    const pool = d.get('segment_pool_id');
    let poolId: readonly [number, number] | null = null;
    if (pool !== undefined && pool !== null) {
      const p = this.list(pool, `${path}.segment_pool_id`);
      if (p.length !== 2) throw shapeError(`${path}.segment_pool_id`, `expected a pair, found ${p.length} items`);
      poolId = makeTuple([this.int(p[0], path, 'segment_pool_id[0]'), this.int(p[1], path, 'segment_pool_id[1]')]) as readonly [number, number];
    }
    const totalSize = this.int(d.get('total_size'), path, 'total_size');
    // Sizes PyTorch has written since 1.x; derived from the blocks if a file lacks them.
    const allocated = d.get('allocated_size');
    const active = d.get('active_size');
    const requested = d.get('requested_size');
    const expandable = d.get('is_expandable');
    return {
      index,
      device: this.optInt(d.get('device'), -1, path, 'device'),
      address,
      totalSize,
      allocatedSize: allocated === undefined ? this.sumBlocks(raw, firstBlock, (s) => s === 'active_allocated') : this.int(allocated, path, 'allocated_size'),
      activeSize: active === undefined ? this.sumBlocks(raw, firstBlock, (s) => s.startsWith('active')) : this.int(active, path, 'active_size'),
      requestedSize: requested === undefined || requested === null ? null : this.int(requested, path, 'requested_size'),
      stream: this.optInt(d.get('stream'), 0, path, 'stream'),
      segmentType: d.get('segment_type') === undefined ? 'large' : this.str(d.get('segment_type'), path, 'segment_type'),
      poolId,
      isExpandable: expandable === true,
      stack: this.stack(d.get('frames'), `${path}.frames`),
      firstBlock,
      blockCount: raw.length - firstBlock,
    };
  }

  traces(v: unknown): TraceTable[] {
    if (v === undefined || v === null) return [];
    const devices = this.list(v, 'device_traces');
    // Each device's entries as rows of the trace columns: a run (first, count) when they are
    // consecutive, as recognised entries always are, else the row of each.
    const spans = devices.map((dev, d) => {
      const first = dev instanceof RawList && dev.ids !== null && dev.idKind === NodeKind.Trace ? dev.ids.runStart() : -1;
      if (first >= 0) return { first, n: (dev as RawList).ids!.length, rows: null };
      const rows = this.rows(dev, NodeKind.Trace, `device_traces[${d}]`, (e, p) => this.traceEntry(e, p));
      const n = rows.length;
      const start = n > 0 ? rows[0]! : 0;
      for (let i = 0; i < n; i++) if (rows[i] !== start + i) return { first: start, n, rows };
      return { first: start, n, rows: null };
    });
    const t = this.t;
    // Columns are final only now: generic entries may have been appended above.
    const action = t.tAction.data;
    const cols: TraceNumberColumns = {
      addr: t.tAddr.data,
      size: t.tSize.data,
      stream: t.tStream.data,
      timeUs: t.tTime.data,
      stack: t.tStack.data,
      compileContext: t.tCompile?.data ?? null,
      userMetadata: t.tUser?.data ?? null,
      deviceFree: t.tDeviceFree?.data ?? null,
    };
    return spans.map(({ first, n, rows }, device) => {
      // Consecutive rows (the normal case): views, no copy. Otherwise gather.
      const f64 = (c: Float64Array): Float64Array => (rows === null ? c.subarray(first, first + n) : gatherF64(c, rows));
      const i32 = (c: Int32Array): Int32Array => (rows === null ? c.subarray(first, first + n) : Int32Array.from(rows, (r) => c[r]!));
      return traceTableOf(device, n, rows === null ? action.subarray(first, first + n) : Uint8Array.from(rows, (r) => action[r]!), cols, f64, i32);
    });
  }

  /** Plain JSON-ready copy of a generic node (allocator_settings, annotations, unknown keys). */
  plain(v: unknown, path: string): PlainValue {
    return toPlain(this.toPickleValue(v, path, 0, new Map()));
  }

  // `copies`: a node shared in the file (the pickle memo) is converted once and stays shared, so
  // the copy is as large as the file's value, not as its expansion (toPlain limits that).
  toPickleValue(v: unknown, path: string, depth: number, copies: Map<unknown, PickleValue>): PickleValue {
    if (depth > 1000) throw shapeError(path, 'nested deeper than 1000');
    const copied = copies.get(v);
    if (copied !== undefined) return copied;
    const out = this.copyNode(v, path, depth, copies);
    if (typeof v === 'object' && v !== null) copies.set(v, out);
    return out;
  }

  private copyNode(v: unknown, path: string, depth: number, copies: Map<unknown, PickleValue>): PickleValue {
    if (v instanceof RawDict) {
      const d = this.dict(v)!;
      const out = new Map<PickleValue, PickleValue>();
      for (const [k, x] of d) out.set(k as PickleValue, this.toPickleValue(x, path, depth + 1, copies));
      return out;
    }
    if (v instanceof RawList) return this.list(v, path).map((x) => this.toPickleValue(x, path, depth + 1, copies));
    if (v instanceof Map) {
      const out = new Map<PickleValue, PickleValue>();
      for (const [k, x] of v) out.set(k as PickleValue, this.toPickleValue(x, path, depth + 1, copies));
      return out;
    }
    if (Array.isArray(v)) {
      const items = v.map((x) => this.toPickleValue(x, path, depth + 1, copies));
      return isTuple(v) ? makeTuple(items) : items;
    }
    return v as PickleValue;
  }

  private recognisedToMap(v: RawDict): Map<unknown, unknown> {
    const t = this.t;
    const i = v.id;
    if (v.kind === NodeKind.Frame) {
      const f = t.frames[i]!;
      return new Map<unknown, unknown>([
        ['name', f.name],
        ['filename', f.filename],
        ['line', f.line],
      ]);
    }
    if (v.kind === NodeKind.Segment) {
      // The keys the dict had, in PyTorch's order; None where the column holds NaN.
      const mask = t.sKeyMask.data[i]!;
      const num = (c: Float64Array): number | null => (Number.isNaN(c[i]!) ? null : c[i]!);
      const m = new Map<unknown, unknown>();
      SEGMENT_KEYS.forEach((key, bit) => {
        if ((mask & (1 << bit)) === 0) return;
        let x: unknown;
        if (key === 'device') x = num(t.sDevice.data);
        else if (key === 'address') x = t.sAddress.data[i];
        else if (key === 'total_size') x = t.sTotal.data[i];
        else if (key === 'allocated_size') x = t.sAllocated.data[i];
        else if (key === 'active_size') x = t.sActive.data[i];
        else if (key === 'requested_size') x = num(t.sRequested.data);
        else if (key === 'stream') x = num(t.sStream.data);
        else if (key === 'segment_type') x = t.segmentTypes[t.sType.data[i]!];
        else if (key === 'segment_pool_id') x = Number.isNaN(t.sPool0.data[i]!) ? null : makeTuple([t.sPool0.data[i]!, t.sPool1.data[i]!]);
        else if (key === 'is_expandable') x = t.sExpandable.data[i] === 1;
        else if (key === 'frames') x = this.stackToFrameDicts(t.sStack.data[i]!);
        else x = Array.from(t.segmentBlocks.data.subarray(t.sBlockStart.data[i]!, t.sBlockStart.data[i + 1]!), (b) => nodeFor(NodeKind.Block, b));
        m.set(key, x);
      });
      return m;
    }
    if (v.kind === NodeKind.Block) {
      return new Map<unknown, unknown>([
        ['address', t.bAddress.data[i]],
        ['size', t.bSize.data[i]],
        ['requested_size', t.bRequested.data[i]],
        ['state', t.stateNames[t.bState.data[i]!]],
        ['frames', this.stackToFrameDicts(t.bStack.data[i]!)],
      ]);
    }
    const m = new Map<unknown, unknown>([
      ['action', t.actionNames[t.tAction.data[i]!]],
      ['addr', t.tAddr.data[i]],
      ['size', t.tSize.data[i]],
      ['stream', t.tStream.data[i]],
    ]);
    if (!Number.isNaN(t.tTime.data[i]!)) m.set('time_us', t.tTime.data[i]);
    m.set('frames', this.stackToFrameDicts(t.tStack.data[i]!));
    return m;
  }

  private stackToFrameDicts(stack: number): Map<unknown, unknown>[] {
    const t = this.t;
    const out: Map<unknown, unknown>[] = [];
    for (let k = t.stackOffsets.data[stack]!; k < t.stackOffsets.data[stack + 1]!; k++) {
      const f = t.frames[t.stackFrames.data[k]!]!;
      out.push(new Map<unknown, unknown>([['name', f.name], ['filename', f.filename], ['line', f.line]]));
    }
    return out;
  }
}

function gatherF64(source: Float64Array, rows: ArrayLike<number>): Float64Array {
  const out = new Float64Array(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = source[rows[i]!]!;
  return out;
}
