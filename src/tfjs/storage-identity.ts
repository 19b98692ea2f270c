import type { DeviceName, TensorRef } from '../core/events.js';
import { type DataId, type TfBackend, type TfEngine, type TfTensor, isTensorLike, isVariableLike } from './engine-types.js';
import {
  LiveStorages,
  StorageIndex,
  TensorRefIndex,
  TfjsStorage,
  TfjsTensorRef,
  backendSlot,
  countedStorageId,
  derivedStorageId,
  isDerivedStorageId,
  sizeOf,
  storageBytes,
} from './refs.js';
import type { SinkDispatch } from './sink-dispatch.js';

/**
 * Storage identity for one installation: which storage each TFJS dataId is, its id (derived from
 * the dataId where the backend numbers them, else counted), the storages alive, the storages made
 * before memscope saw them (adopted when met), moves between backends, and the TensorRef of each
 * tensor. The engine wrappers call it directly for every tensor made, disposed and freed; it tells
 * the sinks through SinkDispatch.
 */
export class StorageIdentity {
  /**
   * Derived ids of the variables alive at installation, which memscope knows from the start
   * without announcing them (sinks classify them, e.g. as weights, or leave them uncounted). A
   * variable adopted here whose storage is later dropped and met again must not be announced
   * either. Ids are never reused, so ids of variables freed since do no harm here.
   */
  private readonly silentIds = new Set<number>();
  /**
   * Whether storage ids may derive from dataIds here. A derived id assumes the dataId was numbered
   * by the backend that holds it, which a move between backends breaks: the dataId keeps the
   * number its first backend gave it. Moves memscope sees get a counted id (onMoved); moves before
   * installation cannot be seen, so ids derive only when at most one backend had been initialised
   * then (with one backend there is nowhere to move to).
   */
  private readonly deriveIds: boolean;
  private readonly storages = new StorageIndex();
  readonly live = new LiveStorages();
  private readonly tensorRefs = new TensorRefIndex(this.storages);
  private readonly backendNames = new WeakMap<object, string>();
  /**
   * Whether a tensor's ref must be the same object every time. When no sink needs it (every sink
   * is a StorageBatchSink and none listens to tensor events), the refs of short-lived tensors are
   * not remembered: a WeakMap entry per module input, output and gradient makes V8's scavenger
   * promote ~4 KB per training step of the demo model. Variables' refs are always remembered.
   */
  private stableTensorRefs = true;
  /** The variable whose `assign` runs now: its new tensor is not a tensor the program made. */
  assigning: TfTensor | null = null;

  readonly toRef = (t: TfTensor): TensorRef => this.refFor(t);

  constructor(
    private readonly engine: TfEngine,
    private readonly dispatch: SinkDispatch,
  ) {
    this.deriveIds = Object.keys(engine.registry).length <= 1;
  }

  /** Weights and optimizer state usually exist before tracking starts: they are the engine's registered variables, known from the start. */
  adoptRegisteredVariables(each: (v: TfTensor) => void): void {
    const vars = this.engine.state.registeredVariables;
    for (const name of Object.keys(vars)) {
      const v = vars[name];
      if (v == null) continue;
      each(v);
      if (!v.isDisposed && this.storages.get(v.dataId) === undefined) {
        const s = this.adopt(v, false);
        if (isDerivedStorageId(s.id)) this.silentIds.add(s.id);
      }
    }
  }

  /** After the sinks changed: what they need kept (SinkDispatch.plainSinkCount). */
  applySinkNeeds(): void {
    const d = this.dispatch;
    this.tensorRefs.everyTensor = d.createSinks.length > 0;
    this.stableTensorRefs = d.createSinks.length > 0 || d.disposeSinks.length > 0 || d.plainSinkCount > 0;
  }

  // ------------------------------------------------------------- backends

  private lastBackend: object | null = null;
  private lastDevice = '';
  private lastSlot = -1;

  private deviceOf(backend: TfBackend | undefined): string {
    if (backend == null) return this.engine.backendName ?? 'unknown';
    if (backend !== this.lastBackend) this.cacheBackend(backend);
    return this.lastDevice;
  }

  /** The backend's slot for derived storage ids (-1: none; see refs.ts). Leaves its device in lastDevice. */
  private slotOf(backend: TfBackend | null | undefined): number {
    if (backend == null) return -1;
    if (backend !== this.lastBackend) this.cacheBackend(backend);
    return this.lastSlot;
  }

