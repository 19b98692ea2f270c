/**
 * The framework-free event contract. Adapters (src/tfjs today) turn framework
 * activity into these calls; trackers, recorders and capture writers
 * (src/tracking, src/analysis, src/cli/run) implement `MemoryEventSink` and
 * never see the framework.
 *
 * Hot-path rules, because every tensor allocation passes through here:
 * - The adapter calls sinks synchronously, in subscription order.
 * - `ctx` is the adapter's live, mutable context object: read what you need
 *   during the call and copy it if you keep it. It is never frozen or cloned
 *   per event.
 * - `StorageRef`/`TensorRef`/`ModuleRef` objects are stable identities: the same
 *   storage is always the same object, so sinks may key Maps/WeakMaps on them
 *   (for TensorRefs, unless every subscribed sink is a `StorageBatchSink`).
 * - A sink that throws is isolated by the adapter (logged once, then dropped
 *   from that event); it never reaches the user's program.
 */

/** A device name: a TFJS backend ('cpu', 'wasm', 'webgl', 'webgpu') or a PyTorch device ('cuda:0'). */
export type DeviceName = string;

/** What the program is doing. 'optimizer' covers an optimizer's step (applyGradients). */
export type Phase = 'forward' | 'backward' | 'optimizer' | 'none';

/**
 * One storage: one TFJS dataId (one PyTorch allocation). Bytes are counted
 * once, however many tensors share the dataId.
 */
export interface StorageRef {
  /** Allocation id: unique in the process, never reused. */
  readonly id: number;
  readonly device: DeviceName;
  /** Bytes as the framework counts them (before any device granularity rounding). */
  readonly bytes: number;
  readonly dtype: string;
  /** Shape of the tensor that created the storage. */
  readonly shape: readonly number[];
  /**
   * True when the storage existed before the adapter saw it being created
   * (made before instrumentation was installed): its onStorageAlloc came when
   * the adapter first met it, not when the framework allocated it.
   */
  readonly adopted?: boolean;
  /**
   * The storage this one replaces on another device (the framework moved the data: TFJS after
   * `tf.setBackend`). Its onStorageAlloc comes before the old one's onStorageFree, so a sink can
   * carry what it knew of the old storage (its category) over to this one.
   */
  readonly movedFrom?: number;
}

/** A tensor: a view of one storage. Variables keep their id when `assign` swaps the storage. */
export interface TensorRef {
  /** The framework's tensor id (TFJS `tensor.id`). */
  readonly id: number;
  /** The storage the tensor refers to *now* (a variable's changes on assign). */
  readonly storage: StorageRef;
  readonly dtype: string;
  readonly shape: readonly number[];
  /** Set for variables (weights, optimizer state): the framework's variable name. */
  readonly variableName?: string;
  readonly trainable?: boolean;
}

/** A module: one layer instance, named by its fully qualified path from the tracked root. */
export interface ModuleRef {
  /** Unique per instrumented layer instance. */
  readonly id: number;
  /** Fully qualified path from the root model, e.g. 'model.encoder.dense_1'; the root's path is its name. */
  readonly path: string;
  /** The layer's class, e.g. 'Dense', 'BatchNormalization', 'Sequential'. */
  readonly className: string;
  readonly parent: ModuleRef | null;
  readonly children: readonly ModuleRef[];
  /** Trainable weights of this module itself (not of its children), read now (weights build lazily). */
  parameters(): TensorRef[];
  /** Non-trainable weights of this module itself (e.g. BatchNorm moving statistics), read now. */
  buffers(): TensorRef[];
}

/** An optimizer instance under tracking. */
export interface OptimizerRef {
  readonly id: number;
  /** The optimizer's class, e.g. 'AdamOptimizer'. */
  readonly className: string;
  /** Its state variables as they are now (moments, iteration counters, beta powers, ...). */
  stateVariables(): TensorRef[];
}

/** Where an event happens. Live and mutable: see the hot-path rules above. */
export interface EventContext {
  readonly phase: Phase;
  /**
   * Innermost module: in forward, the layer whose `call` is running; in
   * backward, the layer that recorded the gradient closure now running.
   */
  readonly module: ModuleRef | null;
  /** Kernel running now, if any (e.g. 'MatMul', 'FusedBatchNorm'). */
  readonly kernel: string | null;
  /** Optimizer steps completed since instrumentation was installed. */
  readonly step: number;
  /** Monotonic event sequence number; increases by one per emitted event. */
  readonly seq: number;
}

/**
 * A named region: an engine scope (tidy), an op wrapper, or a user annotation.
 * - 'tidy': a TFJS engine scope (`tf.tidy`, including the engine's own
 *   'forward'/'backward' tidies inside `gradients` and one per backprop node).
 * - 'op': the scope tfjs-core's `op()` opens around every public op call
 *   (added by the TFJS adapter; the name is the op's, e.g. 'matMul').
 * - 'annotation': a user region (`annotate(name, fn)` in memscope/tfjs).
 * - 'backward': reserved for adapters whose framework has a backward scope of
 *   its own; the TFJS adapter reports backprop as the 'backward' tidy.
 */
