/**
 * Snapshot pickle → `MemorySnapshot`, two ways that share one assembler:
 *
 * - `readSnapshot(bytes)` (fast path) runs the pickle machine with a builder that recognises, at
 *   SETITEMS time, the three dict shapes that make up almost all of a snapshot — frames
 *   `{name, filename, line}`, blocks and trace entries — and stores them straight into interned
 *   tables and typed-array columns instead of building a Map per dict. Frame lists are interned into
 *   stacks and their arrays dropped. Anything it does not recognise stays a generic dict/list and
 *   goes through the same checks as the slow path, so recognition is an optimisation, not a
 *   different reader.
 * - `normaliseSnapshot(value)` takes a value from `readPickle` (Maps and arrays).
 *
 * Both end in `assemble()`, which walks segments / device_traces, checks every field's type and
 * names the path of anything wrong (`segments[3].blocks[7].size`).
 */
import { MemscopeError } from '../core/errors.js';
import {
  DEFAULT_PICKLE_LIMITS,
  isTuple,
  makeTuple,
  pickleError,
  PickleMachine,
  runPickle,
  scanOpcodes,
  type FastLane,
  type PickleBuilder,
  type PickleLimits,
} from './pickle/machine.js';
import { decodeLong, decodeUtf8 } from './pickle/machine.js';
import { readPickle, toPlain, type PickleValue, type PlainValue } from './pickle/reader.js';
import {
  KNOWN_BLOCK_STATES,
  KNOWN_TRACE_ACTIONS,
  type BlockTable,
  type ExternalAnnotation,
  type Frame,
  type MemorySnapshot,
  type Segment,
  type StackTable,
  type TraceTable,
} from './snapshot.js';

// ---------------------------------------------------------------------------------------------
// Growable typed-array columns

class F64Column {
  data: Float64Array;
  constructor(capacity = 1024) {
    this.data = new Float64Array(capacity);
  }
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  finish(): Float64Array {
    return this.data.slice(0, this.length);
  }
}

class I32Column {
  data: Int32Array;
  constructor(capacity = 1024) {
    this.data = new Int32Array(capacity);
  }
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Int32Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  finish(): Int32Array {
    return this.data.slice(0, this.length);
  }
}

class U8Column {
  data: Uint8Array;
  constructor(capacity = 1024) {
    this.data = new Uint8Array(capacity);
  }
  length = 0;
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Uint8Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// Fast-path nodes: what the recognising builder puts on the pickle stack instead of Map / Array

const GENERIC = 0;
const FRAME = 1;
const BLOCK = 2;
const TRACE = 3;

class RawDict {
  kind = GENERIC;
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
class RawList {
  items: unknown[] | null = null;
  ids: number[] | null = null;
  idKind = GENERIC;
  stack = -1;
  slot = -1;
}

const STACK = 4;
/** Memo slots whose value was stored in the tables hold this; `materialize` rebuilds a node. */
const RELEASED = Symbol('released memo entry');
/** Memo indices beyond this keep their node (a hostile LONG_BINPUT must not size our side arrays). */
const MAX_RELEASED_SLOT = 1 << 28;

function nodeFor(kind: number, id: number): RawDict {
  const node = new RawDict();
  node.kind = kind;
  node.id = id;
  return node;
}

/** The fast path met something it does not handle; readSnapshot retries with the generic reader. */
class FastPathBail extends Error {}

// Trace entry keys → bits, for `format.traceKeys` without a Set insert per event.
const TRACE_KEYS = ['action', 'addr', 'size', 'stream', 'time_us', 'frames', 'compile_context', 'user_metadata', 'device_free'] as const;
const TRACE_KEY_BIT = new Map<unknown, number>(TRACE_KEYS.map((k, i) => [k, i]));

function safeInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

// ---------------------------------------------------------------------------------------------
// Interned tables and raw columns shared by both paths

class SnapshotTables {
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
  private readonly stateCodes = new Map<string, number>(KNOWN_BLOCK_STATES.map((s, i) => [s, i]));
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
  readonly otherTraceKeys = new Set<string>();
  legacyHistory = false;

