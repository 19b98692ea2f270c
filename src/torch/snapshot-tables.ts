/**
 * The tables a snapshot read fills (interned frames, stacks and strings; block and trace-event
 * columns), and the node types the recognising builder puts on the pickle stack. Shared by the
 * snapshot builder (snapshot-node-builder.ts and the lanes above it fill them while the pickle is
 * read) and snapshot-assembler.ts (assembles the model from them).
 */
import { MemscopeError } from '../core/errors.js';
import { BLOCK_STATE_ALIASES, KNOWN_BLOCK_STATES, KNOWN_TRACE_ACTIONS, type Frame } from './pytorch-vocabulary.js';

// ---------------------------------------------------------------------------------------------
// Growable typed-array columns

export class F64Column {
  data: Float64Array;
  constructor(capacity = 1024) {
    this.data = new Float64Array(capacity);
  }
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) this.grow();
    this.data[this.length++] = v;
  }
  /** Doubles the capacity. */
  grow(): void {
    const next = new Float64Array(Math.max(16, this.data.length * 2));
    next.set(this.data);
    this.data = next;
  }
  finish(): Float64Array {
    return this.data.slice(0, this.length);
  }
}

export class I32Column {
  data: Int32Array;
  constructor(capacity = 1024) {
    this.data = new Int32Array(capacity);
  }
  length = 0;
  /** The pushed values (a view, not a copy). */
  view(): Int32Array {
    return this.data.subarray(0, this.length);
  }
  push(v: number): void {
    if (this.length === this.data.length) this.grow();
    this.data[this.length++] = v;
  }
  /** Doubles the capacity. */
  grow(): void {
    const next = new Int32Array(Math.max(16, this.data.length * 2));
    next.set(this.data);
    this.data = next;
  }
  finish(): Int32Array {
    return this.data.slice(0, this.length);
  }
}

/**
 * The ids of the recognised nodes (trace entries, blocks, segments) a pickled list holds, in
 * order. While each id is one more than the one before — a device's trace list, hundreds of
 * thousands long, always is, since its entries get their ids as they are read — only the first
 * and the count are kept: no column grown by doubling (~8 MB written, ~2,000 page faults on the
 * 97 MB bench file) and no copy at the end. The first id out of sequence turns it into a column.
 */
export class IdList {
  length = 0;
  /** The first id, while the ids run consecutively (`column` is null). */
  private first = 0;
  private column: I32Column | null = null;

  static from(values: ArrayLike<number>): IdList {
    const list = new IdList();
    for (let i = 0; i < values.length; i++) list.push(values[i]!);
    return list;
  }

  push(id: number): void {
    const n = this.length;
    if (this.column === null) {
      if (n === 0) this.first = id;
      else if (id !== this.first + n) this.column = this.toColumn(n + 1);
      if (this.column === null) {
        this.length = n + 1;
        return;
      }
    }
    this.column.push(id);
    this.length = n + 1;
  }

  /** The first id when the ids run consecutively (an empty list runs from 0), else -1. */
  runStart(): number {
    return this.column === null ? (this.length > 0 ? this.first : 0) : -1;
  }

  /** The ids (a view; a run becomes a column the first time). */
  view(): Int32Array {
    this.column ??= this.toColumn(this.length);
    return this.column.view();
  }

  /** The run so far as a column with room for `capacity` ids. */
  private toColumn(capacity: number): I32Column {
    const column = new I32Column(Math.max(16, capacity));
    for (let i = 0; i < this.length; i++) column.push(this.first + i);
    return column;
  }
}

export class U8Column {
  data: Uint8Array;
  constructor(capacity = 1024) {
    this.data = new Uint8Array(capacity);
  }
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) this.grow();
    this.data[this.length++] = v;
  }
  /** Doubles the capacity. */
  grow(): void {
    const next = new Uint8Array(Math.max(16, this.data.length * 2));
    next.set(this.data);
    this.data = next;
  }
}

// ---------------------------------------------------------------------------------------------
// Fast-path nodes: what the recognising builder puts on the pickle stack instead of Map / Array

