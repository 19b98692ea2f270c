/**
 * The recognising pickle builder behind `readSnapshot`: trace entries through a fast lane straight
 * from the opcode bytes, frames / blocks / trace entries / frame lists recognised at SETITEMS and
 * APPENDS, everything else kept as generic nodes for the assembler (snapshot-decoder.ts).
 */
import { DEFAULT_PICKLE_LIMITS, decodeLong, decodeUtf8, makeTuple, pickleError, type FastLane, type PickleBuilder } from './pickle/machine.js';
import { PickleMemo } from './pickle/memo.js';
import {
  BLOCK,
  ENTRY_ADDR,
  ENTRY_DEVICE_FREE,
  ENTRY_SIZE,
  ENTRY_STREAM,
  ENTRY_TIME,
  FRAME,
  FastPathBail,
  GENERIC,
  IdList,
  MAX_RELEASED_SLOT,
  POOL_TUPLE,
  RawDict,
  RawList,
  SEGMENT,
  SEGMENT_BLOCKS,
  SEGMENT_KEYS,
  SEGMENT_KEY_BIT,
  STACK,
  SnapshotTables,
  TRACE,
  TRACE_KEYS,
  TRACE_KEY_BIT,
  nodeFor,
  safeInt,
} from './snapshot-tables.js';

/**
 * Bit of each trace entry key: its index in TRACE_KEYS. Literal members, so that the lanes' per-key
 * branches compare with constants; `TraceBitsMatchKeys` below fails typechecking if TRACE_KEYS
 * changes order.
 */
const enum TraceBit {
  Action = 0,
  Addr = 1,
  Size = 2,
  Stream = 3,
  TimeUs = 4,
  Frames = 5,
  CompileContext = 6,
  UserMetadata = 7,
  DeviceFree = 8,
}
/** Bit of each segment key: its index in SEGMENT_KEYS (`SegmentBitsMatchKeys` checks the order). */
const enum SegmentBit {
  Device = 0,
  Address = 1,
  TotalSize = 2,
  AllocatedSize = 3,
  ActiveSize = 4,
  RequestedSize = 5,
  Stream = 6,
  SegmentType = 7,
  SegmentPoolId = 8,
  IsExpandable = 9,
  Frames = 10,
  Blocks = 11,
}
/** The segment keys below this bit are ints (read into `segmentInts` at their bit). */
const SEGMENT_INT_BITS = SegmentBit.SegmentType;
/** Keys every trace entry has: action, addr, size. */
const TRACE_REQUIRED_MASK = (1 << TraceBit.Action) | (1 << TraceBit.Addr) | (1 << TraceBit.Size);

type AssertTrue<T extends true> = T;
type TraceKeyAt<B extends TraceBit> = (typeof TRACE_KEYS)[B];
type SegmentKeyAt<B extends SegmentBit> = (typeof SEGMENT_KEYS)[B];
/** Fails typechecking when a TraceBit member is not its key's index in TRACE_KEYS. */
type TraceBitsMatchKeys = AssertTrue<
  [
    TraceKeyAt<TraceBit.Action>,
    TraceKeyAt<TraceBit.Addr>,
    TraceKeyAt<TraceBit.Size>,
    TraceKeyAt<TraceBit.Stream>,
    TraceKeyAt<TraceBit.TimeUs>,
    TraceKeyAt<TraceBit.Frames>,
    TraceKeyAt<TraceBit.CompileContext>,
    TraceKeyAt<TraceBit.UserMetadata>,
    TraceKeyAt<TraceBit.DeviceFree>,
  ] extends ['action', 'addr', 'size', 'stream', 'time_us', 'frames', 'compile_context', 'user_metadata', 'device_free']
    ? true
    : false
>;
/** Fails typechecking when a SegmentBit member is not its key's index in SEGMENT_KEYS. */
type SegmentBitsMatchKeys = AssertTrue<
  [
    SegmentKeyAt<SegmentBit.Device>,
    SegmentKeyAt<SegmentBit.Address>,
    SegmentKeyAt<SegmentBit.TotalSize>,
    SegmentKeyAt<SegmentBit.AllocatedSize>,
    SegmentKeyAt<SegmentBit.ActiveSize>,
    SegmentKeyAt<SegmentBit.RequestedSize>,
    SegmentKeyAt<SegmentBit.Stream>,
    SegmentKeyAt<SegmentBit.SegmentType>,
    SegmentKeyAt<SegmentBit.SegmentPoolId>,
    SegmentKeyAt<SegmentBit.IsExpandable>,
    SegmentKeyAt<SegmentBit.Frames>,
    SegmentKeyAt<SegmentBit.Blocks>,
  ] extends [
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
  ]
    ? true
    : false
>;

// Keys the lanes recognise, as bits: the trace entry keys (TRACE_KEYS order), then the block keys
// that are not also trace keys ('size' and 'frames' are shared).
const TRACE_KEY_COUNT = TRACE_KEYS.length;
const SIZE_BIT = TRACE_KEY_BIT.get('size')!;
const FRAMES_BIT = TRACE_KEY_BIT.get('frames')!;
const ACTION_BIT = TRACE_KEY_BIT.get('action')!;
const ADDRESS_BIT = TRACE_KEY_COUNT;
const REQUESTED_BIT = TRACE_KEY_COUNT + 1;
const STATE_BIT = TRACE_KEY_COUNT + 2;
// Then the segment keys that are neither trace nor block keys.
const DEVICE_BIT = TRACE_KEY_COUNT + 3;
const SEGMENT_ONLY_KEYS = ['device', 'total_size', 'allocated_size', 'active_size', 'segment_type', 'segment_pool_id', 'is_expandable', 'blocks'];
const LANE_KEY_BIT = new Map<unknown, number>([
  ...TRACE_KEY_BIT,
  ['address', ADDRESS_BIT],
  ['requested_size', REQUESTED_BIT],
  ['state', STATE_BIT],
  ...SEGMENT_ONLY_KEYS.map((k, i): [string, number] => [k, DEVICE_BIT + i]),
]);
/** Lane key bit → the key's bit in SEGMENT_KEYS, or -1 for a key segments do not have. */
const SEGMENT_BIT_OF_LANE_BIT = new Int8Array(DEVICE_BIT + SEGMENT_ONLY_KEYS.length).fill(-1);
for (const [key, bit] of SEGMENT_KEY_BIT) SEGMENT_BIT_OF_LANE_BIT[LANE_KEY_BIT.get(key)!] = bit;
const BLOCK_KEY_MASK = (1 << ADDRESS_BIT) | (1 << SIZE_BIT) | (1 << REQUESTED_BIT) | (1 << STATE_BIT) | (1 << FRAMES_BIT);
const BLOCK_REQUIRED_MASK = (1 << ADDRESS_BIT) | (1 << SIZE_BIT) | (1 << STATE_BIT);

/**
 * What the assembler spends per block it places (its row in the block columns, segment and index
 * columns): the cost charged when a file places a segment's blocks again by sharing it.
 */
const BLOCK_ROW_BYTES = 40;
/** Charged per shared node placed again, whatever it holds. */
const SHARED_NODE_BYTES = 16;

/** Slots of the frame-list byte cache (a power of two). */
const LIST_CACHE_SLOTS = 1 << 12;
/** log2 of the slots of the table that predicts the next frames list (`listAfter`). */
const LIST_CONTEXT_BITS = 14;
/** Most bytes of frame lists the cache keeps. */
const MAX_LIST_BYTES = 1 << 25;