  private cacheBackend(backend: TfBackend): void {
    const name = this.lookUpDevice(backend);
    this.lastBackend = backend;
    this.lastDevice = name;
    this.lastSlot = this.deriveIds ? backendSlot(backend, name) : -1;
  }

  private lookUpDevice(backend: TfBackend): string {
    const cached = this.backendNames.get(backend);
    if (cached !== undefined) return cached;
    const engine = this.engine;
    for (const name of Object.keys(engine.registry)) {
      if (engine.registry[name] === backend) {
        this.backendNames.set(backend, name);
        return name;
      }
    }
    return engine.backendName ?? 'unknown';
  }

  // ------------------------------------------------------------- storages

  private newStorage(
    dataId: DataId,
    dtype: string,
    size: number,
    shape: readonly number[],
    adopted: boolean,
    owner?: TfBackend | null,
    counted = false,
  ): TfjsStorage {
    // trackTensor's caller names the owning backend, or the engine uses its
    // current one (engine.trackTensor: `backend || this.backend`).
    const backend = owner ?? this.engine.state.tensorInfo.get(dataId)?.backend;
    const bytes = storageBytes(dtype, size, backend, dataId);
    let id = counted ? -1 : derivedStorageId(dataId, this.slotOf(backend));
    if (id < 0) id = countedStorageId();
    const s = new TfjsStorage(id, this.storages, this.deviceOf(backend), bytes, dtype, shape, adopted, dataId);
    this.storages.set(dataId, s);
    this.live.add(s);
    return s;
  }

  /** Makes a storage known that TFJS created before memscope could see it. */
  private adopt(t: TfTensor, announce: boolean): TfjsStorage {
    const d = this.dispatch;
    if (!this.engine.state.tensorInfo.has(t.dataId)) {
      // Already released by the engine: a dead storage, never live.
      return new TfjsStorage(countedStorageId(), null, this.deviceOf(undefined), storageBytes(t.dtype, t.size, undefined, t.dataId), t.dtype, t.shape, true, null);
    }
    const s = this.newStorage(t.dataId, t.dtype, t.size, t.shape, true);
    if (announce && d.allocSinks.length > 0 && !this.silentIds.has(s.id)) d.emitStorageAlloc(s);
    return s;
  }

  /**
   * Announces the storages of a kernel's inputs that memscope has not met (made before it was
   * installed), as `refFor` does when kernel events are wanted: a storage a kernel reads is counted
   * from then on whichever trackers listen.
   */
  meetInputs(inputs: Record<string, unknown> | null | undefined): void {
    if (inputs == null) return;
    for (const k in inputs) {
      const t = inputs[k];
      if (isTensorLike(t) && this.storages.get(t.dataId) === undefined) this.adopt(t, true);
    }
  }

  /** Forgets every kept storage (at uninstall): dataIds still alive carry nothing of memscope's. */
  forgetAll(): void {
    for (const s of this.live) {
      if (s.dataId !== null) this.storages.delete(s.dataId);
      s.dataId = null;
    }
    this.live.clear();
  }

  /** The storages memscope knows to be alive. */
  liveStorages(): TfjsStorage[] {
    return Array.from(this.live);
  }

  /** The storage behind `dataId` now; undefined if it is not live or not known. */
  storageOf(dataId: DataId): TfjsStorage | undefined {
    return this.storages.get(dataId);
  }

  refFor(t: TfTensor): TfjsTensorRef {
    let r = this.tensorRefs.get(t);
    if (r === undefined) {
      const s = this.storages.get(t.dataId) ?? this.adopt(t, true);
      r = new TfjsTensorRef(t, this.storages, s);
      if (this.stableTensorRefs || isVariableLike(t)) this.tensorRefs.set(t, r);
    }
    return r;
  }

  /** The refs of every live tensor in `x` (a tensor or nested arrays of them). */
  refsOf(x: unknown): TensorRef[] {
    const out: TensorRef[] = [];
    const visit = (v: unknown): void => {
      if (isTensorLike(v)) {
        if (!v.isDisposed || this.storageOf(v.dataId) !== undefined) out.push(this.refFor(v));
      } else if (Array.isArray(v)) for (const e of v) visit(e);
    };
    visit(x);
    return out;
  }

