import { MemscopeError } from '../core/errors.js';
import { AddressMap } from './address-map.js';
import { SortedSet } from './block-set.js';
import { DeviceBackend, SimulatedDevice } from './device.js';
import { DEFAULT_SETTINGS, divisionsFor, type AllocatorSettings } from './settings.js';
import { isSmallSize, MIN_BLOCK_SIZE, roundSize, segmentSizeFor, SMALL_BUFFER, SMALL_SIZE, LARGE_BUFFER } from './sizes.js';
import { AGGREGATE, DeviceStats, LARGE_POOL, SMALL_POOL } from './stats.js';
import type { Frame, KnownTraceAction } from '../torch/pytorch-vocabulary.js';

/**
 * A model of one device's CUDA caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator), driven by
 * malloc/free calls. It keeps PyTorch's data structures — blocks linked into
 * segments, per-pool free sets ordered by (stream, size, address) — and
 * applies PyTorch's rules in PyTorch's order, so that a replayed trace lands
 * every block at the address PyTorch chose. See docs/ALLOCATOR.md.
 */

/** One entry of the history ring, shaped like PyTorch's device_traces entries. */
export interface TraceEntry {
  action: KnownTraceAction;
  /** Absent on 'oom' entries, which carry device_free instead. */
  addr?: number;
  device_free?: number;
  size: number;
  stream: number;
  time_us: number;
  frames?: Frame[];
}

export interface HistorySettings {
  /** null: no history; 'state': frames of live blocks; 'all': also the trace ring. */
  enabled: 'state' | 'all' | null;
  /** null: no frames; 'state': frames on live blocks; 'alloc': also on trace entries; 'all': also the frames of frees. */
  context: 'state' | 'alloc' | 'all' | null;
  maxEntries: number;
}

export interface Block {
  address: number;
  size: number;
  /** Size asked for by the allocation this block last served (stale once freed, as in PyTorch). */
  requestedSize: number;
  stream: number;
  pool: Pool;
  allocated: boolean;
  /** Freed by the program but still in use by a stream (free_requested seen, free_completed not yet). */
  pendingFree: boolean;
  mapped: boolean;
  prev: Block | null;
  next: Block | null;
  expandable: ExpandableSegment | null;
  gcCountBase: number;
  frames: Frame[] | null;
  segmentFrames: Frame[] | null;
}

export interface Pool {
  readonly isSmall: boolean;
  /** Free, mapped blocks by (stream, size, address). */
  readonly blocks: SortedSet<Block>;
  /** Unmapped address ranges of expandable segments by (stream, address). */
  readonly unmapped: SortedSet<Block>;
  /** Counts get_free_block calls (only while GC is active): a cached block's age. */
  freeCallCount: number;
  /** The stat slots this pool updates: the aggregate and its own. */
  readonly statIndexes: readonly number[];
}

/** A virtual address range mapped page by page (expandable_segments:True). */
export interface ExpandableSegment {
  readonly base: number;
  readonly size: number;
  readonly pageSize: number;
  readonly stream: number;
  /** Indexes of the pages that are mapped. */
  readonly mappedPages: Set<number>;
}

function compareBySize(a: Block, b: Block): number {
  if (a.stream !== b.stream) return a.stream - b.stream;
  if (a.size !== b.size) return a.size - b.size;
  return a.address - b.address;
}

function compareByAddress(a: Block, b: Block): number {
  if (a.stream !== b.stream) return a.stream - b.stream;
  return a.address - b.address;
}

function newPool(isSmall: boolean): Pool {
  return {
    isSmall,
    blocks: new SortedSet<Block>(compareBySize),
    unmapped: new SortedSet<Block>(compareByAddress),
    freeCallCount: 0,
    statIndexes: [AGGREGATE, isSmall ? SMALL_POOL : LARGE_POOL],
  };
}

function makeBlock(stream: number, size: number, pool: Pool, address: number, expandable: ExpandableSegment | null = null): Block {
  return {
    address,
    size,
    requestedSize: 0,
    stream,
    pool,
    allocated: false,
    pendingFree: false,
    mapped: true,
    prev: null,
    next: null,
    expandable,
    gcCountBase: 0,
    frames: null,
    segmentFrames: null,
  };
}

/**
 * Per settings object: the divisions lookup roundSize takes, or null when no interval has
 * divisions. Made once per settings rather than once per request (a closure per malloc is garbage
 * on the allocator's hot path).
 */
const divisionsLookups = new WeakMap<AllocatorSettings, ((size: number) => number) | null>();
function divisionsLookup(settings: AllocatorSettings): ((size: number) => number) | null {
  let lookup = divisionsLookups.get(settings);
  if (lookup === undefined) {
    lookup = settings.roundupPower2Divisions.some((d) => d > 1) ? (size: number) => divisionsFor(settings, size) : null;
    divisionsLookups.set(settings, lookup);
  }
  return lookup;
}

function isSplit(b: Block): boolean {
  return b.prev !== null || b.next !== null;
}

/** PyTorch's format_size: bytes up to 1 KiB, then KiB/MiB/GiB with two decimals. */
export function formatOomSize(size: number): string {
  if (size <= 1024) return `${size} bytes`;
  if (size <= 1048576) return `${(size / 1024).toFixed(2)} KiB`;
  if (size <= 1073741824) return `${(size / 1048576).toFixed(2)} MiB`;
  return `${(size / 1073741824).toFixed(2)} GiB`;
}

export function hexAddress(address: number): string {
  return `0x${address.toString(16)}`;
}

