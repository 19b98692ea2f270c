import type { EventContext, MemoryEventName, MemoryEventSink, Phase } from '../core/events.js';
import { takesStorageBatches } from '../core/events.js';
import type { TfjsModule, TfjsStorage, TfjsTensorRef } from './refs.js';

/**
 * Sink dispatch for one installation: the event context, the subscribed sinks sorted by the
 * events they take, and one emitter per event kind. Every event goes out when it happens.
 * Knows nothing of TFJS.
 */

/** The adapter's live context (EventContext is its read-only view). */
export class LiveContext implements EventContext {
  phase: Phase = 'none';
  module: TfjsModule | null = null;
  kernel: string | null = null;
  step = 0;
  seq = 0;
}

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
  /** Subscribed sinks that are not StorageBatchSinks: each may key on TensorRefs. */
  plainSinkCount = 0;
  wantKernels = false;
  /** Allocation sinks listen but no kernel sink: kernel inputs are still met (StorageIdentity.meetInputs). */
  meetKernelInputs = false;
  watchScopeStart = false;
  watchScopeEnd = false;

  get sinkCount(): number {
    return this.sinks.length;
  }

  subscribe(sink: MemoryEventSink): void {
    this.sinks.push(sink);
    this.sortSinks();
  }

  unsubscribe(sink: MemoryEventSink): void {
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
    this.plainSinkCount = this.sinks.length - this.sinks.filter(takesStorageBatches).length;
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
    this.meetKernelInputs = !this.wantKernels && this.allocSinks.length > 0;
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

  emitTensorCreate(r: TfjsTensorRef): void {
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
}
