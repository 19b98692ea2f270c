/**
 * The allocator's segments and blocks at any trace event of one device: what
 * torch/utils/viz/MemoryViz.js's "Allocator State History" shows. The snapshot records only the
 * final state, so the state after event N comes from walking the trace backwards from it and
 * undoing events N+1 … end (an `alloc` undone removes its block, a `free_completed` undone brings
 * the block back pending its free, a `free_requested` undone makes it plainly allocated again, a
 * `segment_free` undone brings the segment back, a `segment_map` / `segment_unmap` undone shrinks
 * or regrows an expandable segment's mapped range).
 *
 * The backward walk is done once, when the model is made, and it logs for every event the block
 * and segments it replaced, so the model can then move one event either way exactly, and it keeps
 * the whole state every K events (checkpoints): reaching any event costs restoring the nearest
 * checkpoint and at most K/2 event applications, whatever the trace's length. No DOM: the
 * page and the unit tests run the same code.
 */
import type { HistorySegment, ReportHistory, ReportHistoryDevice } from '../snapshot-history-data.js';

/** A segment (or, for an expandable segment, one contiguous mapped range) of the state. */
export interface SegmentState {
  readonly address: number;
  readonly size: number;
  readonly stream: number;
  /** `segment_pool_id`; null when not recorded (old files, or a segment freed before the snapshot). */
  readonly pool: readonly [number, number] | null;
  readonly expandable: boolean;
  /** 'large' / 'small'; null for a segment freed before the snapshot (the trace does not say). */
  readonly kind: string | null;
}

/** An active block: allocated, or freed and waiting for its streams (pending). */
export interface BlockState {
  readonly address: number;
  readonly size: number;
  readonly requested: number;
  /** Index into the page's `stacks` (-1 none). */
  readonly stack: number;
  readonly pending: boolean;
}

interface Checkpoint {
  readonly position: number;
  readonly blocks: BlockState[];
  readonly segments: SegmentState[];
}

const NONE: readonly SegmentState[] = [];

/** Events between checkpoints: enough that the checkpoints hold about `budget` block and segment references in all. */
export function checkpointInterval(events: number, live: number, budget = 4_000_000): number {
  let k = 256;
  while (k < events && (events / k) * (live + 1) > budget) k *= 2;
  return k;
}

export class AllocatorHistory {
  readonly n: number;
  /** Events between checkpoints. */
  readonly interval: number;
  /** The state is the one after event `position` (-1: before the first event). */
  private pos: number;
  private readonly blocks = new Map<number, BlockState>();
  /** By address. */
  private segs: SegmentState[] = [];
  private active = 0;
  private reservedBytes = 0;
  /** Per event: the block at its address before and after it (null: none); undefined for events that touch no block. */
  private readonly blockBefore: (BlockState | null | undefined)[];
  private readonly blockAfter: (BlockState | null | undefined)[];
  /** Per event: the segments it removed and the ones it added (undefined: none). */
  private readonly segBefore: (readonly SegmentState[] | undefined)[];
  private readonly segAfter: (readonly SegmentState[] | undefined)[];
  private readonly checkpoints: Checkpoint[] = [];
  /** Counts changes to the segment list, so a view can keep its layout while it is the same. */
  segmentVersion = 0;
  /** Event applications done since made (for measuring). */
  applied = 0;

  constructor(
    readonly device: ReportHistoryDevice,
    private readonly actions: readonly string[],
    interval?: number,
  ) {
    const n = device.events.action.length;
    this.n = n;
    this.interval = interval ?? checkpointInterval(n, device.blocks.address.length + device.segments.length);
    // Filled, so the engine keeps them as flat arrays however long the trace.
    this.blockBefore = new Array(n).fill(undefined);
    this.blockAfter = new Array(n).fill(undefined);
    this.segBefore = new Array(n).fill(undefined);
    this.segAfter = new Array(n).fill(undefined);
    for (const s of device.segments) this.segs.push(finalSegment(s));
    const b = device.blocks;
    for (let i = 0; i < b.address.length; i++) {
      this.setBlock(b.address[i], { address: b.address[i], size: b.size[i], requested: b.requested[i], stack: b.stack[i], pending: b.pending[i] === 1 });
    }
    for (const s of this.segs) this.reservedBytes += s.size;
    this.pos = n - 1;
    this.checkpoint();
    for (let i = n - 1; i >= 0; i--) {
      this.undoFirstTime(i);
      this.pos = i - 1;
      if (i % this.interval === 0) this.checkpoint();
    }
  }