/** Layout of one segment for loading a known state (replay) or reading it out. */
export interface SegmentLayout {
  address: number;
  totalSize: number;
  stream: number;
  isSmall: boolean;
  blocks: { address: number; size: number; allocated: boolean; requestedSize: number; frames?: Frame[] | null }[];
}

/** An expandable segment's address range and its mapped parts, for loading a known state. */
export interface ExpandableLayout {
  base: number;
  /** Bytes of address space reserved. */
  size: number;
  pageSize: number;
  stream: number;
  isSmall: boolean;
  /** Contiguous mapped runs of whole pages, each with the blocks that tile it. */
  ranges: SegmentLayout[];
}

export interface AllocatorOptions {
  device?: number;
  settings?: AllocatorSettings;
  backend?: DeviceBackend;
  /** Called for every trace entry whether or not history is on. */
  onTrace?: (entry: TraceEntry) => void;
  /**
   * Called for every segment_alloc / segment_free / segment_map / segment_unmap whether or not
   * history is on, without building an entry (replay compares them, once per trace event).
   */
  onSegmentEvent?: (action: 'segment_alloc' | 'segment_free' | 'segment_map' | 'segment_unmap', addr: number, size: number) => void;
  /** Supplies frames when history asks for them (the device API captures JS stacks). */
  stackProvider?: () => Frame[];
  /** Clock for time_us. */
  now?: () => number;
}

export class CachingAllocatorModel {
  readonly device: number;
  readonly stats = new DeviceStats();
  settings: AllocatorSettings;
  readonly backend: DeviceBackend;
  private readonly smallPool = newPool(true);
  private readonly largePool = newPool(false);
  /** Allocated and pending-free blocks by address. */
  private readonly activeBlocks = new AddressMap<Block>();
  private readonly expandableSegments: ExpandableSegment[] = [];
  /** Bytes held from the device (cudaMalloc'd or mapped): PyTorch's total_allocated_memory. */
  private totalAllocatedMemory = 0;
  private fraction: number | null = null;
  private allowedMemoryMaximum = 0;
  private history: HistorySettings = { enabled: null, context: null, maxEntries: 0 };
  private ring: TraceEntry[] = [];
  private ringNext = 0;
  private readonly onTrace: ((entry: TraceEntry) => void) | undefined;
  private readonly onSegmentEvent: AllocatorOptions['onSegmentEvent'];
  private readonly stackProvider: () => Frame[];
  private readonly now: () => number;
  /**
   * Block objects no segment holds any more (merged into a neighbour, or released with their
   * segment), reused by newBlock: a split then costs no allocation.
   */
  private readonly spareBlocks: Block[] = [];
    /** One reusable lookup key (the comparators read only stream, size and address). */
  private readonly key = { stream: 0, size: 0, address: 0 } as { stream: number; size: number; address: number };

  constructor(options: AllocatorOptions = {}) {
    this.device = options.device ?? 0;
    this.settings = options.settings ?? DEFAULT_SETTINGS;
    this.backend = options.backend ?? new SimulatedDevice();
    this.onTrace = options.onTrace;
    this.onSegmentEvent = options.onSegmentEvent;
    this.stackProvider = options.stackProvider ?? (() => []);
    this.now = options.now ?? (() => Math.round((globalThis.performance?.now() ?? Date.now()) * 1000));
  }

  // ---------------------------------------------------------------- settings

  /** torch.cuda.set_per_process_memory_fraction. */
  setMemoryFraction(fraction: number): void {
    if (typeof fraction !== 'number' || !Number.isFinite(fraction)) {
      throw new MemscopeError('bad-argument', `Invalid type for fraction argument, must be a number, got ${String(fraction)}`);
    }
    if (fraction < 0 || fraction > 1) {
      throw new MemscopeError('bad-argument', `Invalid fraction value: ${fraction}. Allowed range: 0~1`);
    }
    this.fraction = fraction;
    this.allowedMemoryMaximum = Math.floor(fraction * this.backend.totalMemory);
  }

  get memoryFraction(): number | null {
    return this.fraction;
  }

  setHistory(history: HistorySettings): void {
    if (!(Number.isInteger(history.maxEntries) && history.maxEntries >= 0)) {
      throw new MemscopeError('bad-argument', `maxEntries must be a non-negative integer, got ${history.maxEntries}`);
    }
    const keep = this.traceEntries();
    this.history = { ...history };
    this.ring = history.enabled === 'all' ? keep.slice(Math.max(0, keep.length - history.maxEntries)) : [];
    this.ringNext = this.ring.length % Math.max(1, history.maxEntries);
  }

  get historySettings(): Readonly<HistorySettings> {
    return this.history;
  }

  // ---------------------------------------------------------------- malloc

  /** Allocates `size` bytes on `stream`; returns the block's address. Throws MemscopeError('oom') like PyTorch's OutOfMemoryError. */
  malloc(origSize: number, stream = 0): number {
    if (!(Number.isSafeInteger(origSize) && origSize >= 0)) {
      throw new MemscopeError('bad-argument', `allocation size must be a non-negative integer, got ${origSize}`);
    }
    if (!(Number.isSafeInteger(stream) && stream >= 0)) {
      throw new MemscopeError('bad-argument', `stream must be a non-negative integer, got ${stream}`);
    }
    const context = this.history.context !== null ? this.stackProvider() : null;
    const size = this.roundRequest(origSize);
    const pool = isSmallSize(size) ? this.smallPool : this.largePool;
    const allocSize = segmentSizeFor(size);
    const gcActive = this.fraction !== null && this.settings.garbageCollectionThreshold > 0;

    let block = this.getFreeBlock(pool, size, stream);
    if (!block) {
      if (gcActive) this.garbageCollectCachedBlocks();
      block =
        this.allocBlock(pool, size, allocSize, stream, false, context) ??
        (this.releaseAvailableCachedBlocks(pool, size, stream) ? this.allocBlock(pool, size, allocSize, stream, false, context) : null) ??
        (this.releaseCachedBlocks() ? this.allocBlock(pool, size, allocSize, stream, true, context) : null);
    }
    if (!block) throw this.outOfMemory(allocSize, size, stream, context);
    return this.allocFoundBlock(block, size, origSize, context).address;
  }

