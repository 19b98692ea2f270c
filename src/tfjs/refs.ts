import type { DeviceName, ModuleRef, OptimizerRef, StorageRef, TensorRef } from '../core/events.js';
import type { DataId, TfBackend, TfTensor } from './engine-types.js';

/**
 * The property under which a dataId carries its storage and a tensor its
 * TensorRef. One symbol for the whole process, not one per installation: a
 * tensor that lives through several tracking sessions (a weight, the input
 * batch) would otherwise gain one more property per session, and after a few
 * dozen start/stop cycles V8 turns such objects into slow dictionary-mode
 * objects, which slows every TFJS op that touches them, tracked or not.
 * Entries of an earlier installation are recognised by their owner and ignored.
 */
const STORAGE_KEY = Symbol('memscope.storage');
const TENSOR_REF_KEY = Symbol('memscope.tensor');

/**
 * dataId → storage, one per installation. The storage rides on the dataId
 * object (under STORAGE_KEY) instead of living in a WeakMap: every tensor
 * allocation looks it up, and V8's ephemeron handling of large, churning
 * WeakMaps cost more GC time than the program itself on small models. TFJS
 * only uses dataIds as opaque keys, so the extra symbol-keyed property changes
 * nothing for it; uninstall clears it on every dataId still alive.
 *
 * Nor in a strong `Map<DataId, TfjsStorage>` (which would also have served as
 * the live set, dropping the storage's `index`, `dataId` and list links and the
 * dataId's property array): with one the tracked demo step costs ~12 % more
 * instructions (callgrind), as a Map's ordered table fills with deleted entries
 * under this churn and is rehashed every few hundred allocations, and the
 * scavenger's work grows several times over.
 */
export class StorageIndex {
  get(dataId: DataId): TfjsStorage | undefined {
    const s = (dataId as Record<symbol, TfjsStorage | undefined>)[STORAGE_KEY];
    return s !== undefined && s.index === this ? s : undefined;
  }
  /** `s.index` must be this index. */
  set(dataId: DataId, s: TfjsStorage): void {
    (dataId as Record<symbol, TfjsStorage | undefined>)[STORAGE_KEY] = s;
  }
  delete(dataId: DataId): void {
    const d = dataId as Record<symbol, TfjsStorage | undefined>;
    if (d[STORAGE_KEY]?.index === this) d[STORAGE_KEY] = undefined;
  }
  /** `delete` for a dataId whose storage `get` has just returned: nothing to check again. */
  deleteFound(dataId: DataId): void {
    (dataId as Record<symbol, TfjsStorage | undefined>)[STORAGE_KEY] = undefined;
  }
}

/**
 * Storage ids. A storage's id is derived from its dataId where the backend numbers its dataIds
 * (`dataId.id`), so that a storage met by several attachments of the adapter, or made before
 * memscope saw it and adopted later, has the same id each time. Backends get a slot each, for the
 * whole process (a later attachment must give a live storage the id an earlier one gave it).
 *
 * The backends below number their dataIds from a counter that never goes back (tfjs-backend-cpu,
 * -webgl and -webgpu: a static counter of the backend class; -wasm: one per backend instance), so
 * (backend instance, dataId.id) names one storage. Other backends' dataIds are arbitrary objects
 * to TFJS; theirs get ids from a counter, above every derived id.
 */
const NUMBERED_BACKENDS: ReadonlySet<string> = new Set(['cpu', 'wasm', 'webgl', 'webgpu']);
/** Derived id = slot × ID_SPAN + dataId.id: one backend's storages get consecutive ids, which RecentIdTable's ring wants. */
const ID_SPAN = 2 ** 31;
export const MAX_BACKEND_SLOTS = 64;
/** Ids of storages whose dataId is not numbered: above every derived id (MAX_BACKEND_SLOTS × ID_SPAN = 2^37). */
const COUNTED_ID_BASE = 2 ** 40;
let nextCountedId = COUNTED_ID_BASE;
const backendSlots = new WeakMap<object, number>();
let nextSlot = 0;

/** The slot of a backend registered as `device`, or -1 when its dataIds are not numbered (or all slots are taken). */
export function backendSlot(backend: TfBackend | null | undefined, device: DeviceName): number {
  if (backend == null || !NUMBERED_BACKENDS.has(device)) return -1;
  let slot = backendSlots.get(backend);
  if (slot === undefined) {
    if (nextSlot === MAX_BACKEND_SLOTS) return -1;
    slot = nextSlot++;
    backendSlots.set(backend, slot);
  }
  return slot;
}