/**
 * What a fast-path node stands for (RawDict.kind, RawList.idKind) and what a released memo slot
 * held. A const enum, so that the lanes' kind checks compare with numbers: V8's optimised code
 * reads an imported `const` from its module's cell at every use.
 */
export const enum NodeKind {
  Generic = 0,
  Frame = 1,
  Block = 2,
  Trace = 3,
  /** Released memo kind: a frames list (id: its stack). */
  Stack = 4,
  /** A segment dict (its scalars in the `s*` columns, its blocks in `segmentBlocks`). */
  Segment = 5,
  /** Released memo kind: a segment's `blocks` list (id: the segment's raw id). */
  SegmentBlocks = 6,
  /** Released memo kind: a segment's `segment_pool_id` tuple (id: the segment's raw id). */
  PoolTuple = 7,
}

export class RawDict {
  kind = NodeKind.Generic;
  /** frame id / raw block id / raw trace id for recognised dicts */
  id = -1;
  map: Map<unknown, unknown> | null = null;
  /** memo index (MEMOIZE / BINPUT), -1 if not memoized */
  slot = -1;
}

/**
 * A list under construction. Exactly one representation is in use: `stack` (a list of frames,
 * interned), `ids` (only recognised blocks or only recognised trace entries: their raw ids), or
 * `items` (anything else). All three empty: an empty list.
 */
export class RawList {
  /**
   * Set once a recognised segment has copied this list's block ids: appending to it afterwards
   * (no pickler does; a hand-made file can) would not reach the segment, so it makes the read
   * fall back to the generic reader instead (FastPathBail).
   */
  sealed = false;
  items: unknown[] | null = null;
  /**
   * A typed column, not a JS array: a device's trace list holds hundreds of thousands of ids, and a
   * growing JS array of them (8 bytes each, regrown by half) was ~20 MB of garbage per 100 MB read.
   */
  ids: IdList | null = null;
  idKind = NodeKind.Generic;
  stack = -1;
  slot = -1;
}

/** Memo indices beyond this keep their node (a hostile LONG_BINPUT must not size our side arrays). */
export const MAX_RELEASED_SLOT = 1 << 28;

export function nodeFor(kind: number, id: number): RawDict {
  const node = new RawDict();
  node.kind = kind;
  node.id = id;
  return node;
}

/** The fast path met something it does not handle; readSnapshot retries with the generic reader. */
export class FastPathBail extends Error {}

// Trace entry keys → bits, for `format.traceKeys` without a Set insert per event.
export const TRACE_KEYS = ['action', 'addr', 'size', 'stream', 'time_us', 'frames', 'compile_context', 'user_metadata', 'device_free'] as const;
export const TRACE_KEY_BIT = new Map<unknown, number>(TRACE_KEYS.map((k, i) => [k, i]));
/** The segment keys a recognised segment may have, in PyTorch's order (bits of `sKeyMask`). */
export const SEGMENT_KEYS = [
  'device',
  'address',
  'total_size',
  'allocated_size',
  'active_size',
  'requested_size',
  'stream',
  'segment_type',
  'segment_pool_id',
  'is_expandable',
  'frames',
  'blocks',
] as const;
export const SEGMENT_KEY_BIT = new Map<unknown, number>(SEGMENT_KEYS.map((k, i) => [k, i]));

export function safeInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

/** Index of `s` in `list`, appending it the first time. */
function intern(s: string, list: string[], ids: Map<string, number>): number {
  let id = ids.get(s);
  if (id === undefined) {
    id = list.length;
    list.push(s);
    ids.set(s, id);
  }
  return id;
}

// ---------------------------------------------------------------------------------------------
// Interned tables and raw columns shared by both paths

