/**
 * The recorded profile: a tree of events shaped like torch.profiler's
 * `experimental_event_tree()`, built by `ProfileRecorder` from the
 * framework-free event stream (src/core/events.ts) and consumed by
 * `MemoryProfile` (memory-profile.ts).
 *
 * Mapping to PyTorch's `_EventType`:
 * - `op`         ↔ TorchOp: kernels (aten ops), tidy scopes and user
 *                  annotations (record_function), backward closures
 *                  (RecordScope.BACKWARD_FUNCTION).
 * - `allocation` ↔ Allocation: one storage coming into or out of existence.
 * - `module`     ↔ PyCall with `module` (nn.Module.__call__).
 * - `optimizer`  ↔ PyCall with `optimizer` (Optimizer.step).
 * - `gradient`   ↔ the `AccumulateGrad` evidence: a gradient computation
 *                  (tf.grads / variableGrads / minimize / fit) and the
 *                  (x, grad) pairs it returned.
 * - `assign`     ↔ no PyTorch counterpart: `Variable.assign`, the only way a
 *                  TFJS tensor changes value (see docs/MEMORY_PROFILER.md).
 */

import type { DeviceName, ScopeKind } from '../core/events.js';

/** PyTorch's RecordScope, reduced to the two values the memory profiler reads. */
export type RecordScope = 'function' | 'backward_function';

/** What kind of `op` event: a kernel, or a named region around kernels (a ScopeKind). */
export type OpKind = 'kernel' | ScopeKind;

/**
 * One observation of a tensor (PyTorch's `_TensorMetadata`). `id` is the
 * logical tensor id: storages linked by a tensor that moved between them (a
 * variable across `assign`) share one id, as PyTorch links a TensorImpl's
 * successive storages. It is filled in when the recording ends.
 */
export interface TensorMeta {
  /** The framework's tensor (handle) id. */
  readonly tensorId: number;
  /** The framework's storage id (TFJS dataId), memscope's "pointer". */
  readonly storageId: number;
  /** Storage numbered in order of first appearance in this profile, from 1 (PyTorch's allocation_id). */
  allocationId: number;
  /** Logical tensor id (see above); -1 until the recording is finished. */
  id: number;
  readonly device: DeviceName;
  readonly dtype: string;
  readonly shape: readonly number[];
  /** Bytes of the storage. */
  readonly bytes: number;
  readonly variableName?: string | undefined;
}

interface EventBase {
  readonly name: string;
  /** Event order: unique, increasing in the order events started. */
  readonly startSeq: number;
  /** Wall clock, ns, strictly increasing across events of one recording. */
  readonly startNs: number;
  endSeq: number;
  endNs: number;
  parent: ProfileEvent | null;
  readonly children: ProfileEvent[];
}

/**
 * How an op event takes part in backward: `backward-region` is the engine's
 * 'backward' tidy inside a gradient computation (everything in it runs in
 * backward); `backward-closure` is one gradient closure inside it (a data-flow
 * node, like PyTorch's `MulBackward0`).
 */
export type OpRole = 'plain' | 'backward-region' | 'backward-closure';

export interface OpEvent extends EventBase {
  readonly kind: 'op';
  readonly opKind: OpKind;
  readonly scope: RecordScope;
  readonly role: OpRole;
  /** Closures are named after the kernels they ran once the recording ends, e.g. `Backward[Mul]`. */
  name: string;
  /** Tensor inputs (kernels only; empty for scopes). Null when shapes were not recorded. */
  inputs: TensorMeta[] | null;
  /** Tensor outputs (kernels only). Null when shapes were not recorded. */
  outputs: TensorMeta[] | null;
  /** customGrad / forwardFunc kernels, whose inner kernels run nested inside. */
  readonly composite: boolean;
}

export interface AllocationEvent extends EventBase {
  readonly kind: 'allocation';
  /** True when the storage came into existence, false when it was freed (kept apart from the sign so empty storages work). */
  readonly isAllocation: boolean;
  /** Positive for an allocation, negative for a free (PyTorch's alloc_size). */
  readonly allocSize: number;
  readonly storageId: number;
  allocationId: number;
  readonly device: DeviceName;
  /** Logical tensor id, or null when no tensor was ever seen on this storage (then the storage is "unknown"). */
  id: number | null;
}

export interface ModuleParameter {
  readonly name: string;
  readonly param: TensorMeta;
  /** The gradient alive for this parameter at call time (TFJS keeps none on the variable; see the recorder). */
  readonly grad: TensorMeta | null;
}

export interface ModuleEvent extends EventBase {
  readonly kind: 'module';
  readonly path: string;
  readonly className: string;
  parameters: ModuleParameter[];
}

export interface OptimizerParameter {
  readonly param: TensorMeta;
  readonly grad: TensorMeta | null;
}

export interface OptimizerEvent extends EventBase {
  readonly kind: 'optimizer';
  readonly className: string;
  parameters: OptimizerParameter[];
  state: TensorMeta[];
}

export interface GradientPairMeta {
  readonly x: TensorMeta;
  readonly grad: TensorMeta | null;
}

export interface GradientEvent extends EventBase {
  readonly kind: 'gradient';
  pairs: GradientPairMeta[];
}

export interface AssignEvent extends EventBase {
  readonly kind: 'assign';
  /** The variable after the assign: its new storage. */
  readonly variable: TensorMeta;
  /** The storage it held before. */
  readonly previousStorageId: number;
}

export type ProfileEvent =
  | OpEvent
  | AllocationEvent
  | ModuleEvent
  | OptimizerEvent
  | GradientEvent
  | AssignEvent;

/** The three switches torch.profiler needs for memory profiling. */
export interface ProfileConfig {
  /** Record tensor metadata (ids, storages, shapes) of kernel inputs and outputs. */
  readonly recordShapes: boolean;
  /** Record storage allocations and frees. */
  readonly profileMemory: boolean;
  /** Record layer calls and optimizer steps (PyTorch's Python tracer). */
  readonly withStack: boolean;
}

/** Depth-first, pre-order, children in recorded order (PyTorch's `_utils.traverse_dfs`). */
export function* traverseDfs(
  roots: readonly ProfileEvent[],
  childrenOf: (e: ProfileEvent) => readonly ProfileEvent[] = (e) => e.children,
): Generator<ProfileEvent> {
  const stack: ProfileEvent[] = [...roots].reverse();
  while (stack.length > 0) {
    const e = stack.pop()!;
    yield e;
    const children = childrenOf(e);
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
}

/** Scopes of `event` and its ancestors, innermost first (PyTorch's `get_scopes`). */
export function scopesOf(event: ProfileEvent | null): RecordScope[] {
  const scopes: RecordScope[] = [];
  for (let e = event; e !== null; e = e.parent) if (e.kind === 'op') scopes.push(e.scope);
  return scopes;
}

export function inBackward(event: ProfileEvent): boolean {
  return scopesOf(event).includes('backward_function');
}