  /** Whether a request would be served from the cache without touching the device (no side effects). */
  wouldReuseCachedBlock(origSize: number, stream = 0): boolean {
    const size = this.roundRequest(origSize);
    const pool = isSmallSize(size) ? this.smallPool : this.largePool;
    return this.findFreeBlock(pool, size, stream) !== null;
  }

  /** round_size under the current settings (power-of-two divisions only when some are set). */
  private roundRequest(origSize: number): number {
    const lookup = divisionsLookup(this.settings);
    return lookup ? roundSize(origSize, lookup) : roundSize(origSize);
  }

  /** The smallest possible block of (stream, size): lower_bound of it finds PyTorch's best fit. */
  private searchKey(stream: number, size: number): Block {
    this.key.stream = stream;
    this.key.size = size;
    this.key.address = 0;
    return this.key as Block;
  }

  private findFreeBlock(pool: Pool, size: number, stream: number): Block | null {
    const key = this.searchKey(stream, size);
    let i = pool.blocks.lowerBound(key);
    let found = pool.blocks.at(i);
    if (!found || found.stream !== stream) return null;
    if (found.expandable) {
      if (this.settings.expandableSegments) {
        // For best fit, a block at the mapped end of an expandable segment
        // counts as the size it could grow to.
        const expandableSize = (b: Block): number => b.size + (b.next && !b.next.mapped ? b.next.size : 0);
        let next = pool.blocks.at(i + 1);
        while (found.expandable && next && next.stream === stream && expandableSize(next) < expandableSize(found)) {
          i++;
          found = next;
          next = pool.blocks.at(i + 1);
        }
      } else {
        // Expandable segments switched off after some were made: skip them.
        do {
          i++;
          found = pool.blocks.at(i);
        } while (found && found.expandable && found.stream === stream);
        if (!found || found.stream !== stream) return null;
      }
    }
    const maxSplit = this.settings.maxSplitSize;
    // Never hand an oversize block to a small-enough request...
    if (size < maxSplit && found.size >= maxSplit) return null;
    // ...and serve an oversize request only from a block not much bigger than it.
    if (size >= maxSplit && found.size >= size + this.settings.maxNonSplitRoundingSize) return null;
    return found;
  }

  private getFreeBlock(pool: Pool, size: number, stream: number): Block | null {
    if (this.fraction !== null && this.settings.garbageCollectionThreshold > 0) pool.freeCallCount++;
    const found = this.findFreeBlock(pool, size, stream);
    if (found) pool.blocks.delete(found);
    return found;
  }

  /** A fresh segment (cudaMalloc) or, with expandable segments, more mapped pages. Null when the device says no. */
  private allocBlock(pool: Pool, size: number, allocSize: number, stream: number, isRetry: boolean, context: Frame[] | null): Block | null {
    if (isRetry) this.stats.num_alloc_retries++;
    if (this.fraction !== null && this.totalAllocatedMemory + allocSize > this.allowedMemoryMaximum) return null;
    if (this.settings.expandableSegments) return this.tryAllocateExpandableBlock(pool, size, stream, context);
    const address = this.backend.malloc(allocSize);
    if (address === null) return null;
    this.totalAllocatedMemory += allocSize;
    const block = this.newBlock(stream, allocSize, pool, address);
    block.segmentFrames = context;
    this.stats.num_device_alloc++;
    for (const i of pool.statIndexes) {
      this.stats.segment[i].increase(1);
      this.stats.reserved_bytes[i].increase(allocSize);
    }
    if (allocSize >= this.settings.maxSplitSize) this.stats.oversize_segments.increase(1);
    this.recordTrace('segment_alloc', address, allocSize, stream, context);
    return block;
  }

  private shouldSplit(block: Block, size: number): boolean {
    const remaining = block.size - size;
    if (block.pool.isSmall || this.settings.expandableSegments) return remaining >= MIN_BLOCK_SIZE;
    return size < this.settings.maxSplitSize && remaining > SMALL_SIZE;
  }

  private allocFoundBlock(found: Block, size: number, origSize: number, context: Frame[] | null): Block {
    const pool = found.pool;
    let block = found;
    const alreadySplit = isSplit(found);
    if (this.shouldSplit(found, size)) {
      // The allocation takes the low-address end; the remainder keeps the old block object.
      const remaining = found;
      block = this.newBlock(found.stream, size, pool, found.address, found.expandable);
      block.prev = remaining.prev;
      if (block.prev) block.prev.next = block;
      block.next = remaining;
      remaining.prev = block;
      remaining.address += size;
      remaining.size -= size;
      this.insertIntoBlocks(pool, remaining);
      if (!block.expandable) {
        if (alreadySplit) {
          for (const i of pool.statIndexes) this.stats.inactive_split_bytes[i].decrease(block.size);
        } else {
          for (const i of pool.statIndexes) {
            this.stats.inactive_split_bytes[i].increase(remaining.size);
            this.stats.inactive_split[i].increase(1);
          }
        }
      }
    } else if (alreadySplit && !block.expandable) {
      for (const i of pool.statIndexes) {
        this.stats.inactive_split_bytes[i].decrease(block.size);
        this.stats.inactive_split[i].decrease(1);
      }
    }
    block.allocated = true;
    block.requestedSize = origSize;
    block.frames = this.history.context !== null ? context : null;
    this.activeBlocks.set(block.address, block);
    this.recordTrace('alloc', block.address, origSize, block.stream, context);
    for (const i of pool.statIndexes) {
      this.stats.allocation[i].increase(1);
      this.stats.allocated_bytes[i].increase(block.size);
      this.stats.active[i].increase(1);
      this.stats.active_bytes[i].increase(block.size);
      this.stats.requested_bytes[i].increase(origSize);
    }
    if (block.size >= this.settings.maxSplitSize) this.stats.oversize_allocations.increase(1);
    return block;
  }