/** The derived id of `dataId`'s storage on the backend in `slot`, or -1 when it has none. */
export function derivedStorageId(dataId: DataId, slot: number): number {
  const n = (dataId as { id?: unknown }).id;
  if (slot < 0 || typeof n !== 'number' || !(n >= 0 && n < ID_SPAN) || !Number.isInteger(n)) return -1;
  return slot * ID_SPAN + n;
}

/** The backend slot a derived id was made with. */
export function slotOfDerivedId(id: number): number {
  return Math.floor(id / ID_SPAN);
}

/** An id for a storage with no derived id. */
export function countedStorageId(): number {
  return nextCountedId++;
}

/** Whether `id` was derived from a dataId (so the storage can be built again from it). */
export function isDerivedStorageId(id: number): boolean {
  return id < COUNTED_ID_BASE;
}

/** One storage per TFJS dataId per device. Immutable once made: a move makes a new one. */
export class TfjsStorage implements StorageRef {
  constructor(
    /** See derivedStorageId / countedStorageId. */
    readonly id: number,
    /** The installation's index that owns this storage (StorageIndex ignores other installations' storages). */
    readonly index: StorageIndex | null,
    readonly device: DeviceName,
    readonly bytes: number,
    readonly dtype: string,
    readonly shape: readonly number[],
    /**
     * True when the dataId existed before memscope saw it being created (made
     * before install, and first touched afterwards). Such a storage gets its
     * onStorageAlloc when memscope first meets it, not when TFJS made it.
     */
    readonly adopted: boolean,
    /** The dataId while the storage is live (cleared on free, so nothing is retained after). */
    public dataId: DataId | null,
  ) {}
  /** The storage on the device the data moved from (StorageRef.movedFrom). */
  movedFrom: number | undefined = undefined;
  /** Links of the installation's live list (see LiveStorages). */
  prevLive: TfjsStorage | null = null;
  nextLive: TfjsStorage | null = null;
}

/** Where LiveStorages records its newest storage (see there). */
interface NewestCursor {
  newest: TfjsStorage | null;
}

/** Insertions between two replacements of LiveStorages' cursor. */
const CURSOR_SPAN = 64;

/**
 * The storages alive now, as an intrusive doubly linked list: O(1) insert and
 * remove with no hashing, on the path of every allocation and free.
 *
 * The list is anchored at its newest storage, kept in a small cursor object
 * that is replaced every CURSOR_SPAN insertions rather than in a field of this
 * long-lived object. A pointer stored into an object V8 has promoted to the
 * old generation, pointing at a young one (every new storage is young), goes
 * through the write barrier's slow path, which records the slot for the
 * scavenger: ~50 instructions, once per tensor allocation when the anchor was a
 * field here (callgrind). A fresh cursor is young, so writing the newest
 * storage into it is not recorded; a new cursor every CURSOR_SPAN insertions
 * keeps it young, and only that replacement pays the barrier. The previous
 * newest storage, whose `nextLive` an insertion sets, is nearly always young
 * too. Correctness never depends on where V8 keeps the cursor.
 */
export class LiveStorages implements Iterable<TfjsStorage> {
  private cursor: NewestCursor = { newest: null };
  private insertsLeft = CURSOR_SPAN;
  size = 0;
  add(s: TfjsStorage): void {
    const cursor = this.cursor;
    const prev = cursor.newest;
    s.prevLive = prev;
    s.nextLive = null;
    if (prev !== null) prev.nextLive = s;
    cursor.newest = s;
    this.size++;
    if (--this.insertsLeft === 0) {
      this.insertsLeft = CURSOR_SPAN;
      this.cursor = { newest: s };
    }
  }
  /** `s` must be in the list. */
  remove(s: TfjsStorage): void {
    const prev = s.prevLive;
    const next = s.nextLive;
    if (next !== null) next.prevLive = prev;
    else this.cursor.newest = prev;
    if (prev !== null) prev.nextLive = next;
    s.prevLive = s.nextLive = null;
    this.size--;
  }
  clear(): void {
    for (let s = this.cursor.newest; s !== null; ) {
      const prev = s.prevLive;
      s.prevLive = s.nextLive = null;
      s = prev;
    }
    this.cursor = { newest: null };
    this.size = 0;
  }
  /** Newest first. */
  *[Symbol.iterator](): Iterator<TfjsStorage> {
    for (let s = this.cursor.newest; s !== null; s = s.prevLive) yield s;
  }
}