  /** Index of the event whose state is shown (-1: before the first event). */
  get position(): number {
    return this.pos;
  }

  /** Bytes in active blocks and in segments now. */
  get allocatedBytes(): number {
    return this.active;
  }
  get reservedTotal(): number {
    return this.reservedBytes;
  }

  /** Segments now, by address. */
  segments(): readonly SegmentState[] {
    return this.segs;
  }

  /** Active blocks now, in no order. */
  activeBlocks(): IterableIterator<BlockState> {
    return this.blocks.values();
  }

  blockAt(address: number): BlockState | undefined {
    return this.blocks.get(address);
  }

  action(i: number): string {
    return this.actions[this.device.events.action[i]] ?? '?';
  }

  /** The event's address (NaN for events without one). */
  address(i: number): number {
    const a = this.device.events.addr[i];
    return a >= 0 ? this.device.addresses[a] : NaN;
  }

  /** Segments event i removes and adds, going forward (empty when it changes none). */
  segmentChanges(i: number): { removed: readonly SegmentState[]; added: readonly SegmentState[] } {
    return { removed: this.segBefore[i] ?? NONE, added: this.segAfter[i] ?? NONE };
  }

  /** Moves to the state after event `target` (clamped to -1 … n-1). */
  goTo(target: number): void {
    const to = Math.max(-1, Math.min(this.n - 1, Math.round(target)));
    // The nearest checkpoint, restored only when it is closer than the current state.
    const k = Math.round((to + 1) / this.interval);
    const cp = this.checkpoints[Math.min(this.checkpoints.length - 1, Math.max(0, k))];
    if (cp && Math.abs(cp.position - to) < Math.abs(this.pos - to)) this.restore(cp);
    while (this.pos < to) this.redo(this.pos + 1);
    while (this.pos > to) this.undo(this.pos);
  }

  private setBlock(address: number, b: BlockState | null): void {
    const old = this.blocks.get(address);
    if (old) this.active -= old.size;
    if (b) {
      this.blocks.set(address, b);
      this.active += b.size;
    } else this.blocks.delete(address);
  }

  private replaceSegments(remove: readonly SegmentState[], add: readonly SegmentState[]): void {
    if (!remove.length && !add.length) return;
    for (const s of remove) {
      // Segments never overlap, so the one at this address is `s` itself when it is present.
      const i = segmentIndex(this.segs, s.address);
      if (this.segs[i] === s) {
        this.segs.splice(i, 1);
        this.reservedBytes -= s.size;
      }
    }
    for (const s of add) {
      this.segs.splice(segmentIndex(this.segs, s.address), 0, s);
      this.reservedBytes += s.size;
    }
    this.segmentVersion++;
  }

  private redo(i: number): void {
    const after = this.blockAfter[i];
    if (after !== undefined) this.setBlock(this.address(i), after);
    const before = this.segBefore[i];
    if (before) this.replaceSegments(before, this.segAfter[i] ?? NONE);
    this.pos = i;
    this.applied++;
  }

  private undo(i: number): void {
    const before = this.blockBefore[i];
    if (before !== undefined) this.setBlock(this.address(i), before);
    const after = this.segAfter[i];
    if (after) this.replaceSegments(after, this.segBefore[i] ?? NONE);
    this.pos = i - 1;
    this.applied++;
  }

  private checkpoint(): void {
    this.checkpoints.unshift({ position: this.pos, blocks: [...this.blocks.values()], segments: [...this.segs] });
  }

  private restore(cp: Checkpoint): void {
    this.blocks.clear();
    this.active = 0;
    for (const b of cp.blocks) this.setBlock(b.address, b);
    this.segs = [...cp.segments];
    this.reservedBytes = 0;
    for (const s of this.segs) this.reservedBytes += s.size;
    this.segmentVersion++;
    this.pos = cp.position;
  }