export class SnapshotTables {
  readonly frames: Frame[] = [];
  private readonly frameIds = new Map<string, number>();
  readonly stackOffsets = new I32Column();
  readonly stackFrames = new I32Column();
  private readonly stackByHash = new Map<number, number>();
  private readonly stackNext = new I32Column(); // collision chain
  private scratch = new Int32Array(256);
  readonly strings: string[] = [];
  private readonly stringIds = new Map<string, number>();
  readonly stateNames: string[] = [...KNOWN_BLOCK_STATES];
  readonly actionNames: string[] = [...KNOWN_TRACE_ACTIONS];
  private readonly stateCodes = new Map<string, number>([
    ...KNOWN_BLOCK_STATES.map((s, i): [string, number] => [s, i]),
    ...Object.entries(BLOCK_STATE_ALIASES).map(([alias, s]): [string, number] => [alias, KNOWN_BLOCK_STATES.indexOf(s)]),
  ]);
  private readonly actionCodes = new Map<string, number>(KNOWN_TRACE_ACTIONS.map((s, i) => [s, i]));

  // raw blocks (encounter order)
  readonly bAddress = new F64Column();
  readonly bSize = new F64Column();
  readonly bRequested = new F64Column();
  readonly bState = new U8Column();
  readonly bStack = new I32Column();

  // raw trace events (encounter order)
  readonly tAction: U8Column;
  readonly tAddr: F64Column;
  readonly tSize: F64Column;
  readonly tStream: F64Column;
  readonly tTime: F64Column;
  readonly tStack: I32Column;
  tCompile: I32Column | null = null;
  tUser: I32Column | null = null;
  tDeviceFree: F64Column | null = null;
  traceKeyMask = 0;

  // raw segments (encounter order). NaN marks a key the dict did not have (or None where PyTorch
  // allows it): the assembler then applies the same defaults as for a generic segment dict.
  readonly sDevice = new F64Column();
  readonly sAddress = new F64Column();
  readonly sTotal = new F64Column();
  readonly sAllocated = new F64Column();
  readonly sActive = new F64Column();
  readonly sRequested = new F64Column();
  readonly sStream = new F64Column();
  /** segmentTypes index of segment_type, -1 when absent */
  readonly sType = new I32Column();
  readonly sPool0 = new F64Column();
  readonly sPool1 = new F64Column();
  /** is_expandable: 0 False, 1 True, 2 absent */
  readonly sExpandable = new U8Column();
  readonly sStack = new I32Column();
  /** The segment's raw block ids are segmentBlocks[sBlockStart[i], sBlockStart[i + 1]). */
  readonly sBlockStart = new I32Column();
  readonly segmentBlocks = new I32Column();
  /** Which SEGMENT_KEYS each raw segment had (for turning one back into a dict). */
  readonly sKeyMask = new I32Column();
  readonly segmentTypes: string[] = [];
  private readonly segmentTypeCodes = new Map<string, number>();
  readonly otherTraceKeys = new Set<string>();
  /** Keys of generic segment / block dicts that PyTorch does not write (for the warnings). */
  readonly otherSegmentKeys = new Set<string>();
  readonly otherBlockKeys = new Set<string>();
  legacyHistory = false;
  /** Blocks without `address` (PyTorch 2.0) placed by their order in the segment. */
  derivedBlockAddresses = 0;
  /** Trace entries other than `oom` without `addr`, and entries without `size` (read as 0). */
  entriesWithoutAddr = 0;
  /** Frames with keys besides name, filename and line (augment_with_fx_traces adds fx_*), and those keys. */
  framesWithOtherKeys = 0;
  readonly otherFrameKeys = new Set<string>();
  entriesWithoutSize = 0;

  /**
   * Trace columns start at a capacity guessed from the file size (a trace entry takes ≥ ~100
   * bytes of pickle), so big files don't regrow and copy them ~10 times. Untouched capacity costs
   * address space only: typed arrays are zero-filled lazily by the OS.
   */
  constructor(expectedEvents = 1024) {
    this.sBlockStart.push(0);
    this.tAction = new U8Column(expectedEvents);
    this.tAddr = new F64Column(expectedEvents);
    this.tSize = new F64Column(expectedEvents);
    this.tStream = new F64Column(expectedEvents);
    this.tTime = new F64Column(expectedEvents);
    this.tStack = new I32Column(expectedEvents);
    // stack 0: the empty stack
    this.stackOffsets.push(0);
    this.stackOffsets.push(0);
    this.stackNext.push(-1);
  }

