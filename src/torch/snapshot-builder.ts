/**
 * The recognising pickle builder behind `readSnapshot`: trace entries through a fast lane straight
 * from the opcode bytes, frames / blocks / trace entries / frame lists recognised at SETITEMS and
 * APPENDS, everything else kept as generic nodes for the assembler (snapshot-decoder.ts).
 */
import { decodeLong, decodeUtf8, pickleError, type FastLane, type PickleBuilder } from './pickle/machine.js';
import {
  BLOCK,
  FRAME,
  FastPathBail,
  GENERIC,
  I32Column,
  MAX_RELEASED_SLOT,
  RELEASED,
  RawDict,
  RawList,
  STACK,
  SnapshotTables,
  TRACE,
  TRACE_KEY_BIT,
  nodeFor,
  safeInt,
} from './snapshot-tables.js';

// ---------------------------------------------------------------------------------------------
// The recognising builder (fast path)

export class SnapshotBuilder implements PickleBuilder {
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

