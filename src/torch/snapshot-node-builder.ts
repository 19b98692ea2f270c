/**
 * The snapshot builder's general path: every dict and list the pickle machine builds is a node
 * (RawDict / RawList), and frames, frame lists, blocks, segments and trace entries are recognised
 * when their SETITEMS / APPENDS arrive and stored in the tables (snapshot-tables.ts); everything
 * else stays a generic node for the assembler (snapshot-assembler.ts). The fast lanes
 * (snapshot-builder.ts, snapshot-frame-list-lane.ts) build on it and leave to it whatever they do
 * not recognise.
 */
import { DEFAULT_PICKLE_LIMITS, makeTuple, type PickleBuilder } from './pickle/builder.js';
import { pickleError } from './pickle/errors.js';
import { PickleMemo } from './pickle/memo.js';
import { BLOCK_ROW_BYTES, SHARED_NODE_BYTES, SegmentBit } from './snapshot-lane-keys.js';
import { FastPathBail, IdList, MAX_RELEASED_SLOT, nodeFor, NodeKind, RawDict, RawList, safeInt, SEGMENT_KEY_BIT, SEGMENT_KEYS, SnapshotTables } from './snapshot-tables.js';

export class SnapshotNodeBuilder implements PickleBuilder {
  protected memo = new PickleMemo();
  /** Per memo index: the kind of node a released entry was (its id is kept by the memo). */
  protected releasedKind: Uint8Array;
  readonly memoCapacityHint: number;

  /**
   * `expectedMemo`: a guess from the file size (PyTorch memoizes ~1 value per 40–50 bytes).
   * `maxItems`: limits.maxContainerItems, which a list or dict filled by several APPENDS /
   * SETITEMS batches must not pass in total (the machine checks each batch).
   */
  constructor(
    protected readonly t: SnapshotTables,
    expectedMemo = 0,
    protected readonly maxItems = DEFAULT_PICKLE_LIMITS.maxContainerItems,
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
    // The fast lanes' caches are keyed by memo index, so a re-PUT (also of a slot a lane filled) voids them.
    if (replaced) {
      this.memoReput = true;
      this.forgetMemoCaches();
    }
  }

  /** Whether the file has re-PUT a memo index (PyTorch never does; see appendItems). */
  protected memoReput = false;

  /** Empties what the fast lanes keep by memo index (SnapshotBuilder and FrameListLane add theirs). */
  protected forgetMemoCaches(): void {}

  /**
   * The node's content now lives in the tables: drop the memo's reference so the node can be
   * collected young (PyTorch memoizes every dict and list, so otherwise every trace entry and
   * frame list would survive to the end of the read).
   */
  protected release(node: RawDict | RawList, kind: number, id: number): void {
    const slot = node.slot;
    if (slot < 0 || slot >= MAX_RELEASED_SLOT || this.memo.valueAt(slot) !== node) return;
    this.releaseSlot(slot, kind, id);
  }

  /** `slot` is inside the memo's index (a lane checked it is free, or it holds the node released). */
  protected releaseSlot(slot: number, kind: number, id: number): void {
    // Small enough for V8 to inline into the lanes; growing is rare and out of line.
    if (slot >= this.releasedKind.length) this.growReleasedKinds(slot);
    this.releasedKind[slot] = kind;
    this.memo.release(slot, id);
  }

  protected growReleasedKinds(slot: number): void {
    const kinds = new Uint8Array(Math.max(slot + 1, this.releasedKind.length * 2, 1024));
    kinds.set(this.releasedKind);
    this.releasedKind = kinds;
  }

  /** See PickleBuilder.pendingCharge. */
  pendingCharge = 0;

  materialize(index: number, id: number): unknown {
    const kind = this.releasedKind[index]!;
    let node: RawDict | RawList;
    if (kind === NodeKind.Segment || kind === NodeKind.SegmentBlocks) {
      // A segment (or its blocks list) placed again is all its blocks again to the assembler: each
      // GET costs that, and the node is not put back in the memo, so every later GET does too.
      const t = this.t;
      const blocks = t.sBlockStart.data[id + 1]! - t.sBlockStart.data[id]!;
      this.pendingCharge += SHARED_NODE_BYTES + blocks * BLOCK_ROW_BYTES;
      if (kind === NodeKind.Segment) {
        node = nodeFor(NodeKind.Segment, id);
        node.slot = index;
        return node;
      }
    }
    if (kind === NodeKind.PoolTuple) {
      // The segment lane stored the pair in the segment columns; the same tuple the machine makes.
      const t = this.t;
      const tuple = makeTuple([t.sPool0.data[id]!, t.sPool1.data[id]!]);
      this.memo.put(index, tuple);
      return tuple;
    }
    if (kind === NodeKind.Stack) {
      node = new RawList();
      node.stack = id;
      // Fetched again: whatever holds it took the stack as it is now (appendItems).
      node.sealed = true;
    } else if (kind === NodeKind.SegmentBlocks) {
      node = new RawList();
      const t = this.t;
      const start = t.sBlockStart.data[id]!;
      const end = t.sBlockStart.data[id + 1]!;
      if (end > start) {
        node.ids = IdList.from(t.segmentBlocks.data.subarray(start, end));
        node.idKind = NodeKind.Block;
      }
      node.sealed = true;
    } else node = nodeFor(kind, id);
    node.slot = index;
    // Later GETs see the same object again (a blocks list is rebuilt each time: see above).
    if (kind !== NodeKind.SegmentBlocks) this.memo.put(index, node);
    return node;
  }

