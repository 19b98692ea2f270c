/**
 * The frames-list lane, one of the reader's performance devices: trace entries and blocks each
 * carry a `frames` list, and a training step allocates from the same few hundred stacks again and
 * again. A list seen before is recognised by its bytes (compared four at a time) instead of being
 * decoded GET by GET, and the list that followed the last three lists is tried first. It is a layer
 * of the snapshot builder: the dict lanes (snapshot-builder.ts) call `laneFramesValue` for a
 * `frames` value. What it costs per read: up
 * to MAX_LIST_BYTES (32 MiB) of copied list bytes, a 4,096-slot table and a 16,384-entry prediction
 * table, all emptied if the file ever re-PUTs a memo index. `npm run bench -- pickle` measures the
 * reader it serves; docs/PICKLE.md describes how it works. What the byte cache and prediction save:
 * 5–12 % of the CPU of `memscope summary FILE --json` on a 97 MB snapshot, by paired runs against a
 * build that decodes every list GET by GET (docs/ARCHITECTURE.md, "Performance devices").
 */
import type { FastLane } from './pickle/builder.js';
import { PickleMemo } from './pickle/memo.js';
import { FastPathBail, NodeKind, RawDict } from './snapshot-tables.js';
import { SnapshotNodeBuilder } from './snapshot-node-builder.js';

// The lane's sizes live here, beside the code that indexes by them, not imported: V8's optimised
// code reads an imported binding from its module's cell at every use.
/** Slots of the frame-list byte cache (a power of two). */
const LIST_CACHE_SLOTS = 1 << 12;
/** log2 of the slots of the table that predicts the next frames list (`listAfter`). */
const LIST_CONTEXT_BITS = 14;
/** Most bytes of frame lists the cache keeps. */
const MAX_LIST_BYTES = 1 << 25;

export class FrameListLane extends SnapshotNodeBuilder {
  protected laneFrames = new Int32Array(256);
  protected laneGets = new Int32Array(256);
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
  protected listBytes = new Uint8Array(256);
  protected listWords = new Int32Array(this.listBytes.buffer);
  protected listBytesUsed = 0;
  protected readonly listSlotHash = new Int32Array(LIST_CACHE_SLOTS);
  protected readonly listSlotSpan = new Int32Array(LIST_CACHE_SLOTS);
  protected readonly listSlotGets = new Int32Array(LIST_CACHE_SLOTS);
  protected readonly listSlotStack = new Int32Array(LIST_CACHE_SLOTS);
  /** Offset in `listBytes` of the slot's first copy of its list, or -1 for an empty slot. */
  protected readonly listSlotFirst = new Int32Array(LIST_CACHE_SLOTS).fill(-1);
  /**
   * `[slot * 4 + phase]`: offset of a copy that starts at the same offset mod 4 as a list at that
   * phase in the source (made when first needed), so the two compare as aligned Int32 words; -1 if none.
   */
  protected readonly listSlotAligned = new Int32Array(LIST_CACHE_SLOTS * 4).fill(-1);
  /**
   * The list that followed each context of three lists, by a hash of their cache slots (direct-
   * mapped, -1 if none); `recentLists` holds the slots of the last three lists read through the
   * cache, latest first. A training loop allocates from the same stacks in the same order step
   * after step, so the list after three known lists is most often the one that followed them
   * before: 85–87 % of lists in the fixtures' traces (48–80 % after one list alone).
   */
  protected readonly listAfter = new Int32Array(1 << LIST_CONTEXT_BITS).fill(-1);
  protected readonly recentLists = new Int32Array(3).fill(-1);
  /** The source's whole buffer as Int32 words, made once per piece (`sourceBytes`). */
  protected sourceWords: Int32Array<ArrayBufferLike> = new Int32Array(0);
  protected sourceBytes: Uint8Array | null = null;
  /** The source's bytes as a DataView, made once per piece (`sourceViewBytes`). */
  protected sourceView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
  protected sourceViewBytes: Uint8Array | null = null;

  protected sourceViewOf(b: Uint8Array): DataView {
    if (this.sourceViewBytes !== b) {
      this.sourceViewBytes = b;
      this.sourceView = new DataView(b.buffer, b.byteOffset, b.byteLength);
    }
    return this.sourceView;
  }