  /** A fresh free block: a spare one reset, or a new one. */
  private newBlock(stream: number, size: number, pool: Pool, address: number, expandable: ExpandableSegment | null = null): Block {
    const b = this.spareBlocks.pop();
    if (b === undefined) return makeBlock(stream, size, pool, address, expandable);
    b.address = address;
    b.size = size;
    b.requestedSize = 0;
    b.stream = stream;
    b.pool = pool;
    b.allocated = false;
    b.pendingFree = false;
    b.mapped = true;
    b.prev = null;
    b.next = null;
    b.expandable = expandable;
    b.gcCountBase = 0;
    b.frames = null;
    b.segmentFrames = null;
    return b;
  }

  private insertIntoBlocks(pool: Pool, block: Block): void {
    block.gcCountBase = pool.freeCallCount;
    pool.blocks.insert(block);
  }

  private outOfMemory(allocSize: number, size: number, stream: number, context: Frame[] | null): MemscopeError {
    const deviceFree = this.backend.freeMemory();
    const total = this.backend.totalMemory;
    this.recordTrace('oom', deviceFree, size, stream, context);
    this.stats.num_ooms++;
    const allocated = this.stats.allocated_bytes[AGGREGATE].current;
    const reserved = this.stats.reserved_bytes[AGGREGATE].current;
    const allowed = this.fraction !== null ? `${formatOomSize(this.allowedMemoryMaximum)} allowed; ` : '';
    return new MemscopeError(
      'oom',
      `CUDA out of memory. Tried to allocate ${formatOomSize(allocSize)}. GPU ${this.device} has a total capacity of ` +
        `${formatOomSize(total)} of which ${formatOomSize(deviceFree)} is free. ` +
        `Including non-PyTorch memory, this process has ${formatOomSize(this.totalAllocatedMemory)} memory in use. ` +
        `${allowed}Of the allocated memory ${formatOomSize(allocated)} is allocated by PyTorch, and ` +
        `${formatOomSize(reserved - allocated)} is reserved by PyTorch but unallocated. ` +
        `If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.` +
        ` (memscope model: ${this.settings.conf ? `settings "${this.settings.conf}"` : 'default settings'})`,
    );
  }

  // ---------------------------------------------------------------- free

  private lookupActive(address: number, verb: string): Block {
    if (!(Number.isSafeInteger(address) && address >= 0)) {
      throw new MemscopeError('bad-argument', `${verb}: address must be a non-negative integer, got ${String(address)}`);
    }
    const block = this.activeBlocks.get(address);
    if (block) return block;
    if (this.isFreeBlockStart(address)) {
      throw new MemscopeError('double-free', `${verb} of ${hexAddress(address)} on device ${this.device}: that block is already free (double free)`);
    }
    throw new MemscopeError('invalid-pointer', `${verb} of ${hexAddress(address)} on device ${this.device}: invalid device pointer (not an allocation of this allocator)`);
  }

  /** True when `address` starts a cached free block (a free of it would be a double free). */
  isFreeBlockStart(address: number): boolean {
    for (const pool of [this.largePool, this.smallPool]) {
      for (const b of pool.blocks) if (b.address === address) return true;
    }
    return false;
  }

  /** Frees an allocation now (free_requested and free_completed together). */
  free(address: number): void {
    this.requestFree(address);
    this.completeFree(address);
  }

  /**
   * The program released the block but a stream may still use it (PyTorch's
   * record_stream events): its bytes stop counting as allocated, yet it stays
   * out of the pool until completeFree.
   */
  requestFree(address: number): void {
    const block = this.lookupActive(address, 'free');
    if (block.pendingFree) {
      throw new MemscopeError('double-free', `free of ${hexAddress(address)} on device ${this.device}: already freed, waiting for its stream (double free)`);
    }
    const context = this.history.context === 'all' ? this.stackProvider() : null;
    block.allocated = false;
    block.pendingFree = true;
    for (const i of block.pool.statIndexes) {
      this.stats.allocation[i].decrease(1);
      this.stats.allocated_bytes[i].decrease(block.size);
    }
    this.recordTrace('free_requested', block.address, block.requestedSize, block.stream, context ?? block.frames);
    if (block.size >= this.settings.maxSplitSize) this.stats.oversize_allocations.decrease(1);
  }

  /** The stream is done with a block freed by requestFree: it returns to the pool and merges with free neighbours. */
  completeFree(address: number): void {
    this.completeFreeOf(this.activeBlocks.get(address), address);
  }

  /**
   * A trace's free_completed: completes a pending free, or frees an allocation whose
   * free_requested the trace does not hold (one lookup where blockSize + isPendingFree +
   * completeFree would take three).
   */
  completeFreeOrFree(address: number): void {
    const block = this.activeBlocks.get(address);
    if (block && !block.pendingFree) this.requestFree(address);
    this.completeFreeOf(block, address);
  }