export type ScopeKind = 'tidy' | 'op' | 'annotation' | 'backward';

export interface KernelEvent {
  readonly name: string;
  readonly inputs: readonly TensorRef[];
  /** Empty on `onKernelStart`. */
  readonly outputs: readonly TensorRef[];
  /** True for customGrad/forwardFunc kernels (their inner kernels run nested inside). */
  readonly composite: boolean;
}

export interface GradientPair {
  /** The tensor differentiated against (a variable for optimizer/layers gradients). */
  readonly x: TensorRef;
  readonly grad: TensorRef | null;
}

/**
 * The plain contract: implement the events you need; all are optional. Every adapter delivers
 * these. A sink on the per-tensor hot path may also implement the one fast form,
 * `StorageBatchSink` (below).
 */
export interface MemoryEventSink {
  /** A new storage came into existence (first tensor on a new dataId, or moved in from another device). */
  onStorageAlloc?(storage: StorageRef, ctx: EventContext): void;
  /** A storage's last reference was released (or it moved to another device). */
  onStorageFree?(storage: StorageRef, ctx: EventContext): void;
  /** A tensor handle was created (several can share one storage). */
  onTensorCreate?(tensor: TensorRef, ctx: EventContext): void;
  /** A tensor handle was disposed. */
  onTensorDispose?(tensor: TensorRef, ctx: EventContext): void;

  onKernelStart?(kernel: KernelEvent, ctx: EventContext): void;
  onKernelEnd?(kernel: KernelEvent, ctx: EventContext): void;

  onScopeStart?(name: string, kind: ScopeKind, ctx: EventContext): void;
  onScopeEnd?(name: string, kind: ScopeKind, ctx: EventContext): void;

  /** A module's forward begins (PyTorch's pre-forward hook). */
  onModuleEnter?(module: ModuleRef, inputs: readonly TensorRef[], ctx: EventContext): void;
  /** A module's forward ended (post-forward hook). */
  onModuleExit?(module: ModuleRef, outputs: readonly TensorRef[], ctx: EventContext): void;
  /** Backward reached the module: the first gradient closure it recorded starts (pre-backward hook). */
  onBackwardModuleEnter?(module: ModuleRef, ctx: EventContext): void;
  /** Backward left the module: its last gradient closure finished (post-backward hook). */
  onBackwardModuleExit?(module: ModuleRef, ctx: EventContext): void;

  /** A gradient computation (`engine.gradients`: tf.grads, variableGrads, minimize, fit) begins. */
  onGradientStart?(xs: readonly TensorRef[], ctx: EventContext): void;
  /** It ended; `pairs` are the gradients it returned, aligned with its xs. */
  onGradientEnd?(pairs: readonly GradientPair[], ctx: EventContext): void;

  onOptimizerStepStart?(optimizer: OptimizerRef, ctx: EventContext): void;
  onOptimizerStepEnd?(optimizer: OptimizerRef, ctx: EventContext): void;

  /** `Variable.assign` swapped `variable`'s storage from `previous` to `variable.storage`. */
  onVariableAssign?(variable: TensorRef, previous: StorageRef, ctx: EventContext): void;
}

/**
 * The one opt-in fast form of the contract, for a sink that counts storages (MemTracker's
 * recorder). Implementing it promises, beyond the plain contract, that the sink:
 * - knows storages only by `id`, `bytes` and `device`, and reads them during the call only;
 * - never keeps a TensorRef nor compares one with another seen in an earlier event, so an adapter
 *   may give a short-lived tensor a new ref each time it names it (the TFJS adapter then remembers
 *   refs only for variables; see src/tfjs/storage-identity.ts, stableTensorRefs);
 * - takes storage events also as batches of (id, bytes) numbers, `batch[0 .. length)` in the order
 *   they happened, bytes -1 for a free, every storage on `device`, all with the context `ctx` (its
 *   `seq` is the last event's). An adapter delivers each batch before any later event. The TFJS
 *   adapter sends no batches: it calls `onStorageAlloc` and `onStorageFree`, which mean the same.
 *
 * An allocation may come again for an id that is live: the id stays as it is. A free may come for
 * an id never announced (made before tracking): ignore it.
 */
export interface StorageBatchSink extends MemoryEventSink {
  onStorageAlloc(storage: StorageRef, ctx: EventContext): void;
  onStorageFree(storage: StorageRef, ctx: EventContext): void;
  onStorageBatch(batch: Float64Array, length: number, device: DeviceName, ctx: EventContext): void;
}

/** Whether `sink` implements the fast form (`StorageBatchSink`). */
export function takesStorageBatches(sink: MemoryEventSink): sink is StorageBatchSink {
  return typeof (sink as Partial<StorageBatchSink>).onStorageBatch === 'function';
}

/** The names of the event methods of `MemoryEventSink`. */
export type MemoryEventName = keyof MemoryEventSink;