  /** Undoes event i during the backward walk, logging what it replaced. */
  private undoFirstTime(i: number): void {
    const ev = this.device.events;
    const action = this.action(i);
    const addr = this.address(i);
    const size = ev.size[i];
    const logBlock = (before: BlockState | null): void => {
      this.blockAfter[i] = this.blocks.get(addr) ?? null;
      this.blockBefore[i] = before;
      this.setBlock(addr, before);
    };
    const logSegments = (removed: SegmentState[], added: SegmentState[]): void => {
      // Going forward, event i removes `added` (its state before) and adds `removed`.
      if (!removed.length && !added.length) return;
      this.segAfter[i] = removed;
      this.segBefore[i] = added;
      this.replaceSegments(removed, added);
    };
    if (Number.isNaN(addr)) return;
    switch (action) {
      case 'alloc':
        logBlock(null);
        break;
      case 'free_requested': {
        const b = this.blocks.get(addr);
        if (b) logBlock({ ...b, pending: false });
        break;
      }
      case 'free_completed':
        logBlock({ address: addr, size, requested: size, stack: ev.stack[i], pending: true });
        break;
      case 'segment_alloc': {
        const s = this.segs[segmentIndex(this.segs, addr)];
        if (s && s.address === addr) logSegments([s], []);
        break;
      }
      case 'segment_free':
        logSegments([], [{ address: addr, size, stream: this.device.streams[ev.stream[i]], pool: null, expandable: false, kind: null }]);
        break;
      case 'segment_map': {
        // Before the map, the range was not mapped: cut it out of the mapped range holding it.
        const at = segmentIndex(this.segs, addr + 1) - 1;
        const s = this.segs[at];
        if (!s || s.address > addr || s.address + s.size < addr + size) break;
        const pieces: SegmentState[] = [];
        if (addr > s.address) pieces.push({ ...s, size: addr - s.address });
        if (addr + size < s.address + s.size) pieces.push({ ...s, address: addr + size, size: s.address + s.size - addr - size });
        logSegments([s], pieces);
        break;
      }
      case 'segment_unmap': {
        // Before the unmap the range was mapped, one contiguous range with its mapped neighbours.
        const stream = this.device.streams[ev.stream[i]];
        const at = segmentIndex(this.segs, addr);
        const prev = this.segs[at - 1];
        const next = this.segs[at];
        const joins = (s: SegmentState | undefined): s is SegmentState => !!s && s.expandable && s.stream === stream;
        const removed: SegmentState[] = [];
        let start = addr;
        let end = addr + size;
        let like: SegmentState | null = null;
        if (joins(prev) && prev.address + prev.size === addr) {
          removed.push(prev);
          start = prev.address;
          like = prev;
        }
        if (joins(next) && next.address === addr + size) {
          removed.push(next);
          end = next.address + next.size;
          like ??= next;
        }
        const merged: SegmentState = like ? { ...like, address: start, size: end - start } : { address: start, size: end - start, stream, pool: null, expandable: true, kind: null };
        logSegments(removed, [merged]);
        break;
      }
      default:
        break;
    }
  }
}

function finalSegment(s: HistorySegment): SegmentState {
  return { address: s.address, size: s.size, stream: s.stream, pool: s.pool, expandable: s.expandable, kind: s.kind };
}

/** Index of the first segment at or after `address` (segments by address). */
export function segmentIndex(segs: readonly SegmentState[], address: number): number {
  let lo = 0;
  let hi = segs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (segs[mid].address < address) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The state as plain sorted lists, for tests and comparisons. */
export function stateSummary(h: AllocatorHistory): { segments: [number, number][]; blocks: [number, number, number][] } {
  const blocks = [...h.activeBlocks()].map((b): [number, number, number] => [b.address, b.size, b.pending ? 1 : 0]).sort((x, y) => x[0] - y[0]);
  return { segments: h.segments().map((s): [number, number] => [s.address, s.size]), blocks };
}

/** One model per device of the page's history data. */
export function allocatorHistories(history: ReportHistory): AllocatorHistory[] {
  return history.devices.map((d) => new AllocatorHistory(d, history.actions));
}