  /**
   * Trace columns start at a capacity guessed from the file size (a trace entry takes ≥ ~100
   * bytes of pickle), so big files don't regrow and copy them ~10 times. Untouched capacity costs
   * address space only: typed arrays are zero-filled lazily by the OS.
   */
  constructor(expectedEvents = 1024) {
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

  internFrame(name: string, filename: string, line: number): number {
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
    let id = this.stringIds.get(s);
    if (id === undefined) {
      id = this.strings.length;
      this.strings.push(s);
      this.stringIds.set(s, id);
    }
    return id;
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

  pushBlock(address: number, size: number, requested: number, state: number, stack: number): number {
    this.bAddress.push(address);
    this.bSize.push(size);
    this.bRequested.push(requested);
    this.bState.push(state);
    this.bStack.push(stack);
    return this.bSize.length - 1;
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
    const i = this.tAddr.length;
    this.tAction.push(action);
    this.tAddr.push(addr);
    this.tSize.push(size);
    this.tStream.push(stream);
    this.tTime.push(time);
    this.tStack.push(stack);
    if (compile >= 0 || this.tCompile) (this.tCompile ??= filledI32(i, -1)).push(compile);
    if (user >= 0 || this.tUser) (this.tUser ??= filledI32(i, -1)).push(user);
    if (!Number.isNaN(deviceFree) || this.tDeviceFree) (this.tDeviceFree ??= filledF64(i, NaN)).push(deviceFree);
    return i;
  }
}

function filledI32(n: number, v: number): I32Column {
  const c = new I32Column();
  for (let i = 0; i < n; i++) c.push(v);
  return c;
}

function filledF64(n: number, v: number): F64Column {
  const c = new F64Column();
  for (let i = 0; i < n; i++) c.push(v);
  return c;
}

// ---------------------------------------------------------------------------------------------
// The recognising builder (fast path)

class SnapshotBuilder implements PickleBuilder {
  private memo: unknown[] = [];
  private releasedKind: Uint8Array;
  private releasedId: Int32Array;
  readonly memoSentinel = RELEASED;
  readonly memoCapacityHint: number;

  /** `expectedMemo`: a guess from the file size (PyTorch memoizes ~1 value per 40–50 bytes). */
  constructor(
    private readonly t: SnapshotTables,
    expectedMemo = 0,
  ) {
    this.memoCapacityHint = expectedMemo;
    // Zero-filled lazily by the OS: capacity that is never used costs address space only.
    this.releasedKind = new Uint8Array(Math.min(expectedMemo, MAX_RELEASED_SLOT));
    this.releasedId = new Int32Array(Math.min(expectedMemo, MAX_RELEASED_SLOT));
  }

  attachMemo(memo: unknown[]): void {
    this.memo = memo;
  }

  onMemoize(value: unknown, index: number): void {
    if (value instanceof RawDict || value instanceof RawList) value.slot = index;
    if (index <= this.highestSlot) this.forgetGetSequences();
    else this.highestSlot = index;
  }

  private forgetGetSequences(): void {
    this.keyCacheIndex.fill(-1);
    this.getSeqByHash.clear();
    this.getSeqStart.length = this.getSeqLength.length = this.getSeqStack.length = this.getSeqPool.length = 0;
  }

  /**
   * The node's content now lives in the tables: drop the memo's reference so the node can be
   * collected young (PyTorch memoizes every dict and list, so otherwise every trace entry and
   * frame list would survive to the end of the read).
   */
  private release(node: RawDict | RawList, kind: number, id: number): void {
    const slot = node.slot;
    if (slot < 0 || slot >= MAX_RELEASED_SLOT || this.memo[slot] !== node) return;
    this.releaseSlot(slot, kind, id);
  }

  private releaseSlot(slot: number, kind: number, id: number): void {
    if (slot >= this.releasedKind.length) {
      const size = Math.max(slot + 1, this.releasedKind.length * 2, 1024);
      const kinds = new Uint8Array(size);
      kinds.set(this.releasedKind);
      const ids = new Int32Array(size);
      ids.set(this.releasedId);
      this.releasedKind = kinds;
      this.releasedId = ids;
    }
    this.releasedKind[slot] = kind;
    this.releasedId[slot] = id;
    this.memo[slot] = RELEASED;
  }

  materialize(index: number): unknown {
    const kind = this.releasedKind[index]!;
    const id = this.releasedId[index]!;
    let node: RawDict | RawList;
    if (kind === STACK) {
      node = new RawList();
      node.stack = id;
    } else node = nodeFor(kind, id);
    node.slot = index;
    this.memo[index] = node; // later GETs see the same object again
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
   * Frame lists repeat byte for byte (the same frames are the same memo entries), so a list's
   * sequence of memo indices maps to its stack id. Cached by hash; entries keep their index
   * sequence in `getSeqPool` for verification. Cleared if the file ever re-PUTs an existing memo
   * index (PyTorch never does), since indices would then change meaning.
   */
  private readonly getSeqByHash = new Map<number, number>();
  private readonly getSeqStart = new I32Column();
  private readonly getSeqLength = new I32Column();
  private readonly getSeqStack = new I32Column();
  private readonly getSeqPool = new I32Column();
  private highestSlot = -1;
  private readonly keyCacheIndex = new Int32Array(256).fill(-1);
  private readonly keyCacheBit = new Uint8Array(256);

  /**
   * The fast lane for trace entries, which are most of a snapshot. PyTorch (CPython's pickler)
   * writes each as
   *   EMPTY_DICT MEMOIZE MARK  (key value)*  SETITEMS
   * with keys as memo GETs of strings, ints as BININT / BININT1 / BININT2 / LONG1, strings as GETs (or new strings
   * followed by MEMOIZE), and `frames` as a new list `EMPTY_LIST MEMOIZE [MARK GET… APPENDS |
   * GET APPEND]` of memoized frame dicts, or a GET of an earlier list. This decodes that shape
   * straight from the bytes into the columns — no VM stack, no node per value — and gives up (-1,
   * nothing changed) on anything else, leaving it to the general path.
   */
  fastDict(b: Uint8Array, at: number, memo: unknown[], lane: FastLane): number {
    const len = b.length;
    let p = at + 1;
    if (p + 4 > len || b[p] !== 0x94 /* MEMOIZE */ || b[p + 1] !== 0x28 /* MARK */) return -1;
    p += 2;
    // Cheap early exit for dicts that are not trace entries: the first key must be 'action'.
    const k0: unknown =
      b[p] === 0x68 ? memo[b[p + 1]!] : b[p] === 0x6a && p + 4 < len ? memo[(b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0] : undefined;
    if (k0 !== 'action') return -1;
    const t = this.t;
    let next = lane.memoCount;
    const dictSlot = next++;
    if (memo[dictSlot] !== undefined) return -1;
    let mask = 0;
    let action: unknown = undefined;
    let addr = 0;
    let size = 0;
    let stream = 0;
    let time = NaN;
    let deviceFree = NaN;
    let compile: string | null = null;
    let user: string | null = null;
    let listSlot = -1;
    let nFrames = 0;
    let pendingSeqHash = -1;
    let knownStack = 0;
    let newStrings = 0;
    for (;;) {
      if (p >= len) return -1;
      let op = b[p]!;
      if (op === 0x75 /* SETITEMS */) {
        p++;
        break;
      }
      // key: a GET of a known key string
      let keyIndex: number;
      if (op === 0x68 /* BINGET */ && p + 1 < len) {
        keyIndex = b[p + 1]!;
        p += 2;
      } else if (op === 0x6a /* LONG_BINGET */ && p + 4 < len) {
        keyIndex = (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
        p += 5;
      } else return -1;
      // Keys are the same few memo entries in every entry: a direct-mapped cache index → key bit.
      let bit: number | undefined;
      const keySlot = keyIndex & 255;
      if (this.keyCacheIndex[keySlot] === keyIndex) bit = this.keyCacheBit[keySlot]!;
      else {
        bit = TRACE_KEY_BIT.get(memo[keyIndex]);
        if (bit === undefined) return -1;
        this.keyCacheIndex[keySlot] = keyIndex;
        this.keyCacheBit[keySlot] = bit;
      }
      if (mask & (1 << bit)) return -1;
      mask |= 1 << bit;
      if (p >= len) return -1;
      op = b[p]!;
      if (bit === 5) {
        // frames
        if (op === 0x5d /* EMPTY_LIST */) {
          if (p + 2 > len || b[p + 1] !== 0x94 /* MEMOIZE */) return -1;
          listSlot = next++;
          if (memo[listSlot] !== undefined) return -1;
          p += 2;
          if (p >= len) return -1;
          if (b[p] === 0x28 /* MARK */) {
            p++;
            // Read the memo indices up to APPENDS, then map the sequence to a stack.
            let n = 0;
            let h = 0;
            for (;;) {
              if (p >= len) return -1;
              const c = b[p]!;
              let i: number;
              if (c === 0x68 && p + 1 < len) {
                i = b[p + 1]!;
                p += 2;
              } else if (c === 0x6a && p + 4 < len) {
                i = (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
                p += 5;
              } else if (c === 0x65 /* APPENDS */) {
                p++;
                break;
              } else return -1;
              if (n === this.laneGets.length) {
                const grown = new Int32Array(n * 2);
                grown.set(this.laneGets);
                this.laneGets = grown;
              }
              this.laneGets[n++] = i;
              h = Math.imul(h ^ i, 0x9e3779b1) ^ (h >>> 13);
            }
            h &= 0x3fffffff;
            const cached = this.getSeqByHash.get(h);
            let hit = -1;
            if (cached !== undefined && this.getSeqLength.data[cached] === n) {
              const pool = this.getSeqPool.data;
              const start = this.getSeqStart.data[cached]!;
              let same = true;
              for (let k = 0; k < n; k++) {
                if (pool[start + k] !== this.laneGets[k]) {
                  same = false;
                  break;
                }
              }
              if (same) hit = this.getSeqStack.data[cached]!;
            }
            if (hit >= 0) {
              knownStack = hit;
              nFrames = -1; // stack already known
            } else {
              if (this.laneFrames.length < n) this.laneFrames = new Int32Array(n * 2);
              for (let k = 0; k < n; k++) {
                const f = memo[this.laneGets[k]!];
                if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
                this.laneFrames[k] = f.id;
              }
              nFrames = n;
              pendingSeqHash = h;
            }
            if (p < len && b[p] === 0x28) return -1; // a second APPENDS batch (> 1000 frames)
          } else if (b[p] === 0x68 && p + 2 < len && b[p + 2] === 0x61 /* APPEND */) {
            const f = memo[b[p + 1]!];
            if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
            this.laneFrames[nFrames++] = f.id;
            p += 3;
          } else if (b[p] === 0x6a && p + 5 < len && b[p + 5] === 0x61) {
            const f = memo[(b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0];
            if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
            this.laneFrames[nFrames++] = f.id;
            p += 6;
          }
          // otherwise: an empty list, and the next key follows
        } else {
          // a GET of a list seen before
          let i: number;
          if (op === 0x68 && p + 1 < len) {
            i = b[p + 1]!;
            p += 2;
          } else if (op === 0x6a && p + 4 < len) {
            i = (b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0;
            p += 5;
          } else return -1;
          const v = memo[i];
          if (v === RELEASED && this.releasedKind[i] === STACK) knownStack = this.releasedId[i]!;
          else if (v instanceof RawList && v.stack >= 0) knownStack = v.stack;
          else return -1;
        }
        continue;
      }
      if (bit === 0 || bit === 6 || bit === 7) {
        // strings: action, compile_context, user_metadata
        let v: unknown;
        if (op === 0x68 && p + 1 < len) {
          v = memo[b[p + 1]!];
          p += 2;
        } else if (op === 0x6a && p + 4 < len) {
          v = memo[(b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)) >>> 0];
          p += 5;
        } else if (op === 0x8c /* SHORT_BINUNICODE */ && bit !== 0 && p + 1 < len) {
          const n = b[p + 1]!;
          if (p + 2 + n >= len || b[p + 2 + n] !== 0x94 /* MEMOIZE */) return -1;
          v = decodeUtf8(b, p + 2, p + 2 + n);
          const slot = next++;
          if (memo[slot] !== undefined) return -1;
          this.laneStrings[newStrings] = v as string;
          this.laneStringSlots[newStrings++] = slot;
          p += 3 + n;
        } else return -1;
        if (typeof v !== 'string') return -1;
        if (bit === 0) action = v;
        else if (bit === 6) compile = v;
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
        const x = decodeLong(b, p + 2, n);
        if (typeof x !== 'number') return -1;
        v = x;
        p += 2 + n;
      } else return -1;
      if (bit === 1) addr = v;
      else if (bit === 2) size = v;
      else if (bit === 3) stream = v;
      else if (bit === 4) time = v;
      else deviceFree = v;
    }
    if ((mask & 7) !== 7 || next > lane.maxMemoEntries) return -1;
    // Commit.
    let stack = knownStack;
    if (listSlot >= 0 && nFrames >= 0) {
      stack = nFrames === 0 ? 0 : t.internStack(this.laneFrames, nFrames);
      if (pendingSeqHash >= 0 && this.getSeqPool.length < 1 << 24) {
        // Remember this index sequence (bounded: a file of all-distinct lists must not grow it forever).
        this.getSeqByHash.set(pendingSeqHash, this.getSeqStack.length);
        this.getSeqStart.push(this.getSeqPool.length);
        this.getSeqLength.push(nFrames);
        this.getSeqStack.push(stack);
        for (let k = 0; k < nFrames; k++) this.getSeqPool.push(this.laneGets[k]!);
      }
    }
    t.traceKeyMask |= mask;
    const id = t.pushTrace(
      t.actionCode(action as string),
      addr,
      size,
      stream,
      time,
      stack,
      compile === null ? -1 : t.string(compile),
      user === null ? -1 : t.string(user),
      deviceFree,
    );
    this.releaseSlot(dictSlot, TRACE, id);
    if (listSlot >= 0) this.releaseSlot(listSlot, STACK, stack);
    for (let i = 0; i < newStrings; i++) memo[this.laneStringSlots[i]!] = this.laneStrings[i];
    lane.memoCount = next;
    lane.value = nodeFor(TRACE, id);
    return p;
  }

  newList(): unknown {
    return new RawList();
  }

  appendItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!(target instanceof RawList)) throw pickleError('pickle-corrupt', at, 'APPEND target is not a list');
    if (target.stack >= 0) {
      // Interned as a stack already and now extended (a stack longer than one APPENDS batch).
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
      if (target.items === null && x instanceof RawDict && (x.kind === TRACE || x.kind === BLOCK) && (target.ids === null || target.idKind === x.kind)) {
        if (target.ids === null) {
          target.ids = [];
          target.idKind = x.kind;
        }
        target.ids.push(x.id);
        continue;
      }
      if (target.items === null) {
        target.items = [];
        if (target.ids !== null) {
          // Mixed list: turn the ids back into nodes.
          for (const id of target.ids) target.items.push(nodeFor(target.idKind, id));
          target.ids = null;
        }
      }
      target.items.push(x);
    }
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
      const n = (end - start) >> 1;
      if (first === 'action') {
        const id = this.trace(stack, start, end);
        if (id >= 0) {
          target.kind = TRACE;
          target.id = id;
          this.release(target, TRACE, id);
          return;
        }
      } else if (n === 3 && (first === 'name' || first === 'filename' || first === 'line')) {
        const id = this.frame(stack, start, end);
        if (id >= 0) {
          target.kind = FRAME;
          target.id = id;
          return;
        }
      } else if (first === 'address' || first === 'size') {
        const id = this.block(stack, start, end);
        if (id >= 0) {
          target.kind = BLOCK;
          target.id = id;
          this.release(target, BLOCK, id);
          return;
        }
      }
      target.map = new Map();
    }
    const map = target.map;
    for (let i = start; i < end; i += 2) {
      const key = stack[i];
      if (key instanceof RawDict || key instanceof RawList || key instanceof Map || (key instanceof Set && !Object.isFrozen(key))) {
        throw pickleError('pickle-corrupt', at, 'dict key is an unhashable list, dict or set');
      }
      map.set(key, stack[i + 1]);
    }
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
    if (!(v instanceof RawList)) return -1;
    if (v.stack >= 0) return v.stack;
    if (v.ids !== null) return -1;
    const items = v.items;
    if (items === null) return 0; // []
    const n = items.length;
    const ids = this.t.scratchFor(n);
    for (let i = 0; i < n; i++) {
      const f = items[i];
      if (!(f instanceof RawDict) || f.kind !== FRAME) return -1;
      ids[i] = f.id;
    }
    v.stack = this.t.internStack(ids, n);
    v.items = null;
    return v.stack;
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

// ---------------------------------------------------------------------------------------------
// Assembly (both paths): segments, blocks in segment order, per-device traces

function shapeError(path: string, message: string): MemscopeError {
  return new MemscopeError('snapshot-shape', `snapshot: ${path}: ${message}`);
}

function describe(v: unknown): string {
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

class Assembler {
  /** Frame dicts are shared objects in real files (the pickle memo): resolve each once. */
  private readonly frameIdByObject = new Map<unknown, number>();
  constructor(private readonly t: SnapshotTables) {}

  /** Map view of a generic dict node (RawDict or Map), or null if not a dict. */
  dict(v: unknown): Map<unknown, unknown> | null {
    if (v instanceof Map) return v;
    if (v instanceof RawDict) return v.kind === GENERIC ? (v.map ?? new Map()) : this.recognisedToMap(v);
    return null;
  }

  list(v: unknown, path: string): readonly unknown[] {
    if (Array.isArray(v)) return v;
    if (v instanceof RawList) {
      if (v.stack >= 0) return this.stackToFrameDicts(v.stack);
      if (v.ids !== null) return v.ids.map((id) => nodeFor(v.idKind, id));
      return v.items ?? [];
    }
    throw shapeError(path, `expected a list, found ${describe(v)}`);
  }

  /** Raw ids of a list of recognised blocks / trace entries; other lists go through `each`. */
  rows(v: unknown, kind: number, path: string, each: (node: unknown, path: string) => number): Int32Array {
    if (v instanceof RawList && v.ids !== null && v.idKind === kind) return Int32Array.from(v.ids);
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

  frameId(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === FRAME) return v.id;
    const known = this.frameIdByObject.get(v);
    if (known !== undefined) return known;
    const d = this.dict(v);
    if (!d) throw shapeError(path, `expected a frame dict, found ${describe(v)}`);
    const id = this.t.internFrame(this.str(d.get('name'), path, 'name'), this.str(d.get('filename'), path, 'filename'), this.int(d.get('line'), path, 'line'));
    this.frameIdByObject.set(v, id);
    return id;
  }

  stack(v: unknown, path: string): number {
    if (v === undefined || v === null) return 0;
    if (v instanceof RawList && v.stack >= 0) return v.stack;
    if (v instanceof RawList && v.items === null && v.ids === null) return 0;
    const items = this.list(v, path);
    const ids = new Int32Array(items.length);
    items.forEach((f, i) => (ids[i] = this.frameId(f, `${path}[${i}]`)));
    const id = this.t.internStack(ids, ids.length);
    if (v instanceof RawList) {
      v.stack = id;
      v.items = null;
      v.ids = null;
    }
    return id;
  }

  /** Raw block id of a block node. */
  block(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === BLOCK) return v.id;
    const d = this.dict(v);
    if (!d) throw shapeError(path, `expected a block dict, found ${describe(v)}`);
    const size = this.int(d.get('size'), path, 'size');
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
    return this.t.pushBlock(
      this.int(d.get('address'), path, 'address'),
      size,
      requested,
      this.t.stateCode(this.str(d.get('state'), path, 'state')),
      stack,
    );
  }

  /** Raw trace id of a trace entry node. */
  traceEntry(v: unknown, path: string): number {
    if (v instanceof RawDict && v.kind === TRACE) return v.id;
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
    return t.pushTrace(
      t.actionCode(this.str(d.get('action'), path, 'action')),
      this.int(d.get('addr'), path, 'addr'),
      this.int(d.get('size'), path, 'size'),
      this.optInt(d.get('stream'), 0, path, 'stream'),
      time === undefined || time === null ? NaN : typeof time === 'number' ? time : this.int(time, path, 'time_us'),
      this.stack(d.get('frames'), `${path}.frames`),
      opt('compile_context'),
      opt('user_metadata'),
      deviceFree === undefined || deviceFree === null ? NaN : this.int(deviceFree, path, 'device_free'),
    );
  }

  segments(v: unknown): { segments: Segment[]; blocks: BlockTable } {
    const list = this.list(v, 'segments');
    const raw: number[] = [];
    const owner: number[] = [];
    const segments: Segment[] = [];
    list.forEach((node, index) => {
      const path = `segments[${index}]`;
      const d = this.dict(node);
      if (!d) throw shapeError(path, `expected a segment dict, found ${describe(node)}`);
      const firstBlock = raw.length;
      const rows = this.rows(d.get('blocks') ?? [], BLOCK, `${path}.blocks`, (b, p) => this.block(b, p));
      for (let j = 0; j < rows.length; j++) {
        raw.push(rows[j]!);
        owner.push(index);
      }
      const pool = d.get('segment_pool_id');
      let poolId: readonly [number, number] | null = null;
      if (pool !== undefined && pool !== null) {
        const p = this.list(pool, `${path}.segment_pool_id`);
        if (p.length !== 2) throw shapeError(`${path}.segment_pool_id`, `expected a pair, found ${p.length} items`);
        poolId = makeTuple([this.int(p[0], path, 'segment_pool_id[0]'), this.int(p[1], path, 'segment_pool_id[1]')]) as readonly [number, number];
      }
      const totalSize = this.int(d.get('total_size'), path, 'total_size');
      // Sizes PyTorch has written since 1.x; derived from the blocks if a file lacks them.
      const sumBlocks = (pred: (state: string) => boolean): number => {
        let s = 0;
        for (let k = firstBlock; k < raw.length; k++) if (pred(this.t.stateNames[this.t.bState.data[raw[k]!]!]!)) s += this.t.bSize.data[raw[k]!]!;
        return s;
      };
      const allocated = d.get('allocated_size');
      const active = d.get('active_size');
      const requested = d.get('requested_size');
      const expandable = d.get('is_expandable');
      segments.push({
        index,
        device: this.optInt(d.get('device'), -1, path, 'device'),
        address: this.int(d.get('address'), path, 'address'),
        totalSize,
        allocatedSize: allocated === undefined ? sumBlocks((s) => s === 'active_allocated') : this.int(allocated, path, 'allocated_size'),
        activeSize: active === undefined ? sumBlocks((s) => s.startsWith('active')) : this.int(active, path, 'active_size'),
        requestedSize: requested === undefined || requested === null ? null : this.int(requested, path, 'requested_size'),
        stream: this.optInt(d.get('stream'), 0, path, 'stream'),
        segmentType: d.get('segment_type') === undefined ? 'large' : this.str(d.get('segment_type'), path, 'segment_type'),
        poolId,
        isExpandable: expandable === true,
        stack: this.stack(d.get('frames'), `${path}.frames`),
        firstBlock,
        blockCount: raw.length - firstBlock,
      });
    });
    const t = this.t;
    const n = raw.length;
    const blocks: BlockTable = {
      count: n,
      segment: Int32Array.from(owner),
      address: gatherF64(t.bAddress.data, raw),
      size: gatherF64(t.bSize.data, raw),
      requestedSize: gatherF64(t.bRequested.data, raw),
      state: Uint8Array.from(raw, (r) => t.bState.data[r]!),
      stack: Int32Array.from(raw, (r) => t.bStack.data[r]!),
    };
    return { segments, blocks };
  }

  traces(v: unknown): TraceTable[] {
    if (v === undefined || v === null) return [];
    const devices = this.list(v, 'device_traces');
    const ids = devices.map((dev, d) => this.rows(dev, TRACE, `device_traces[${d}]`, (e, p) => this.traceEntry(e, p)));
    const t = this.t;
    // Columns are final only now: generic entries may have been appended above.
    const action = t.tAction.data;
    const cols = {
      addr: t.tAddr.data,
      size: t.tSize.data,
      stream: t.tStream.data,
      time: t.tTime.data,
      stack: t.tStack.data,
      compile: t.tCompile?.data ?? null,
      user: t.tUser?.data ?? null,
      deviceFree: t.tDeviceFree?.data ?? null,
    };
    return ids.map((rows, device) => {
      const n = rows.length;
      const first = n > 0 ? rows[0]! : 0;
      let contiguous = true;
      for (let i = 0; i < n; i++) {
        if (rows[i] !== first + i) {
          contiguous = false;
          break;
        }
      }
      // Contiguous rows (the normal case): views, no copy. Otherwise gather.
      const f64 = (c: Float64Array): Float64Array => (contiguous ? c.subarray(first, first + n) : gatherF64(c, rows));
      const i32 = (c: Int32Array): Int32Array => (contiguous ? c.subarray(first, first + n) : Int32Array.from(rows, (r) => c[r]!));
      return {
        device,
        count: n,
        action: contiguous ? action.subarray(first, first + n) : Uint8Array.from(rows, (r) => action[r]!),
        addr: f64(cols.addr),
        size: f64(cols.size),
        stream: f64(cols.stream),
        timeUs: f64(cols.time),
        stack: i32(cols.stack),
        compileContext: cols.compile ? i32(cols.compile) : null,
        userMetadata: cols.user ? i32(cols.user) : null,
        deviceFree: cols.deviceFree ? f64(cols.deviceFree) : null,
      };
    });
  }

  /** Plain JSON-ready copy of a generic node (allocator_settings, annotations, unknown keys). */
  plain(v: unknown, path: string): PlainValue {
    return toPlain(this.toPickleValue(v, path, 0));
  }

  toPickleValue(v: unknown, path: string, depth: number): PickleValue {
    if (depth > 1000) throw shapeError(path, 'nested deeper than 1000');
    if (v instanceof RawDict) {
      const d = this.dict(v)!;
      const out = new Map<PickleValue, PickleValue>();
      for (const [k, x] of d) out.set(k as PickleValue, this.toPickleValue(x, path, depth + 1));
      return out;
    }
    if (v instanceof RawList) return this.list(v, path).map((x) => this.toPickleValue(x, path, depth + 1));
    if (v instanceof Map) {
      const out = new Map<PickleValue, PickleValue>();
      for (const [k, x] of v) out.set(k as PickleValue, this.toPickleValue(x, path, depth + 1));
      return out;
    }
    if (Array.isArray(v)) {
      const items = v.map((x) => this.toPickleValue(x, path, depth + 1));
      return isTuple(v) ? makeTuple(items) : items;
    }
    return v as PickleValue;
  }

  private recognisedToMap(v: RawDict): Map<unknown, unknown> {
    const t = this.t;
    const i = v.id;
    if (v.kind === FRAME) {
      const f = t.frames[i]!;
      return new Map<unknown, unknown>([
        ['name', f.name],
        ['filename', f.filename],
        ['line', f.line],
      ]);
    }
    if (v.kind === BLOCK) {
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

const MODELLED_KEYS = new Set(['segments', 'device_traces', 'allocator_settings', 'external_annotations']);

function assemble(root: unknown, t: SnapshotTables): MemorySnapshot {
  const a = new Assembler(t);
  let top = a.dict(root);
  if (!top) {
    // PyTorch 1.x `memory_snapshot()` returned the segment list alone.
    if (Array.isArray(root) || root instanceof RawList) top = new Map<unknown, unknown>([['segments', root]]);
    else throw shapeError('top level', `expected a dict with 'segments', found ${describe(root)}`);
  }
  if (!top.has('segments')) throw shapeError('top level', "no 'segments' key: not a PyTorch memory snapshot");
  const { segments, blocks } = a.segments(top.get('segments'));
  const traces = a.traces(top.get('device_traces'));
  const settings = top.get('allocator_settings');
  const allocatorSettings = settings === undefined || settings === null ? null : a.plain(settings, 'allocator_settings');
  if (allocatorSettings !== null && (typeof allocatorSettings !== 'object' || Array.isArray(allocatorSettings))) {
    throw shapeError('allocator_settings', 'expected a dict');
  }
  const annotations: ExternalAnnotation[] = [];
  const rawAnnotations = top.get('external_annotations');
  if (rawAnnotations !== undefined && rawAnnotations !== null) {
    a.list(rawAnnotations, 'external_annotations').forEach((x, i) => {
      const path = `external_annotations[${i}]`;
      const d = a.dict(x);
      if (!d) throw shapeError(path, `expected a dict, found ${describe(x)}`);
      annotations.push({
        stage: a.str(d.get('stage'), path, 'stage'),
        name: a.str(d.get('name'), path, 'name'),
        device: a.optInt(d.get('device'), -1, path, 'device'),
        timeUs: typeof d.get('time_us') === 'number' ? (d.get('time_us') as number) : a.int(d.get('time_us'), path, 'time_us'),
      });
    });
  }
  const extra: { [key: string]: PlainValue } = {};
  const unknownKeys: string[] = [];
  for (const [k, v] of top) {
    if (typeof k === 'string' && MODELLED_KEYS.has(k)) continue;
    unknownKeys.push(String(k));
    extra[String(k)] = a.plain(v, String(k));
  }
  const traceKeys = TRACE_KEYS.filter((_, bit) => t.traceKeyMask & (1 << bit)) as string[];
  traceKeys.push(...t.otherTraceKeys);
  const stacks: StackTable = {
    count: t.stackOffsets.length - 1,
    offsets: t.stackOffsets.finish(),
    frameIds: t.stackFrames.finish(),
  };
  return {
    segments,
    blocks,
    traces,
    frames: t.frames,
    stacks,
    strings: t.strings,
    stateNames: t.stateNames,
    actionNames: t.actionNames,
    allocatorSettings: allocatorSettings as { [key: string]: PlainValue } | null,
    externalAnnotations: annotations,
    format: {
      hasAllocatorSettings: top.has('allocator_settings'),
      hasExternalAnnotations: top.has('external_annotations'),
      legacyBlockHistory: t.legacyHistory,
      traceKeys: traceKeys.sort(),
      unknownKeys,
    },
    extra,
  };
}

// ---------------------------------------------------------------------------------------------

export interface ReadSnapshotOptions {
  limits?: Partial<PickleLimits>;
  /** Called every ~0.5% of the file (at least every MiB) while reading; for progress bars. */
  onProgress?: (bytesRead: number, totalBytes: number) => void;
}

/** Normalises a snapshot already read with `readPickle`. */
export function normaliseSnapshot(value: PickleValue): MemorySnapshot {
  return assemble(value, new SnapshotTables());
}

/**
 * Reads a pickled PyTorch memory snapshot (`_dump_snapshot`) into memscope's model, fast and
 * without building a JavaScript object per block or event. Throws MemscopeError on bad input.
 */
export function readSnapshot(bytes: Uint8Array, options: ReadSnapshotOptions = {}): MemorySnapshot {
  if (!(bytes instanceof Uint8Array)) throw new MemscopeError('bad-argument', 'readSnapshot: expected a Uint8Array');
  const limits: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...options.limits };
  const tables = new SnapshotTables(Math.max(1024, Math.min(Math.floor(bytes.length / 100), 1 << 27)));
  let root: unknown;
  try {
    root = runPickle(bytes, new SnapshotBuilder(tables, Math.floor(bytes.length / 40)), limits, options.onProgress);
  } catch (e) {
    if (!(e instanceof FastPathBail)) throw e;
    // Something the fast path does not model (e.g. a recognised dict modified later): read generically.
    return normaliseSnapshot(readPickle(bytes, limits));
  }
  return assemble(root, tables);
}

/** Reads up to `into.length` bytes of the file at `fileOffset` into `into`; returns how many. */
export type ReadAt = (into: Uint8Array, fileOffset: number) => number;

export interface ReadSnapshotPiecesOptions extends ReadSnapshotOptions {
  /** Bytes of the file held at a time (default 64 MiB); grows for a single larger opcode. */
  pieceBytes?: number;
}

/**
 * `readSnapshot` for a file read in pieces through `readAt` (src/torch/snapshot-node.ts reads a
 * path this way): only one piece of the file is in memory at a time, so a 1 GB snapshot costs
 * ~64 MB for its bytes instead of 1 GB. Each piece ends on an opcode boundary (`scanOpcodes`);
 * the machine keeps its state between pieces. Same result and errors as `readSnapshot`.
 */
export function readSnapshotPieces(readAt: ReadAt, totalBytes: number, options: ReadSnapshotPiecesOptions = {}): MemorySnapshot {
  const limits: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...options.limits };
  const tables = new SnapshotTables(Math.max(1024, Math.min(Math.floor(totalBytes / 100), 1 << 27)));
  const builder = new SnapshotBuilder(tables, Math.floor(totalBytes / 40));
  const machine = new PickleMachine(builder, limits, options.onProgress);
  let buf = new Uint8Array(Math.max(64, Math.min(options.pieceBytes ?? 64 << 20, totalBytes)));
  let have = 0; // valid bytes in buf
  let fileOffset = 0; // file offset of buf[0]
  let root: unknown;
  try {
    for (;;) {
      while (have < buf.length && fileOffset + have < totalBytes) {
        const n = readAt(buf.subarray(have), fileOffset + have);
        if (n <= 0) break;
        have += n;
      }
      const atEnd = fileOffset + have >= totalBytes;
      const scan = atEnd ? null : scanOpcodes(buf.subarray(0, have), 0);
      if (atEnd || scan!.reason !== 'more') {
        // The last piece (or STOP / a bad byte inside this one): run it to the end.
        const end = scan && scan.reason === 'stop' ? scan.end : have;
        root = machine.run(buf.subarray(0, end), fileOffset, true, totalBytes).value;
        break;
      }
      if (scan!.end === 0) {
        // One opcode larger than the buffer (a huge string): grow it.
        const bigger = new Uint8Array(buf.length * 2);
        bigger.set(buf.subarray(0, have));
        buf = bigger;
        continue;
      }
      machine.run(buf.subarray(0, scan!.end), fileOffset, false, totalBytes);
      buf.copyWithin(0, scan!.end, have);
      have -= scan!.end;
      fileOffset += scan!.end;
    }
  } catch (e) {
    if (!(e instanceof FastPathBail)) throw e;
    // As readSnapshot: something the fast path does not model; read the whole file generically.
    const all = new Uint8Array(totalBytes);
    let got = 0;
    while (got < totalBytes) {
      const n = readAt(all.subarray(got), got);
      if (n <= 0) break;
      got += n;
    }
    return normaliseSnapshot(readPickle(all.subarray(0, got), limits));
  }
  return assemble(root, tables);
}
