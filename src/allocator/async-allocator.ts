import { MemscopeError } from '../core/errors.js';
import type { DeviceAllocator } from './allocator-interface.js';
import { formatOomSize, hexAddress } from './caching-allocator.js';
import { DEFAULT_CAPACITY } from './device.js';
import { DeviceStats, flattenStats, nestedStats } from './stats.js';
import { emitPyTorchWarning } from './warnings.js';

/** The driver maps pool memory in 2 MiB granules (cuMemGetAllocationGranularity on current GPUs). */
export const POOL_GRANULE = 2 << 20;
/** Placement alignment inside the pool (memscope's choice: the native allocator's 512 B block size). */
export const POOL_ALIGN = 512;
const BASE_ADDRESS = 0x7f0000000000;

interface Chunk {
  readonly id: number;
  readonly address: number;
  readonly size: number;
  /** Bytes of live allocations placed in this chunk. */
  live: number;
}

interface Range {
  address: number;
  size: number;
  /** The stream whose cudaFreeAsync returned this memory (same-stream reuse is immediate). */
  stream: number;
  readonly chunk: Chunk;
}

interface Live {
  readonly size: number;
  readonly placed: number;
  readonly stream: number;
  readonly chunk: Chunk;
}

class DevicePool {
  readonly stats = new DeviceStats();
  readonly chunks = new Set<Chunk>();
  readonly freeByStart = new Map<number, Range>();
  readonly freeByEnd = new Map<number, Range>();
  readonly live = new Map<number, Live>();
  /** PyTorch's pytorch_used_bytes: requested bytes of live allocations. */
  used = 0;
  reserved = 0;
  limit = Number.POSITIVE_INFINITY;
  nextAddress: number;
  nextChunkId = 0;
  deviceCalls = 0;

  constructor(
    readonly device: number,
    readonly capacity: number,
  ) {
    this.nextAddress = BASE_ADDRESS + device * 2 ** 42;
  }
}

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

/**
 * PyTorch's `backend:cudaMallocAsync` (c10/cuda/CUDAMallocAsyncAllocator.cpp):
 * PyTorch hands every request, unrounded, to cudaMallocAsync on the device's
 * default memory pool and every free to cudaFreeAsync on the allocation's
 * stream. PyTorch keeps no blocks, pools or splits of its own; it sets the
 * pool's release threshold to UINT64_MAX so freed memory stays in the pool,
 * and allows the pool to reuse memory across streams.
 *
 * The pool itself is the CUDA driver's and is not public, so memscope models
 * it: memory is mapped in 2 MiB-granule chunks; a request takes the best-fitting
 * free range, preferring ranges last freed on its own stream and then any
 * stream's (opportunistic reuse); freed ranges merge with free neighbours in the
 * same chunk; a chunk is released only by empty_cache (cudaMemPoolTrimTo(0))
 * or, before failing, when growing the pool would exceed the device.
 *
 * memory_stats reports what PyTorch reports under this backend: only
 * allocated_bytes, active_bytes and reserved_bytes in the "all" pool, current
 * and peak; every other key is 0.
 */
export class CudaMallocAsyncAllocator implements DeviceAllocator {
  readonly name = 'cudaMallocAsync';
  private readonly pools: DevicePool[] = [];
  private used = false;
  private warnedResetAccumulated = false;

  constructor(options: { deviceCount?: number; capacity?: number } = {}) {
    const count = options.deviceCount ?? 1;
    const capacity = options.capacity ?? DEFAULT_CAPACITY;
    if (!(Number.isSafeInteger(capacity) && capacity > 0)) {
      throw new MemscopeError('bad-argument', `device capacity must be a positive integer number of bytes, got ${capacity}`);
    }
    for (let d = 0; d < count; d++) this.pools.push(new DevicePool(d, capacity));
  }

  private pool(device: number): DevicePool {
    const p = this.pools[device];
    if (p === undefined) throw new MemscopeError('bad-device', 'Invalid device argument.');
    return p;
  }

  initialized(): boolean {
    return this.used;
  }

  alloc(size: number, device: number, stream: number): number | null {
    if (!(Number.isSafeInteger(size) && size >= 0)) throw new MemscopeError('bad-argument', `allocation size must be a non-negative integer, got ${size}`);
    const p = this.pool(device);
    this.used = true;
    if (size === 0) return 0;
    if (p.used + size > p.limit) throw this.outOfMemory(p, size);
    const placed = roundUp(size, POOL_ALIGN);
    const range = this.bestFit(p, placed, stream) ?? this.grow(p, placed, stream);
    if (range === null) throw this.outOfMemory(p, size);
    const address = range.address;
    this.removeFree(p, range);
    if (range.size > placed) this.addFree(p, { address: address + placed, size: range.size - placed, stream: range.stream, chunk: range.chunk });
    p.live.set(address, { size, placed, stream, chunk: range.chunk });
    range.chunk.live += placed;
    p.used += size;
    this.setStat(p, 'allocated_bytes', p.used);
    this.setStat(p, 'active_bytes', p.used);
    return address;
  }

