import { MemscopeError } from '../core/errors.js';
import type { CachingAllocatorModel } from './caching-allocator.js';
import type { SnapshotDict } from './snapshot.js';
import { flattenStats, nestedStats } from './stats.js';

/** PyTorch's allocator backends, as `get_allocator_backend()` names them. */
export type AllocatorBackendName = 'native' | 'cudaMallocAsync';

/**
 * What PyTorch asks of a device allocator (c10's CUDAAllocator as a
 * CUDAPluggableAllocator sees it): `alloc(size, device, stream)` returns an
 * address and `free(address, size, device, stream)` gives it back with the
 * size, device and stream of its allocation. `size` is the caller's byte count,
 * unrounded: rounding, pools and splitting are the allocator's own business.
 *
 * `alloc` returns null (or throws MemscopeError code 'oom') when it cannot
 * give the memory. Everything else is optional: without `memoryStats` the
 * statistics functions fail as PyTorch's do for a pluggable allocator.
 */
export interface DeviceAllocator {
  /** Shown in reports and errors: 'native', 'cudaMallocAsync', 'pluggable', or a policy's own name (default 'policy'). */
  readonly name?: string;
  alloc(size: number, device: number, stream: number): number | null;
  free(address: number, size: number, device: number, stream: number): void;
  /** Whether the allocator has been used (PyTorch refuses to swap an initialized allocator). */
  initialized?(): boolean;
  /** memory_stats keys for one device (flat, dotted). */
  memoryStats?(device: number): Record<string, number>;
  /** Bytes the allocator holds from the device now (reserved_bytes.all.current). */
  reservedBytes?(device: number): number;
  resetPeakStats?(device: number): void;
  resetAccumulatedStats?(device: number): void;
  /** empty_cache: give cached memory back to the device. */
  emptyCache?(): void;
  /** _snapshot(): the allocator's segments and traces in PyTorch's schema. */
  snapshot?(): SnapshotDict;
}

/** An allocator's name for reports and errors. */
export function allocatorName(allocator: DeviceAllocator): string {
  return typeof allocator.name === 'string' && allocator.name !== '' ? allocator.name : 'policy';
}

/** The checks every call into an allocator gets: an address must be a non-negative safe integer. */
export function isValidAddress(address: unknown): address is number {
  return typeof address === 'number' && Number.isSafeInteger(address) && address >= 0;
}

/** PyTorch's message for a CUDAPluggableAllocator asked for something it does not implement. */
export function pluggableUnsupported(what: string): MemscopeError {
  return new MemscopeError(
    'unsupported',
    `CUDAPluggableAllocator does not yet support ${what}. If you need it, please file an issue describing your use case.`,
  );
}

/**
 * The native caching allocator behind the interface: one CachingAllocatorModel
 * per device (the models DeviceMemory or a replay already holds).
 */
export class NativeAllocator implements DeviceAllocator {
  readonly name = 'native';
  private used = false;

  constructor(private readonly models: readonly CachingAllocatorModel[]) {}

  private model(device: number): CachingAllocatorModel {
    const m = this.models[device];
    if (m === undefined) throw new MemscopeError('bad-device', `device ${device} does not exist (${this.models.length} device(s))`);
    return m;
  }

  alloc(size: number, device: number, stream: number): number {
    const m = this.model(device);
    this.used = true;
    return m.malloc(size, stream);
  }

  free(address: number, _size: number, device: number): void {
    this.model(device).free(address);
  }

  /** Marks the allocator used without an allocation (a model driven directly, e.g. by the TFJS binding). */
  markUsed(): void {
    this.used = true;
  }

  initialized(): boolean {
    return this.used;
  }

  memoryStats(device: number): Record<string, number> {
    const m = this.model(device);
    return flattenStats(nestedStats(m.stats, m.settings.maxSplitSize));
  }

  reservedBytes(device: number): number {
    return this.model(device).reservedBytes;
  }

  resetPeakStats(device: number): void {
    this.model(device).stats.resetPeak();
  }

  resetAccumulatedStats(device: number): void {
    this.model(device).stats.resetAccumulated();
  }

  emptyCache(): void {
    for (const m of this.models) m.emptyCache();
  }
}

export interface PluggableHooks {
  /** Name shown in reports (default 'pluggable', CUDAPluggableAllocator::name()). */
  name?: string;
  /** empty_cache (PyTorch's set_reset_fn); without it empty_cache does nothing. */
  reset?: () => void;
  memoryStats?: (device: number) => Record<string, number>;
  reservedBytes?: (device: number) => number;
  snapshot?: () => SnapshotDict;
}

/**
 * torch.cuda.memory.CUDAPluggableAllocator: a user's alloc/free functions as
 * an allocator. PyTorch creates it initialized (createCustomAllocator calls
 * init), so once it is current no other allocator can replace it.
 */
export class CUDAPluggableAllocator implements DeviceAllocator {
  readonly name: string;

  constructor(
    private readonly allocFn: (size: number, device: number, stream: number) => number | null,
    private readonly freeFn: (address: number, size: number, device: number, stream: number) => void,
    private readonly hooks: PluggableHooks = {},
  ) {
    if (typeof allocFn !== 'function' || typeof freeFn !== 'function') {
      throw new MemscopeError('bad-argument', 'CUDAPluggableAllocator needs an alloc function and a free function');
    }
    this.name = hooks.name ?? 'pluggable';
  }

  alloc(size: number, device: number, stream: number): number | null {
    return this.allocFn(size, device, stream);
  }

  free(address: number, size: number, device: number, stream: number): void {
    this.freeFn(address, size, device, stream);
  }

  initialized(): boolean {
    return true;
  }

  memoryStats(device: number): Record<string, number> {
    if (!this.hooks.memoryStats) throw pluggableUnsupported('getDeviceStats');
    return this.hooks.memoryStats(device);
  }

  reservedBytes(device: number): number {
    if (this.hooks.reservedBytes) return this.hooks.reservedBytes(device);
    const stats = this.memoryStats(device);
    return stats['reserved_bytes.all.current'] ?? 0;
  }

  resetPeakStats(): void {
    throw pluggableUnsupported('resetPeakStats');
  }

  resetAccumulatedStats(): void {
    throw pluggableUnsupported('resetAccumulatedStats');
  }

  emptyCache(): void {
    this.hooks.reset?.();
  }

  snapshot(): SnapshotDict {
    if (!this.hooks.snapshot) throw pluggableUnsupported('snapshot');
    return this.hooks.snapshot();
  }
}