  private completeFreeOf(block: Block | undefined, address: number): void {
    if (!block || !block.pendingFree) {
      if (block) throw new MemscopeError('bad-argument', `completing the free of ${hexAddress(address)}: it was not requested to be freed`);
      this.lookupActive(address, 'completing the free');
      return;
    }
    const context = this.history.context === 'all' ? this.stackProvider() : null;
    this.recordTrace('free_completed', block.address, block.requestedSize, block.stream, context ?? block.frames);
    block.pendingFree = false;
    block.frames = null;
    this.activeBlocks.delete(address);
    const originalSize = block.size;
    const requested = block.requestedSize;
    const pool = block.pool;
    let netBlocks = 0;
    let netBytes = 0;
    const prevSubsumed = this.tryMergeBlocks(block, block.prev, pool);
    if (prevSubsumed > 0) {
      netBlocks -= 1;
      netBytes -= prevSubsumed;
    }
    const nextSubsumed = this.tryMergeBlocks(block, block.next, pool);
    if (nextSubsumed > 0) {
      netBlocks -= 1;
      netBytes -= nextSubsumed;
    }
    this.insertIntoBlocks(pool, block);
    if (isSplit(block)) {
      netBlocks += 1;
      netBytes += block.size;
    }
    for (const i of pool.statIndexes) {
      // Expandable segments can always release whole free pages, so they are
      // left out of inactive_split (as PyTorch does).
      if (!block.expandable) {
        if (netBlocks > 0) this.stats.inactive_split[i].increase(netBlocks);
        else if (netBlocks < 0) this.stats.inactive_split[i].decrease(-netBlocks);
        if (netBytes > 0) this.stats.inactive_split_bytes[i].increase(netBytes);
        else if (netBytes < 0) this.stats.inactive_split_bytes[i].decrease(-netBytes);
      }
      this.stats.active[i].decrease(1);
      this.stats.active_bytes[i].decrease(originalSize);
      this.stats.requested_bytes[i].decrease(requested);
    }
  }

  /** Merges free `src` into `dst`; returns the bytes absorbed (0 when src is absent, busy or differently mapped). */
  private tryMergeBlocks(dst: Block, src: Block | null, pool: Pool): number {
    if (!src || src.allocated || src.pendingFree || dst.mapped !== src.mapped) return 0;
    if (src.mapped) pool.blocks.delete(src);
    else pool.unmapped.delete(src);
    if (dst.prev === src) {
      dst.address = src.address;
      dst.prev = src.prev;
      if (dst.prev) dst.prev.next = dst;
    } else {
      dst.next = src.next;
      if (dst.next) dst.next.prev = dst;
    }
    dst.size += src.size;
    const absorbed = src.size;
    this.spareBlocks.push(src);
    return absorbed;
  }

  // ---------------------------------------------------------------- release

  /** With max_split_size set: free oversize cached blocks to make room (largest first). */
  private releaseAvailableCachedBlocks(pool: Pool, size: number, stream: number): boolean {
    const maxSplit = this.settings.maxSplitSize;
    if (maxSplit === Infinity) return false;
    const keySize = size < maxSplit ? maxSplit : size;
    const key = this.searchKey(stream, keySize);
    let i = pool.blocks.lowerBound(key);
    const found = pool.blocks.at(i);
    if (!found || found.stream !== stream || found.expandable) {
      if (i === 0) return false;
      let released = 0;
      i--;
      const candidates: Block[] = [];
      // Walk down from the largest block of this stream, freeing oversize ones.
      while (i >= 0) {
        const b = pool.blocks.at(i)!;
        if (released >= keySize || b.size < maxSplit || b.stream !== stream) break;
        if (!b.expandable) {
          candidates.push(b);
          released += b.size;
        }
        i--;
      }
      if (released < keySize) {
        // PyTorch frees them even when they do not add up; keep that.
        for (const b of candidates) this.releaseBlock(b);
        return false;
      }
      for (const b of candidates) this.releaseBlock(b);
      return true;
    }
    this.releaseBlock(found);
    return true;
  }

  /** Frees every wholly free, unsplit segment: large pool first, then small (PyTorch's release_cached_blocks). */
  private releaseCachedBlocks(): boolean {
    this.stats.num_sync_all_streams++;
    this.releaseBlocks(this.largePool);
    this.releaseBlocks(this.smallPool);
    return true;
  }

  private releaseBlocks(pool: Pool): void {
    const toUnmap: Block[] = [];
    for (const block of pool.blocks.toArray()) {
      if (block.expandable) toUnmap.push(block);
      else if (!block.prev && !block.next) this.releaseBlock(block);
    }
    for (const block of toUnmap) {
      this.unmapBlock(block);
      // A segment with no page left mapped gives its address range back (PyTorch's release_expandable_segment).
      if (!block.mapped && !block.prev && !block.next) this.releaseExpandableSegment(block);
    }
  }

  private releaseExpandableSegment(block: Block): void {
    const segment = block.expandable!;
    const at = this.expandableSegments.indexOf(segment);
    if (at >= 0) this.expandableSegments.splice(at, 1);
    block.pool.unmapped.delete(block);
  }

  private releaseBlock(block: Block): void {
    const pool = block.pool;
    this.stats.num_device_free++;
    this.recordTrace('segment_free', block.address, block.size, block.stream, block.segmentFrames);
    this.backend.free(block.address, block.size);
    this.totalAllocatedMemory -= block.size;
    for (const i of pool.statIndexes) {
      this.stats.segment[i].decrease(1);
      this.stats.reserved_bytes[i].decrease(block.size);
    }
    if (block.size >= this.settings.maxSplitSize) this.stats.oversize_segments.decrease(1);
    pool.blocks.delete(block);
    this.spareBlocks.push(block);
  }

