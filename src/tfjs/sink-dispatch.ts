import type { DeviceName, EventContext, MemoryEventName, MemoryEventSink, Phase, StorageBatchSink } from '../core/events.js';
import { takesStorageBatches } from '../core/events.js';
import type { TfBackend } from './engine-types.js';
import type { TfjsModule, TfjsStorage, TfjsTensorRef } from './refs.js';

/**
 * Sink dispatch for one installation: the event context, the subscribed sinks sorted by the
 * events they take, one emitter per event kind, and the single queue of storage events held back
 * for the batch sinks (StorageBatchSink). Knows nothing of TFJS but the backend a batch is for.
 */

/** The adapter's live context (EventContext is its read-only view). */
export class LiveContext implements EventContext {
  phase: Phase = 'none';
  module: TfjsModule | null = null;
  kernel: string | null = null;
  step = 0;
  seq = 0;
}

/** Storage events held back at most (see SinkDispatch.queued), two numbers each. */
const QUEUED_EVENTS = 512;

export class SinkDispatch {
  /** False once uninstalled: every wrapper then passes straight through. */
  active = true;
  readonly ctx = new LiveContext();

  /** Failures inside memscope's own hook logic, swallowed so the program runs on. */
  internalErrors = 0;
  private warnedInternal = false;
  private readonly warnedSinks = new WeakSet<object>();

  private sinks: MemoryEventSink[] = [];
  // Per-handler subscriber lists, recomputed on (un)subscribe so the hot path only tests `.length`.
  allocSinks: MemoryEventSink[] = [];
  freeSinks: MemoryEventSink[] = [];
  createSinks: MemoryEventSink[] = [];
  disposeSinks: MemoryEventSink[] = [];
  kernelStartSinks: MemoryEventSink[] = [];
  kernelEndSinks: MemoryEventSink[] = [];
  scopeStartSinks: MemoryEventSink[] = [];
  scopeEndSinks: MemoryEventSink[] = [];
  moduleEnterSinks: MemoryEventSink[] = [];
  moduleExitSinks: MemoryEventSink[] = [];
  bwEnterSinks: MemoryEventSink[] = [];
  bwExitSinks: MemoryEventSink[] = [];
  gradStartSinks: MemoryEventSink[] = [];
  gradEndSinks: MemoryEventSink[] = [];
  optStartSinks: MemoryEventSink[] = [];
  optEndSinks: MemoryEventSink[] = [];
  assignSinks: MemoryEventSink[] = [];
  /** The sinks of the fast form (StorageBatchSink), whichever form their storage events take now. */
  batchSinks: StorageBatchSink[] = [];
  /** Subscribed sinks that are not batch sinks: each may read ctx.kernel and key on TensorRefs. */
  plainSinkCount = 0;
  wantKernels = false;
  watchScopeStart = false;
  watchScopeEnd = false;
  /**
   * True while every sink listening to storage events takes batches and none listens to tensor
   * create or dispose events: then storage identity may keep no object per storage (byId).
   */
  batchesOnly = false;

  /**
   * Storage events held back for the batch sinks: (derived id, bytes) pairs, bytes -1 for a free,
   * all of storages on `queueBackend`. Why: an allocation and a free happen once per tensor, each
   * between microseconds of TFJS and wasm code that evict memscope's code from the CPU's
   * instruction cache, so handling one there runs cold (docs/MEMTRACKER.md, "Overhead"). Queued,
   * the engine's hot path pays a few stores, and the handling runs later as one warm loop. They
   * are delivered (flushQueued) before any other event, before the context changes, before the
   * sinks change, and when a sink asks (the session's flush), so each sink sees them in order and
   * with the context they had.
   */
  private readonly queued = new Float64Array(QUEUED_EVENTS * 2);
  queuedLength = 0;
  /**
   * The backend whose new and freed storages may be queued now, else null: the engine wrappers'
   * one test. Set by storage identity at the first new storage on a backend with derived ids
   * while queueing is allowed; cleared whenever that may have changed.
   */
  queueBackend: TfBackend | null = null;
  /** queueBackend's slot for derived ids. */
  queueSlot = -1;
  private queueDevice: DeviceName = '';
  /** Set by storage identity: batches only, with ids derived from dataIds, and no move seen. */
  queueAllowed = false;
  private flushing = false;
  /** One event's batch, for storage events by id that go out at once. */
  private readonly single = new Float64Array(2);

  get sinkCount(): number {
    return this.sinks.length;
  }

  subscribe(sink: MemoryEventSink): void {
    this.flushIfQueued(); // held back for the sinks there before
    this.sinks.push(sink);
    this.sortSinks();
  }

  unsubscribe(sink: MemoryEventSink): void {
    this.flushIfQueued();
    const i = this.sinks.indexOf(sink);
    if (i >= 0) this.sinks.splice(i, 1);
    this.sortSinks();
  }

  /** Drops every sink (at uninstall). */
  clear(): void {
    this.sinks = [];
    this.sortSinks();
  }

  private sortSinks(): void {
    const pick = (k: MemoryEventName) => this.sinks.filter((s) => typeof s[k] === 'function');
    this.allocSinks = pick('onStorageAlloc');
    this.freeSinks = pick('onStorageFree');
    this.createSinks = pick('onTensorCreate');
    this.disposeSinks = pick('onTensorDispose');
    this.batchSinks = this.sinks.filter(takesStorageBatches);
    this.plainSinkCount = this.sinks.length - this.batchSinks.length;
    this.batchesOnly =
      this.allocSinks.every(takesStorageBatches) &&
      this.freeSinks.every(takesStorageBatches) &&
      this.createSinks.length === 0 &&
      this.disposeSinks.length === 0;
    this.queueBackend = null; // set again at the next new storage, if allowed
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

  // The per-tensor events have their own emitters, each calling its handler by name: the generic
  // `emit` below reads the method with a variable key and calls every kind of handler from one
  // call site, which V8 can neither inline nor keep monomorphic. With one subscribed sink each of
  // these call sites sees a single target and is inlined.

  emitStorageAlloc(s: TfjsStorage): void {
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

  emitStorageFree(s: TfjsStorage): void {
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
  emitStorageEventById(id: number, bytes: number, device: DeviceName): void {
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

  emitTensorCreate(r: TfjsTensorRef): void {
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

  emitTensorDispose(r: TfjsTensorRef): void {
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
  emit(list: MemoryEventSink[], method: MemoryEventName, a: unknown, b?: unknown, two = false): void {
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

  // ------------------------------------------------------------- the storage-event queue

  /** Before the context or the sinks change: what is queued goes out as it was. */
  flushIfQueued(): void {
    if (this.queuedLength !== 0) this.flushQueued();
  }

  /** Delivers the queued storage events, in order, as one batch to each batch sink. */
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
      if (this.queueAllowed && this.queueBackend === null) this.queueBackend = backend;
    }
  }

  /** Queues one storage event of queueBackend's device (bytes -1: a free). */
  pushQueued(id: number, bytes: number): void {
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
  startQueueing(backend: TfBackend, slot: number, device: DeviceName): void {
    if (!this.queueAllowed || this.queueBackend !== null || this.flushing || slot < 0) return;
    this.flushIfQueued(); // events queued before go out with the device they were queued on
    this.queueBackend = backend;
    this.queueSlot = slot;
    this.queueDevice = device;
  }

  /** Queueing stops for good (a move between backends: see StorageIdentity.onMoved). */
  stopQueueing(): void {
    this.queueAllowed = false;
    this.queueBackend = null;
  }
}