/** Elements of a tensor of this shape. */
export function sizeOf(shape: readonly number[]): number {
  let size = 1;
  for (const d of shape) size *= d;
  return size;
}

/**
 * Bytes a dataId holds on its backend. Numeric dtypes: elements × element
 * size (the engine's own rule). complex64: 8 bytes per element — the backend
 * keeps a float32 real and a float32 imaginary buffer, which the engine counts
 * as 0 on the complex container. string: the encoded byte length of every
 * element, read from the backend (the engine counts this only for tensors made
 * by `makeTensor`, and 0 for strings made by kernels).
 */
export function storageBytes(dtype: string, size: number, backend: TfBackend | undefined, dataId: DataId): number {
  switch (dtype) {
    case 'float32':
    case 'int32':
      return size * 4;
    case 'bool':
      return size;
    case 'complex64':
      return size * 8;
    case 'string': {
      let total = 0;
      try {
        const vals = backend?.readSync?.(dataId);
        if (Array.isArray(vals)) for (const v of vals) total += (v as { length?: number })?.length ?? 0;
      } catch {
        // Unreadable string data: count nothing rather than guess.
      }
      return total;
    }
    default:
      return size * 4;
  }
}

/**
 * tensor → TensorRef, one per installation. Where it is kept depends on how many tensors get one:
 *
 * - Every tensor (a sink wants `onTensorCreate`, e.g. the operator tracker): on the tensor, under
 *   TENSOR_REF_KEY, for the same reason as StorageIndex (a WeakMap entry per tensor made GC the
 *   largest cost of tracking). All tensors then share the extra property.
 * - Some tensors (module inputs and outputs, gradients, assigned variables: MemTracker): in a
 *   WeakMap. A property on only some tensors would give TFJS's tensors more hidden classes than
 *   V8's inline caches keep apart, and every tensor property read in TFJS's own hot code
 *   (engine.endScope, trackTensor, convertToTensor) would go megamorphic: in a 540-step run of the
 *   demo model, endScope then makes 1.39 M megamorphic loads instead of 0.12 M, and the
 *   megamorphic-load builtin's instructions grow from 34 M to 167 M (callgrind; docs/MEMTRACKER_DESIGN.md,
 *   "Tensor refs").
 *
 * A ref made in one mode is found in the other (get looks in both), so switching modes while
 * sinks come and go keeps each tensor's one ref. A TensorRef belongs to the installation whose
 * StorageIndex it reads.
 */
export class TensorRefIndex {
  private readonly sparse = new WeakMap<TfTensor, TfjsTensorRef>();
  /** Set by the installation: true while some sink wants a ref for every tensor made. */
  everyTensor = false;
  constructor(private readonly storages: StorageIndex) {}
  get(t: TfTensor): TfjsTensorRef | undefined {
    const r = (t as unknown as Record<symbol, TfjsTensorRef | undefined>)[TENSOR_REF_KEY];
    if (r !== undefined && r.storages === this.storages) return r;
    return this.sparse.get(t);
  }
  set(t: TfTensor, r: TfjsTensorRef): void {
    if (this.everyTensor) (t as unknown as Record<symbol, TfjsTensorRef | undefined>)[TENSOR_REF_KEY] = r;
    else this.sparse.set(t, r);
  }
}

/**
 * A tensor handle. `storage` follows the tensor's dataId now (a variable's
 * changes on assign, any tensor's on a move between backends); after the
 * storage is freed it keeps answering the last one it had.
 */
export class TfjsTensorRef implements TensorRef {
  disposed = false;
  constructor(
    readonly tensor: TfTensor,
    readonly storages: StorageIndex,
    private last: TfjsStorage,
  ) {}
  get id(): number {
    return this.tensor.id;
  }
  get storage(): TfjsStorage {
    const dataId = this.tensor.dataId;
    const kept = this.storages.get(dataId);
    if (kept !== undefined) this.last = kept;
    return this.last;
  }
  get dtype(): string {
    return this.tensor.dtype;
  }
  get shape(): readonly number[] {
    return this.tensor.shape;
  }
  get variableName(): string | undefined {
    return typeof this.tensor.assign === 'function' ? this.tensor.name : undefined;
  }
  get trainable(): boolean | undefined {
    return typeof this.tensor.assign === 'function' ? this.tensor.trainable : undefined;
  }
}