  /**
   * garbage_collection_threshold: once reserved memory passes the threshold
   * fraction of the allowed memory, free unsplit cached large blocks that have
   * gone unused for at least the average age, until enough is reclaimed.
   */
  private garbageCollectCachedBlocks(): void {
    const threshold = Math.floor(this.settings.garbageCollectionThreshold * this.allowedMemoryMaximum);
    if (this.totalAllocatedMemory <= threshold) return;
    const target = this.totalAllocatedMemory - threshold;
    const pool = this.largePool;
    let reclaimed = 0;
    let totalAge = 0;
    let freeable = 0;
    for (const b of pool.blocks) {
      if (!isSplit(b)) {
        totalAge += pool.freeCallCount - b.gcCountBase;
        freeable++;
      }
    }
    if (freeable === 0) return;
    let freedOne = true;
    while (reclaimed < target && freedOne && freeable > 0) {
      const ageThreshold = totalAge / freeable;
      freedOne = false;
      for (const b of pool.blocks.toArray()) {
        const age = pool.freeCallCount - b.gcCountBase;
        if (!isSplit(b) && !b.expandable && age >= ageThreshold) {
          freedOne = true;
          reclaimed += b.size;
          totalAge -= age;
          freeable--;
          this.releaseBlock(b);
        }
      }
    }
  }

  /** torch.cuda.empty_cache: returns every wholly free segment (and free expandable pages) to the device. */
  emptyCache(): void {
    this.releaseCachedBlocks();
  }

  // ---------------------------------------------------------------- expandable segments

  private tryAllocateExpandableBlock(pool: Pool, size: number, stream: number, context: Frame[] | null): Block | null {
    let candidate = this.findExpandableBlock(pool, size, stream);
    if (!candidate.mapped && !this.mapBlock(candidate, Math.min(candidate.size, size), context)) return null;
    while (candidate.size < size) {
      const next = candidate.next!;
      if (!this.mapBlock(next, Math.min(size - candidate.size, next.size), context)) return null;
      // mapBlock merged `next` with the free mapped block before it.
      candidate = next;
    }
    pool.blocks.delete(candidate);
    return candidate;
  }

  private findExpandableBlock(pool: Pool, size: number, stream: number): Block {
    const allocatable = (b: Block | null): b is Block => b !== null && !b.allocated && !b.pendingFree;
    const hasRoom = (start: Block): boolean => {
      let bytes = 0;
      let b: Block | null = start;
      while (bytes < size && allocatable(b)) {
        bytes += b.size;
        b = b.next;
      }
      return bytes >= size;
    };
    const key = this.searchKey(stream, 0);
    for (let i = pool.unmapped.lowerBound(key); i < pool.unmapped.size; i++) {
      let c = pool.unmapped.at(i)!;
      if (c.stream !== stream) break;
      if (allocatable(c.prev)) c = c.prev;
      if (hasRoom(c)) return c;
    }
    const pageSize = pool.isSmall ? SMALL_BUFFER : LARGE_BUFFER;
    // PyTorch reserves 1 1/8 of device memory of address space per segment.
    const total = this.backend.totalMemory;
    const vaSize = Math.ceil((total + Math.floor(total / 8)) / pageSize) * pageSize;
    const base = this.backend.reserveAddressSpace(vaSize);
    const segment: ExpandableSegment = { base, size: vaSize, pageSize, stream, mappedPages: new Set<number>() };
    this.expandableSegments.push(segment);
    const candidate = makeBlock(stream, vaSize, pool, base, segment);
    candidate.mapped = false;
    pool.unmapped.insert(candidate);
    return candidate;
  }

  /** Maps whole pages covering [block.address, +size); returns the mapped range (size 0 on failure). */
  private mapPages(segment: ExpandableSegment, address: number, size: number): { address: number; size: number } {
    const page = segment.pageSize;
    const begin = Math.floor((address - segment.base) / page);
    const end = Math.ceil((address + size - segment.base) / page);
    for (let i = begin; i < end; i++) {
      if (!this.backend.mapPage(segment.base + i * page, page)) {
        for (let j = begin; j < i; j++) this.backend.unmapPage(segment.base + j * page, page);
        return { address: segment.base + begin * page, size: 0 };
      }
    }
    for (let i = begin; i < end; i++) segment.mappedPages.add(i);
    return { address: segment.base + begin * page, size: (end - begin) * page };
  }

  private mapBlock(toMap: Block, size: number, context: Frame[] | null): boolean {
    const segment = toMap.expandable!;
    const range = this.mapPages(segment, toMap.address, size);
    if (range.size === 0) return false;
    const pool = toMap.pool;
    pool.unmapped.delete(toMap);
    toMap.mapped = true;
    if (range.size < toMap.size) {
      const remaining = this.newBlock(toMap.stream, toMap.size - range.size, pool, toMap.address + range.size, segment);
      remaining.mapped = false;
      remaining.prev = toMap;
      remaining.next = toMap.next;
      if (toMap.next) toMap.next.prev = remaining;
      toMap.next = remaining;
      pool.unmapped.insert(remaining);
      toMap.size = range.size;
    }
    this.tryMergeBlocks(toMap, toMap.prev, pool);
    this.tryMergeBlocks(toMap, toMap.next, pool);
    this.insertIntoBlocks(pool, toMap);
    this.totalAllocatedMemory += range.size;
    for (const i of pool.statIndexes) this.stats.reserved_bytes[i].increase(range.size);
    this.stats.num_device_alloc++;
    this.recordTrace('segment_map', range.address, range.size, toMap.stream, context);
    if (!toMap.prev && !toMap.segmentFrames) toMap.segmentFrames = context;
    return true;
  }