  /** `line` below 0 (CPython's -1, or a value the reader could not hold) is stored as -1: unknown. */
  internFrame(name: string, filename: string, line: number): number {
    if (line < 0) line = -1;
    const key = `${line}\u0000${filename}\u0000${name}`;
    let id = this.frameIds.get(key);
    if (id === undefined) {
      id = this.frames.length;
      this.frames.push({ name, filename, line });
      this.frameIds.set(key, id);
    }
    return id;
  }

  scratchFor(n: number): Int32Array {
    if (this.scratch.length < n) this.scratch = new Int32Array(n * 2);
    return this.scratch;
  }

  /** Interns ids[0..n) (frame ids, innermost first) as a stack. */
  internStack(ids: Int32Array, n: number): number {
    if (n === 0) return 0;
    let h = n | 0;
    for (let i = 0; i < n; i++) h = Math.imul(h ^ ids[i]!, 0x9e3779b1) ^ (h >>> 15);
    h &= 0x3fffffff; // a small integer key (no heap number per lookup)
    const frames = this.stackFrames;
    const offsets = this.stackOffsets;
    let id = this.stackByHash.get(h);
    const head = id ?? -1;
    while (id !== undefined && id >= 0) {
      const start = offsets.data[id]!;
      if (offsets.data[id + 1]! - start === n) {
        let same = true;
        for (let i = 0; i < n; i++) {
          if (frames.data[start + i] !== ids[i]) {
            same = false;
            break;
          }
        }
        if (same) return id;
      }
      id = this.stackNext.data[id]!;
    }
    const newId = offsets.length - 1;
    for (let i = 0; i < n; i++) frames.push(ids[i]!);
    offsets.push(frames.length);
    this.stackNext.push(head);
    this.stackByHash.set(h, newId);
    return newId;
  }

  string(s: string): number {
    return intern(s, this.strings, this.stringIds);
  }

  segmentTypeCode(s: string): number {
    return intern(s, this.segmentTypes, this.segmentTypeCodes);
  }

  stateCode(s: string): number {
    let c = this.stateCodes.get(s);
    if (c === undefined) {
      if (this.stateNames.length >= 255) throw new MemscopeError('snapshot-shape', 'snapshot: more than 255 distinct block states');
      c = this.stateNames.length;
      this.stateNames.push(s);
      this.stateCodes.set(s, c);
    }
    return c;
  }

  actionCode(s: string): number {
    let c = this.actionCodes.get(s);
    if (c === undefined) {
      if (this.actionNames.length >= 255) throw new MemscopeError('snapshot-shape', 'snapshot: more than 255 distinct trace actions');
      c = this.actionNames.length;
      this.actionNames.push(s);
      this.actionCodes.set(s, c);
    }
    return c;
  }

  /** Appends a recognised segment; `blockIds` are its blocks' raw ids, in list order. */
  pushSegment(
    keyMask: number,
    /** device, address, total_size, allocated_size, active_size, requested_size, stream (SEGMENT_KEYS order); NaN where not given. */
    ints: Float64Array,
    type: number,
    pool0: number,
    pool1: number,
    expandable: number,
    stack: number,
    blockIds: ArrayLike<number> | null,
    /** Or, with `blockIds` null, the raw block ids [firstBlock, firstBlock + blockCount) (the segment lane's). */
    firstBlock = 0,
    blockCount = 0,
  ): number {
    this.sKeyMask.push(keyMask);
    this.sDevice.push(ints[0]!);
    this.sAddress.push(ints[1]!);
    this.sTotal.push(ints[2]!);
    this.sAllocated.push(ints[3]!);
    this.sActive.push(ints[4]!);
    this.sRequested.push(ints[5]!);
    this.sStream.push(ints[6]!);
    this.sType.push(type);
    this.sPool0.push(pool0);
    this.sPool1.push(pool1);
    this.sExpandable.push(expandable);
    this.sStack.push(stack);
    if (blockIds !== null) for (let i = 0; i < blockIds.length; i++) this.segmentBlocks.push(blockIds[i]!);
    else for (let i = 0; i < blockCount; i++) this.segmentBlocks.push(firstBlock + i);
    this.sBlockStart.push(this.segmentBlocks.length);
    return this.sTotal.length - 1;
  }