function bitCount(x: number): number {
  x = x - ((x >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24);
}

// ---------------------------------------------------------------------------------------------
// The recognising builder (fast path)

export class SnapshotBuilder implements PickleBuilder {
  private memo = new PickleMemo();
  /** Per memo index: the kind of node a released entry was (its id is kept by the memo). */
  private releasedKind: Uint8Array;
  readonly memoCapacityHint: number;

  /**
   * `expectedMemo`: a guess from the file size (PyTorch memoizes ~1 value per 40–50 bytes).
   * `maxItems`: limits.maxContainerItems, which a list or dict filled by several APPENDS /
   * SETITEMS batches must not pass in total (the machine checks each batch).
   */
  constructor(
    private readonly t: SnapshotTables,
    expectedMemo = 0,
    private readonly maxItems = DEFAULT_PICKLE_LIMITS.maxContainerItems,
  ) {
    this.memoCapacityHint = expectedMemo;
    // Zero-filled lazily by the OS: capacity that is never used costs address space only.
    this.releasedKind = new Uint8Array(Math.min(expectedMemo, MAX_RELEASED_SLOT));
  }

  attachMemo(memo: PickleMemo): void {
    this.memo = memo;
  }

  onMemoize(value: unknown, index: number, replaced: boolean): void {
    if (value instanceof RawDict || value instanceof RawList) value.slot = index;
    // The caches below are keyed by memo index, so a re-PUT (also of a slot a lane filled) voids them.
    if (replaced) {
      this.memoReput = true;
      this.forgetMemoCaches();
    }
  }

  /** Whether the file has re-PUT a memo index (PyTorch never does; see appendItems). */
  private memoReput = false;

  private forgetMemoCaches(): void {
    this.keyCacheIndex.fill(-1);
    this.actionCacheIndex.fill(-1);
    this.typeCacheIndex.fill(-1);
    this.listSlotFirst.fill(-1);
    this.listSlotAligned.fill(-1);
    this.listAfter.fill(-1);
    this.recentLists.fill(-1);
    this.listBytesUsed = 0;
  }

  /**
   * The node's content now lives in the tables: drop the memo's reference so the node can be
   * collected young (PyTorch memoizes every dict and list, so otherwise every trace entry and
   * frame list would survive to the end of the read).
   */
  private release(node: RawDict | RawList, kind: number, id: number): void {
    const slot = node.slot;
    if (slot < 0 || slot >= MAX_RELEASED_SLOT || this.memo.valueAt(slot) !== node) return;
    this.releaseSlot(slot, kind, id);
  }

  /** `slot` is inside the memo's index (a lane checked it is free, or it holds the node released). */
  private releaseSlot(slot: number, kind: number, id: number): void {
    // Small enough for V8 to inline into the lanes; growing is rare and out of line.
    if (slot >= this.releasedKind.length) this.growReleasedKinds(slot);
    this.releasedKind[slot] = kind;
    this.memo.release(slot, id);
  }

  private growReleasedKinds(slot: number): void {
    const kinds = new Uint8Array(Math.max(slot + 1, this.releasedKind.length * 2, 1024));
    kinds.set(this.releasedKind);
    this.releasedKind = kinds;
  }

  /** See PickleBuilder.pendingCharge. */
  pendingCharge = 0;

  materialize(index: number, id: number): unknown {
    const kind = this.releasedKind[index]!;
    let node: RawDict | RawList;
    if (kind === SEGMENT || kind === SEGMENT_BLOCKS) {
      // A segment (or its blocks list) placed again is all its blocks again to the assembler: each
      // GET costs that, and the node is not put back in the memo, so every later GET does too.
      const t = this.t;
      const blocks = t.sBlockStart.data[id + 1]! - t.sBlockStart.data[id]!;
      this.pendingCharge += SHARED_NODE_BYTES + blocks * BLOCK_ROW_BYTES;
      if (kind === SEGMENT) {
        node = nodeFor(SEGMENT, id);
        node.slot = index;
        return node;
      }
    }
    if (kind === POOL_TUPLE) {
      // The segment lane stored the pair in the segment columns; the same tuple the machine makes.
      const t = this.t;
      const tuple = makeTuple([t.sPool0.data[id]!, t.sPool1.data[id]!]);
      this.memo.put(index, tuple);
      return tuple;
    }
    if (kind === STACK) {
      node = new RawList();
      node.stack = id;
      // Fetched again: whatever holds it took the stack as it is now (appendItems).
      node.sealed = true;
    } else if (kind === SEGMENT_BLOCKS) {
      node = new RawList();
      const t = this.t;
      const start = t.sBlockStart.data[id]!;
      const end = t.sBlockStart.data[id + 1]!;
      if (end > start) {
        node.ids = IdList.from(t.segmentBlocks.data.subarray(start, end));
        node.idKind = BLOCK;
      }
      node.sealed = true;
    } else node = nodeFor(kind, id);
    node.slot = index;
    // Later GETs see the same object again (a blocks list is rebuilt each time: see above).
    if (kind !== SEGMENT_BLOCKS) this.memo.put(index, node);
    return node;
  }

  newDict(): unknown {
    return new RawDict();
  }

  private laneFrames = new Int32Array(256);
  private laneGets = new Int32Array(256);
  private readonly laneStrings: string[] = [];
  private readonly laneStringSlots: number[] = [];
  /**
   * Frame lists seen before, recognised by their bytes. The same frames are the same memo entries,
   * so a list that repeats an earlier one repeats its bytes, and the bytes of `MARK GET… APPENDS`
   * fix its memo indices: equal bytes mean the same stack. Comparing bytes four at a time is
   * cheaper than decoding each GET, and trace entries (most of a big file) repeat a few hundred
   * stacks. A direct-mapped table keyed by a hash taken while stepping over the GETs; each slot
   * holds one list (its bytes in `listBytes`), verified byte for byte before it is used, so a
   * collision only costs a decode. Emptied if the file ever re-PUTs an existing memo index
   * (PyTorch never does), since the same bytes would then name other values.
   */
  private listBytes = new Uint8Array(256);
  private listWords = new Int32Array(this.listBytes.buffer);
  private listBytesUsed = 0;
  private readonly listSlotHash = new Int32Array(LIST_CACHE_SLOTS);
  private readonly listSlotSpan = new Int32Array(LIST_CACHE_SLOTS);
  private readonly listSlotGets = new Int32Array(LIST_CACHE_SLOTS);
  private readonly listSlotStack = new Int32Array(LIST_CACHE_SLOTS);
  /** Offset in `listBytes` of the slot's first copy of its list, or -1 for an empty slot. */
  private readonly listSlotFirst = new Int32Array(LIST_CACHE_SLOTS).fill(-1);
  /**
   * `[slot * 4 + phase]`: offset of a copy that starts at the same offset mod 4 as a list at that
   * phase in the source (made when first needed), so the two compare as aligned Int32 words; -1 if none.
   */
  private readonly listSlotAligned = new Int32Array(LIST_CACHE_SLOTS * 4).fill(-1);
  /**
   * The list that followed each context of three lists, by a hash of their cache slots (direct-
   * mapped, -1 if none); `recentLists` holds the slots of the last three lists read through the
   * cache, latest first. A training loop allocates from the same stacks in the same order step
   * after step, so the list after three known lists is most often the one that followed them
   * before: 85–87 % of lists in the fixtures' traces (48–80 % after one list alone).
   */
  private readonly listAfter = new Int32Array(1 << LIST_CONTEXT_BITS).fill(-1);
  private readonly recentLists = new Int32Array(3).fill(-1);
  /** The source's whole buffer as Int32 words, made once per piece (`sourceBytes`). */
  private sourceWords: Int32Array<ArrayBufferLike> = new Int32Array(0);
  private sourceBytes: Uint8Array | null = null;
  /** The source's bytes as a DataView, made once per piece (`sourceViewBytes`). */
  private sourceView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
  private sourceViewBytes: Uint8Array | null = null;

  private sourceViewOf(b: Uint8Array): DataView {
    if (this.sourceViewBytes !== b) {
      this.sourceViewBytes = b;
      this.sourceView = new DataView(b.buffer, b.byteOffset, b.byteLength);
    }
    return this.sourceView;
  }

  /** Direct-mapped cache: memo index of a key string → its LANE_KEY_BIT (keys are the same few memo entries). */
  private readonly keyCacheIndex = new Int32Array(256).fill(-1);
  private readonly keyCacheBit = new Uint8Array(256);
  /** Direct-mapped cache: memo index of an action name → its code in the tables. */
  private readonly actionCacheIndex = new Int32Array(256).fill(-1);
  private readonly actionCacheCode = new Uint8Array(256);

  // What `laneFramesValue` decoded, committed by `commitFrames` once the whole dict is accepted.
  /** Memo slot the value's new list takes, or -1 (a GET of an earlier list). */
  private lfListSlot = -1;
  /** Frames waiting in `laneFrames` to be interned, or -1 when `lfStack` is already the stack id. */
  private lfCount = -1;
  private lfStack = 0;
  /** Table slot to remember the decoded list in at commit, or -1; its bytes are at `lfBytesAt`. */
  private lfCacheSlot = -1;
  private lfCacheHash = 0;
  private lfBytesAt = 0;
  private lfBytesSpan = 0;
  /** What the general path would take from the maxBytes budget for the value. */
  private lfCharge = 0;

  /**
   * The fast lanes for the dicts that make up nearly all of a snapshot: trace entries and blocks.
   * PyTorch (CPython's pickler) writes each as
   *   EMPTY_DICT MEMOIZE MARK  (key value)*  SETITEMS
   * with keys as memo GETs of strings, ints as BININT / BININT1 / BININT2 / LONG1, strings as GETs
   * (or new strings followed by MEMOIZE), and `frames` as a new list `EMPTY_LIST MEMOIZE [MARK GET…
   * APPENDS | GET APPEND]` of memoized frame dicts, or a GET of an earlier list. The lanes decode
   * that shape straight from the bytes into the columns — no VM stack, no node per value — and give
   * up (-1, nothing changed) on anything else, leaving the dict to the general path, whose
   * `trace` / `block` recognisers accept exactly what the lanes accept and more.
   */
  fastDict(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    // A lane never throws for bad input (it gives up instead), so anything thrown here is a fault
    // of the lane itself: the whole file is read again by the general path rather than crash.
    try {
      return this.laneDict(b, at, memo, lane);
    } catch {
      throw new FastPathBail();
    }
  }

  private laneDict(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    const len = b.length;
    const p = at + 3;
    if (p + 1 > len || b[at + 1] !== 0x94 /* MEMOIZE */ || b[at + 2] !== 0x28 /* MARK */) return -1;
    // Cheap early exit for other dicts: the first key must be 'action' (trace) or 'address' (block).
    const first = this.laneKey(b, p, memo);
    if (first === ACTION_BIT) return this.fastTrace(b, at, memo, lane);
    if (first === ADDRESS_BIT) return this.fastBlock(b, at, memo, lane);
    if (first === DEVICE_BIT) return this.fastSegment(b, at, memo, lane);
    return -1;
  }

  /**
   * The int at p for the lanes (BININT1 / BININT2 / BININT, or a LONG1 that is a safe integer),
   * with `intEnd` set to the offset after it; NaN for anything else (NaN is no pickled int).
   */
  private intEnd = 0;
  private laneInt(b: Uint8Array, p: number): number {
    const len = b.length;
    const op = b[p];
    if (op === 0x4b /* BININT1 */ && p + 1 < len) {
      this.intEnd = p + 2;
      return b[p + 1]!;
    }
    if (op === 0x4d /* BININT2 */ && p + 2 < len) {
      this.intEnd = p + 3;
      return b[p + 1]! | (b[p + 2]! << 8);
    }
    if (op === 0x4a /* BININT */ && p + 4 < len) {
      this.intEnd = p + 5;
      return b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24);
    }
    if (op === 0x8a /* LONG1 */ && p + 1 < len) {
      const n = b[p + 1]!;
      if (n > 8 || p + 2 + n > len) return NaN;
      const x = decodeLong(b, p + 2, n);
      if (typeof x !== 'number') return NaN;
      this.intEnd = p + 2 + n;
      return x;
    }
    return NaN;
  }

  /**
   * A segment's int fields being read, by their SEGMENT_KEYS bit (device, address, total_size,
   * allocated_size, active_size, requested_size, stream); NaN for one not given (or None).
   */
  private readonly segmentInts = new Float64Array(7);

  /**
   * The memo index a BINGET / LONG_BINGET at p reads, or -1 (another opcode, or one the piece holds
   * only part of); `getEnd` gets the offset after it. For the segment lane and the frame-list
   * lane's rare parts: the trace and block lanes decode their GETs inline, since a call there
   * would spend the inlining budget V8 gives them (docs/PICKLE.md, "Where the time goes").
   */
  private getEnd = 0;
  private memoIndexAt(b: Uint8Array, p: number): number {
    const op = b[p];
    if (op === 0x68 /* BINGET */ && p + 1 < b.length) {
      this.getEnd = p + 2;
      return b[p + 1]!;
    }
    if (op === 0x6a /* LONG_BINGET */ && p + 4 < b.length) {
      this.getEnd = p + 5;
      return (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
    }
    return -1;
  }

  /** Direct-mapped cache: memo index of a segment_type string → its code in the tables. */
  private readonly typeCacheIndex = new Int32Array(64).fill(-1);
  private readonly typeCacheCode = new Int32Array(64);

  /**
   * The segment lane (see fastDict): a segment dict as `segment` accepts it, its blocks through
   * `fastBlock` and its frames through `laneFramesValue`, so that no key, value or block list goes
   * through the VM stack and no generic dict or pool tuple is made per segment. PyTorch writes
   *   EMPTY_DICT MEMOIZE MARK (key value)* SETITEMS
   * with keys as GETs, ints, `segment_type` as a GET or a new string, `segment_pool_id` as
   * `int int TUPLE2 MEMOIZE`, `is_expandable` as NEWTRUE / NEWFALSE, and `blocks` as
   * `EMPTY_LIST MEMOIZE` then nothing, one `block APPEND`, or `MARK block… APPENDS` batches.
   *
   * Unlike the other lanes it commits before it knows it will succeed: each block is pushed by
   * `fastBlock` as it is read. Giving up then undoes that (`abandonSegment`: the blocks dropped,
   * the memo entries taken emptied), so the general path finds everything as it was; interned
   * stacks and states stay, which changes no result.
   */
  private fastSegment(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    // Nesting: the segment's MARK, its blocks list's, a block's and that block's frames list's.
    if (lane.markRoom < 4) return -1;
    const len = b.length;
    const t = this.t;
    const firstSlot = lane.memoCount;
    const maxSpan = lane.maxSpan;
    const budget = lane.budget;
    const firstBlock = t.bSize.length;
    let p = at + 3;
    let charge = 0;
    let next = firstSlot;
    const dictSlot = next++;
    if (!memo.isFree(dictSlot)) return -1;
    let mask = 0;
    const ints = this.segmentInts.fill(NaN);
    let pool0 = NaN, pool1 = NaN;
    let poolSlot = -1;
    let type = -1;
    let typeString: string | null = null;
    let typeSlot = -1;
    let expandable = 2;
    let stack = 0;
    let blocksSlot = -1;
    let blockCount = 0;
    for (;;) {
      if (p >= len) return this.abandonSegment(memo, firstSlot, next, firstBlock);
      if (b[p] === 0x75 /* SETITEMS */) {
        p++;
        break;
      }
      const laneBit = this.laneKey(b, p, memo);
      const bit = laneBit < 0 ? -1 : SEGMENT_BIT_OF_LANE_BIT[laneBit]!;
      if (bit < 0 || mask & (1 << bit)) return this.abandonSegment(memo, firstSlot, next, firstBlock);
      mask |= 1 << bit;
      p = this.keyEnd;
      if (p >= len) return this.abandonSegment(memo, firstSlot, next, firstBlock);
      const op = b[p]!;
      if (bit < SEGMENT_INT_BITS) {
        // ints; None only where `segment` reads it as "not given"
        if (op === 0x4e /* NONE */ && (bit === SegmentBit.Device || bit === SegmentBit.RequestedSize || bit === SegmentBit.Stream)) p++;
        else {
          const v = this.laneInt(b, p);
          if (Number.isNaN(v)) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          ints[bit] = v;
          p = this.intEnd;
        }
      } else if (bit === SegmentBit.SegmentType) {
        // segment_type: a string seen before, or a new one
        const index = this.memoIndexAt(b, p);
        if (index >= 0) {
          p = this.getEnd;
          const cached = index & 63;
          if (this.typeCacheIndex[cached] === index) type = this.typeCacheCode[cached]!;
          else {
            const v = memo.valueAt(index);
            if (typeof v !== 'string') return this.abandonSegment(memo, firstSlot, next, firstBlock);
            type = t.segmentTypeCode(v);
            this.typeCacheIndex[cached] = index;
            this.typeCacheCode[cached] = type;
          }
        } else if (op === 0x8c /* SHORT_BINUNICODE */ && p + 1 < len) {
          const n = b[p + 1]!;
          if (p + 2 + n >= len || b[p + 2 + n] !== 0x94 /* MEMOIZE */) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          typeSlot = next++;
          if (!memo.isFree(typeSlot)) return this.abandonSegment(memo, firstSlot, next - 1, firstBlock);
          typeString = decodeUtf8(b, p + 2, p + 2 + n);
          type = t.segmentTypeCode(typeString);
          charge += n + 16;
          p += 3 + n;
        } else return this.abandonSegment(memo, firstSlot, next, firstBlock);
      } else if (bit === SegmentBit.SegmentPoolId) {
        // segment_pool_id: None, `int int TUPLE2 MEMOIZE`, or a GET of such a pair
        if (op === 0x4e /* NONE */) p++;
        else if (op === 0x68 /* BINGET */ || op === 0x6a /* LONG_BINGET */) {
          const index = this.memoIndexAt(b, p);
          if (index < 0) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          p = this.getEnd;
          const released = memo.releasedId(index);
          if (released >= 0 && this.releasedKind[index] === POOL_TUPLE) {
            pool0 = t.sPool0.data[released]!;
            pool1 = t.sPool1.data[released]!;
          } else {
            const v = memo.valueAt(index);
            if (!Array.isArray(v) || v.length !== 2 || !safeInt(v[0]) || !safeInt(v[1])) return this.abandonSegment(memo, firstSlot, next, firstBlock);
            pool0 = v[0];
            pool1 = v[1];
          }
        } else {
          pool0 = this.laneInt(b, p);
          if (Number.isNaN(pool0)) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          pool1 = this.laneInt(b, this.intEnd);
          if (Number.isNaN(pool1)) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          p = this.intEnd;
          if (p + 1 >= len || b[p] !== 0x86 /* TUPLE2 */ || b[p + 1] !== 0x94 /* MEMOIZE */) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          poolSlot = next++;
          if (!memo.isFree(poolSlot)) return this.abandonSegment(memo, firstSlot, next - 1, firstBlock);
          p += 2;
        }
      } else if (bit === SegmentBit.IsExpandable) {
        if (op === 0x88 /* NEWTRUE */) expandable = 1;
        else if (op === 0x89 /* NEWFALSE */) expandable = 0;
        else return this.abandonSegment(memo, firstSlot, next, firstBlock);
        p++;
      } else if (bit === SegmentBit.Frames) {
        // frames: None, or a frames list (interned now: a block's frames reuse the lf* fields)
        if (op === 0x4e /* NONE */) {
          stack = 0;
          p++;
        } else {
          p = this.laneFramesValue(b, p, memo, next);
          if (p < 0) return this.abandonSegment(memo, firstSlot, next, firstBlock);
          charge += this.lfCharge;
          stack = this.commitFrames(b);
          if (this.lfListSlot >= 0) {
            next++;
            this.releaseSlot(this.lfListSlot, STACK, stack);
          }
        }
      } else {
        // blocks: None, or a new list of blocks
        if (op === 0x4e /* NONE */) {
          p++;
          continue;
        }
        if (op !== 0x5d /* EMPTY_LIST */ || p + 2 >= len || b[p + 1] !== 0x94 /* MEMOIZE */) return this.abandonSegment(memo, firstSlot, next, firstBlock);
        blocksSlot = next++;
        if (!memo.isFree(blocksSlot)) return this.abandonSegment(memo, firstSlot, next - 1, firstBlock);
        charge += 64;
        p += 2;
        if (b[p] === 0x7d /* EMPTY_DICT */) {
          // one block: `block APPEND`
          p = this.laneBlock(b, p, memo, lane, next, budget - charge);
          if (p < 0 || p >= len || b[p] !== 0x61 /* APPEND */) return this.abandonSegment(memo, firstSlot, Math.max(next, lane.memoCount), firstBlock);
          next = lane.memoCount;
          charge += lane.charge + 16;
          blockCount = 1;
          p++;
        } else {
          // `MARK block… APPENDS` batches (PyTorch's pickler writes 1000 per batch)
          while (p < len && b[p] === 0x28 /* MARK */) {
            p++;
            let batch = 0;
            while (p < len && b[p] === 0x7d /* EMPTY_DICT */) {
              p = this.laneBlock(b, p, memo, lane, next, budget - charge);
              if (p < 0) return this.abandonSegment(memo, firstSlot, next, firstBlock);
              next = lane.memoCount;
              charge += lane.charge;
              batch++;
            }
            if (p >= len || b[p] !== 0x65 /* APPENDS */) return this.abandonSegment(memo, firstSlot, next, firstBlock);
            p++;
            charge += 8 * batch;
            blockCount += batch;
          }
        }
      }
    }
    if (Number.isNaN(ints[SegmentBit.Address]!) || Number.isNaN(ints[SegmentBit.TotalSize]!) || next > lane.maxMemoEntries) return this.abandonSegment(memo, firstSlot, next, firstBlock);
    // SETITEMS takes 8 per key and per value.
    charge += 16 * bitCount(mask);
    if (p - at > maxSpan || charge > budget) return this.abandonSegment(memo, firstSlot, next, firstBlock);
    // Commit (the blocks are in already).
    const id = t.pushSegment(mask, ints, type, pool0, pool1, expandable, stack, null, firstBlock, blockCount);
    this.releaseSlot(dictSlot, SEGMENT, id);
    if (blocksSlot >= 0) this.releaseSlot(blocksSlot, SEGMENT_BLOCKS, id);
    if (poolSlot >= 0) this.releaseSlot(poolSlot, POOL_TUPLE, id);
    if (typeSlot >= 0) memo.put(typeSlot, typeString);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(SEGMENT, id);
    return p;
  }

  /**
   * `fastBlock` at p for the segment lane, with memo slots from `next` and `budget` left. Sets
   * lane.memoCount, and lane.charge including the 64 the machine takes for EMPTY_DICT before a lane.
   */
  private laneBlock(b: Uint8Array, p: number, memo: PickleMemo, lane: FastLane, next: number, budget: number): number {
    lane.memoCount = next;
    lane.budget = budget - 64;
    const end = this.fastBlock(b, p, memo, lane);
    lane.charge += 64;
    return end;
  }

  /** The segment lane gives up: undoes what it committed (blocks from `firstBlock`, memo entries [fromSlot, toSlot)). */
  private abandonSegment(memo: PickleMemo, fromSlot: number, toSlot: number, firstBlock: number): number {
    memo.forget(fromSlot, toSlot);
    this.t.truncateBlocks(firstBlock);
    return -1;
  }

  /** Bit of the key string GET at p (BINGET / LONG_BINGET), or -1; `keyEnd` gets the offset after it. */
  private keyEnd = 0;
  private laneKey(b: Uint8Array, p: number, memo: PickleMemo): number {
    const len = b.length;
    let keyIndex: number;
    if (b[p] === 0x68 /* BINGET */ && p + 1 < len) {
      keyIndex = b[p + 1]!;
      this.keyEnd = p + 2;
    } else if (b[p] === 0x6a /* LONG_BINGET */ && p + 4 < len) {
      keyIndex = (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
      this.keyEnd = p + 5;
    } else return -1;
    const keySlot = keyIndex & 255;
    if (this.keyCacheIndex[keySlot] === keyIndex) return this.keyCacheBit[keySlot]!;
    const bit = LANE_KEY_BIT.get(memo.valueAt(keyIndex));
    if (bit === undefined) return -1;
    this.keyCacheIndex[keySlot] = keyIndex;
    this.keyCacheBit[keySlot] = bit;
    return bit;
  }

  /** The trace-entry lane (see fastDict) for the dict at `at`. */
  private fastTrace(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    const len = b.length;
    let p = at + 3;
    let charge = 0;
    const t = this.t;
    let next = lane.memoCount;
    const dictSlot = next++;
    if (!memo.isFree(dictSlot)) return -1;
    let mask = 0;
    let action: unknown = undefined;
    let actionCode = -1;
    /** Memo index of an action name to remember at commit, or -1. */
    let actionIndex = -1;
    let addr = 0;
    let size = 0;
    let stream = 0;
    let time = NaN;
    let deviceFree = NaN;
    let compile: string | null = null;
    let user: string | null = null;
    let hasFrames = false;
    let newStrings = 0;
    for (;;) {
      if (p >= len) return -1;
      if (b[p] === 0x75 /* SETITEMS */) {
        p++;
        break;
      }
      const bit = this.laneKey(b, p, memo);
      if (bit < 0 || bit >= TRACE_KEY_COUNT || mask & (1 << bit)) return -1;
      mask |= 1 << bit;
      p = this.keyEnd;
      if (p >= len) return -1;
      const op = b[p]!;
      if (bit === TraceBit.Frames) {
        p = this.laneFramesValue(b, p, memo, next);
        if (p < 0) return -1;
        if (this.lfListSlot >= 0) next++;
        charge += this.lfCharge;
        hasFrames = true;
        continue;
      }
      if (bit === TraceBit.Action || bit === TraceBit.CompileContext || bit === TraceBit.UserMetadata) {
        // strings
        let v: unknown;
        let index = -1;
        if (op === 0x68 && p + 1 < len) {
          index = b[p + 1]!;
          p += 2;
        } else if (op === 0x6a && p + 4 < len) {
          index = (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
          p += 5;
        }
        if (index >= 0) {
          if (bit === TraceBit.Action && this.actionCacheIndex[index & 255] === index) {
            // an action name seen before: its code, without looking the string up again
            actionCode = this.actionCacheCode[index & 255]!;
            actionIndex = -1;
            continue;
          }
          v = memo.valueAt(index);
          if (bit === TraceBit.Action) actionIndex = index;
        } else if (op === 0x8c /* SHORT_BINUNICODE */ && bit !== TraceBit.Action && p + 1 < len) {
          const n = b[p + 1]!;
          if (p + 2 + n >= len || b[p + 2 + n] !== 0x94 /* MEMOIZE */) return -1;
          v = decodeUtf8(b, p + 2, p + 2 + n);
          const slot = next++;
          if (!memo.isFree(slot)) return -1;
          this.laneStrings[newStrings] = v as string;
          this.laneStringSlots[newStrings++] = slot;
          charge += n + 16;
          p += 3 + n;
        } else return -1;
        if (typeof v !== 'string') return -1;
        if (bit === TraceBit.Action) action = v;
        else if (bit === TraceBit.CompileContext) compile = v;
        else user = v;
        continue;
      }
      // ints: addr, size, stream, time_us, device_free
      let v: number;
      if (op === 0x4b /* BININT1 */ && p + 1 < len) {
        v = b[p + 1]!;
        p += 2;
      } else if (op === 0x4d /* BININT2 */ && p + 2 < len) {
        v = b[p + 1]! | (b[p + 2]! << 8);
        p += 3;
      } else if (op === 0x4a /* BININT */ && p + 4 < len) {
        v = b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24);
        p += 5;
      } else if (op === 0x8a /* LONG1 */ && p + 1 < len) {
        const n = b[p + 1]!;
        if (n > 8 || p + 2 + n > len) return -1;
        if (n >= 5 && n <= 7 && b[p + 1 + n]! < 0x80) {
          // Addresses and times (5–7 bytes, not negative; two per entry): the low four bytes as
          // one word and the rest above them, instead of decodeLong's byte-by-byte loop.
          const lo = (b[p + 2]! | (b[p + 3]! << 8) | (b[p + 4]! << 16) | (b[p + 5]! << 24)) >>> 0;
          const hi = n === 5 ? b[p + 6]! : n === 6 ? b[p + 6]! | (b[p + 7]! << 8) : b[p + 6]! | (b[p + 7]! << 8) | (b[p + 8]! << 16);
          if (hi >= 0x200000) return -1; // 2^53 or more: a BigInt, which the general path makes
          v = hi * 0x100000000 + lo;
        } else {
          const x = decodeLong(b, p + 2, n);
          if (typeof x !== 'number') return -1;
          v = x;
        }
        p += 2 + n;
      } else return -1;
      if (bit === TraceBit.Addr) addr = v;
      else if (bit === TraceBit.Size) size = v;
      else if (bit === TraceBit.Stream) stream = v;
      else if (bit === TraceBit.TimeUs) time = v;
      else deviceFree = v;
    }
    if ((mask & TRACE_REQUIRED_MASK) !== TRACE_REQUIRED_MASK || next > lane.maxMemoEntries) return -1;
    // SETITEMS takes 8 per key and per value.
    charge += 16 * bitCount(mask);
    if (p - at > lane.maxSpan || charge > lane.budget) return -1;
    // Commit.
    const stack = hasFrames ? this.commitFrames(b) : 0;
    t.traceKeyMask |= mask;
    if (actionCode < 0) {
      actionCode = t.actionCode(action as string);
      if (actionIndex >= 0) {
        this.actionCacheIndex[actionIndex & 255] = actionIndex;
        this.actionCacheCode[actionIndex & 255] = actionCode;
      }
    }
    const entry = t.traceEntry;
    entry[ENTRY_ADDR] = addr;
    entry[ENTRY_SIZE] = size;
    entry[ENTRY_STREAM] = stream;
    entry[ENTRY_TIME] = time;
    entry[ENTRY_DEVICE_FREE] = deviceFree;
    const id = t.pushTraceEntry(actionCode, stack, compile === null ? -1 : t.string(compile), user === null ? -1 : t.string(user));
    this.releaseSlot(dictSlot, TRACE, id);
    if (hasFrames && this.lfListSlot >= 0) this.releaseSlot(this.lfListSlot, STACK, stack);
    for (let i = 0; i < newStrings; i++) memo.put(this.laneStringSlots[i]!, this.laneStrings[i]);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(TRACE, id);
    return p;
  }

  /**
   * The block lane (see fastDict): `{address, size, requested_size?, state, frames?}` as
   * `SnapshotBuilder.block` accepts it (any other key, e.g. legacy `history`, goes generic).
   */
  private fastBlock(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    const len = b.length;
    // The segment lane calls this at any EMPTY_DICT among a segment's blocks: the two opcodes
    // stepped over must be the MEMOIZE and MARK the lane stands for, not whatever a file puts there.
    if (at + 3 >= len || b[at + 1] !== 0x94 /* MEMOIZE */ || b[at + 2] !== 0x28 /* MARK */) return -1;
    let p = at + 3;
    let charge = 0;
    let next = lane.memoCount;
    const dictSlot = next++;
    if (!memo.isFree(dictSlot)) return -1;
    let mask = 0;
    let address = 0;
    let size = 0;
    let requested = 0;
    let state: unknown = undefined;
    let newState = -1;
    let hasFrames = false;
    for (;;) {
      if (p >= len) return -1;
      if (b[p] === 0x75 /* SETITEMS */) {
        p++;
        break;
      }
      const bit = this.laneKey(b, p, memo);
      if (bit < 0 || ((1 << bit) & BLOCK_KEY_MASK) === 0 || mask & (1 << bit)) return -1;
      mask |= 1 << bit;
      p = this.keyEnd;
      if (p >= len) return -1;
      const op = b[p]!;
      if (bit === FRAMES_BIT) {
        p = this.laneFramesValue(b, p, memo, next);
        if (p < 0) return -1;
        if (this.lfListSlot >= 0) next++;
        charge += this.lfCharge;
        hasFrames = true;
        continue;
      }
      if (bit === STATE_BIT) {
        if (op === 0x68 && p + 1 < len) {
          state = memo.valueAt(b[p + 1]!);
          p += 2;
        } else if (op === 0x6a && p + 4 < len) {
          state = memo.valueAt((b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0);
          p += 5;
        } else if (op === 0x8c /* SHORT_BINUNICODE */ && p + 1 < len) {
          const n = b[p + 1]!;
          if (p + 2 + n >= len || b[p + 2 + n] !== 0x94 /* MEMOIZE */) return -1;
          state = decodeUtf8(b, p + 2, p + 2 + n);
          newState = next++;
          if (!memo.isFree(newState)) return -1;
          charge += n + 16;
          p += 3 + n;
        } else return -1;
        if (typeof state !== 'string') return -1;
        continue;
      }
      // ints: address, size, requested_size
      let v: number;
      if (op === 0x4b /* BININT1 */ && p + 1 < len) {
        v = b[p + 1]!;
        p += 2;
      } else if (op === 0x4d /* BININT2 */ && p + 2 < len) {
        v = b[p + 1]! | (b[p + 2]! << 8);
        p += 3;
      } else if (op === 0x4a /* BININT */ && p + 4 < len) {
        v = b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24);
        p += 5;
      } else if (op === 0x8a /* LONG1 */ && p + 1 < len) {
        const n = b[p + 1]!;
        if (n > 8 || p + 2 + n > len) return -1;
        const x = decodeLong(b, p + 2, n);
        if (typeof x !== 'number') return -1;
        v = x;
        p += 2 + n;
      } else return -1;
      if (bit === ADDRESS_BIT) address = v;
      else if (bit === SIZE_BIT) size = v;
      else requested = v;
    }
    if ((mask & BLOCK_REQUIRED_MASK) !== BLOCK_REQUIRED_MASK || next > lane.maxMemoEntries) return -1;
    charge += 16 * bitCount(mask);
    if (p - at > lane.maxSpan || charge > lane.budget) return -1;
    // Commit.
    const t = this.t;
    const stack = hasFrames ? this.commitFrames(b) : 0;
    const id = t.pushBlock(address, size, mask & (1 << REQUESTED_BIT) ? requested : size, t.stateCode(state as string), stack);
    this.releaseSlot(dictSlot, BLOCK, id);
    if (hasFrames && this.lfListSlot >= 0) this.releaseSlot(this.lfListSlot, STACK, stack);
    if (newState >= 0) memo.put(newState, state);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(BLOCK, id);
    return p;
  }

  /**
   * Decodes a `frames` value at p for the lanes — a new list of memoized frame dicts, or a GET of
   * an earlier frames list — into the lf* fields without changing anything; `slot` is the memo
   * slot a new list takes. Returns the offset after the value, or -1 for anything else.
   */
  private laneFramesValue(b: Uint8Array, p: number, memo: PickleMemo, slot: number): number {
    const len = b.length;
    this.lfListSlot = -1;
    this.lfCount = -1;
    this.lfCacheSlot = -1;
    this.lfCharge = 0;
    const op = b[p]!;
    if (op !== 0x5d /* EMPTY_LIST */) return this.laneFramesGet(b, p, memo);
    if (p + 2 > len || b[p + 1] !== 0x94 /* MEMOIZE */ || !memo.isFree(slot)) return -1;
    this.lfListSlot = slot;
    this.lfCharge = 64; // EMPTY_LIST
    p += 2;
    if (p >= len) return -1;
    const c0 = b[p]!;
    if (c0 === 0x28 /* MARK */) {
      p++;
      const lim = len - 5;
      // First the list that followed the same three lists before (`listAfter`): its bytes compared
      // where this list starts, and an APPENDS byte after them. Equal bytes are the same whole GETs
      // (the cached copy was read GET by GET), so the byte after them is an opcode, and this list
      // ends there. That skips the step over the GETs below: −250 M of 5.52 G instructions in a
      // `summary` of the 97 MB bench file, where 89 % of lists are guessed right.
      const guess = this.listAfter[this.listContext()]!;
      if (guess >= 0 && this.listSlotFirst[guess]! >= 0) {
        const end = p + this.listSlotSpan[guess]!;
        if (end < lim && b[end] === 0x65 /* APPENDS */ && this.isKnownList(b, p, end - p, guess)) {
          this.listFollows(guess);
          return this.knownListEnd(b, end, guess);
        }
      }
      // Step over the GETs to the APPENDS, hashing the low bytes of each index, and look the bytes
      // up among the lists seen before. Stops 5 bytes short of the piece's end, so no read passes
      // it; a list that reaches that far is decoded by laneFramesDecode.
      // One 4-byte read per GET (its opcode and the low bytes of its index): TurboFan checks
      // bounds and reloads the view's fields on every access in this loop, so fewer accesses is
      // what makes it cheaper.
      const view = this.sourceViewOf(b);
      let q = p;
      let h = 0;
      while (q < lim) {
        const w = view.getUint32(q, true);
        const c = w & 0xff;
        if (c === 0x6a /* LONG_BINGET */) {
          h = Math.imul(h ^ (w >>> 8), 0x01000193);
          q = (q + 5) | 0;
        } else if (c === 0x68 /* BINGET */) {
          h = Math.imul(h ^ ((w >>> 8) & 0xff), 0x01000193);
          q = (q + 2) | 0;
        } else break;
      }
      if (q < lim && b[q] === 0x65 /* APPENDS */ && q > p) {
        const span = q - p;
        h = Math.imul(h ^ span, 0x85ebca6b);
        h ^= h >>> 15;
        const cacheSlot = h & (LIST_CACHE_SLOTS - 1);
        if (this.listSlotFirst[cacheSlot]! >= 0 && this.listSlotHash[cacheSlot] === h && this.listSlotSpan[cacheSlot] === span && this.isKnownList(b, p, span, cacheSlot)) {
          this.listFollows(cacheSlot);
          return this.knownListEnd(b, q, cacheSlot);
        }
        this.lfCacheSlot = cacheSlot;
        this.lfCacheHash = h;
        this.lfBytesAt = p;
        this.lfBytesSpan = span;
      }
      return this.laneFramesDecode(b, p, memo);
    }
    let f: unknown;
    if (c0 === 0x68 && p + 2 < len && b[p + 2] === 0x61 /* APPEND */) {
      f = memo.valueAt(b[p + 1]!);
      p += 3;
    } else if (c0 === 0x6a && p + 5 < len && b[p + 5] === 0x61) {
      f = memo.valueAt((b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0);
      p += 6;
    } else {
      // an empty list: the next key follows
      this.lfCount = 0;
      return p;
    }
    if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
    this.laneFrames[0] = f.id;
    this.lfCount = 1;
    this.lfCharge += 16; // APPEND
    return p;
  }

  // The two parts of laneFramesValue that run rarely, kept out of it: V8 compiles (and inlines)
  // a function in time roughly in proportion to its size, and laneFramesValue runs once per
  // trace entry from the first megabytes of a file on, so every millisecond its compile takes is
  // spent running it unoptimised.

  /** The `listAfter` index of the last three lists. */
  private listContext(): number {
    const r = this.recentLists;
    return (Math.imul(r[0]!, 0x9e3779b1) ^ Math.imul(r[1]!, 0x85ebca77) ^ Math.imul(r[2]!, 0xc2b2ae3d)) >>> (32 - LIST_CONTEXT_BITS);
  }

  /** Records that the list in the cache slot came after the last three. */
  private listFollows(cacheSlot: number): void {
    const r = this.recentLists;
    this.listAfter[this.listContext()] = cacheSlot;
    r[2] = r[1]!;
    r[1] = r[0]!;
    r[0] = cacheSlot;
  }

  /** A frames list found in the cache, whose APPENDS is at q: its stack; returns the offset after it. */
  private knownListEnd(b: Uint8Array, q: number, cacheSlot: number): number {
    // A second APPENDS batch (> 1000 frames) is left to the general path.
    if (b[q + 1] === 0x28 /* MARK */) return -1;
    this.lfCharge += 8 * this.listSlotGets[cacheSlot]!; // APPENDS
    this.lfStack = this.listSlotStack[cacheSlot]!;
    return q + 1;
  }

  /** `frames` as a GET of a list seen before (laneFramesValue). */
  private laneFramesGet(b: Uint8Array, p: number, memo: PickleMemo): number {
    const i = this.memoIndexAt(b, p);
    if (i < 0) return -1;
    p = this.getEnd;
    const released = memo.releasedId(i);
    if (released >= 0) {
      if (this.releasedKind[i] !== STACK) return -1;
      this.lfStack = released;
    } else {
      // A list the general path made, taken as the general path takes it (interned if need be,
      // and sealed; should the lane give up, the general path would do the same). PyTorch writes
      // one empty `frames` list for all blocks and segments without a stack (one object in every
      // fixture); first met where the general path reads (new key strings), it has no stack yet.
      const stack = this.stackOf(memo.valueAt(i));
      if (stack < 0) return -1;
      this.lfStack = stack;
    }
    return p;
  }

  /** A `MARK GET… APPENDS` frames list not seen before (laneFramesValue): its memo indices, each checked to be a frame. */
  private laneFramesDecode(b: Uint8Array, p: number, memo: PickleMemo): number {
    const len = b.length;
    let gets = this.laneGets;
    let n = 0;
    for (;;) {
      if (p >= len) return -1;
      if (b[p] === 0x65 /* APPENDS */) {
        p++;
        break;
      }
      const i = this.memoIndexAt(b, p);
      if (i < 0) return -1;
      p = this.getEnd;
      if (n === gets.length) {
        const grown = new Int32Array(n * 2);
        grown.set(gets);
        this.laneGets = gets = grown;
      }
      gets[n++] = i;
    }
    // A second APPENDS batch (> 1000 frames). A lone `GET APPEND` after it fails as the next key.
    if (p < len && b[p] === 0x28 /* MARK */) return -1;
    this.lfCharge += 8 * n; // APPENDS
    if (this.laneFrames.length < n) this.laneFrames = new Int32Array(n * 2);
    const frames = this.laneFrames;
    for (let k = 0; k < n; k++) {
      const f = memo.valueAt(gets[k]!);
      if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
      frames[k] = f.id;
    }
    this.lfCount = n;
    return p;
  }

  /**
   * The lane for a frames list that is not inside a trace entry or block (a segment's `frames`):
   * `EMPTY_LIST MEMOIZE MARK GET… APPENDS` of memoized frame dicts becomes the interned stack that
   * `appendItems` would make of it — same node, same released memo slot — without the VM stack.
   */
  fastList(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    // As fastDict: a fault of the lane sends the file to the general path.
    try {
      return this.laneList(b, at, memo, lane);
    } catch {
      throw new FastPathBail();
    }
  }

  private laneList(b: Uint8Array, at: number, memo: PickleMemo, lane: FastLane): number {
    if (at + 4 > b.length || b[at + 1] !== 0x94 /* MEMOIZE */ || b[at + 2] !== 0x28 /* MARK */) return -1;
    const c = b[at + 3];
    if (c !== 0x68 /* BINGET */ && c !== 0x6a /* LONG_BINGET */) return -1;
    const slot = lane.memoCount;
    if (slot + 1 > lane.maxMemoEntries) return -1;
    const end = this.laneFramesValue(b, at, memo, slot);
    // (The machine took EMPTY_LIST's 64 already.)
    if (end < 0 || this.lfCount === 0 || end - at > lane.maxSpan || this.lfCharge - 64 > lane.budget) return -1;
    const stack = this.commitFrames(b);
    const node = new RawList();
    node.stack = stack;
    node.slot = slot;
    this.releaseSlot(slot, STACK, stack);
    lane.memoCount = slot + 1;
    lane.charge = this.lfCharge - 64;
    lane.value = node;
    return end;
  }

  /** Interns what `laneFramesValue` decoded (and remembers its bytes); returns the stack id. */
  private commitFrames(b: Uint8Array): number {
    const n = this.lfCount;
    if (n < 0) return this.lfStack;
    const stack = n === 0 ? 0 : this.t.internStack(this.laneFrames, n);
    const cacheSlot = this.lfCacheSlot;
    if (cacheSlot >= 0) {
      const at = this.keepListBytes(b, this.lfBytesAt, this.lfBytesSpan);
      if (at >= 0) {
        this.listSlotHash[cacheSlot] = this.lfCacheHash;
        this.listSlotSpan[cacheSlot] = this.lfBytesSpan;
        this.listSlotGets[cacheSlot] = n;
        this.listSlotStack[cacheSlot] = stack;
        this.listSlotFirst[cacheSlot] = at;
        const aligned = cacheSlot * 4;
        this.listSlotAligned.fill(-1, aligned, aligned + 4);
        this.listSlotAligned[aligned + (at & 3)] = at;
        this.listFollows(cacheSlot);
      }
    }
    return stack;
  }

  /**
   * Copies `b[p, p + span)` into `listBytes` at an offset with the same phase mod 4 as the source;
   * returns it, or -1 once the cache holds its maximum (a file of all-distinct lists must not grow
   * it forever).
   */
  private keepListBytes(b: Uint8Array, p: number, span: number): number {
    const used = this.listBytesUsed;
    const at = used + ((b.byteOffset + p - used) & 3);
    if (at + span > MAX_LIST_BYTES) return -1;
    if (at + span > this.listBytes.length) {
      // A whole number of Int32 words: `listWords` views the same buffer.
      const bytes = (Math.max(at + span, this.listBytes.length * 2) + 3) & ~3;
      const grown = new Uint8Array(Math.min(MAX_LIST_BYTES, bytes));
      grown.set(this.listBytes.subarray(0, used));
      this.listBytes = grown;
      this.listWords = new Int32Array(grown.buffer);
    }
    this.listBytes.set(b.subarray(p, p + span), at);
    this.listBytesUsed = at + span;
    return at;
  }

  /**
   * Whether `b[p, p + span)` is the list the cache slot holds: compared as Int32 words against a
   * copy at the same phase mod 4 (made from the first copy, byte by byte, the first time a list
   * turns up at a new phase).
   */
  private isKnownList(b: Uint8Array, p: number, span: number, cacheSlot: number): boolean {
    const base = b.byteOffset + p;
    const alignedSlot = cacheSlot * 4 + (base & 3);
    let at = this.listSlotAligned[alignedSlot]!;
    const kept = this.listBytes;
    if (at < 0) {
      const first = this.listSlotFirst[cacheSlot]!;
      for (let k = 0; k < span; k++) if (b[p + k] !== kept[first + k]) return false;
      at = this.keepListBytes(b, p, span);
      if (at >= 0) this.listSlotAligned[alignedSlot] = at;
      return true;
    }
    if (this.sourceBytes !== b) {
      this.sourceBytes = b;
      this.sourceWords = new Int32Array(b.buffer, 0, b.buffer.byteLength >> 2);
    }
    const src = this.sourceWords;
    const words = this.listWords;
    const head = Math.min(span, (4 - (base & 3)) & 3);
    let k = 0;
    for (; k < head; k++) if (b[p + k] !== kept[at + k]) return false;
    const w = (span - head) >> 2;
    const s0 = (base + head) >> 2;
    const k0 = (at + head) >> 2;
    for (let i = 0; i < w; i++) if (src[s0 + i] !== words[k0 + i]) return false;
    for (k = head + 4 * w; k < span; k++) if (b[p + k] !== kept[at + k]) return false;
    return true;
  }

  newList(): unknown {
    return new RawList();
  }

  appendItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!(target instanceof RawList)) throw pickleError('pickle-corrupt', at, 'APPEND target is not a list');
    // Sealed: a segment's blocks list, or a frames list whose stack a trace entry, block or segment
    // has taken, extended afterwards (no pickler does; a hand-made file can). What took it would
    // keep the shorter list, so the generic reader reads the file instead.
    if (target.sealed) throw new FastPathBail();
    if (target.stack >= 0) {
      // Interned at its first APPENDS and now extended: a stack longer than one batch (CPython
      // writes 1000 items per APPENDS). The first APPENDS released the memo slot with the shorter
      // stack, so the slot takes the list back, or a later GET would fetch the first 1000 frames
      // only. If the slot no longer holds that release (re-PUT since), leave it to the generic reader.
      const slot = target.slot;
      if (slot >= 0 && this.memo.valueAt(slot) !== target) {
        if (this.memoReput || this.memo.releasedId(slot) !== target.stack || this.releasedKind[slot] !== STACK) throw new FastPathBail();
        this.memo.put(slot, target);
      }
      target.items = this.frameNodesOf(target.stack);
      target.stack = -1;
    }
    const n = end - start;
    if (target.items === null && target.ids === null && n > 0) {
      // A list filled by one APPENDS that holds only frames is a stack: intern it now and keep no
      // array (the common case — one list per block / trace entry).
      const ids = this.t.scratchFor(n);
      let frames = true;
      for (let i = 0; i < n; i++) {
        const f = stack[start + i];
        if (!(f instanceof RawDict) || f.kind !== FRAME) {
          frames = false;
          break;
        }
        ids[i] = f.id;
      }
      if (frames) {
        target.stack = this.t.internStack(ids, n);
        this.release(target, STACK, target.stack);
        return;
      }
    }
    for (let i = start; i < end; i++) {
      const x = stack[i];
      if (target.items === null && x instanceof RawDict && (x.kind === TRACE || x.kind === BLOCK || x.kind === SEGMENT) && (target.ids === null || target.idKind === x.kind)) {
        if (target.ids === null) {
          target.ids = new IdList();
          target.idKind = x.kind;
        }
        target.ids.push(x.id);
        continue;
      }
      if (x instanceof RawDict || x instanceof RawList) this.placed(x);
      if (target.items === null) {
        target.items = [];
        if (target.ids !== null) {
          // Mixed list: turn the ids back into nodes.
          const ids = target.ids.view();
          for (let k = 0; k < ids.length; k++) target.items.push(nodeFor(target.idKind, ids[k]!));
          target.ids = null;
        }
      }
      target.items.push(x);
    }
    const size = target.items !== null ? target.items.length : target.ids !== null ? target.ids.length : 0;
    if (size > this.maxItems) throw pickleError('pickle-limit', at, `list with more than ${this.maxItems} items`);
  }

  private readonly frameNodes: RawDict[] = [];
  private frameNodesOf(stack: number): RawDict[] {
    const t = this.t;
    const out: RawDict[] = [];
    for (let k = t.stackOffsets.data[stack]!; k < t.stackOffsets.data[stack + 1]!; k++) {
      const id = t.stackFrames.data[k]!;
      out.push((this.frameNodes[id] ??= nodeFor(FRAME, id)));
    }
    return out;
  }

  setItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!(target instanceof RawDict)) throw pickleError('pickle-corrupt', at, 'SETITEMS target is not a dict');
    if (target.kind !== GENERIC) throw new FastPathBail(); // a recognised dict being modified again
    if (target.map === null) {
      const first = stack[start];
      let kind = GENERIC;
      let id = -1;
      if (first === 'action') (kind = TRACE), (id = this.trace(stack, start, end));
      else if (end - start === 6 && (first === 'name' || first === 'filename' || first === 'line')) (kind = FRAME), (id = this.frame(stack, start, end));
      else if (first === 'device') (kind = SEGMENT), (id = this.segment(stack, start, end));
      else if (first === 'address' || first === 'size') (kind = BLOCK), (id = this.block(stack, start, end));
      if (id >= 0) {
        target.kind = kind;
        target.id = id;
        // Frames stay in the memo: later frame lists GET them over and over.
        if (kind !== FRAME) this.release(target, kind, id);
        return;
      }
      target.map = new Map();
    }
    const map = target.map;
    for (let i = start; i < end; i += 2) {
      const key = stack[i];
      if (key instanceof RawDict || key instanceof RawList || key instanceof Map || (key instanceof Set && !Object.isFrozen(key))) {
        throw pickleError('pickle-corrupt', at, 'dict key is an unhashable list, dict or set');
      }
      const v = stack[i + 1];
      // A list under `frames` is a stack, interned: placing it again costs one stack id (the
      // generic reader's GenericBuilder does not charge it either).
      if (v instanceof RawDict || (v instanceof RawList && key !== 'frames')) this.placed(v);
      map.set(key, v);
    }
    if (map.size > this.maxItems) throw pickleError('pickle-limit', at, `dict with more than ${this.maxItems} items`);
  }

  /** Generic nodes already placed in a container once (a second placement is a shared reference). */
  private readonly placedNodes = new WeakSet<RawDict | RawList>();

  /**
   * A node is being placed in a generic container: a shared one placed again is charged what the
   * assembler spends to place its content again (`pendingCharge`), so that a segment or blocks
   * list the file references a million times meets the `maxBytes` limit instead of the heap's.
   */
  private placed(node: RawDict | RawList): void {
    if (node instanceof RawDict && node.kind !== GENERIC) return;
    if (!this.placedNodes.has(node)) {
      this.placedNodes.add(node);
      return;
    }
    let cost = SHARED_NODE_BYTES + this.listCost(node);
    if (node instanceof RawDict && node.map !== null) {
      for (const x of node.map.values()) cost += 8 + this.listCost(x);
    }
    this.pendingCharge += cost;
  }

  /** What placing the content of a list of recognised rows again costs the assembler; 0 for anything else. */
  private listCost(v: unknown): number {
    if (!(v instanceof RawList)) return 0;
    if (v.items !== null) return 8 * v.items.length;
    if (v.ids === null) return 0;
    if (v.idKind !== SEGMENT) return BLOCK_ROW_BYTES * v.ids.length;
    const t = this.t;
    const ids = v.ids.view();
    let blocks = 0;
    for (let k = 0; k < ids.length; k++) blocks += t.sBlockStart.data[ids[k]! + 1]! - t.sBlockStart.data[ids[k]!]!;
    return BLOCK_ROW_BYTES * (blocks + ids.length);
  }

  finish(value: unknown): unknown {
    return value;
  }

  private frame(kv: unknown[], start: number, end: number): number {
    let name: unknown, filename: unknown, line: unknown;
    for (let i = start; i < end; i += 2) {
      const k = kv[i];
      if (k === 'name') name = kv[i + 1];
      else if (k === 'filename') filename = kv[i + 1];
      else if (k === 'line') line = kv[i + 1];
      else return -1;
    }
    if (typeof name !== 'string' || typeof filename !== 'string' || !safeInt(line)) return -1;
    return this.t.internFrame(name, filename, line);
  }

  /** Stack id of a frames list, interning it (and dropping its array) the first time. */
  private stackOf(v: unknown): number {
    if (!(v instanceof RawList) || v.ids !== null) return -1;
    if (v.stack < 0 && v.items !== null) {
      const items = v.items;
      const n = items.length;
      const ids = this.t.scratchFor(n);
      for (let i = 0; i < n; i++) {
        const f = items[i];
        if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
        ids[i] = f.id;
      }
      v.stack = this.t.internStack(ids, n);
      v.items = null;
    }
    // The caller takes the stack as the list is now: extending it later must not go unseen (appendItems).
    v.sealed = true;
    return v.stack < 0 ? 0 : v.stack; // no stack and no items: []
  }

  /**
   * A segment dict as PyTorch writes it (keys from SEGMENT_KEYS, blocks already recognised) into
   * the segment columns, so that no Map per segment lives to the end of the read. Accepts exactly
   * what the assembler's generic segment path would accept with the same result; anything else
   * (a legacy block list, an unknown key, a wrong type) returns -1 and stays a generic dict, whose
   * checks then name the problem.
   */
  private segment(kv: unknown[], start: number, end: number): number {
    let mask = 0;
    const ints = this.segmentInts.fill(NaN);
    let pool0 = NaN, pool1 = NaN;
    let type = -1;
    let expandable = 2;
    let stack = 0;
    let blocks: RawList | null = null;
    const t = this.t;
    for (let i = start; i < end; i += 2) {
      const bit = SEGMENT_KEY_BIT.get(kv[i]);
      if (bit === undefined) return -1;
      mask |= 1 << bit;
      const v = kv[i + 1];
      const none = v === null;
      if (bit === SegmentBit.SegmentType) {
        if (typeof v !== 'string') return -1;
        type = t.segmentTypeCode(v);
      } else if (bit === SegmentBit.SegmentPoolId) {
        // a pair of ints, or None
        if (none) pool0 = pool1 = NaN;
        else if (Array.isArray(v) && v.length === 2 && safeInt(v[0]) && safeInt(v[1])) (pool0 = v[0]), (pool1 = v[1]);
        else return -1;
      } else if (bit === SegmentBit.IsExpandable) {
        if (typeof v !== 'boolean') return -1;
        expandable = v ? 1 : 0;
      } else if (bit === SegmentBit.Frames) {
        stack = none ? 0 : this.stackOf(v);
        if (stack < 0) return -1;
      } else if (bit === SegmentBit.Blocks) {
        // recognised blocks, an empty list or None
        if (none) blocks = null;
        else if (v instanceof RawList && v.stack < 0 && v.items === null && (v.ids === null || v.idKind === BLOCK)) blocks = v;
        else return -1;
      } else {
        // ints; None only where the assembler reads it as "not given"
        if (safeInt(v)) ints[bit] = v;
        else if (!none || (bit >= SegmentBit.Address && bit <= SegmentBit.ActiveSize)) return -1;
      }
    }
    if (Number.isNaN(ints[SegmentBit.Address]!) || Number.isNaN(ints[SegmentBit.TotalSize]!)) return -1;
    const id = t.pushSegment(mask, ints, type, pool0, pool1, expandable, stack, blocks?.ids?.view() ?? null);
    if (blocks !== null) {
      blocks.sealed = true;
      this.release(blocks, SEGMENT_BLOCKS, id);
    }
    return id;
  }

  private block(kv: unknown[], start: number, end: number): number {
    let address: unknown, size: unknown, requested: unknown, state: unknown;
    let stack = 0;
    for (let i = start; i < end; i += 2) {
      const k = kv[i];
      const v = kv[i + 1];
      if (k === 'address') address = v;
      else if (k === 'size') size = v;
      else if (k === 'requested_size') requested = v;
      else if (k === 'state') state = v;
      else if (k === 'frames') {
        stack = this.stackOf(v);
        if (stack < 0) return -1;
      } else return -1; // 'history' (legacy) and anything new: the generic path handles it
    }
    if (!safeInt(address) || !safeInt(size) || typeof state !== 'string') return -1;
    if (requested !== undefined && !safeInt(requested)) return -1;
    const t = this.t;
    return t.pushBlock(address, size, requested === undefined ? size : requested, t.stateCode(state), stack);
  }

  private trace(kv: unknown[], start: number, end: number): number {
    let action: unknown, addr: unknown, size: unknown, stream: unknown, time: unknown, compile: unknown, user: unknown, deviceFree: unknown;
    let stack = 0;
    let mask = 0;
    for (let i = start; i < end; i += 2) {
      const k = kv[i];
      const v = kv[i + 1];
      if (k === 'action') (action = v), (mask |= 1);
      else if (k === 'addr') (addr = v), (mask |= 2);
      else if (k === 'size') (size = v), (mask |= 4);
      else if (k === 'stream') (stream = v), (mask |= 8);
      else if (k === 'time_us') (time = v), (mask |= 16);
      else if (k === 'frames') {
        stack = this.stackOf(v);
        if (stack < 0) return -1;
        mask |= 32;
      } else if (k === 'compile_context') (compile = v), (mask |= 64);
      else if (k === 'user_metadata') (user = v), (mask |= 128);
      else if (k === 'device_free') (deviceFree = v), (mask |= 256);
      else return -1;
    }
    if (typeof action !== 'string' || !safeInt(addr) || !safeInt(size)) return -1;
    if (stream !== undefined && !safeInt(stream)) return -1;
    if (time !== undefined && typeof time !== 'number') return -1;
    if (compile !== undefined && typeof compile !== 'string') return -1;
    if (user !== undefined && typeof user !== 'string') return -1;
    if (deviceFree !== undefined && !safeInt(deviceFree)) return -1;
    const t = this.t;
    t.traceKeyMask |= mask;
    return t.pushTrace(
      t.actionCode(action),
      addr,
      size,
      stream === undefined ? 0 : stream,
      time === undefined ? NaN : time,
      stack,
      compile === undefined ? -1 : t.string(compile),
      user === undefined ? -1 : t.string(user),
      deviceFree === undefined ? NaN : deviceFree,
    );
  }
}

