import { MemscopeError } from '../core/errors.js';
import { CachingAllocatorModel, type HistorySettings } from './caching-allocator.js';
import { DEFAULT_CAPACITY, SimulatedDevice } from './device.js';
import { DEFAULT_SETTINGS, parseAllocatorConf, type AllocatorSettings } from './settings.js';
import { buildSnapshot, snapshotSegments, type MemorySnapshot, type SnapshotSegment } from './snapshot.js';
import { captureJsStack } from './stacks.js';
import { flattenStats, nestedStats, type NestedMemoryStats } from './stats.js';
import { renderMemorySummary } from './summary.js';

/** A device: an index, or a name like 'cuda:1' / 'cuda'. */
export type DeviceArg = number | string | undefined;

export interface DeviceMemoryOptions {
  /** Capacity of every simulated device in bytes (default 80 GiB). */
  capacity?: number;
  /** PYTORCH_CUDA_ALLOC_CONF-style string or parsed settings. */
  settings?: string | AllocatorSettings;
  /** How many devices exist (default 1). */
  deviceCount?: number;
}

export interface RecordMemoryHistoryOptions {
  enabled?: 'state' | 'all' | null;
  context?: 'state' | 'alloc' | 'all' | null;
  /** 'js' (JavaScript frames) or 'all' (the same: there is no native layer under JS). */
  stacks?: 'js' | 'all' | 'python';
  maxEntries?: number;
}

/**
 * torch.cuda.memory for modelled devices: one caching-allocator model per
 * device, with PyTorch's function set (camelCase). Pure logic: file output is
 * in snapshot-node.ts.
 */
export class DeviceMemory {
  private readonly allocators: CachingAllocatorModel[] = [];
  private settings: AllocatorSettings;

  constructor(options: DeviceMemoryOptions = {}) {
    const count = options.deviceCount ?? 1;
    if (!(Number.isInteger(count) && count >= 1 && count <= 64)) {
      throw new MemscopeError('bad-argument', `deviceCount must be an integer 1..64, got ${String(count)}`);
    }
    this.settings = typeof options.settings === 'string' ? parseAllocatorConf(options.settings) : (options.settings ?? DEFAULT_SETTINGS);
    const capacity = options.capacity ?? DEFAULT_CAPACITY;
    for (let d = 0; d < count; d++) {
      // Devices get disjoint simulated address ranges so pointers identify their device.
      const backend = new SimulatedDevice(capacity, 0x7f0000000000 + d * 2 ** 42);
      this.allocators.push(new CachingAllocatorModel({ device: d, settings: this.settings, backend, stackProvider: () => captureJsStack() }));
    }
  }

  get deviceCount(): number {
    return this.allocators.length;
  }

  /** The model of one device (for direct driving, e.g. by the TFJS binding). */
  allocator(device?: DeviceArg): CachingAllocatorModel {
    return this.allocators[this.deviceIndex(device)];
  }

  deviceIndex(device: DeviceArg): number {
    let index: number;
    if (device === undefined || device === 'cuda') index = 0;
    else if (typeof device === 'number') index = device;
    else {
      const m = /^cuda:(\d+)$/.exec(device);
      if (!m) throw new MemscopeError('bad-device', `unknown device ${JSON.stringify(device)}; expected an index or 'cuda:N'`);
      index = Number(m[1]);
    }
    if (!(Number.isInteger(index) && index >= 0 && index < this.allocators.length)) {
      throw new MemscopeError('bad-device', `device ${String(device)} does not exist (${this.allocators.length} device(s))`);
    }
    return index;
  }

  /** torch.cuda.memory._set_allocator_settings: applies to every device from now on. */
  setAllocatorSettings(conf: string): void {
    const parsed = parseAllocatorConf(conf);
    this.settings = parsed;
    for (const a of this.allocators) a.settings = parsed;
  }

  get allocatorSettings(): AllocatorSettings {
    return this.settings;
  }

  cachingAllocatorAlloc(size: number, device?: DeviceArg, stream = 0): number {
    return this.allocators[this.deviceIndex(device)].malloc(size, stream);
  }