  pushBlock(address: number, size: number, requested: number, state: number, stack: number): number {
    this.bAddress.push(address);
    this.bSize.push(size);
    this.bRequested.push(requested);
    this.bState.push(state);
    this.bStack.push(stack);
    return this.bSize.length - 1;
  }

  /** Drops the raw blocks from id `count` on (pushed by a segment lane that then gave up). */
  truncateBlocks(count: number): void {
    this.bAddress.length = this.bSize.length = this.bRequested.length = this.bState.length = this.bStack.length = count;
  }

  pushTrace(
    action: number,
    addr: number,
    size: number,
    stream: number,
    time: number,
    stack: number,
    compile: number,
    user: number,
    deviceFree: number,
  ): number {
    const e = this.traceEntry;
    e[EntryField.Addr] = addr;
    e[EntryField.Size] = size;
    e[EntryField.Stream] = stream;
    e[EntryField.Time] = time;
    e[EntryField.DeviceFree] = deviceFree;
    return this.pushTraceEntry(action, stack, compile, user);
  }

  /**
   * The numbers of the entry `pushTraceEntry` appends (addr, size, stream, time_us, device_free at
   * the ENTRY_* indices). The trace lane writes them here rather than passing them: an address or
   * a time is not a small integer, and V8 allocates a heap number for each such argument of a call
   * it does not inline (two per entry, ~20 MB of garbage on the 97 MB bench file).
   */
  readonly traceEntry = new Float64Array(5);

  /** Appends a trace entry: its numbers from `traceEntry`, the rest as arguments. */
  pushTraceEntry(action: number, stack: number, compile: number, user: number): number {
    const e = this.traceEntry;
    const addr = e[EntryField.Addr]!;
    const size = e[EntryField.Size]!;
    const stream = e[EntryField.Stream]!;
    const time = e[EntryField.Time]!;
    const deviceFree = e[EntryField.DeviceFree]!;
    // The six columns always have one length and one capacity: one check, then plain stores
    // (this runs once per trace entry, most of a big file).
    const i = this.tAddr.length;
    if (i === this.tAddr.data.length) this.growTraceColumns();
    const n = i + 1;
    this.tAction.data[i] = action;
    this.tAction.length = n;
    this.tAddr.data[i] = addr;
    this.tAddr.length = n;
    this.tSize.data[i] = size;
    this.tSize.length = n;
    this.tStream.data[i] = stream;
    this.tStream.length = n;
    this.tTime.data[i] = time;
    this.tTime.length = n;
    this.tStack.data[i] = stack;
    this.tStack.length = n;
    if (compile >= 0 || this.tCompile) (this.tCompile ??= filledI32(i, -1)).push(compile);
    if (user >= 0 || this.tUser) (this.tUser ??= filledI32(i, -1)).push(user);
    if (!Number.isNaN(deviceFree) || this.tDeviceFree) (this.tDeviceFree ??= filledF64(i, NaN)).push(deviceFree);
    return i;
  }

  private growTraceColumns(): void {
    for (const column of [this.tAction, this.tAddr, this.tSize, this.tStream, this.tTime, this.tStack]) column.grow();
  }
}

/** Indices in SnapshotTables.traceEntry (a const enum, as NodeKind: the trace lane writes them per entry). */
export const enum EntryField {
  Addr = 0,
  Size = 1,
  Stream = 2,
  Time = 3,
  DeviceFree = 4,
}

export function filledI32(n: number, v: number): I32Column {
  const c = new I32Column();
  for (let i = 0; i < n; i++) c.push(v);
  return c;
}

export function filledF64(n: number, v: number): F64Column {
  const c = new F64Column();
  for (let i = 0; i < n; i++) c.push(v);
  return c;
}

