import type {
  DeviceName,
  EventContext,
  GradientPair,
  KernelEvent,
  MemoryEventName,
  MemoryEventSink,
  Phase,
  ScopeKind,
  StorageBatchSink,
  TensorRef,
} from '../core/events.js';
import { takesStorageBatches } from '../core/events.js';
import {
  type DataId,
  type PatchedEngineMethod,
  type TfBackend,
  type TfEngine,
  type TfKernelParams,
  type TfTapeNode,
  type TfTensor,
  PATCHED_ENGINE_METHODS,
  isTensorLike,
  isVariableLike,
} from './engine-types.js';
import {
  type TfLayer,
  LiveStorages,
  StorageIndex,
  TensorRefIndex,
  TfjsModule,
  TfjsOptimizer,
  TfjsStorage,
  TfjsTensorRef,
  backendSlot,
  countedStorageId,
  derivedStorageId,
  isDerivedStorageId,
  MAX_BACKEND_SLOTS,
  sizeOf,
  slotOfDerivedId,
  storageBytes,
} from './refs.js';

/**
 * One installation of memscope's hooks on the global TFJS engine, shared by
 * every attached session (reference counted by the adapter). See
 * docs/TFJS_INSTRUMENTATION.md for what is patched and what each event means.
 */

/** The adapter's live context (EventContext is its read-only view). */
class LiveContext implements EventContext {
  phase: Phase = 'none';
  module: TfjsModule | null = null;
  kernel: string | null = null;
  step = 0;
  seq = 0;
}

/** One forward invocation of a module. Tape nodes recorded inside it point at it. */
interface Frame {
  readonly module: TfjsModule;
  readonly parent: Frame | null;
  readonly depth: number;
  /**
   * Opened by memscope, not by the module's own `call`: tfjs-layers runs a
   * root model's layers from `fit`/`predict`/`evaluate` without calling the
   * root's `call`, so the root's forward spans its first layer's start to its
   * last output layer's end.
   */
  readonly implicit: boolean;
  /** Implicit frames: output layers that have not finished yet. */
  readonly pending: Set<object> | null;
  /** Implicit frames: the outputs of the output layers that finished. */
  readonly outputs: TensorRef[];
  /** Engine scope depth when the frame opened; an implicit frame never outlives it. */
  readonly scopeDepth: number;
}

/** One `engine.gradients` call in progress. */
interface GradientRun {
  /** 0 before its 'forward' tidy, 1 inside it, 2 between, 3 inside 'backward', 4 after. */
  state: number;
  /** The backward frame that was current when this run's backprop began. */
  bwBase: Frame | null;
}

const SCOPE_PLAIN = 0;
const SCOPE_GRAD_FORWARD = 1;
const SCOPE_GRAD_BACKWARD = 2;
/** tfjs-core's OP_SCOPE_SUFFIX (ops/operation.ts). */
const OP_SCOPE_SUFFIX = '__op';

type Fn = (...args: never[]) => unknown;

/**
 * Where onTapeNode keeps a node's recording frame and the engine's gradient
 * closure: process-wide keys, like refs.ts's, so objects keep one shape
 * however many installations come and go.
 */
const NODE_FRAME_KEY = Symbol('memscope.frame');
const NODE_GRADIENT_KEY = Symbol('memscope.gradient');

/** A tape node recorded under a module (see onTapeNode). */
type TaggedTapeNode = TfTapeNode & { [key: symbol]: Frame | null | ((dys: unknown[]) => unknown) | undefined };

interface InstanceWrap {
  readonly target: Record<string, unknown>;
  readonly key: string;
  readonly hadOwn: boolean;
  readonly previous: unknown;
  readonly wrapper: unknown;
}

/**
 * The layers whose completion ends a model's forward: its output layers, or
 * for a Sequential that was never built on its own (nested in another
 * Sequential, whose graph holds its layers directly) its last layer.
 */
function pendingOutputLayers(mod: TfjsModule): Set<object> | null {
  const out = mod.layer.outputLayers;
  if (Array.isArray(out) && out.length > 0) return new Set<object>(out);
  const layers = mod.layer.layers;
  if (Array.isArray(layers) && layers.length > 0) return new Set<object>([layers[layers.length - 1]!]);
  return null;
}

/** Engine methods wrapped only when a subscribed sink needs them (see recomputeWants). */
const DEFERRED_ENGINE_METHODS: ReadonlySet<PatchedEngineMethod> = new Set(['runKernelFunc', 'disposeTensor']);

/** Storage events held back at most (see Installation.queued), two numbers each. */
const QUEUED_EVENTS = 512;

/**
 * A customGrad kernel has no registered name; the engine (and its profiler)
 * names it after the enclosing scope — the op that used customGrad, e.g.
 * 'softmaxCrossEntropy__op' — and memscope keeps that name (consumers pin
 * it); outside any scope, where the engine says '', memscope says 'customGrad'.
 */
function compositeKernelName(scopeName: string | undefined): string {
  return scopeName == null || scopeName === '' ? 'customGrad' : scopeName;
}

export class Installation {
  active = true;
  readonly ctx = new LiveContext();

  /** Failures inside memscope's own hook logic, swallowed so the program runs on. */
  internalErrors = 0;
  private warnedInternal = false;
  private readonly warnedSinks = new WeakSet<object>();

  private sinks: MemoryEventSink[] = [];
  // Per-handler subscriber lists, recomputed on (un)subscribe so the hot path
  // only tests `.length`.
  private allocSinks: MemoryEventSink[] = [];
  private freeSinks: MemoryEventSink[] = [];
  private createSinks: MemoryEventSink[] = [];
  private disposeSinks: MemoryEventSink[] = [];
  private kernelStartSinks: MemoryEventSink[] = [];
  private kernelEndSinks: MemoryEventSink[] = [];
  private scopeStartSinks: MemoryEventSink[] = [];
  private scopeEndSinks: MemoryEventSink[] = [];
  private moduleEnterSinks: MemoryEventSink[] = [];
  private moduleExitSinks: MemoryEventSink[] = [];
  private bwEnterSinks: MemoryEventSink[] = [];
  private bwExitSinks: MemoryEventSink[] = [];
  private gradStartSinks: MemoryEventSink[] = [];
  private gradEndSinks: MemoryEventSink[] = [];
  private optStartSinks: MemoryEventSink[] = [];
  private optEndSinks: MemoryEventSink[] = [];
  private assignSinks: MemoryEventSink[] = [];
  private wantKernels = false;
  /** The sinks of the fast form (StorageBatchSink), whichever form their storage events take now. */
  private batchSinks: StorageBatchSink[] = [];
  /**
   * True while every sink listening to storage events takes them in batches and none listens to
   * tensor create or dispose events (StorageBatchSink): then a storage whose id derives
   * from its dataId (refs.ts, derivedStorageId) gets no object and no entry on its dataId or in
   * the live list. Its events carry the derived id, and an object is built only when asked for
   * (a TensorRef's storage, liveStorages). A storage made so is, to sinks that subscribe later,
   * like one made before memscope was installed: met when first touched.
   */
  private byId = false;
  /**
   * Derived ids of the variables alive at installation, which memscope knows from the start
   * without announcing them (sinks classify them, e.g. as weights, or leave them uncounted). When
   * it keeps no object for them (byId) and meets them again, it must not announce them either.
   * Ids are never reused, so ids of variables freed since do no harm here.
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
  /**
   * Set by the first move seen: from then on a dataId met again may carry a kept storage with a
   * counted id, so frees and re-announcements look for one before deriving an id.
   */
  private sawMove = false;
  /**
   * Per backend slot, the derived id of the first new dataId seen since installation. Backends
   * number their dataIds upwards, so a dataId met again with an id at or above it was made while
   * memscope watched and its storage was announced then: only older ones need announcing when met
   * (without this, every view and every variable assign announced its storage once more).
   */
  private readonly firstNewIds = new Float64Array(MAX_BACKEND_SLOTS).fill(Infinity);
  /**
   * Storage events held back for the batch sinks (StorageBatchSink): (derived id, bytes) pairs, bytes -1 for a free,
   * all of storages on `queueBackend`. Why: an allocation and a free happen once per tensor, each
   * between microseconds of TFJS and wasm code that evict memscope's code from the CPU's
   * instruction cache, so handling one there runs cold (docs/MEMTRACKER.md, "Storage events queued").
   * Queued, the engine's hot path pays a few stores, and the handling runs later as one warm loop.
   * They are delivered (flushQueued) before any other event, before the context changes, before
   * the sinks change, and when a sink asks (the session's flush), so each sink sees them in order
   * and with the context they had.
   */
  private readonly queued = new Float64Array(QUEUED_EVENTS * 2);
  queuedLength = 0;
  /**
   * The backend whose new and freed storages may be queued now, else null: the engine wrappers'
   * one test. Set at the first new storage on a backend with derived ids while queueing is
   * allowed (`queueAllowed`); cleared whenever that may have changed.
   */
  queueBackend: TfBackend | null = null;
  /** queueBackend's slot for derived ids. */
  private queueSlot = -1;
  private queueDevice: DeviceName = '';
  /** byId with ids derived from dataIds (recomputeWants). */
  private queueAllowed = false;
  private flushing = false;
  /** One event's batch, for storage events by id that go out at once. */
  private readonly single = new Float64Array(2);

