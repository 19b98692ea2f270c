import { MemscopeError } from '../core/errors.js';
import { allocatorName, isValidAddress, NativeAllocator, pluggableUnsupported, type AllocatorBackendName, type DeviceAllocator } from './allocator-interface.js';
import { CudaMallocAsyncAllocator } from './async-allocator.js';
import { emitPyTorchWarning } from './warnings.js';
import { CachingAllocatorModel, hexAddress, type HistorySettings } from './caching-allocator.js';
import { DEFAULT_CAPACITY, SimulatedDevice } from './device.js';
import { DEFAULT_SETTINGS, parseAllocatorConf, type AllocatorSettings } from './settings.js';
import { buildSnapshot, snapshotSegments, type SnapshotDict, type SnapshotSegment } from './snapshot.js';
import { captureJsStack } from './stacks.js';
import { flattenStats, nestedStats, type NestedMemoryStats } from './stats.js';
import { renderMemorySummary } from '../torch/memory-summary.js';

/** A device: an index, or a name like 'cuda:1' / 'cuda'. */
export type DeviceArg = number | string | undefined;

export interface DeviceMemoryOptions {
  /** Capacity of every simulated device in bytes (default 80 GiB). */
  capacity?: number;
  /** PYTORCH_CUDA_ALLOC_CONF-style string or parsed settings. */
  settings?: string | AllocatorSettings;
  /** How many devices exist (default 1). */
  deviceCount?: number;
  /**
   * The allocator every device uses (see DeviceAllocator). Default: the one
   * `settings` names with `backend:` — the native caching allocator, or the
   * cudaMallocAsync model for `backend:cudaMallocAsync`.
   */
  allocator?: DeviceAllocator;
}

/** One device in listDevices(): which allocator serves it and what it holds. */
export interface DeviceListing {
  device: string;
  index: number;
  allocator: string;
  backend: AllocatorBackendName;
  /** Whether anything has been allocated through the current allocator yet. */
  initialized: boolean;
  allocatedBytes: number;
  /** null when the allocator reports no reserved figure (a pluggable allocator without stats). */
  reservedBytes: number | null;
  capacityBytes: number;
}

interface PluggableAllocation {
  size: number;
  device: number;
  stream: number;
}

/** PyTorch's FutureWarning texts for the deprecated torch.cuda.memory names. */
export const DEPRECATION_WARNINGS = {
  memoryCached: '`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`',
  maxMemoryCached: '`torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`',
  resetMaxMemoryAllocated:
    'torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.',
  resetMaxMemoryCached: 'torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.',
} as const;