  free(address: number, _size: number, device: number, _stream: number): void {
    const p = this.pool(device);
    if (address === 0) return;
    const a = p.live.get(address);
    if (a === undefined) throw new MemscopeError('invalid-pointer', `cudaMallocAsync free of ${hexAddress(address)} on device ${device}: ptr not found in ptr_info`);
    p.live.delete(address);
    a.chunk.live -= a.placed;
    p.used -= a.size;
    this.setStat(p, 'allocated_bytes', p.used);
    this.setStat(p, 'active_bytes', p.used);
    let range: Range = { address, size: a.placed, stream: a.stream, chunk: a.chunk };
    const before = p.freeByEnd.get(address);
    if (before !== undefined && before.chunk === a.chunk) {
      this.removeFree(p, before);
      range = { ...range, address: before.address, size: before.size + range.size };
    }
    const after = p.freeByStart.get(address + a.placed);
    if (after !== undefined && after.chunk === a.chunk) {
      this.removeFree(p, after);
      range = { ...range, size: range.size + after.size };
    }
    this.addFree(p, range);
  }

  /** cudaMemPoolTrimTo(pool, 0) on every used device: every chunk with no live allocation goes back to the device. */
  emptyCache(): void {
    for (const p of this.pools) this.releaseFreeChunks(p);
  }

  /** setMemoryFraction: PyTorch's own limit on requested bytes, fraction × device total. */
  setMemoryFraction(fraction: number, device: number): void {
    if (!(fraction >= 0 && fraction <= 1)) throw new MemscopeError('bad-argument', `invalid fraction:${fraction}. Please set within (0, 1).`);
    const p = this.pool(device);
    this.used = true;
    p.limit = Math.floor(fraction * p.capacity);
  }

  memoryStats(device: number): Record<string, number> {
    return flattenStats(nestedStats(this.pool(device).stats, 0));
  }

  reservedBytes(device: number): number {
    return this.pool(device).reserved;
  }

  allocatedBytes(device: number): number {
    return this.pool(device).used;
  }

  /** cudaMalloc-like calls the pool made to grow (chunks mapped). */
  deviceCalls(device: number): number {
    return this.pool(device).deviceCalls;
  }

  freeMemory(device: number): number {
    const p = this.pool(device);
    return p.capacity - p.reserved;
  }

  capacity(device: number): number {
    return this.pool(device).capacity;
  }

  resetPeakStats(device: number): void {
    const s = this.pool(device).stats;
    for (const family of ['allocated_bytes', 'active_bytes', 'reserved_bytes'] as const) s[family][0].resetPeak();
  }

  /** PyTorch warns once and changes nothing. */
  resetAccumulatedStats(device: number): void {
    this.pool(device);
    if (this.warnedResetAccumulated) return;
    this.warnedResetAccumulated = true;
    emitPyTorchWarning('For backend:cudaMallocAsync, resetAccumulatedStats has no effect.', 'UserWarning');
  }

  private setStat(p: DevicePool, family: 'allocated_bytes' | 'active_bytes' | 'reserved_bytes', value: number): void {
    const s = p.stats[family][0];
    s.current = value;
    if (value > s.peak) s.peak = value;
  }

  private bestFit(p: DevicePool, size: number, stream: number): Range | null {
    let same: Range | null = null;
    let other: Range | null = null;
    const better = (r: Range, best: Range | null): boolean => best === null || r.size < best.size || (r.size === best.size && r.address < best.address);
    for (const r of p.freeByStart.values()) {
      if (r.size < size) continue;
      if (r.stream === stream) {
        if (better(r, same)) same = r;
      } else if (better(r, other)) other = r;
    }
    return same ?? other;
  }

  private grow(p: DevicePool, size: number, stream: number): Range | null {
    const chunkSize = roundUp(size, POOL_GRANULE);
    if (p.reserved + chunkSize > p.capacity) {
      this.releaseFreeChunks(p);
      if (p.reserved + chunkSize > p.capacity) return null;
    }
    const chunk: Chunk = { id: p.nextChunkId++, address: p.nextAddress, size: chunkSize, live: 0 };
    p.nextAddress += chunkSize;
    p.chunks.add(chunk);
    p.reserved += chunkSize;
    p.deviceCalls++;
    this.setStat(p, 'reserved_bytes', p.reserved);
    const range: Range = { address: chunk.address, size: chunkSize, stream, chunk };
    this.addFree(p, range);
    return range;
  }

  private releaseFreeChunks(p: DevicePool): void {
    for (const chunk of [...p.chunks]) {
      if (chunk.live > 0) continue;
      const r = p.freeByStart.get(chunk.address);
      if (r !== undefined) this.removeFree(p, r);
      p.chunks.delete(chunk);
      p.reserved -= chunk.size;
    }
    this.setStat(p, 'reserved_bytes', p.reserved);
  }

  private addFree(p: DevicePool, r: Range): void {
    p.freeByStart.set(r.address, r);
    p.freeByEnd.set(r.address + r.size, r);
  }

  private removeFree(p: DevicePool, r: Range): void {
    p.freeByStart.delete(r.address);
    p.freeByEnd.delete(r.address + r.size);
  }

  private outOfMemory(p: DevicePool, size: number): MemscopeError {
    const limit = p.limit === Number.POSITIVE_INFINITY ? 2 ** 64 : p.limit;
    return new MemscopeError(
      'oom',
      `Allocation on device ${p.device} would exceed allowed memory. (out of memory)\n` +
        `Currently allocated     : ${formatOomSize(p.used)}\n` +
        `Requested               : ${formatOomSize(size)}\n` +
        `Device limit            : ${formatOomSize(p.capacity)}\n` +
        `Free (according to CUDA): ${formatOomSize(p.capacity - p.reserved)}\n` +
        `PyTorch limit (set by user-supplied memory fraction)\n` +
        `                        : ${formatOomSize(limit)}`,
    );
  }
}