  newDict(): unknown {
    return new RawDict();
  }

  /**
   * A segment's int fields being read, by their SEGMENT_KEYS bit (device, address, total_size,
   * allocated_size, active_size, requested_size, stream); NaN for one not given (or None).
   */
  protected readonly segmentInts = new Float64Array(7);

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
        if (this.memoReput || this.memo.releasedId(slot) !== target.stack || this.releasedKind[slot] !== NodeKind.Stack) throw new FastPathBail();
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
        if (!(f instanceof RawDict) || f.kind !== NodeKind.Frame) {
          frames = false;
          break;
        }
        ids[i] = f.id;
      }
      if (frames) {
        target.stack = this.t.internStack(ids, n);
        this.release(target, NodeKind.Stack, target.stack);
        return;
      }
    }
    for (let i = start; i < end; i++) {
      const x = stack[i];
      if (target.items === null && x instanceof RawDict && (x.kind === NodeKind.Trace || x.kind === NodeKind.Block || x.kind === NodeKind.Segment) && (target.ids === null || target.idKind === x.kind)) {
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

  protected readonly frameNodes: RawDict[] = [];
  protected frameNodesOf(stack: number): RawDict[] {
    const t = this.t;
    const out: RawDict[] = [];
    for (let k = t.stackOffsets.data[stack]!; k < t.stackOffsets.data[stack + 1]!; k++) {
      const id = t.stackFrames.data[k]!;
      out.push((this.frameNodes[id] ??= nodeFor(NodeKind.Frame, id)));
    }
    return out;
  }

  setItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
    if (!(target instanceof RawDict)) throw pickleError('pickle-corrupt', at, 'SETITEMS target is not a dict');
    if (target.kind !== NodeKind.Generic) throw new FastPathBail(); // a recognised dict being modified again
    if (target.map === null) {
      const first = stack[start];
      let kind = NodeKind.Generic;
      let id = -1;
      if (first === 'action') (kind = NodeKind.Trace), (id = this.trace(stack, start, end));
      else if (end - start === 6 && (first === 'name' || first === 'filename' || first === 'line')) (kind = NodeKind.Frame), (id = this.frame(stack, start, end));
      else if (first === 'device') (kind = NodeKind.Segment), (id = this.segment(stack, start, end));
      else if (first === 'address' || first === 'size') (kind = NodeKind.Block), (id = this.block(stack, start, end));
      if (id >= 0) {
        target.kind = kind;
        target.id = id;
        // Frames stay in the memo: later frame lists GET them over and over.
        if (kind !== NodeKind.Frame) this.release(target, kind, id);
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
  protected readonly placedNodes = new WeakSet<RawDict | RawList>();

  /**
   * A node is being placed in a generic container: a shared one placed again is charged what the
   * assembler spends to place its content again (`pendingCharge`), so that a segment or blocks
   * list the file references a million times meets the `maxBytes` limit instead of the heap's.
   */
  protected placed(node: RawDict | RawList): void {
    if (node instanceof RawDict && node.kind !== NodeKind.Generic) return;
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
  protected listCost(v: unknown): number {
    if (!(v instanceof RawList)) return 0;
    if (v.items !== null) return 8 * v.items.length;
    if (v.ids === null) return 0;
    if (v.idKind !== NodeKind.Segment) return BLOCK_ROW_BYTES * v.ids.length;
    const t = this.t;
    const ids = v.ids.view();
    let blocks = 0;
    for (let k = 0; k < ids.length; k++) blocks += t.sBlockStart.data[ids[k]! + 1]! - t.sBlockStart.data[ids[k]!]!;
    return BLOCK_ROW_BYTES * (blocks + ids.length);
  }

  finish(value: unknown): unknown {
    return value;
  }

  protected frame(kv: unknown[], start: number, end: number): number {
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
  protected stackOf(v: unknown): number {
    if (!(v instanceof RawList) || v.ids !== null) return -1;
    if (v.stack < 0 && v.items !== null) {
      const items = v.items;
      const n = items.length;
      const ids = this.t.scratchFor(n);
      for (let i = 0; i < n; i++) {
        const f = items[i];
        if (!(f instanceof RawDict) || f.kind !== NodeKind.Frame) return -1;
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
  protected segment(kv: unknown[], start: number, end: number): number {
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
        else if (v instanceof RawList && v.stack < 0 && v.items === null && (v.ids === null || v.idKind === NodeKind.Block)) blocks = v;
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
      this.release(blocks, NodeKind.SegmentBlocks, id);
    }
    return id;
  }

  protected block(kv: unknown[], start: number, end: number): number {
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

  protected trace(kv: unknown[], start: number, end: number): number {
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