  private readonly storages = new StorageIndex();
  readonly live = new LiveStorages();
  private readonly tensorRefs = new TensorRefIndex(this.storages);
  private readonly backendNames = new WeakMap<object, string>();

  private readonly engineOriginals = new Map<PatchedEngineMethod, Fn>();
  /** Wrappers now on the engine prototype. */
  private readonly engineWrappers = new Map<PatchedEngineMethod, Fn>();
  /** Wrappers built but not installed yet: installed when a subscribed sink first needs them. */
  private readonly deferredWrappers = new Map<PatchedEngineMethod, Fn>();
  private readonly engineProto: Record<string, unknown>;
  /** Prototypes whose `assign` memscope replaced → the original. */
  private readonly assignOriginals = new Map<Record<string, unknown>, { original: Fn; wrapper: Fn }>();
  private readonly instanceWraps: InstanceWrap[] = [];

  readonly modules = new WeakMap<object, TfjsModule>();
  private moduleCount = 0;
  readonly optimizers = new WeakMap<object, TfjsOptimizer>();

  private fwdTop: Frame | null = null;
  private bwTop: Frame | null = null;
  private forwardDepth = 0;
  private backwardDepth = 0;
  private optimizerDepth = 0;
  private readonly gradRuns: GradientRun[] = [];
  /** The engine scopes memscope gave a meaning to (gradients' forward/backward tidies), innermost last. */
  private readonly markedScopes: object[] = [];
  /** The innermost marked scope (read by the endScope fast path). */
  markedTop: object | null = null;
  /** Implicit module frames open now (they close at scope ends). */
  implicitOpen = 0;
  watchScopeStart = false;
  watchScopeEnd = false;
  /**
   * The innermost gradient run waits for the engine's 'forward' or 'backward' tidy (its state is 0
   * or 2): only then does a new scope's name need comparing. Op scopes' names are built by
   * concatenation, so comparing every one cost a string-compare builtin call per op.
   */
  awaitsGradientScope = false;
  private readonly scopeMarks: number[] = [];
  private assigning: TfTensor | null = null;

  readonly toRef = (t: TfTensor): TensorRef => this.refFor(t);

  constructor(readonly engine: TfEngine) {
    this.engineProto = Object.getPrototypeOf(engine) as Record<string, unknown>;
    this.deriveIds = Object.keys(engine.registry).length <= 1;
    this.patchEngine();
    // Weights and optimizer state usually exist before tracking starts: they
    // are the engine's registered variables, so memscope can know them.
    for (const name of Object.keys(engine.state.registeredVariables)) {
      const v = engine.state.registeredVariables[name];
      if (v == null) continue;
      this.patchVariableClassOf(v);
      if (!v.isDisposed && this.storages.get(v.dataId) === undefined) {
        const s = this.adopt(v, false);
        if (isDerivedStorageId(s.id)) this.silentIds.add(s.id);
      }
    }
  }

  // ---------------------------------------------------------------- sinks

  subscribe(sink: MemoryEventSink): void {
    this.flushIfQueued(); // held back for the sinks there before
    this.sinks.push(sink);
    this.recomputeWants();
  }

  unsubscribe(sink: MemoryEventSink): void {
    this.flushIfQueued();
    const i = this.sinks.indexOf(sink);
    if (i >= 0) this.sinks.splice(i, 1);
    this.recomputeWants();
  }

  private recomputeWants(): void {
    const pick = (k: MemoryEventName) => this.sinks.filter((s) => typeof s[k] === 'function');
    this.allocSinks = pick('onStorageAlloc');
    this.freeSinks = pick('onStorageFree');
    this.createSinks = pick('onTensorCreate');
    this.tensorRefs.everyTensor = this.createSinks.length > 0;
    this.disposeSinks = pick('onTensorDispose');
    this.batchSinks = this.sinks.filter(takesStorageBatches);
    const byId =
      this.allocSinks.every(takesStorageBatches) &&
      this.freeSinks.every(takesStorageBatches) &&
      this.createSinks.length === 0 &&
      this.disposeSinks.length === 0;
    if (byId && !this.byId) this.dropDerivedStorages();
    this.byId = byId;
    this.storages.onDemand = byId ? this.storageOnDemand : null;
    this.queueAllowed = byId && this.deriveIds && this.batchSinks.length > 0;
    this.queueBackend = null; // set again at the next new storage, if allowed
    // A batch sink keeps no TensorRef and reads no kernel name (StorageBatchSink); any other sink may.
    const plainSinks = this.sinks.length - this.batchSinks.length;
    this.stableTensorRefs = this.createSinks.length > 0 || this.disposeSinks.length > 0 || plainSinks > 0;
    this.kernelStartSinks = pick('onKernelStart');
    this.kernelEndSinks = pick('onKernelEnd');
    this.scopeStartSinks = pick('onScopeStart');
    this.scopeEndSinks = pick('onScopeEnd');
    this.moduleEnterSinks = pick('onModuleEnter');
    this.moduleExitSinks = pick('onModuleExit');
    this.bwEnterSinks = pick('onBackwardModuleEnter');
    this.bwExitSinks = pick('onBackwardModuleExit');
    this.gradStartSinks = pick('onGradientStart');
    this.gradEndSinks = pick('onGradientEnd');
    this.optStartSinks = pick('onOptimizerStepStart');
    this.optEndSinks = pick('onOptimizerStepEnd');
    this.assignSinks = pick('onVariableAssign');
    this.wantKernels = this.kernelStartSinks.length > 0 || this.kernelEndSinks.length > 0;
    this.watchScopeStart = this.scopeStartSinks.length > 0;
    this.watchScopeEnd = this.scopeEndSinks.length > 0;
    // runKernelFunc and disposeTensor run for every kernel and every dispose; they are wrapped
    // only once some sink needs what their wrappers provide (ctx.kernel, kernel events, tensor
    // disposals). Once wrapped they stay wrapped until uninstall: re-patching the engine's
    // prototype makes V8 discard optimised TFJS code, which costs more than a pass-through.
    if (this.wantKernels || plainSinks > 0) this.installDeferred('runKernelFunc');
    if (this.disposeSinks.length > 0) this.installDeferred('disposeTensor');
  }