  /** Frees a pointer from cachingAllocatorAlloc; the owning device is found from the pointer, as PyTorch does. */
  cachingAllocatorDelete(address: number): void {
    const owner =
      this.allocators.find((a) => a.blockSize(address) !== undefined) ??
      this.allocators.find((a) => a.isFreeBlockStart(address)) ??
      this.allocators[0];
    owner.free(address);
  }

  setPerProcessMemoryFraction(fraction: number, device?: DeviceArg): void {
    this.allocators[this.deviceIndex(device)].setMemoryFraction(fraction);
  }

  /** Releases every wholly free cached segment on every device. */
  emptyCache(): void {
    for (const a of this.allocators) a.emptyCache();
  }

  memoryStatsAsNestedDict(device?: DeviceArg): NestedMemoryStats {
    const a = this.allocator(device);
    return nestedStats(a.stats, a.settings.maxSplitSize);
  }

  memoryStats(device?: DeviceArg): Record<string, number> {
    return flattenStats(this.memoryStatsAsNestedDict(device));
  }

  resetPeakMemoryStats(device?: DeviceArg): void {
    this.allocator(device).stats.resetPeak();
  }

  resetAccumulatedMemoryStats(device?: DeviceArg): void {
    this.allocator(device).stats.resetAccumulated();
  }

  memoryAllocated(device?: DeviceArg): number {
    return this.memoryStats(device)['allocated_bytes.all.current'] ?? 0;
  }

  maxMemoryAllocated(device?: DeviceArg): number {
    return this.memoryStats(device)['allocated_bytes.all.peak'] ?? 0;
  }

  memoryReserved(device?: DeviceArg): number {
    return this.memoryStats(device)['reserved_bytes.all.current'] ?? 0;
  }

  maxMemoryReserved(device?: DeviceArg): number {
    return this.memoryStats(device)['reserved_bytes.all.peak'] ?? 0;
  }

  memorySummary(device?: DeviceArg, abbreviated = false): string {
    return renderMemorySummary(this.memoryStats(device), this.deviceIndex(device), abbreviated);
  }

  /** [free, total] bytes of the device, like cudaMemGetInfo. */
  memGetInfo(device?: DeviceArg): [number, number] {
    const a = this.allocator(device);
    return [a.backend.freeMemory(), a.backend.totalMemory];
  }

  /** torch.cuda.memory._record_memory_history(enabled, context, stacks, max_entries). */
  recordMemoryHistory(options: RecordMemoryHistoryOptions = {}): void {
    const enabled = options.enabled === undefined ? 'all' : options.enabled;
    const context = options.context === undefined ? 'all' : options.context;
    const stacks = options.stacks ?? 'all';
    const maxEntries = options.maxEntries ?? Number.MAX_SAFE_INTEGER;
    if (enabled !== null && enabled !== 'state' && enabled !== 'all') {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: enabled must be null, 'state' or 'all', got ${JSON.stringify(enabled)}`);
    }
    if (context !== null && context !== 'state' && context !== 'alloc' && context !== 'all') {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: context must be null, 'state', 'alloc' or 'all', got ${JSON.stringify(context)}`);
    }
    if (stacks !== 'js' && stacks !== 'all' && stacks !== 'python') {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: stacks must be 'js' or 'all', got ${JSON.stringify(stacks)}`);
    }
    if (!(Number.isSafeInteger(maxEntries) && maxEntries >= 0)) {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: maxEntries must be a non-negative integer, got ${String(maxEntries)}`);
    }
    if (enabled === 'state' && (context === 'alloc' || context === 'all')) {
      throw new MemscopeError('bad-argument', "recordMemoryHistory: when enabled is 'state', context must be null or 'state' (there is no history to attach alloc/free stacks to)");
    }
    const history: HistorySettings =
      enabled === null ? { enabled: null, context: null, maxEntries: 0 } : { enabled, context, maxEntries: enabled === 'all' ? maxEntries : 0 };
    for (const a of this.allocators) a.setHistory(history);
  }

  /** torch.cuda.memory._snapshot(): segments, device_traces, allocator_settings. */
  snapshot(): MemorySnapshot {
    return buildSnapshot(this.allocators);
  }

  /** torch.cuda.memory_snapshot(): the segments only. */
  memorySnapshot(): SnapshotSegment[] {
    return this.allocators.flatMap((a) => snapshotSegments(a));
  }
}