  private unmapBlock(block: Block): void {
    const segment = block.expandable!;
    const page = segment.pageSize;
    // Only whole free pages inside the block can go.
    const begin = Math.ceil((block.address - segment.base) / page);
    const end = Math.floor((block.address + block.size - segment.base) / page);
    if (end <= begin) return;
    const unmappedAddress = segment.base + begin * page;
    const unmappedSize = (end - begin) * page;
    for (let i = begin; i < end; i++) {
      this.backend.unmapPage(segment.base + i * page, page);
      segment.mappedPages.delete(i);
    }
    const pool = block.pool;
    pool.blocks.delete(block);
    const beforeSize = unmappedAddress - block.address;
    if (beforeSize > 0) {
      const before = this.newBlock(block.stream, beforeSize, pool, block.address, segment);
      before.prev = block.prev;
      if (before.prev) before.prev.next = before;
      before.next = block;
      block.prev = before;
      this.insertIntoBlocks(pool, before);
    }
    const afterSize = block.size - (beforeSize + unmappedSize);
    if (afterSize > 0) {
      const after = this.newBlock(block.stream, afterSize, pool, unmappedAddress + unmappedSize, segment);
      after.next = block.next;
      if (after.next) after.next.prev = after;
      after.prev = block;
      block.next = after;
      this.insertIntoBlocks(pool, after);
    }
    block.address = unmappedAddress;
    block.size = unmappedSize;
    block.mapped = false;
    this.tryMergeBlocks(block, block.prev, pool);
    this.tryMergeBlocks(block, block.next, pool);
    pool.unmapped.insert(block);
    this.totalAllocatedMemory -= unmappedSize;
    for (const i of pool.statIndexes) this.stats.reserved_bytes[i].decrease(unmappedSize);
    this.stats.num_device_free++;
    this.recordTrace('segment_unmap', unmappedAddress, unmappedSize, block.stream, block.segmentFrames);
  }

  // ---------------------------------------------------------------- history

  private recordTrace(action: KnownTraceAction, addr: number, size: number, stream: number, frames: Frame[] | null): void {
    if (this.onSegmentEvent && (action === 'segment_alloc' || action === 'segment_free' || action === 'segment_map' || action === 'segment_unmap')) {
      this.onSegmentEvent(action, addr, size);
    }
    if (!this.onTrace && this.history.enabled !== 'all') return;
    const entry: TraceEntry =
      action === 'oom'
        ? { action, device_free: addr, size, stream, time_us: this.now() }
        : { action, addr, size, stream, time_us: this.now() };
    const withFrames = this.history.context === 'alloc' || this.history.context === 'all';
    if (withFrames) entry.frames = frames ?? [];
    this.onTrace?.(entry);
    if (this.history.enabled !== 'all' || this.history.maxEntries === 0) return;
    if (this.ring.length < this.history.maxEntries) {
      this.ring.push(entry);
    } else {
      this.ring[this.ringNext] = entry;
    }
    this.ringNext = (this.ringNext + 1) % this.history.maxEntries;
  }

  /** The history ring in chronological order. */
  traceEntries(): TraceEntry[] {
    if (this.ring.length < this.history.maxEntries || this.history.maxEntries === 0) return this.ring.slice();
    return [...this.ring.slice(this.ringNext), ...this.ring.slice(0, this.ringNext)];
  }

  /** Records PyTorch's 'snapshot' trace entry (taking a snapshot does this). */
  recordSnapshotTaken(activeBytes: number): void {
    this.recordTrace('snapshot', 0, activeBytes, 0, null);
  }

  // ---------------------------------------------------------------- state

  get reservedBytes(): number {
    return this.stats.reserved_bytes[AGGREGATE].current;
  }

  get allocatedBytes(): number {
    return this.stats.allocated_bytes[AGGREGATE].current;
  }

  /** Bytes this allocator holds from the device. */
  get deviceBytesInUse(): number {
    return this.totalAllocatedMemory;
  }

  /** The size of the block serving `address` (allocated or pending), or undefined. */
  blockSize(address: number): number | undefined {
    return this.activeBlocks.get(address)?.size;
  }

  /** True when `address` was freed by the program but its stream has not released it yet. */
  isPendingFree(address: number): boolean {
    return this.activeBlocks.get(address)?.pendingFree === true;
  }

  /** Every mapped block, grouped into segments (one per contiguous mapped range), by address. */
  segments(): { head: Block; blocks: Block[]; isExpandable: boolean }[] {
    const all: Block[] = this.activeBlocks.values();
    for (const pool of [this.largePool, this.smallPool]) all.push(...pool.blocks);
    const out: { head: Block; blocks: Block[]; isExpandable: boolean }[] = [];
    for (const head of all) {
      if (head.prev && head.prev.mapped) continue;
      const blocks: Block[] = [];
      for (let b: Block | null = head; b && b.mapped; b = b.next) blocks.push(b);
      out.push({ head, blocks, isExpandable: head.expandable !== null });
    }
    out.sort((a, b) => a.head.address - b.head.address);
    return out;
  }

