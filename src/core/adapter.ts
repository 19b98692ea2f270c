import type { DeviceName, MemoryEventSink, ModuleRef, OptimizerRef, StorageBatchSink, StorageRef, TensorRef } from './events.js';

/**
 * What a tracker needs from a framework, and nothing more. Trackers in
 * src/tracking and recorders in src/analysis take a `FrameworkAdapter`;
 * `memscope/tfjs` supplies one bound to TensorFlow.js. A test may supply a fake.
 */
export interface FrameworkAdapter {
  /** 'tfjs', or a test double's name. */
  readonly name: string;
  /**
   * Installs the instrumentation if no session holds it yet (reference
   * counted: nested and overlapping sessions share one installation) and
   * subscribes `sink`. Events flow until `detach()`, each delivered when it happens.
   */
  attach(sink: MemoryEventSink | StorageBatchSink): AdapterSession;
}

export interface AdapterSession {
  /** Instruments a model (and every nested layer) and returns its root module; idempotent per model. */
  module(model: unknown, name?: string): ModuleRef;
  /** Instruments an optimizer so its steps emit events; idempotent per optimizer. */
  optimizer(optimizer: unknown): OptimizerRef;
  /** The TensorRef of a framework tensor (for `trackExternal`); throws MemscopeError for a non-tensor. */
  tensor(tensor: unknown): TensorRef;
  /** Storages alive now that the adapter knows of (may be incomplete for storages made before install; see docs). */
  liveStorages(): Iterable<StorageRef>;
  /** The device the framework allocates on by default now. */
  currentDevice(): DeviceName;
  /** What the device really holds (pools, heaps); null where the framework cannot tell. */
  deviceMemory(device: DeviceName): DeviceMemoryReading | null;
  /** Unsubscribes; the last subscriber to detach uninstalls and restores every patch. Idempotent. */
  detach(): void;
}

export interface DeviceMemoryReading {
  /** Bytes the device holds for tensors, including pooled/cached free space. */
  readonly reservedBytes: number;
  /** Where the figure comes from, e.g. 'webgl texture pool', 'wasm heap'. */
  readonly source: string;
}

/**
 * A caching-allocator model bound to an event stream (src/allocator provides
 * one): trackers ask it for the reserved figure on devices that have no pool
 * of their own (cpu), and for retry/OOM counts.
 */
export interface ReservedMemorySource {
  reservedBytes(device: DeviceName): number;
  numAllocRetries(device: DeviceName): number;
  numOoms(device: DeviceName): number;
}