  // What `laneFramesValue` decoded, committed by `commitFrames` once the whole dict is accepted.
  /** Memo slot the value's new list takes, or -1 (a GET of an earlier list). */
  protected lfListSlot = -1;
  /** Frames waiting in `laneFrames` to be interned, or -1 when `lfStack` is already the stack id. */
  protected lfCount = -1;
  protected lfStack = 0;
  /** Table slot to remember the decoded list in at commit, or -1; its bytes are at `lfBytesAt`. */
  protected lfCacheSlot = -1;
  protected lfCacheHash = 0;
  protected lfBytesAt = 0;
  protected lfBytesSpan = 0;
  /** What the general path would take from the maxBytes budget for the value. */
  protected lfCharge = 0;

  /**
   * The memo index a BINGET / LONG_BINGET at p reads, or -1 (another opcode, or one the piece holds
   * only part of); `getEnd` gets the offset after it. For the segment lane and the frame-list
   * lane's rare parts: the trace and block lanes decode their GETs inline, since a call there
   * would spend the inlining budget V8 gives them (docs/PICKLE.md, "Where the time goes").
   */
  protected getEnd = 0;
  protected memoIndexAt(b: Uint8Array, p: number): number {
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

  protected override forgetMemoCaches(): void {
    super.forgetMemoCaches();
    this.listSlotFirst.fill(-1);
    this.listSlotAligned.fill(-1);
    this.listAfter.fill(-1);
    this.recentLists.fill(-1);
    this.listBytesUsed = 0;
  }

  /**
   * Decodes a `frames` value at p for the lanes — a new list of memoized frame dicts, or a GET of
   * an earlier frames list — into the lf* fields without changing anything; `slot` is the memo
   * slot a new list takes. Returns the offset after the value, or -1 for anything else.
   */
  protected laneFramesValue(b: Uint8Array, p: number, memo: PickleMemo, slot: number): number {
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
    if (!(f instanceof RawDict) || f.kind !== NodeKind.Frame) return -1;
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
  protected listContext(): number {
    const r = this.recentLists;
    return (Math.imul(r[0]!, 0x9e3779b1) ^ Math.imul(r[1]!, 0x85ebca77) ^ Math.imul(r[2]!, 0xc2b2ae3d)) >>> (32 - LIST_CONTEXT_BITS);
  }

  /** Records that the list in the cache slot came after the last three. */
  protected listFollows(cacheSlot: number): void {
    const r = this.recentLists;
    this.listAfter[this.listContext()] = cacheSlot;
    r[2] = r[1]!;
    r[1] = r[0]!;
    r[0] = cacheSlot;
  }

  /** A frames list found in the cache, whose APPENDS is at q: its stack; returns the offset after it. */
  protected knownListEnd(b: Uint8Array, q: number, cacheSlot: number): number {
    // A second APPENDS batch (> 1000 frames) is left to the general path.
    if (b[q + 1] === 0x28 /* MARK */) return -1;
    this.lfCharge += 8 * this.listSlotGets[cacheSlot]!; // APPENDS
    this.lfStack = this.listSlotStack[cacheSlot]!;
    return q + 1;
  }

  /** `frames` as a GET of a list seen before (laneFramesValue). */
  protected laneFramesGet(b: Uint8Array, p: number, memo: PickleMemo): number {
    const i = this.memoIndexAt(b, p);
    if (i < 0) return -1;
    p = this.getEnd;
    const released = memo.releasedId(i);
    if (released >= 0) {
      if (this.releasedKind[i] !== NodeKind.Stack) return -1;
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
  protected laneFramesDecode(b: Uint8Array, p: number, memo: PickleMemo): number {
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
      if (!(f instanceof RawDict) || f.kind !== NodeKind.Frame) return -1;
      frames[k] = f.id;
    }
    this.lfCount = n;
    return p;
  }

  /** Interns what `laneFramesValue` decoded (and remembers its bytes); returns the stack id. */
  protected commitFrames(b: Uint8Array): number {
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
  protected keepListBytes(b: Uint8Array, p: number, span: number): number {
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
  protected isKnownList(b: Uint8Array, p: number, span: number, cacheSlot: number): boolean {
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
}