  /**
   * Installs an expandable segment in a known state (replay starts from the state PyTorch had when
   * its trace began): the address range [base, base + size) with `ranges` mapped (each a contiguous
   * run of whole pages holding the given blocks) and the rest unmapped. Only valid before any
   * malloc; reserved bytes count the mapped pages, as map_block counts them.
   */
  loadExpandableState(spec: ExpandableLayout): void {
    const pool = spec.isSmall ? this.smallPool : this.largePool;
    const page = spec.pageSize;
    const segment: ExpandableSegment = { base: spec.base, size: spec.size, pageSize: page, stream: spec.stream, mappedPages: new Set<number>() };
    this.expandableSegments.push(segment);
    const ranges = [...spec.ranges].sort((a, b) => a.address - b.address);
    let prev: Block | null = null;
    let cursor = spec.base;
    const link = (b: Block): void => {
      b.prev = prev;
      if (prev) prev.next = b;
      prev = b;
      cursor = b.address + b.size;
    };
    const unmappedRun = (end: number): void => {
      if (end <= cursor) return;
      const gap = makeBlock(spec.stream, end - cursor, pool, cursor, segment);
      gap.mapped = false;
      link(gap);
      pool.unmapped.insert(gap);
    };
    const free: Block[] = [];
    for (const range of ranges) {
      if (range.address < cursor || (range.address - spec.base) % page !== 0 || range.totalSize % page !== 0) {
        throw new MemscopeError('bad-argument', `loadExpandableState: range ${hexAddress(range.address)} is not whole pages of ${page} bytes inside the segment`);
      }
      unmappedRun(range.address);
      for (let i = (range.address - spec.base) / page; i < (range.address + range.totalSize - spec.base) / page; i++) segment.mappedPages.add(i);
      this.totalAllocatedMemory += range.totalSize;
      for (const i of pool.statIndexes) this.stats.reserved_bytes[i].increase(range.totalSize);
      for (const spec2 of [...range.blocks].sort((a, b) => a.address - b.address)) {
        if (spec2.address !== cursor || spec2.size <= 0) {
          throw new MemscopeError('bad-argument', `loadExpandableState: range ${hexAddress(range.address)} has a gap or overlap at ${hexAddress(spec2.address)}`);
        }
        const b = makeBlock(spec.stream, spec2.size, pool, spec2.address, segment);
        b.requestedSize = spec2.requestedSize;
        link(b);
        if (spec2.allocated) this.loadAllocated(pool, b, spec2.frames);
        else free.push(b);
      }
      if (cursor !== range.address + range.totalSize) {
        throw new MemscopeError('bad-argument', `loadExpandableState: blocks of range ${hexAddress(range.address)} do not cover its ${range.totalSize} bytes`);
      }
    }
    unmappedRun(spec.base + spec.size);
    for (const b of free) this.insertIntoBlocks(pool, b);
  }

  /** A block of a loaded state that the program holds: live, with its stats counted as if just allocated. */
  private loadAllocated(pool: Pool, b: Block, frames: Block['frames'] | undefined): void {
    b.allocated = true;
    b.frames = frames ?? null;
    this.activeBlocks.set(b.address, b);
    for (const i of pool.statIndexes) {
      this.stats.allocation[i].increase(1);
      this.stats.allocated_bytes[i].increase(b.size);
      this.stats.active[i].increase(1);
      this.stats.active_bytes[i].increase(b.size);
      this.stats.requested_bytes[i].increase(b.requestedSize);
    }
  }

  /**
   * Installs a known state (replay starts from the state PyTorch had when its
   * trace began). Only valid on a fresh allocator; stats start from that state
   * as if it had just been allocated.
   */
  loadState(layout: readonly SegmentLayout[]): void {
    if (this.activeBlocks.size > 0 || this.largePool.blocks.size > 0 || this.smallPool.blocks.size > 0) {
      throw new MemscopeError('bad-argument', 'loadState needs a fresh allocator');
    }
    for (const seg of layout) {
      const pool = seg.isSmall ? this.smallPool : this.largePool;
      const address = this.backend.malloc(seg.totalSize);
      if (address !== seg.address) {
        throw new MemscopeError('bad-argument', `loadState: the device placed segment ${hexAddress(seg.address)} at ${String(address)}`);
      }
      this.totalAllocatedMemory += seg.totalSize;
      this.stats.num_device_alloc++;
      for (const i of pool.statIndexes) {
        this.stats.segment[i].increase(1);
        this.stats.reserved_bytes[i].increase(seg.totalSize);
      }
      if (seg.totalSize >= this.settings.maxSplitSize) this.stats.oversize_segments.increase(1);
      let prev: Block | null = null;
      let cursor = seg.address;
      const blocks = [...seg.blocks].sort((a, b) => a.address - b.address);
      for (const spec of blocks) {
        if (spec.address !== cursor || spec.size <= 0) {
          throw new MemscopeError('bad-argument', `loadState: segment ${hexAddress(seg.address)} has a gap or overlap at ${hexAddress(spec.address)}`);
        }
        const b = makeBlock(seg.stream, spec.size, pool, spec.address);
        b.requestedSize = spec.requestedSize;
        b.prev = prev;
        if (prev) prev.next = b;
        prev = b;
        cursor += spec.size;
        if (spec.allocated) {
          this.loadAllocated(pool, b, spec.frames);
          if (b.size >= this.settings.maxSplitSize) this.stats.oversize_allocations.increase(1);
        }
      }
      if (cursor !== seg.address + seg.totalSize) {
        throw new MemscopeError('bad-argument', `loadState: blocks of segment ${hexAddress(seg.address)} do not cover its ${seg.totalSize} bytes`);
      }
      for (let b: Block | null = prev; b; b = b.prev) {
        if (b.allocated) continue;
        this.insertIntoBlocks(pool, b);
        if (isSplit(b)) {
          for (const i of pool.statIndexes) {
            this.stats.inactive_split[i].increase(1);
            this.stats.inactive_split_bytes[i].increase(b.size);
          }
        }
      }
    }
  }
}