/** Turns memory_stats' dotted keys back into the nested dict. */
function unflatten(flat: Record<string, number>): NestedMemoryStats {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split('.');
    let node = out;
    for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1]] = value;
  }
  return out as unknown as NestedMemoryStats;
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
  private readonly native: NativeAllocator;
  private current: DeviceAllocator;
  private readonly backend: AllocatorBackendName;
  private readonly capacity: number;
  /** Size, device and stream of each live allocation of a non-native allocator (its free gets them back). */
  private readonly pluggableLive = new Map<number, PluggableAllocation>();
  private readonly pluggableAllocated: number[] = [];

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
      this.pluggableAllocated.push(0);
    }
    this.capacity = capacity;
    this.backend = this.settings.backend ?? 'native';
    this.native = new NativeAllocator(this.allocators);
    this.current = this.native;
    if (options.allocator !== undefined) this.current = checkAllocator(options.allocator);
    else if (this.backend === 'cudaMallocAsync') this.current = new CudaMallocAsyncAllocator({ deviceCount: count, capacity });
  }

  // ------------------------------------------------------------ allocator choice

  /** torch.cuda.memory.get_allocator_backend(): the `backend:` of the settings ('native' by default). */
  getAllocatorBackend(): AllocatorBackendName {
    return this.backend;
  }

  /** torch.cuda.memory._get_current_allocator(). */
  getCurrentAllocator(): DeviceAllocator {
    return this.current;
  }

  /**
   * torch.cuda.memory.change_current_allocator: only while the current
   * allocator is uninitialized (nothing allocated through it yet). A
   * CUDAPluggableAllocator is initialized from birth, so once it is current it
   * stays, as in PyTorch (torch/csrc/cuda/CUDAPluggableAllocator.cpp).
   */
  changeCurrentAllocator(allocator: DeviceAllocator): void {
    if (this.current.initialized?.() ?? true) {
      throw new MemscopeError('allocator-initialized', "Can't swap an already initialized allocator");
    }
    this.current = checkAllocator(allocator);
  }

  private get isNative(): boolean {
    return this.current === this.native;
  }

  // ------------------------------------------------------------ deprecated names

  /** Deprecated (PyTorch's FutureWarning, once per process): memoryReserved. */
  memoryCached(device?: DeviceArg): number {
    emitPyTorchWarning(DEPRECATION_WARNINGS.memoryCached, 'FutureWarning');
    return this.memoryReserved(device);
  }

  /** Deprecated (PyTorch's FutureWarning, once per process): maxMemoryReserved. */
  maxMemoryCached(device?: DeviceArg): number {
    emitPyTorchWarning(DEPRECATION_WARNINGS.maxMemoryCached, 'FutureWarning');
    return this.maxMemoryReserved(device);
  }

  /** Deprecated: resets every peak (resetPeakMemoryStats), with PyTorch's FutureWarning once per process. */
  resetMaxMemoryAllocated(device?: DeviceArg): void {
    emitPyTorchWarning(DEPRECATION_WARNINGS.resetMaxMemoryAllocated, 'FutureWarning');
    this.resetPeakMemoryStats(device);
  }

  /** Deprecated: resets every peak (resetPeakMemoryStats), with PyTorch's FutureWarning once per process. */
  resetMaxMemoryCached(device?: DeviceArg): void {
    emitPyTorchWarning(DEPRECATION_WARNINGS.resetMaxMemoryCached, 'FutureWarning');
    this.resetPeakMemoryStats(device);
  }

  /** The list_gpu_processes counterpart: every device, the allocator serving it and what it holds. */
  listDevices(): DeviceListing[] {
    return this.allocators.map((model, index): DeviceListing => {
      let allocatedBytes: number;
      let reservedBytes: number | null;
      if (this.isNative) {
        allocatedBytes = model.allocatedBytes;
        reservedBytes = model.reservedBytes;
      } else {
        allocatedBytes = this.pluggableAllocated[index];
        reservedBytes = this.current.reservedBytes === undefined ? null : tryOrNull(() => this.current.reservedBytes!(index));
      }
      return {
        device: `cuda:${index}`,
        index,
        allocator: allocatorName(this.current),
        backend: this.backend,
        initialized: this.current.initialized?.() ?? true,
        allocatedBytes,
        reservedBytes,
        capacityBytes: this.capacity,
      };
    });
  }

  get deviceCount(): number {
    return this.allocators.length;
  }

  /** The model of one device (for direct driving, e.g. by the TFJS binding). */
  allocator(device?: DeviceArg): CachingAllocatorModel {
    if (!this.isNative) {
      throw new MemscopeError('unsupported', `the current allocator is ${allocatorName(this.current)}: only the native caching allocator has a model to drive directly`);
    }
    this.native.markUsed();
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
    if (!this.isNative) return this.pluggableAlloc(size, this.deviceIndex(device), stream);
    this.native.markUsed();
    return this.allocators[this.deviceIndex(device)].malloc(size, stream);
  }

  /** An allocation through a non-native allocator: PyTorch passes the size unrounded and remembers size/device/stream for the free. */
  private pluggableAlloc(size: number, device: number, stream: number): number {
    if (!(Number.isSafeInteger(size) && size >= 0)) throw new MemscopeError('bad-argument', `allocation size must be a non-negative integer, got ${size}`);
    const address = this.current.alloc(size, device, stream);
    if (address === null) {
      throw new MemscopeError('oom', `CUDA out of memory: the ${allocatorName(this.current)} allocator returned no memory for ${size} bytes on device ${device}`);
    }
    if (!isValidAddress(address)) {
      throw new MemscopeError('bad-address', `the ${allocatorName(this.current)} allocator returned ${String(address)} for ${size} bytes on device ${device}: not a non-negative integer address`);
    }
    if (size > 0 && this.pluggableLive.has(address)) {
      throw new MemscopeError('bad-address', `the ${allocatorName(this.current)} allocator returned ${hexAddress(address)} for ${size} bytes on device ${device}, an address already allocated`);
    }
    if (size > 0) this.pluggableLive.set(address, { size, device, stream });
    this.pluggableAllocated[device] += size;
    return address;
  }

  /** Frees a pointer from cachingAllocatorAlloc; the owning device is found from the pointer, as PyTorch does. */
  cachingAllocatorDelete(address: number): void {
    if (!this.isNative) {
      const a = this.pluggableLive.get(address);
      if (a === undefined) throw new MemscopeError('invalid-pointer', `free of ${String(address)}: Trying to free a pointer not allocated here`);
      this.pluggableLive.delete(address);
      this.pluggableAllocated[a.device] -= a.size;
      this.current.free(address, a.size, a.device, a.stream);
      return;
    }
    const owner =
      this.allocators.find((a) => a.blockSize(address) !== undefined) ??
      this.allocators.find((a) => a.isFreeBlockStart(address)) ??
      this.allocators[0];
    owner.free(address);
  }

  setPerProcessMemoryFraction(fraction: number, device?: DeviceArg): void {
    if (!this.isNative) {
      const setter = (this.current as { setMemoryFraction?: (f: number, d: number) => void }).setMemoryFraction;
      setter?.call(this.current, fraction, this.deviceIndex(device));
      return;
    }
    this.native.markUsed();
    this.allocators[this.deviceIndex(device)].setMemoryFraction(fraction);
  }

  /** Releases every wholly free cached segment on every device. */
  emptyCache(): void {
    if (!this.isNative) {
      this.current.emptyCache?.();
      return;
    }
    for (const a of this.allocators) a.emptyCache();
  }

  memoryStatsAsNestedDict(device?: DeviceArg): NestedMemoryStats {
    if (!this.isNative) return unflatten(this.memoryStats(device));
    const a = this.allocators[this.deviceIndex(device)];
    return nestedStats(a.stats, a.settings.maxSplitSize);
  }

  memoryStats(device?: DeviceArg): Record<string, number> {
    if (!this.isNative) {
      const d = this.deviceIndex(device);
      if (!this.current.memoryStats) throw pluggableUnsupported('getDeviceStats');
      return this.current.memoryStats(d);
    }
    return flattenStats(this.memoryStatsAsNestedDict(device));
  }

  resetPeakMemoryStats(device?: DeviceArg): void {
    const d = this.deviceIndex(device);
    if (this.isNative) this.allocators[d].stats.resetPeak();
    else if (this.current.resetPeakStats) this.current.resetPeakStats(d);
    else throw pluggableUnsupported('resetPeakStats');
  }

  resetAccumulatedMemoryStats(device?: DeviceArg): void {
    const d = this.deviceIndex(device);
    if (this.isNative) this.allocators[d].stats.resetAccumulated();
    else if (this.current.resetAccumulatedStats) this.current.resetAccumulatedStats(d);
    else throw pluggableUnsupported('resetAccumulatedStats');
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
    if (!this.isNative) {
      const d = this.deviceIndex(device);
      // cudaMemGetInfo answers under any allocator: what the allocator reports holding, else what it handed out.
      const reserved = this.current.reservedBytes ? tryOrNull(() => this.current.reservedBytes!(d)) : null;
      const held = reserved ?? this.pluggableAllocated[d];
      return [Math.max(0, this.capacity - held), this.capacity];
    }
    const a = this.allocators[this.deviceIndex(device)];
    return [a.backend.freeMemory(), a.backend.totalMemory];
  }

  /** torch.cuda.memory._record_memory_history(enabled, context, stacks, max_entries). */
  recordMemoryHistory(options: RecordMemoryHistoryOptions = {}): void {
    if (!this.isNative) throw this.unsupported('recordHistory');
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
  snapshot(): SnapshotDict {
    if (!this.isNative) {
      if (this.current.snapshot) return this.current.snapshot();
      throw this.unsupported('snapshot');
    }
    return buildSnapshot(this.allocators);
  }

  /** torch.cuda.memory_snapshot(): the segments only. */
  memorySnapshot(): SnapshotSegment[] {
    if (!this.isNative) {
      if (this.current.snapshot) return this.current.snapshot().segments;
      throw this.unsupported('snapshot');
    }
    return this.allocators.flatMap((a) => snapshotSegments(a));
  }

  /** PyTorch's refusal of a feature the current (non-native) allocator lacks. */
  private unsupported(what: 'recordHistory' | 'snapshot'): MemscopeError {
    if (allocatorName(this.current) !== 'cudaMallocAsync') return pluggableUnsupported(what);
    if (what === 'snapshot') {
      return new MemscopeError(
        'unsupported',
        'Calling snapshot with backend:cudaMallocAsync is not meaningful. (For backend:native, snapshot returns a detailed summary of all blocks tracked by the allocator, but the cudaMallocAsync backend does not track individual blocks.)',
      );
    }
    return new MemscopeError('unsupported', 'cudaMallocAsync does not yet support recordHistory. If you need it, please file an issue describing your use case.');
  }
}

function checkAllocator(allocator: DeviceAllocator): DeviceAllocator {
  const a = allocator as Partial<DeviceAllocator> | null;
  if (a === null || typeof a !== 'object' || typeof a.alloc !== 'function' || typeof a.free !== 'function') {
    throw new MemscopeError('bad-argument', 'an allocator needs alloc(size, device, stream) and free(address, size, device, stream) methods');
  }
  return allocator;
}

function tryOrNull(f: () => number): number | null {
  try {
    return f();
  } catch {
    return null;
  }
}
