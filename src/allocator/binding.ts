import type { AdapterSession, FrameworkAdapter, ReservedMemorySource } from '../core/adapter.js';
import { MemscopeError } from '../core/errors.js';
import type { DeviceName, MemoryEventSink, StorageRef } from '../core/events.js';
import { CachingAllocatorModel } from './caching-allocator.js';
import { DEFAULT_CAPACITY, SimulatedDevice } from './device.js';
import { DEFAULT_SETTINGS, parseAllocatorConf, type AllocatorSettings } from './settings.js';
import { snapshotSegments, type SnapshotSegment } from './snapshot.js';
import { flattenStats, nestedStats } from './stats.js';
import { renderMemorySummary } from '../torch/memory-summary.js';

export interface AllocatorBindingOptions {
  /** PYTORCH_CUDA_ALLOC_CONF-style settings for every modelled device. */
  settings?: string | AllocatorSettings;
  /** Device capacity in bytes ("would this fit in 4 GiB?"); default 80 GiB. */
  capacity?: number;
  /** Only model these devices (default: every device that allocates). */
  devices?: readonly DeviceName[];
}

/**
 * Feeds a framework's storage allocations and frees (stream 0, one model per
 * device) through the caching-allocator model, so a TFJS program gets the
 * figures a PyTorch CUDA run of the same tensors would show: allocated,
 * reserved, fragmentation, cudaMalloc retries and OOMs. It implements
 * ReservedMemorySource for the operator tracker. A modelled OOM never throws
 * into the program: the storage is left unmodelled and counted in numOoms.
 */
export class AllocatorBinding implements MemoryEventSink, ReservedMemorySource {
  readonly settings: AllocatorSettings;
  readonly capacity: number;
  private readonly only: ReadonlySet<DeviceName> | null;
  private readonly models = new Map<DeviceName, CachingAllocatorModel>();
  private readonly addresses = new Map<StorageRef, number>();
  /** Frees of storages the model never saw (made before attach, or refused by a modelled OOM). */
  untrackedFrees = 0;
  /** The message of the last modelled OOM, for reports. */
  lastOom: string | null = null;

  constructor(options: AllocatorBindingOptions = {}) {
    this.settings = typeof options.settings === 'string' ? parseAllocatorConf(options.settings) : (options.settings ?? DEFAULT_SETTINGS);
    if (this.settings.backend === 'cudaMallocAsync') {
      throw new MemscopeError('unsupported', `AllocatorBinding models the native caching allocator; settings ${JSON.stringify(this.settings.conf)} ask for backend:cudaMallocAsync`);
    }
    this.capacity = options.capacity ?? DEFAULT_CAPACITY;
    if (!(Number.isSafeInteger(this.capacity) && this.capacity > 0)) {
      throw new MemscopeError('bad-argument', `AllocatorBinding: capacity must be a positive integer number of bytes, got ${String(options.capacity)}`);
    }
    this.only = options.devices ? new Set(options.devices) : null;
  }

  /** Subscribes to an adapter; detach the returned session to stop. */
  attach(adapter: FrameworkAdapter): AdapterSession {
    return adapter.attach(this);
  }

  /** The model of one device (created on first use). */
  model(device: DeviceName): CachingAllocatorModel {
    let m = this.models.get(device);
    if (!m) {
      m = new CachingAllocatorModel({ device: this.models.size, settings: this.settings, backend: new SimulatedDevice(this.capacity) });
      this.models.set(device, m);
    }
    return m;
  }

  get devices(): DeviceName[] {
    return [...this.models.keys()];
  }

  onStorageAlloc(storage: StorageRef): void {
    if (this.only && !this.only.has(storage.device)) return;
    const m = this.model(storage.device);
    try {
      this.addresses.set(storage, m.malloc(storage.bytes, 0));
    } catch (err) {
      if (err instanceof MemscopeError && err.code === 'oom') this.lastOom = `${storage.device}: ${err.message}`;
      else throw err;
    }
  }

  onStorageFree(storage: StorageRef): void {
    const address = this.addresses.get(storage);
    if (address === undefined) {
      if (!this.only || this.only.has(storage.device)) this.untrackedFrees++;
      return;
    }
    this.addresses.delete(storage);
    this.model(storage.device).free(address);
  }

  reservedBytes(device: DeviceName): number {
    return this.models.get(device)?.reservedBytes ?? 0;
  }

  allocatedBytes(device: DeviceName): number {
    return this.models.get(device)?.allocatedBytes ?? 0;
  }

  /** Reserved bytes not allocated to any block, as a fraction of reserved (0 when nothing is reserved). */
  fragmentation(device: DeviceName): number {
    const reserved = this.reservedBytes(device);
    return reserved === 0 ? 0 : 1 - this.allocatedBytes(device) / reserved;
  }

  numAllocRetries(device: DeviceName): number {
    return this.models.get(device)?.stats.num_alloc_retries ?? 0;
  }

  numOoms(device: DeviceName): number {
    return this.models.get(device)?.stats.num_ooms ?? 0;
  }

  memoryStats(device: DeviceName): Record<string, number> {
    const m = this.model(device);
    return flattenStats(nestedStats(m.stats, m.settings.maxSplitSize));
  }

  memorySummary(device: DeviceName, abbreviated = false): string {
    const m = this.model(device);
    return renderMemorySummary(this.memoryStats(device), m.device, abbreviated);
  }

  segments(device: DeviceName): SnapshotSegment[] {
    return snapshotSegments(this.model(device));
  }
}
