/**
 * The recognising pickle builder behind `readSnapshot`: the fast lanes that read trace entries,
 * blocks and segments straight from the opcode bytes into the tables, on top of the frames-list
 * lane (snapshot-frame-list-lane.ts) and the general path (snapshot-node-builder.ts) that takes
 * whatever a lane gives up on. A lane never changes a result, only how fast it comes: the corpus
 * test reads every file both ways (test/corpus/reader.test.ts). The machine reaches the lanes
 * through one interface, `PickleBuilder.fastDict` (pickle/builder.ts); with a builder
 * that has none, it runs the general path alone. What they cost: this file's and the frames-list
 * lane's code, and three caches by memo index (256 key, 256 action and 64 segment-type entries);
 * a lane that meets anything else gives the dict to the general path and leaves everything as it
 * found it. docs/PICKLE.md ("The fast snapshot path") describes the lanes. What they save: 41 % of
 * the CPU of `memscope summary FILE --json` on a 97 MB snapshot, by paired runs against a build
 * whose machine ignores `fastDict` (docs/ARCHITECTURE.md, "Performance devices").
 */
import type { FastLane } from './pickle/builder.js';
import { PickleMemo } from './pickle/memo.js';
import { decodeLong, decodeUtf8 } from './pickle/values.js';
import { LANE_KEY_BIT, LaneBit, LaneMask, SEGMENT_BIT_OF_LANE_BIT, SegmentBit, TraceBit, bitCount } from './snapshot-lane-keys.js';
import { EntryField, FastPathBail, nodeFor, NodeKind, safeInt } from './snapshot-tables.js';
import { FrameListLane } from './snapshot-frame-list-lane.js';

export class SnapshotBuilder extends FrameListLane {
  private readonly laneStrings: string[] = [];
  private readonly laneStringSlots: number[] = [];

  /** Direct-mapped cache: memo index of a key string → its LANE_KEY_BIT (keys are the same few memo entries). */
  private readonly keyCacheIndex = new Int32Array(256).fill(-1);
  private readonly keyCacheBit = new Uint8Array(256);
  /** Direct-mapped cache: memo index of an action name → its code in the tables. */
  private readonly actionCacheIndex = new Int32Array(256).fill(-1);
  private readonly actionCacheCode = new Uint8Array(256);

  protected override forgetMemoCaches(): void {
    super.forgetMemoCaches();
    this.keyCacheIndex.fill(-1);
    this.actionCacheIndex.fill(-1);
    this.typeCacheIndex.fill(-1);
  }

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
    if (first === LaneBit.Action) return this.fastTrace(b, at, memo, lane);
    if (first === LaneBit.Address) return this.fastBlock(b, at, memo, lane);
    if (first === LaneBit.Device) return this.fastSegment(b, at, memo, lane);
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
      if (bit < SegmentBit.SegmentType) {
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
          if (released >= 0 && this.releasedKind[index] === NodeKind.PoolTuple) {
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
            this.releaseSlot(this.lfListSlot, NodeKind.Stack, stack);
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
    this.releaseSlot(dictSlot, NodeKind.Segment, id);
    if (blocksSlot >= 0) this.releaseSlot(blocksSlot, NodeKind.SegmentBlocks, id);
    if (poolSlot >= 0) this.releaseSlot(poolSlot, NodeKind.PoolTuple, id);
    if (typeSlot >= 0) memo.put(typeSlot, typeString);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(NodeKind.Segment, id);
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
      if (bit < 0 || bit >= LaneBit.TraceKeyCount || mask & (1 << bit)) return -1;
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
    if ((mask & LaneMask.TraceRequired) !== LaneMask.TraceRequired || next > lane.maxMemoEntries) return -1;
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
    entry[EntryField.Addr] = addr;
    entry[EntryField.Size] = size;
    entry[EntryField.Stream] = stream;
    entry[EntryField.Time] = time;
    entry[EntryField.DeviceFree] = deviceFree;
    const id = t.pushTraceEntry(actionCode, stack, compile === null ? -1 : t.string(compile), user === null ? -1 : t.string(user));
    this.releaseSlot(dictSlot, NodeKind.Trace, id);
    if (hasFrames && this.lfListSlot >= 0) this.releaseSlot(this.lfListSlot, NodeKind.Stack, stack);
    for (let i = 0; i < newStrings; i++) memo.put(this.laneStringSlots[i]!, this.laneStrings[i]);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(NodeKind.Trace, id);
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
      if (bit < 0 || ((1 << bit) & LaneMask.Block) === 0 || mask & (1 << bit)) return -1;
      mask |= 1 << bit;
      p = this.keyEnd;
      if (p >= len) return -1;
      const op = b[p]!;
      if (bit === LaneBit.Frames) {
        p = this.laneFramesValue(b, p, memo, next);
        if (p < 0) return -1;
        if (this.lfListSlot >= 0) next++;
        charge += this.lfCharge;
        hasFrames = true;
        continue;
      }
      if (bit === LaneBit.State) {
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
      if (bit === LaneBit.Address) address = v;
      else if (bit === LaneBit.Size) size = v;
      else requested = v;
    }
    if ((mask & LaneMask.BlockRequired) !== LaneMask.BlockRequired || next > lane.maxMemoEntries) return -1;
    charge += 16 * bitCount(mask);
    if (p - at > lane.maxSpan || charge > lane.budget) return -1;
    // Commit.
    const t = this.t;
    const stack = hasFrames ? this.commitFrames(b) : 0;
    const id = t.pushBlock(address, size, mask & (1 << LaneBit.RequestedSize) ? requested : size, t.stateCode(state as string), stack);
    this.releaseSlot(dictSlot, NodeKind.Block, id);
    if (hasFrames && this.lfListSlot >= 0) this.releaseSlot(this.lfListSlot, NodeKind.Stack, stack);
    if (newState >= 0) memo.put(newState, state);
    lane.memoCount = next;
    lane.charge = charge;
    lane.value = nodeFor(NodeKind.Block, id);
    return p;
  }
}