  private installDeferred(name: PatchedEngineMethod): void {
    const wrapper = this.deferredWrappers.get(name);
    if (wrapper === undefined || !this.active) return;
    // Wrap what is there now, which is also what uninstall puts back: a patch another library
    // made after memscope attached keeps running beneath memscope's wrapper.
    const current = this.engineProto[name];
    if (typeof current !== 'function') return;
    this.engineOriginals.set(name, current as Fn);
    this.rebindDeferredOriginal(name, current as Fn);
    this.deferredWrappers.delete(name);
    this.engineWrappers.set(name, wrapper);
    this.engineProto[name] = wrapper;
  }

  /** Points a deferred wrapper at the method it wraps (set by patchEngine). */
  private rebindDeferredOriginal: (name: PatchedEngineMethod, original: Fn) => void = () => {};

  get sinkCount(): number {
    return this.sinks.length;
  }

  private sinkError(sink: MemoryEventSink, err: unknown): void {
    if (this.warnedSinks.has(sink)) return;
    this.warnedSinks.add(sink);
    console.warn('memscope: an event sink threw; the error was isolated from the program:', err);
  }

  internalError(err: unknown): void {
    this.internalErrors++;
    if (this.warnedInternal) return;
    this.warnedInternal = true;
    console.warn('memscope: internal error in a TFJS hook; the event was skipped and TFJS ran on:', err);
  }

  // The per-tensor events (four, and the two storage events by id) have their own emitters, each calling its
  // handler by name: the generic `emit` below reads the method with a
  // variable key and calls every kind of handler from one call site, which
  // V8 can neither inline nor keep monomorphic. With one subscribed sink each
  // of these call sites sees a single target and is inlined.