  // ------------------------------------------------------------- the engine's storage events

  /** After `engine.trackTensor(a)`: `isNew` when the engine made a new dataId entry. */
  onTrack(engine: TfEngine, a: TfTensor, isNew: boolean, backend: TfBackend | null | undefined): void {
    const d = this.dispatch;
    let s = this.storages.get(a.dataId);
    if (s === undefined || isNew) {
      if (s !== undefined) this.release(a.dataId, s); // stale: cannot happen unless the engine was reset
      s = this.newStorage(a.dataId, a.dtype, a.size, a.shape, !isNew, isNew ? (backend ?? engine.backendInstance) : null);
      if (d.allocSinks.length > 0 && (isNew || !this.silentIds.has(s.id))) d.emitStorageAlloc(s);
    }
    if (d.createSinks.length > 0 && a !== this.assigning) {
      let r = this.tensorRefs.get(a);
      if (r === undefined) {
        r = new TfjsTensorRef(a, this.storages, s);
        this.tensorRefs.set(a, r);
      }
      d.emitTensorCreate(r);
    }
  }

  onDispose(a: TfTensor): void {
    if (this.dispatch.disposeSinks.length === 0 || a === this.assigning) return;
    const r = this.tensorRefs.get(a);
    if (r !== undefined && !r.disposed) {
      r.disposed = true;
      this.dispatch.emitTensorDispose(r);
    }
  }

  /** `s` is what `storages.get(dataId)` returned. */
  private release(dataId: DataId, s: TfjsStorage): void {
    this.storages.deleteFound(dataId);
    s.dataId = null;
    this.live.remove(s);
    if (this.dispatch.freeSinks.length > 0) this.dispatch.emitStorageFree(s);
  }

  /**
   * After `engine.removeDataId`. `removed`: the engine's dataId count went
   * down, i.e. it dropped the entry. Otherwise the entry is either still there
   * (another backend's removal) or was already gone; only then is the engine's
   * map asked — one WeakMap lookup saved on every free.
   */
  onDataIdRemoved(engine: TfEngine, dataId: DataId, backend: TfBackend, removed: boolean): void {
    const d = this.dispatch;
    const s = this.storages.get(dataId);
    // Not kept: made before memscope saw it and never met, so no sink was told of it.
    if (s === undefined) return;
    if (!removed && engine.state.tensorInfo.has(dataId)) return;
    this.release(dataId, s);
  }

  /** After `engine.moveData`: `from` is the backend that held the data before. */
  onMoved(engine: TfEngine, dataId: DataId, from: TfBackend | undefined): void {
    const d = this.dispatch;
    const old = this.storages.get(dataId);
    if (old !== undefined) {
      this.storages.deleteFound(dataId);
      old.dataId = null;
      this.live.remove(old);
    }
    const info = engine.state.tensorInfo.get(dataId);
    // The data's new storage is told before the old one's end, so sinks carry its category over.
    if (info !== undefined) {
      // The dataId keeps its first backend's number: kept, with a counted id (see deriveIds).
      const s = this.newStorage(dataId, info.dtype, sizeOf(info.shape), info.shape, old === undefined, info.backend, true);
      if (old !== undefined) s.movedFrom = old.id;
      if (d.allocSinks.length > 0) d.emitStorageAlloc(s);
    }
    if (old !== undefined && d.freeSinks.length > 0) d.emitStorageFree(old);
  }

  // ---------------------------------------------------------------- assign

  /** Before `Variable.assign`: the variable's storage now (adopted if memscope keeps no object for it). */
  beforeAssign(v: TfTensor): TfjsStorage | undefined {
    const known = this.storageOf(v.dataId);
    if (known !== undefined || !this.engine.state.tensorInfo.has(v.dataId)) return known;
    // A live variable memscope keeps no object for: made before installation and not met since.
    // Without its storage the
    // assign would go unreported and the new storage keep the category of its phase.
    return this.adopt(v, true);
  }

  afterAssign(v: TfTensor, previous: TfjsStorage | undefined): void {
    const d = this.dispatch;
    if (previous === undefined || d.assignSinks.length === 0) return;
    d.emit(d.assignSinks, 'onVariableAssign', this.refFor(v), previous, true);
  }
}