let nextModuleId = 1;

/** What memscope reads from a tfjs-layers Layer (duck-typed). */
export interface TfLayer {
  name: string;
  call: (inputs: unknown, kwargs: unknown) => unknown;
  trainableWeights?: Array<{ read?: () => TfTensor; val?: TfTensor }>;
  nonTrainableWeights?: Array<{ read?: () => TfTensor; val?: TfTensor }>;
  layers?: TfLayer[];
  outputLayers?: TfLayer[];
  getClassName?: () => string;
  constructor: { name: string; className?: string };
}

export class TfjsModule implements ModuleRef {
  readonly id = nextModuleId++;
  readonly children: TfjsModule[] = [];
  constructor(
    readonly layer: TfLayer,
    public path: string,
    readonly className: string,
    public parent: TfjsModule | null,
    private readonly toRef: (t: TfTensor) => TensorRef,
  ) {}
  /**
   * A model instrumented on its own first and then found nested in another
   * instrumented model becomes that model's child: paths are always from the
   * outermost instrumented root.
   */
  adoptInto(parent: TfjsModule, name: string): void {
    this.parent = parent;
    parent.children.push(this);
    this.renamePath(`${parent.path}.${name}`);
  }
  private renamePath(path: string): void {
    this.path = path;
    for (const c of this.children) c.renamePath(`${path}.${c.layer.name}`);
  }
  get root(): TfjsModule {
    let m: TfjsModule = this;
    while (m.parent !== null) m = m.parent;
    return m;
  }
  isAncestorOf(m: TfjsModule | null): boolean {
    for (let p = m; p !== null; p = p.parent) if (p === this) return true;
    return false;
  }
  /**
   * The layer's own weights, read through the Layer getters so a frozen layer
   * (`trainable = false`) reports its weights as buffers. A container's weight
   * lists are its children's, so containers report none of their own.
   */
  parameters(): TensorRef[] {
    return this.children.length > 0 ? [] : this.weights(this.layer.trainableWeights);
  }
  buffers(): TensorRef[] {
    return this.children.length > 0 ? [] : this.weights(this.layer.nonTrainableWeights);
  }
  private weights(list: Array<{ read?: () => TfTensor; val?: TfTensor }> | undefined): TensorRef[] {
    const out: TensorRef[] = [];
    if (!Array.isArray(list)) return out;
    for (const w of list) {
      // LayerVariable keeps its tf.Variable in `val`; `read()` returns it too
      // but throws once disposed.
      const v = w?.val;
      if (v != null && !v.isDisposed) out.push(this.toRef(v));
    }
    return out;
  }
}

let nextOptimizerId = 1;

export class TfjsOptimizer implements OptimizerRef {
  readonly id = nextOptimizerId++;
  constructor(
    readonly optimizer: object,
    readonly className: string,
    private readonly toRef: (t: TfTensor) => TensorRef,
    private readonly isTensor: (x: unknown) => x is TfTensor,
  ) {}
  /**
   * Every tensor the optimizer holds in its own properties: variables (Adam's
   * accBeta1/accBeta2), arrays of `{originalName, variable}` (the moments and
   * accumulators every tfjs optimizer keeps), and kept tensors (SGD's
   * learning-rate scalar `c`, momentum's `m`). Read now: state is made lazily on
   * the first step.
   */
  stateVariables(): TensorRef[] {
    const out: TensorRef[] = [];
    const seen = new Set<TfTensor>();
    const add = (t: unknown): void => {
      if (this.isTensor(t) && !t.isDisposed && !seen.has(t)) {
        seen.add(t);
        out.push(this.toRef(t));
      }
    };
    for (const key of Object.keys(this.optimizer)) {
      const v = (this.optimizer as Record<string, unknown>)[key];
      if (Array.isArray(v)) {
        for (const e of v) {
          if (this.isTensor(e)) add(e);
          else if (e != null && typeof e === 'object') add((e as { variable?: unknown }).variable);
        }
      } else add(v);
    }
    return out;
  }
}