  private emitStorageAlloc(s: TfjsStorage): void {
    this.flushIfQueued();
    const list = this.allocSinks;
    const ctx = this.ctx;
    ctx.seq++;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      try {
        sink.onStorageAlloc!(s, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  private emitStorageFree(s: TfjsStorage): void {
    this.flushIfQueued();
    const list = this.freeSinks;
    const ctx = this.ctx;
    ctx.seq++;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      try {
        sink.onStorageFree!(s, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  /** One storage event by id (bytes -1: a free) to the batch sinks, at once, as a batch of one. */
  private emitStorageEventById(id: number, bytes: number, device: DeviceName): void {
    this.flushIfQueued();
    const list = this.batchSinks;
    const ctx = this.ctx;
    ctx.seq++;
    const single = this.single;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      single[0] = id;
      single[1] = bytes;
      try {
        sink.onStorageBatch(single, 2, device, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  private emitTensorCreate(r: TfjsTensorRef): void {
    this.flushIfQueued();
    const list = this.createSinks;
    const ctx = this.ctx;
    ctx.seq++;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      try {
        sink.onTensorCreate!(r, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  private emitTensorDispose(r: TfjsTensorRef): void {
    this.flushIfQueued();
    const list = this.disposeSinks;
    const ctx = this.ctx;
    ctx.seq++;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      try {
        sink.onTensorDispose!(r, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  /** Calls `method` on every sink in `list` with (a, ctx) or (a, b, ctx): the less frequent events. */
  private emit(list: MemoryEventSink[], method: MemoryEventName, a: unknown, b?: unknown, two = false): void {
    if (list.length === 0) return;
    this.flushIfQueued();
    const ctx = this.ctx;
    ctx.seq++;
    for (let i = 0; i < list.length; i++) {
      const sink = list[i]!;
      try {
        const f = sink[method] as (...args: unknown[]) => void;
        if (two) f.call(sink, a, b, ctx);
        else f.call(sink, a, ctx);
      } catch (err) {
        this.sinkError(sink, err);
      }
    }
  }

  // ------------------------------------------------------------- queued storage events

  /** Before the context or the sinks change: what is queued goes out as it was. */
  private flushIfQueued(): void {
    if (this.queuedLength !== 0) this.flushQueued();
  }

  /** Delivers the queued storage events, in order (see `queued`). */
  flushQueued(): void {
    const end = this.queuedLength;
    if (end === 0 || this.flushing) return;
    // Events during delivery (a sink running TFJS ops) are not queued, and go out at once.
    this.flushing = true;
    const backend = this.queueBackend;
    this.queueBackend = null;
    this.queuedLength = 0;
    try {
      const queued = this.queued;
      const device = this.queueDevice;
      const list = this.batchSinks;
      const ctx = this.ctx;
      ctx.seq += end / 2;
      for (let i = 0; i < list.length; i++) {
        const sink = list[i]!;
        try {
          sink.onStorageBatch(queued, end, device, ctx);
        } catch (err) {
          this.sinkError(sink, err);
        }
      }
    } finally {
      this.flushing = false;
      // A sink that changed the sinks, or moved data, while taking the queue left queueing off.
      if (this.queueAllowed && !this.sawMove && this.queueBackend === null) this.queueBackend = backend;
    }
  }

  /**
   * Queues the new storage of `a` on queueBackend (the engine wrapper checked the backend);
   * false when it must take the general path: a string tensor (its bytes are read from the
   * backend) or a dataId not numbered as derived ids need.
   */
  queueAlloc(a: TfTensor): boolean {
    const dtype = a.dtype;
    const id = derivedStorageId(a.dataId, this.queueSlot);
    if (id < 0 || dtype === 'string') return false;
    this.pushQueued(id, storageBytes(dtype, a.size, undefined, a.dataId));
    return true;
  }

  /** Queues the free of `dataId`'s storage on queueBackend (the engine dropped its entry); false as for queueAlloc. */
  queueFree(dataId: DataId): boolean {
    const id = derivedStorageId(dataId, this.queueSlot);
    if (id < 0) return false;
    this.pushQueued(id, -1);
    return true;
  }

  private pushQueued(id: number, bytes: number): void {
    let at = this.queuedLength;
    if (at === QUEUED_EVENTS * 2) {
      this.flushQueued();
      at = 0;
    }
    const queued = this.queued;
    queued[at] = id;
    queued[at + 1] = bytes;
    this.queuedLength = at + 2;
  }

  /** Storage events queued in a kernel go out with that kernel as the context's (never throws). */
  flushBeforeKernelChange(): void {
    if (this.queuedLength === 0) return;
    try {
      this.flushQueued();
    } catch (err) {
      this.internalError(err);
    }
  }

  /** After the first new storage on `backend` (slot `slot`) was announced: its next ones may be queued. */
  private startQueueing(backend: TfBackend, slot: number): void {
    if (!this.queueAllowed || this.queueBackend !== null || this.flushing || this.sawMove || slot < 0) return;
    this.flushIfQueued(); // events queued before go out with the device they were queued on
    this.queueBackend = backend;
    this.queueSlot = slot;
    this.queueDevice = this.lastDevice;
  }

  // ------------------------------------------------------------- storages

  private lastBackend: object | null = null;
  private lastDevice = '';
  private lastSlot = -1;

  private deviceOf(engine: TfEngine, backend: TfBackend | undefined): string {
    if (backend == null) return engine.backendName ?? 'unknown';
    if (backend !== this.lastBackend) this.cacheBackend(engine, backend);
    return this.lastDevice;
  }

  /** The backend's slot for derived storage ids (-1: none; see refs.ts). */
  private slotOf(engine: TfEngine, backend: TfBackend | null | undefined): number {
    if (backend == null) return -1;
    if (backend !== this.lastBackend) this.cacheBackend(engine, backend);
    return this.lastSlot;
  }

  private cacheBackend(engine: TfEngine, backend: TfBackend): void {
    const name = this.lookUpDevice(engine, backend);
    this.lastBackend = backend;
    this.lastDevice = name;
    this.lastSlot = this.deriveIds ? backendSlot(backend, name) : -1;
  }

  /** The id for a new storage of `dataId` on `backend`. */
  private storageIdFor(engine: TfEngine, dataId: DataId, backend: TfBackend | undefined): number {
    const id = derivedStorageId(dataId, this.slotOf(engine, backend));
    return id >= 0 ? id : countedStorageId();
  }

  private lookUpDevice(engine: TfEngine, backend: TfBackend): string {
    const cached = this.backendNames.get(backend);
    if (cached !== undefined) return cached;
    for (const name of Object.keys(engine.registry)) {
      if (engine.registry[name] === backend) {
        this.backendNames.set(backend, name);
        return name;
      }
    }
    return engine.backendName ?? 'unknown';
  }

  private newStorage(
    engine: TfEngine,
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
    const backend = owner ?? engine.state.tensorInfo.get(dataId)?.backend;
    const bytes = storageBytes(dtype, size, backend, dataId);
    const id = counted ? countedStorageId() : this.storageIdFor(engine, dataId, backend);
    const s = new TfjsStorage(id, this.storages, this.deviceOf(engine, backend), bytes, dtype, shape, adopted, dataId);
    this.storages.set(dataId, s);
    this.live.add(s);
    return s;
  }

  /** Makes a storage known that TFJS created before memscope could see it. */
  private adopt(t: TfTensor, announce: boolean): TfjsStorage {
    const engine = this.engine;
    if (!engine.state.tensorInfo.has(t.dataId)) {
      // Already released by the engine: a dead storage, never live.
      return new TfjsStorage(countedStorageId(), null, this.deviceOf(engine, undefined), storageBytes(t.dtype, t.size, undefined, t.dataId), t.dtype, t.shape, true, null);
    }
    if (this.byId) {
      const built = this.storageOnDemand(t.dataId);
      if (built !== undefined) {
        if (announce && this.allocSinks.length > 0 && !this.announcedBefore(built.id)) this.emitStorageEventById(built.id, built.bytes, built.device);
        return built;
      }
    }
    const s = this.newStorage(engine, t.dataId, t.dtype, t.size, t.shape, true);
    if (announce && this.allocSinks.length > 0 && !this.silentIds.has(s.id)) this.emitStorageAlloc(s);
    return s;
  }

  /**
   * In byId mode, the storage of a live dataId whose id derives from it, built from the engine's
   * entry (not kept: built again when asked again); undefined when the engine has no entry or the
   * id does not derive (such storages are kept as objects in either mode).
   */
  private readonly storageOnDemand = (dataId: DataId): TfjsStorage | undefined => {
    const engine = this.engine;
    const info = engine.state.tensorInfo.get(dataId);
    if (info === undefined) return undefined;
    const id = derivedStorageId(dataId, this.slotOf(engine, info.backend));
    if (id < 0) return undefined;
    const bytes = storageBytes(info.dtype, sizeOf(info.shape), info.backend, dataId);
    const adopted = id < this.firstNewIds[slotOfDerivedId(id)]!; // made before installation
    return new TfjsStorage(id, null, this.deviceOf(engine, info.backend), bytes, info.dtype, info.shape, adopted, dataId);
  };

  /** Records a storage made while memscope watched (see firstNewIds). */
  private noteNew(id: number): void {
    if (!isDerivedStorageId(id)) return;
    const slot = slotOfDerivedId(id);
    if (this.firstNewIds[slot] === Infinity) this.firstNewIds[slot] = id;
  }

  /** Whether sinks know the storage with this derived id without being told again: made while memscope watched, or a variable alive at installation. */
  private announcedBefore(id: number): boolean {
    return id >= this.firstNewIds[slotOfDerivedId(id)]! || this.silentIds.has(id);
  }

  /** Every storage with no object kept (byId mode) loses its object now, silently: its id stays what it was. */
  private dropDerivedStorages(): void {
    const derived: TfjsStorage[] = [];
    for (const s of this.live) if (isDerivedStorageId(s.id)) derived.push(s);
    for (const s of derived) {
      if (s.dataId !== null) this.storages.deleteFound(s.dataId);
      s.dataId = null;
      this.live.remove(s);
    }
  }

  /** The storages memscope knows to be alive: those it keeps, and in byId mode the engine's registered variables'. */
  liveStorages(): TfjsStorage[] {
    const out = Array.from(this.live);
    if (!this.byId) return out;
    const seen = new Set<number>();
    for (const s of out) seen.add(s.id);
    const vars = this.engine.state.registeredVariables;
    for (const name of Object.keys(vars)) {
      const v = vars[name];
      if (v == null || v.isDisposed) continue;
      const s = this.storageOnDemand(v.dataId);
      if (s !== undefined && !seen.has(s.id)) {
        seen.add(s.id);
        out.push(s);
      }
    }
    return out;
  }

  /** The storage behind `dataId` now, kept or (byId mode) built; undefined if it is not live or not known. */
  storageOf(dataId: DataId): TfjsStorage | undefined {
    return this.storages.current(dataId);
  }

  /**
   * Whether a tensor's ref must be the same object every time (see StorageBatchSink). When no
   * sink needs it, the refs of short-lived tensors are not remembered: a WeakMap entry per module
   * input, output and gradient makes V8's scavenger promote ~4 KB per training step of the demo
   * model (docs/MEMTRACKER.md, "Tensor refs"). Variables' refs are always remembered.
   */
  private stableTensorRefs = true;

  refFor(t: TfTensor): TfjsTensorRef {
    let r = this.tensorRefs.get(t);
    if (r === undefined) {
      const s = this.storages.get(t.dataId) ?? this.adopt(t, true);
      r = new TfjsTensorRef(t, this.storages, s);
      if (this.stableTensorRefs || isVariableLike(t)) this.tensorRefs.set(t, r);
    }
    return r;
  }

  /** After `engine.trackTensor(a)`: `isNew` when the engine made a new dataId entry. */
  onTrack(engine: TfEngine, a: TfTensor, isNew: boolean, backend: TfBackend | null | undefined): void {
    if (this.byId) {
      // No object: the storage's id derives from its dataId. A dataId met again (a view, or one
      // made before memscope saw it) is announced again; the sinks keep what they know.
      const dataId = a.dataId;
      const owner = isNew ? (backend ?? engine.backendInstance ?? undefined) : engine.state.tensorInfo.get(dataId)?.backend;
      const slot = this.slotOf(engine, owner);
      const id = derivedStorageId(dataId, slot);
      if (id >= 0 && (isNew || !this.sawMove || this.storages.get(dataId) === undefined)) {
        if (isNew) {
          if (this.firstNewIds[slot] === Infinity) this.firstNewIds[slot] = id;
        } else if (id >= this.firstNewIds[slot]! || this.silentIds.has(id)) return;
        if (this.allocSinks.length > 0) this.emitStorageEventById(id, storageBytes(a.dtype, a.size, owner, dataId), this.lastDevice);
        if (isNew && this.queueBackend === null && owner !== undefined) this.startQueueing(owner, slot);
        return;
      }
    }
    let s = this.storages.get(a.dataId);
    if (s === undefined || isNew) {
      if (s !== undefined) this.release(a.dataId, s); // stale: cannot happen unless the engine was reset
      s = this.newStorage(engine, a.dataId, a.dtype, a.size, a.shape, !isNew, isNew ? (backend ?? engine.backendInstance) : null);
      if (isNew) this.noteNew(s.id);
      if (this.allocSinks.length > 0 && (isNew || !this.silentIds.has(s.id))) this.emitStorageAlloc(s);
    }
    if (this.createSinks.length > 0 && a !== this.assigning) {
      let r = this.tensorRefs.get(a);
      if (r === undefined) {
        r = new TfjsTensorRef(a, this.storages, s);
        this.tensorRefs.set(a, r);
      }
      this.emitTensorCreate(r);
    }
  }

  onDispose(a: TfTensor): void {
    if (this.disposeSinks.length === 0 || a === this.assigning) return;
    const r = this.tensorRefs.get(a);
    if (r !== undefined && !r.disposed) {
      r.disposed = true;
      this.emitTensorDispose(r);
    }
  }

  /** `s` is what `storages.get(dataId)` returned. */
  private release(dataId: DataId, s: TfjsStorage): void {
    this.storages.deleteFound(dataId);
    s.dataId = null;
    this.live.remove(s);
    if (this.freeSinks.length > 0) this.emitStorageFree(s);
  }

  /**
   * After `engine.removeDataId`. `removed`: the engine's dataId count went
   * down, i.e. it dropped the entry. Otherwise the entry is either still there
   * (another backend's removal) or was already gone; only then is the engine's
   * map asked — one WeakMap lookup saved on every free.
   */
  onDataIdRemoved(engine: TfEngine, dataId: DataId, backend: TfBackend, removed: boolean): void {
    if (this.byId && removed && !this.sawMove) {
      const id = derivedStorageId(dataId, this.slotOf(engine, backend));
      if (id >= 0) {
        if (this.batchSinks.length > 0) this.emitStorageEventById(id, -1, this.lastDevice);
        return;
      }
    }
    const s = this.storages.get(dataId);
    if (s === undefined) {
      // Not kept: made before memscope saw it, or while it kept no objects (byId), when the batch
      // sinks may have been told of it.
      if (removed && this.batchSinks.length > 0) {
        const id = derivedStorageId(dataId, this.slotOf(engine, backend));
        if (id >= 0) this.emitStorageEventById(id, -1, this.lastDevice);
      }
      return;
    }
    if (!removed && engine.state.tensorInfo.has(dataId)) return;
    this.release(dataId, s);
  }

  /** After `engine.moveData`: `from` is the backend that held the data before. */
  onMoved(engine: TfEngine, dataId: DataId, from: TfBackend | undefined): void {
    const old = this.storages.get(dataId);
    if (old !== undefined) this.release(dataId, old);
    else if (this.batchSinks.length > 0) {
      const oldId = derivedStorageId(dataId, this.slotOf(engine, from));
      if (oldId >= 0) this.emitStorageEventById(oldId, -1, this.lastDevice);
    }
    const info = engine.state.tensorInfo.get(dataId);
    if (info === undefined) return;
    // The dataId keeps its first backend's number: kept, with a counted id (see deriveIds).
    this.sawMove = true;
    this.queueBackend = null; // frees must look for kept storages from now on
    const s = this.newStorage(engine, dataId, info.dtype, sizeOf(info.shape), info.shape, old === undefined, info.backend, true);
    if (this.allocSinks.length > 0) this.emitStorageAlloc(s);
  }

  // --------------------------------------------------------------- context

  private updateCtx(): void {
    this.flushIfQueued();
    const ctx = this.ctx;
    if (this.optimizerDepth > 0) ctx.phase = 'optimizer';
    else if (this.backwardDepth > 0) ctx.phase = 'backward';
    else if (this.fwdTop !== null || this.forwardDepth > 0) ctx.phase = 'forward';
    else ctx.phase = 'none';
    ctx.module = this.backwardDepth > 0 && this.optimizerDepth === 0 ? (this.bwTop?.module ?? null) : (this.fwdTop?.module ?? null);
  }

  // --------------------------------------------------------------- kernels

  kernelStart(name: string, params: TfKernelParams): KernelEvent | null {
    if (!this.wantKernels) return null;
    const inputs: TensorRef[] = [];
    const map = params.inputs;
    if (map != null) {
      for (const k in map) {
        const t = map[k];
        if (isTensorLike(t)) inputs.push(this.refFor(t));
      }
    }
    const ev: KernelEvent = { name, inputs, outputs: [], composite: params.kernelName == null };
    this.emit(this.kernelStartSinks, 'onKernelStart', ev);
    return ev;
  }

  kernelEnd(start: KernelEvent, out: unknown): void {
    const outputs = out == null ? [] : this.refsOf(out);
    this.emit(this.kernelEndSinks, 'onKernelEnd', { name: start.name, inputs: start.inputs, outputs, composite: start.composite });
  }

  private refsOf(x: unknown): TensorRef[] {
    const out: TensorRef[] = [];
    const visit = (v: unknown): void => {
      if (isTensorLike(v)) {
        if (!v.isDisposed || this.storageOf(v.dataId) !== undefined) out.push(this.refFor(v));
      } else if (Array.isArray(v)) for (const e of v) visit(e);
    };
    visit(x);
    return out;
  }

  // ---------------------------------------------------------------- scopes

  onScopeStart(engine: TfEngine): void {
    const scope = engine.state.activeScope;
    if (scope == null) return;
    const run = this.gradRuns.length > 0 ? this.gradRuns[this.gradRuns.length - 1]! : undefined;
    if (run !== undefined) {
      // The engine's own tidies inside `gradients`: 'forward' around f, then
      // 'backward' around backprop. Only these two are remembered (plain
      // scopes, one per op call, cost nothing here).
      let mark = SCOPE_PLAIN;
      if (run.state === 0 && scope.name === 'forward') {
        run.state = 1;
        mark = SCOPE_GRAD_FORWARD;
        this.forwardDepth++;
      } else if (run.state === 2 && scope.name === 'backward') {
        run.state = 3;
        run.bwBase = this.bwTop;
        mark = SCOPE_GRAD_BACKWARD;
        this.backwardDepth++;
      }
      if (mark !== SCOPE_PLAIN) {
        this.syncGradientScopeWatch();
        this.markedScopes.push(scope);
        this.markedTop = scope;
        this.scopeMarks.push(mark);
        this.updateCtx();
      }
    }
    if (this.scopeStartSinks.length > 0) this.emitScope(this.scopeStartSinks, 'onScopeStart', scope.name);
  }

  private syncGradientScopeWatch(): void {
    const n = this.gradRuns.length;
    const state = n > 0 ? this.gradRuns[n - 1]!.state : -1;
    this.awaitsGradientScope = state === 0 || state === 2;
  }

  /** tfjs-core's `op()` wraps every op in a scope named `<op>__op`: reported as kind 'op', name without the suffix. */
  private emitScope(list: MemoryEventSink[], method: 'onScopeStart' | 'onScopeEnd', name: string): void {
    if (name.endsWith(OP_SCOPE_SUFFIX)) this.emit(list, method, name.slice(0, -OP_SCOPE_SUFFIX.length), 'op' satisfies ScopeKind, true);
    else this.emit(list, method, name, 'tidy' satisfies ScopeKind, true);
  }

  /** Before `engine.endScope`: what the ending scope was to memscope (null: nothing to do after). */
  beforeScopeEnd(engine: TfEngine): { mark: number; name: string } | null {
    const scope = engine.state.activeScope;
    if (scope == null) return null;
    const n = this.markedScopes.length;
    const mark = n > 0 && this.markedScopes[n - 1] === scope ? this.scopeMarks[n - 1]! : SCOPE_PLAIN;
    if (mark === SCOPE_GRAD_BACKWARD) {
      // Backprop is over: leave every module it entered before the tidy frees
      // backprop's intermediates (they are still live at the Exit events).
      const run = this.gradRuns[this.gradRuns.length - 1];
      this.backwardTo(run?.bwBase ?? null);
    }
    if (mark === SCOPE_PLAIN && this.scopeEndSinks.length === 0 && (this.fwdTop === null || !this.fwdTop.implicit)) return null;
    return { mark, name: scope.name };
  }

  afterScopeEnd(engine: TfEngine, ended: { mark: number; name: string }): void {
    if (ended.mark !== SCOPE_PLAIN) {
      this.markedScopes.pop();
      this.markedTop = this.markedScopes.length > 0 ? this.markedScopes[this.markedScopes.length - 1]! : null;
      this.scopeMarks.pop();
      const run = this.gradRuns[this.gradRuns.length - 1];
      if (ended.mark === SCOPE_GRAD_FORWARD) {
        this.forwardDepth--;
        if (run !== undefined) run.state = 2;
      } else {
        this.backwardDepth--;
        if (run !== undefined) run.state = 4;
      }
      this.syncGradientScopeWatch();
      this.updateCtx();
    }
    // An implicit module frame never outlives the engine scope it opened in
    // (fit/predict run each batch's forward inside a tidy).
    if (this.fwdTop !== null && this.fwdTop.implicit) {
      const depth = engine.state.scopeStack.length;
      while (this.fwdTop !== null && this.fwdTop.implicit && this.fwdTop.scopeDepth > depth) {
        this.closeFrame(this.fwdTop, this.fwdTop.outputs);
      }
    }
    if (this.scopeEndSinks.length > 0) this.emitScope(this.scopeEndSinks, 'onScopeEnd', ended.name);
  }

  annotationStart(name: string): void {
    this.emit(this.scopeStartSinks, 'onScopeStart', name, 'annotation' satisfies ScopeKind, true);
  }

  annotationEnd(name: string): void {
    this.emit(this.scopeEndSinks, 'onScopeEnd', name, 'annotation' satisfies ScopeKind, true);
  }

  // ------------------------------------------------------------- gradients

  gradientStart(xs: TfTensor[]): GradientRun {
    const run: GradientRun = { state: 0, bwBase: null };
    this.gradRuns.push(run);
    this.syncGradientScopeWatch();
    if (this.gradStartSinks.length > 0) this.emit(this.gradStartSinks, 'onGradientStart', this.refsOf(xs));
    return run;
  }

  gradientEnd(run: GradientRun, xs: TfTensor[], result: { grads: Array<TfTensor | null | undefined> } | null): void {
    const i = this.gradRuns.lastIndexOf(run);
    if (i >= 0) this.gradRuns.length = i;
    this.syncGradientScopeWatch();
    if (this.bwTop !== run.bwBase && run.state >= 3) this.backwardTo(run.bwBase);
    this.updateCtx();
    if (this.gradEndSinks.length > 0) {
      const pairs: GradientPair[] = [];
      if (result !== null) {
        for (let k = 0; k < xs.length; k++) {
          const g = result.grads[k];
          pairs.push({ x: this.refFor(xs[k]!), grad: isTensorLike(g) ? this.refFor(g) : null });
        }
      }
      this.emit(this.gradEndSinks, 'onGradientEnd', pairs);
    }
  }

  /**
   * After `addTapeNode`: ties the node's gradient closure to the module that
   * recorded it. The node keeps the recording frame and the engine's closure
   * under installation-private symbols, and its `gradient` becomes one shared
   * function that finds them through `this` (the engine always calls
   * `node.gradient(dys)` as a method): no closure is allocated per recorded op.
   */
  onTapeNode(engine: TfEngine): void {
    if (this.moduleCount === 0) return;
    const tape = engine.state.activeTape;
    if (tape == null || tape.length === 0) return;
    const node = tape[tape.length - 1]! as TaggedTapeNode;
    const gradient = node.gradient;
    if (typeof gradient !== 'function') return;
    node[NODE_FRAME_KEY] = this.fwdTop;
    node[NODE_GRADIENT_KEY] = gradient;
    node.gradient = this.moduleGradient;
  }

  private readonly moduleGradient = ((inst: Installation) =>
    function (this: TaggedTapeNode, dys: unknown[]): unknown {
      if (inst.active && inst.backwardDepth > 0) {
        try {
          inst.backwardTo((this[NODE_FRAME_KEY] as Frame | null | undefined) ?? null);
        } catch (err) {
          inst.internalError(err);
        }
      }
      const gradient = this[NODE_GRADIENT_KEY] as (dys: unknown[]) => unknown;
      return gradient(dys);
    })(this);

  /**
   * Moves backprop's position to `target` (the frame that recorded the node
   * about to run): exits the frames being left, innermost first, then enters
   * the frames being reached, outermost first.
   */
  private backwardTo(target: Frame | null): void {
    const cur = this.bwTop;
    if (cur === target) return;
    this.flushIfQueued();
    let a = cur;
    let b = target;
    while (a !== b) {
      if (a === null) b = b!.parent;
      else if (b === null) a = a.parent;
      else if (a.depth > b.depth) a = a.parent;
      else if (b.depth > a.depth) b = b.parent;
      else {
        a = a.parent;
        b = b.parent;
      }
    }
    const common = a;
    for (let f = cur; f !== null && f !== common; f = f.parent) {
      this.ctx.module = f.module;
      this.emit(this.bwExitSinks, 'onBackwardModuleExit', f.module);
      this.bwTop = f.parent;
    }
    const path: Frame[] = [];
    for (let f = target; f !== null && f !== common; f = f.parent) path.push(f);
    for (let i = path.length - 1; i >= 0; i--) {
      const f = path[i]!;
      this.bwTop = f;
      this.ctx.module = f.module;
      this.emit(this.bwEnterSinks, 'onBackwardModuleEnter', f.module);
    }
    this.bwTop = target;
    this.updateCtx();
  }

  // --------------------------------------------------------------- modules

  /** Instruments `layer` and its nested layers; returns its module. */
  instrumentModule(layer: TfLayer, name: string, parent: TfjsModule | null): TfjsModule {
    let mod = this.modules.get(layer);
    if (mod !== undefined) {
      if (parent !== null && mod.parent === null && !mod.isAncestorOf(parent)) mod.adoptInto(parent, name);
    } else {
      const path = parent === null ? name : `${parent.path}.${name}`;
      const className = layer.getClassName?.() ?? layer.constructor.className ?? layer.constructor.name;
      mod = new TfjsModule(layer, path, className, parent, this.toRef);
      this.modules.set(layer, mod);
      this.moduleCount++;
      if (parent !== null) parent.children.push(mod);
      this.wrapLayerCall(layer, mod);
    }
    // Also for a known module: layers added since (Sequential.add) join now.
    const children = Array.isArray(layer.layers) ? layer.layers : [];
    for (const child of children) {
      if (child == null || typeof child.call !== 'function') continue;
      // InputLayers never run (executors feed their outputs), so they are not modules.
      const childClass = child.getClassName?.() ?? child.constructor.name;
      if (childClass === 'InputLayer') continue;
      const known = this.modules.get(child);
      if (known !== undefined && known.parent === mod) continue;
      this.instrumentModule(child, child.name, mod);
    }
    return mod;
  }

  private wrapLayerCall(layer: TfLayer, mod: TfjsModule): void {
    const previous = layer.call;
    const inst = this;
    const wrapper = function (this: unknown, inputs: unknown, kwargs: unknown): unknown {
      if (!inst.active) return previous.call(this, inputs, kwargs);
      let frame: Frame | null = null;
      try {
        frame = inst.enterModule(mod, inputs);
      } catch (err) {
        inst.internalError(err);
      }
      let out: unknown;
      try {
        out = previous.call(this, inputs, kwargs);
      } catch (userError) {
        if (frame !== null) {
          try {
            inst.exitModule(frame, null);
          } catch (err) {
            inst.internalError(err);
          }
        }
        throw userError;
      }
      if (frame !== null) {
        try {
          inst.exitModule(frame, out);
        } catch (err) {
          inst.internalError(err);
        }
      }
      return out;
    };
    this.wrapInstance(layer as unknown as Record<string, unknown>, 'call', wrapper);
  }

  private openFrame(mod: TfjsModule, implicit: boolean, inputs: unknown): Frame {
    const parent = this.fwdTop;
    const frame: Frame = {
      module: mod,
      parent,
      depth: parent === null ? 0 : parent.depth + 1,
      implicit,
      pending: implicit ? pendingOutputLayers(mod) : null,
      outputs: [],
      scopeDepth: this.engine.state.scopeStack.length,
    };
    this.fwdTop = frame;
    if (implicit) this.implicitOpen++;
    this.updateCtx();
    if (this.moduleEnterSinks.length > 0) this.emit(this.moduleEnterSinks, 'onModuleEnter', mod, this.refsOf(inputs), true);
    return frame;
  }

  private closeFrame(frame: Frame, outputs: readonly TensorRef[]): void {
    this.flushIfQueued();
    this.ctx.module = frame.module;
    if (this.moduleExitSinks.length > 0) this.emit(this.moduleExitSinks, 'onModuleExit', frame.module, outputs, true);
    this.fwdTop = frame.parent;
    if (frame.implicit) this.implicitOpen--;
    this.updateCtx();
  }

  enterModule(mod: TfjsModule, inputs: unknown): Frame {
    // An implicit frame that is not an ancestor of this module is over (its
    // last output layer was not recognised): close it rather than nest under it.
    while (this.fwdTop !== null && this.fwdTop.implicit && !this.fwdTop.module.isAncestorOf(mod)) {
      this.closeFrame(this.fwdTop, this.fwdTop.outputs);
    }
    const top = this.fwdTop;
    const parent = mod.parent;
    if (parent !== null && (top === null || top.module !== parent)) {
      // Ancestors whose own `call` did not run: a root model driven by
      // fit/predict/evaluate, or a Sequential nested in a Sequential (tfjs
      // flattens its layers into the outer graph). Open them implicitly,
      // outermost first.
      const missing: TfjsModule[] = [];
      for (let p: TfjsModule | null = parent; p !== null && (top === null || p !== top.module); p = p.parent) missing.push(p);
      for (let i = missing.length - 1; i >= 0; i--) this.openFrame(missing[i]!, true, inputs);
    }
    return this.openFrame(mod, false, inputs);
  }

  /** `out` null: the module's call threw (its Exit fires with no outputs). */
  exitModule(frame: Frame, out: unknown): void {
    // Implicit frames opened inside this call and still open end with it.
    while (this.fwdTop !== null && this.fwdTop !== frame && frame.depth < this.fwdTop.depth) {
      this.closeFrame(this.fwdTop, this.fwdTop.outputs);
    }
    if (this.fwdTop !== frame) return; // already closed by a scope end
    const outputs = out === null || this.moduleExitSinks.length === 0 ? [] : this.refsOf(out);
    this.closeFrame(frame, outputs);
    if (out === null) return;
    // A finished output layer may complete an implicitly opened ancestor.
    let done: Frame = frame;
    let top = this.fwdTop as Frame | null;
    while (top !== null && top.implicit && top.pending !== null && top.pending.delete(done.module.layer)) {
      for (const o of outputs) top.outputs.push(o);
      if (top.pending.size > 0) break;
      this.closeFrame(top, top.outputs);
      done = top;
      top = this.fwdTop;
    }
  }

  // ------------------------------------------------------------ optimizers

  instrumentOptimizer(optimizer: object): TfjsOptimizer {
    const existing = this.optimizers.get(optimizer);
    if (existing !== undefined) return existing;
    const ctor = (optimizer as { constructor?: { className?: string; name?: string } }).constructor;
    const className = (optimizer as { getClassName?: () => string }).getClassName?.() ?? ctor?.className ?? ctor?.name ?? 'Optimizer';
    const ref = new TfjsOptimizer(optimizer, className, this.toRef, isTensorLike);
    this.optimizers.set(optimizer, ref);
    const previous = (optimizer as { applyGradients: Fn }).applyGradients as (this: unknown, g: unknown) => unknown;
    const inst = this;
    const wrapper = function (this: unknown, grads: unknown): unknown {
      if (!inst.active) return previous.call(this, grads);
      try {
        inst.optimizerStart(ref);
      } catch (err) {
        inst.internalError(err);
      }
      try {
        return previous.call(this, grads);
      } finally {
        try {
          inst.optimizerEnd(ref);
        } catch (err) {
          inst.internalError(err);
        }
      }
    };
    this.wrapInstance(optimizer as Record<string, unknown>, 'applyGradients', wrapper);
    return ref;
  }

  private optimizerStart(ref: TfjsOptimizer): void {
    this.optimizerDepth++;
    this.updateCtx();
    this.emit(this.optStartSinks, 'onOptimizerStepStart', ref);
  }

  private optimizerEnd(ref: TfjsOptimizer): void {
    this.flushIfQueued();
    this.ctx.step++;
    this.emit(this.optEndSinks, 'onOptimizerStepEnd', ref);
    this.optimizerDepth--;
    this.updateCtx();
  }

  // ---------------------------------------------------------------- assign

  beforeAssign(v: TfTensor): TfjsStorage | undefined {
    const known = this.storageOf(v.dataId);
    if (known !== undefined || !this.engine.state.tensorInfo.has(v.dataId)) return known;
    // A live variable memscope keeps no object for: made before installation and not met since,
    // or met only by id before a sink that needs objects subscribed. Without its storage the
    // assign would go unreported and the new storage keep the category of its phase.
    return this.adopt(v, true);
  }

  afterAssign(v: TfTensor, previous: TfjsStorage | undefined): void {
    if (previous === undefined || this.assignSinks.length === 0) return;
    this.emit(this.assignSinks, 'onVariableAssign', this.refFor(v), previous, true);
  }

  // -------------------------------------------------------------- patching

  private wrapInstance(target: Record<string, unknown>, key: string, wrapper: unknown): void {
    const hadOwn = Object.prototype.hasOwnProperty.call(target, key);
    const previous = target[key];
    target[key] = wrapper;
    this.instanceWraps.push({ target, key, hadOwn, previous, wrapper });
  }

  /** The prototype of the last variable patchVariableClassOf looked at (its class is instrumented). */
  private lastVariableProto: object | null = null;

  /** Finds the prototype that defines `assign` for this variable's class and patches it once. */
  patchVariableClassOf(v: TfTensor): void {
    // incRef runs on every assign (an optimizer step assigns every weight and
    // moment): the class seen last is almost always this one.
    const own = Object.getPrototypeOf(v) as Record<string, unknown> | null;
    if (own === this.lastVariableProto) return;
    this.lastVariableProto = own;
    let proto = own;
    while (proto !== null && !Object.prototype.hasOwnProperty.call(proto, 'assign')) {
      proto = Object.getPrototypeOf(proto) as Record<string, unknown> | null;
    }
    if (proto === null || this.assignOriginals.has(proto)) return;
    const original = proto['assign'] as (this: TfTensor, value: TfTensor) => void;
    if (typeof original !== 'function') return;
    const inst = this;
    const wrapper = function (this: TfTensor, value: TfTensor): void {
      if (!inst.active) return original.call(this, value);
      let previous: TfjsStorage | undefined;
      try {
        previous = inst.beforeAssign(this);
      } catch (err) {
        inst.internalError(err);
      }
      const outer = inst.assigning;
      inst.assigning = this;
      try {
        original.call(this, value);
      } finally {
        inst.assigning = outer;
      }
      try {
        inst.afterAssign(this, previous);
      } catch (err) {
        inst.internalError(err);
      }
    };
    proto['assign'] = wrapper;
    this.assignOriginals.set(proto, { original: original as Fn, wrapper: wrapper as Fn });
  }

  private patchEngine(): void {
    const proto = this.engineProto;
    for (const name of PATCHED_ENGINE_METHODS) {
      const original = proto[name];
      if (typeof original !== 'function') throw new Error(`engine method ${name} is missing`);
      this.engineOriginals.set(name, original as Fn);
    }
    const inst = this;
    const o = <K extends PatchedEngineMethod>(k: K) => this.engineOriginals.get(k) as unknown as TfEngine[K];
    const trackTensor = o('trackTensor');
    // The deferred methods' originals are read again when their wrappers are installed (see
    // installDeferred): another library may have patched them in the meantime.
    let disposeTensor = o('disposeTensor');
    const removeDataId = o('removeDataId');
    const moveData = o('moveData');
    let runKernelFunc = o('runKernelFunc');
    this.rebindDeferredOriginal = (name, f) => {
      if (name === 'runKernelFunc') runKernelFunc = f as unknown as TfEngine['runKernelFunc'];
      else if (name === 'disposeTensor') disposeTensor = f as unknown as TfEngine['disposeTensor'];
    };
    const addTapeNode = o('addTapeNode');
    const gradients = o('gradients');
    const startScope = o('startScope');
    const endScope = o('endScope');
    const incRef = o('incRef');

    const wrappers: { [K in PatchedEngineMethod]: TfEngine[K] } = {
      trackTensor(this: TfEngine, a, backend) {
        // One call site for the original, so V8 can inline it here as it did into TFJS's callers.
        const active = inst.active;
        const before = active ? this.state.numDataBuffers : 0;
        trackTensor.call(this, a, backend);
        if (!active) return;
        try {
          const isNew = this.state.numDataBuffers !== before;
          // The common case, kept small: a new storage on the backend whose storages are queued.
          const queueBackend = inst.queueBackend;
          if (isNew && queueBackend !== null && (backend ?? this.backendInstance) === queueBackend && inst.queueAlloc(a)) return;
          inst.onTrack(this, a, isNew, backend);
        } catch (err) {
          inst.internalError(err);
        }
      },
      incRef(this: TfEngine, a, backend) {
        incRef.call(this, a, backend);
        // A new variable (makeVariable) or an assign: make sure its class's
        // assign is instrumented, whichever tfjs-core copy it came from.
        if (inst.active && isVariableLike(a)) {
          try {
            inst.patchVariableClassOf(a);
          } catch (err) {
            inst.internalError(err);
          }
        }
      },
      disposeTensor(this: TfEngine, a) {
        disposeTensor.call(this, a);
        if (!inst.active) return;
        try {
          inst.onDispose(a);
        } catch (err) {
          inst.internalError(err);
        }
      },
      removeDataId(this: TfEngine, dataId, backend) {
        const before = this.state.numDataBuffers;
        removeDataId.call(this, dataId, backend);
        if (!inst.active) return;
        try {
          const removed = this.state.numDataBuffers !== before;
          if (removed && backend === inst.queueBackend && backend != null && inst.queueFree(dataId)) return;
          inst.onDataIdRemoved(this, dataId, backend, removed);
        } catch (err) {
          inst.internalError(err);
        }
      },
      moveData(this: TfEngine, backend, dataId) {
        const from = inst.active ? this.state.tensorInfo.get(dataId)?.backend : undefined;
        moveData.call(this, backend, dataId);
        if (!inst.active) return;
        try {
          inst.onMoved(this, dataId, from);
        } catch (err) {
          inst.internalError(err);
        }
      },
      runKernelFunc(this: TfEngine, params) {
        if (!inst.active) return runKernelFunc.call(this, params);
        const ctx = inst.ctx;
        const previousKernel = ctx.kernel;
        let start: KernelEvent | null = null;
        try {
          inst.flushBeforeKernelChange();
          ctx.kernel = params.kernelName ?? compositeKernelName(this.state.activeScope?.name);
          if (inst.wantKernels) start = inst.kernelStart(ctx.kernel, params);
        } catch (err) {
          inst.internalError(err);
        }
        let out: TfTensor | TfTensor[];
        try {
          out = runKernelFunc.call(this, params);
        } catch (userError) {
          if (start !== null) {
            try {
              inst.kernelEnd(start, null);
            } catch (err) {
              inst.internalError(err);
            }
          }
          inst.flushBeforeKernelChange();
          ctx.kernel = previousKernel;
          throw userError;
        }
        if (start !== null) {
          try {
            inst.kernelEnd(start, out);
          } catch (err) {
            inst.internalError(err);
          }
        }
        inst.flushBeforeKernelChange();
        ctx.kernel = previousKernel;
        return out;
      },
      addTapeNode(this: TfEngine, kernelName, inputs, outputs, gradientsFunc, saved, attrs) {
        // Six named parameters (engine.addTapeNode's own), not a rest array: one call per recorded op.
        addTapeNode.call(this, kernelName, inputs, outputs, gradientsFunc, saved, attrs);
        if (!inst.active) return;
        try {
          inst.onTapeNode(this);
        } catch (err) {
          inst.internalError(err);
        }
      },
      gradients(this: TfEngine, f, xs, dy, allowNoGradients) {
        if (!inst.active) return gradients.call(this, f, xs, dy, allowNoGradients);
        let run: GradientRun | null = null;
        try {
          run = inst.gradientStart(xs);
        } catch (err) {
          inst.internalError(err);
        }
        let result: ReturnType<TfEngine['gradients']>;
        try {
          result = gradients.call(this, f, xs, dy, allowNoGradients);
        } catch (userError) {
          if (run !== null) {
            try {
              inst.gradientEnd(run, xs, null);
            } catch (err) {
              inst.internalError(err);
            }
          }
          throw userError;
        }
        if (run !== null) {
          try {
            inst.gradientEnd(run, xs, result);
          } catch (err) {
            inst.internalError(err);
          }
        }
        return result;
      },
      startScope(this: TfEngine, name) {
        startScope.call(this, name);
        // One scope per op call: only the engine's own forward/backward
        // tidies matter unless a sink wants scope events.
        if (!inst.active || !(inst.watchScopeStart || (inst.awaitsGradientScope && (name === 'forward' || name === 'backward')))) return;
        try {
          inst.onScopeStart(this);
        } catch (err) {
          inst.internalError(err);
        }
      },
      endScope(this: TfEngine, result) {
        if (!inst.active || (!inst.watchScopeEnd && inst.implicitOpen === 0 && inst.markedTop !== this.state.activeScope)) {
          return endScope.call(this, result);
        }
        let ended: { mark: number; name: string } | null = null;
        try {
          ended = inst.beforeScopeEnd(this);
        } catch (err) {
          inst.internalError(err);
        }
        endScope.call(this, result);
        if (ended === null) return;
        try {
          inst.afterScopeEnd(this, ended);
        } catch (err) {
          inst.internalError(err);
        }
      },
    };
    for (const name of PATCHED_ENGINE_METHODS) {
      const w = wrappers[name] as unknown as Fn;
      if (DEFERRED_ENGINE_METHODS.has(name)) {
        this.deferredWrappers.set(name, w);
        continue;
      }
      this.engineWrappers.set(name, w);
      proto[name] = w;
    }
  }

  /**
   * Restores every patched method to the exact function it replaced, and
   * removes every per-instance wrapper. A method someone else re-patched on
   * top of memscope's wrapper is left alone (restoring it would drop their
   * patch); memscope's wrapper beneath it turns into a pass-through.
   */
  uninstall(): void {
    this.flushIfQueued();
    this.active = false;
    const proto = this.engineProto;
    for (const [name, original] of this.engineOriginals) {
      if (proto[name] === this.engineWrappers.get(name)) proto[name] = original;
    }
    for (const [vproto, { original, wrapper }] of this.assignOriginals) {
      if (vproto['assign'] === wrapper) vproto['assign'] = original;
    }
    this.assignOriginals.clear();
    for (let i = this.instanceWraps.length - 1; i >= 0; i--) {
      const w = this.instanceWraps[i]!;
      if (w.target[w.key] !== w.wrapper) continue;
      if (w.hadOwn) w.target[w.key] = w.previous;
      else delete w.target[w.key];
    }
    this.instanceWraps.length = 0;
    for (const s of this.live) {
      if (s.dataId !== null) this.storages.delete(s.dataId);
      s.dataId = null;
    }
    this.live.clear();
    this.sinks = [];
    this.recomputeWants();
  }

  /** For tests: the function memscope replaced (by identity). */
  originalEngineMethod(name: PatchedEngineMethod): unknown {
    return this.engineOriginals.get(name);
  }
}
