/**
 * MemoryTracker: operator-level memory traces, after PyTorch's
 * torch/distributed/_tools/memory_tracker.py. After every top-level kernel it
 * records allocated, active and reserved bytes of one device under the name
 * `<layer path>.<phase>.<Kernel>_<n>`, with `fw_start` / `fw_bw_boundary`
 * markers around each forward pass of the root model.
 *
 * Framework-free: it consumes the event contract of src/core/events.ts through
 * a FrameworkAdapter. `memscope/tfjs` exports a subclass bound to TensorFlow.js.
 * docs/OPERATOR_TRACES.md says what each figure means on each backend.
 */
import type { AdapterSession, FrameworkAdapter, ReservedMemorySource } from '../core/adapter.js';
import { deviceSpec } from '../core/device.js';
import { MemscopeError } from '../core/errors.js';
import { afterSettled } from '../core/settle.js';
import type { DeviceName, EventContext, KernelEvent, MemoryEventSink, ModuleRef, StorageRef } from '../core/events.js';
import {
  formatOpSummary,
  opTraceStatsToJson,
  OP_TRACES_FORMAT,
  OP_TRACES_VERSION,
  parseOpTraceStats,
  renderOpTraceCharts,
  renderOpTracesHtml,
  summarizeOpTraces,
  type MarkerName,
  type MemoryFigures,
  type OpMarker,
  type OpRecord,
  type OpTraceStats,
  type OpTraceSummary,
  type TraceChart,
} from './op-traces.js';
import { loadOpTraceStats, saveOpTraceStats, writeOpTracePlots, type WrittenTraces } from './op-traces-node.js';

/** The layer part of a record name for kernels that run outside every layer (loss, optimizer updates). */
export const NO_LAYER = '(no layer)';

/**
 * TFJS backends free a storage the moment its last tensor is disposed; no
 * stream can still be using a freed block, so PyTorch's "active" (allocated +
 * blocks awaiting stream sync) equals allocated.
 */
export const ACTIVE_EQUALS_ALLOCATED = 'allocated (no stream-ordered frees: every live storage is active)';

export interface MemoryTrackerOptions {
  /** Device to trace; defaults to the framework's current device when monitoring starts. */
  readonly device?: DeviceName;
  /**
   * A caching-allocator model (src/allocator) to take reserved bytes and
   * retry/OOM counts from, on devices whose framework reports no pool (cpu).
   */
  readonly reservedSource?: ReservedMemorySource;
}

export interface MonitorOptions {
  /** Optimizer to instrument, so its kernels are named `.optimizer.` and steps are counted. */
  readonly optimizer?: unknown;
  /** Name of the root in record names; defaults to the model's own name. */
  readonly name?: string;
}

export interface RenderedTraces {
  readonly charts: readonly TraceChart[];
  readonly html: string;
}


export class MemoryTracker implements Disposable {
  readonly #adapter: FrameworkAdapter;
  readonly #options: MemoryTrackerOptions;

  #session: AdapterSession | null = null;
  #root: ModuleRef | null = null;
  #rootDepth = 0;
  #kernelDepth = 0;
  /**
   * The adapter's `ctx.step` when this monitoring began (read at the first event after
   * startMonitor), or null before it. `ctx.step` counts from when the framework was instrumented,
   * which is earlier when another tracker attached first; like PyTorch's MemoryTracker, whose
   * records belong to its own monitoring session, steps count from 0 at start.
   */
  #stepBase: number | null = null;

  #device: DeviceName = '';
  #granularity = 1;
  /** Storages counted in #allocated: only these are subtracted when freed. */
  #counted = new Set<StorageRef>();
  #allocated = 0;
  #reservedMode: 'device' | 'model' | 'allocated' = 'allocated';
  #reservedLabel = '';
  #activeLabel = ACTIVE_EQUALS_ALLOCATED;
  #baseline: MemoryFigures = { allocated: 0, active: 0, reserved: 0 };
  #retriesAtStart = 0;
  #oomsAtStart = 0;

  #kernelCalls = new Map<string, number>();
  #records: OpRecord[] = [];
  #markers: OpMarker[] = [];
  #numAllocRetries: number | null = null;
  #numOoms: number | null = null;

  readonly #sink: MemoryEventSink;

  constructor(adapter: FrameworkAdapter, options: MemoryTrackerOptions = {}) {
    this.#adapter = adapter;
    this.#options = options;
    this.#sink = {
      onStorageAlloc: (storage) => {
        if (storage.device !== this.#device || this.#counted.has(storage)) return;
        this.#counted.add(storage);
        const bytes = this.#round(storage.bytes);
        this.#allocated += bytes;
        if (storage.adopted) this.#countFromStart(bytes);
      },
      onStorageFree: (storage) => {
        // A storage made before monitoring that the adapter did not list is not ours to subtract.
        if (!this.#counted.delete(storage)) return;
        this.#allocated -= this.#round(storage.bytes);
      },
      onKernelStart: (_kernel, ctx) => {
        this.#stepBase ??= ctx.step;
        this.#kernelDepth++;
      },
      onKernelEnd: (kernel, ctx) => {
        if (this.#kernelDepth > 0) this.#kernelDepth--;
        // Only top-level kernels are operator calls. Kernels nested inside
        // another are its implementation: a composite's (customGrad /
        // forwardFunc) inner kernels, and the Identity clones TFJS runs inside
        // a kernel to save its inputs for backward. Their memory shows up in
        // the enclosing kernel's record.
        if (this.#kernelDepth > 0) return;
        // The adapter reports a kernel that threw with no outputs; like
        // PyTorch (which records after the op returns) it is not an operator call.
        if (kernel.outputs.length === 0) return;
        this.#record(kernel, ctx);
      },
      onModuleEnter: (module, _inputs, ctx) => {
        if (module !== this.#root) return;
        if (this.#rootDepth++ === 0) this.#mark('fw_start', ctx);
      },
      onModuleExit: (module, _outputs, ctx) => {
        if (module !== this.#root || this.#rootDepth === 0) return;
        if (--this.#rootDepth === 0) this.#mark('fw_bw_boundary', ctx);
      },
    };
  }

  /** True between startMonitor() and stop(). */
  get monitoring(): boolean {
    return this.#session !== null;
  }

  /** The device traced (set by startMonitor or load). */
  get device(): DeviceName {
    return this.#device;
  }

  /** One entry per top-level kernel call, in order. */
  get records(): readonly OpRecord[] {
    return this.#records;
  }

  /** Every marker, in order: one fw_start/fw_bw_boundary pair per forward pass of the root. */
  get markers(): readonly OpMarker[] {
    return this.#markers;
  }

  /**
   * Clears previous results, instruments `model` (every nested layer) and
   * starts recording. Returns `this`, so `using t = new MemoryTracker(a).startMonitor(m)` works.
   */
  startMonitor(model: unknown, options: MonitorOptions = {}): this {
    if (this.#session) {
      throw new MemscopeError('already-monitoring', 'MemoryTracker.startMonitor(): already monitoring; call stop() first');
    }
    this.#clear();
    const session = this.#adapter.attach(this.#sink);
    try {
      this.#device = this.#options.device ?? session.currentDevice();
      this.#granularity = deviceSpec(this.#device).granularity;
      for (const storage of session.liveStorages()) {
        if (storage.device !== this.#device || this.#counted.has(storage)) continue;
        this.#counted.add(storage);
        this.#allocated += this.#round(storage.bytes);
      }
      const reading = session.deviceMemory(this.#device);
      const model_ = this.#options.reservedSource;
      if (reading) {
        this.#reservedMode = 'device';
        this.#reservedLabel = reading.source;
      } else if (model_) {
        this.#reservedMode = 'model';
        this.#reservedLabel = 'caching allocator model (ReservedMemorySource)';
      } else {
        this.#reservedMode = 'allocated';
        this.#reservedLabel = `allocated (${this.#device} reports no pool and no allocator model is attached)`;
      }
      if (model_) {
        this.#retriesAtStart = model_.numAllocRetries(this.#device);
        this.#oomsAtStart = model_.numOoms(this.#device);
      }
      this.#session = session;
      this.#baseline = { allocated: this.#allocated, active: this.#allocated, reserved: this.#readReserved() };
      this.#root = session.module(model, options.name);
      if (options.optimizer !== undefined) session.optimizer(options.optimizer);
    } catch (err) {
      this.#session = null;
      this.#root = null;
      session.detach();
      throw err;
    }
    return this;
  }

  /** Stops recording and removes every hook; the results stay readable. */
  stop(): void {
    const session = this.#session;
    if (!session) throw new MemscopeError('not-monitoring', 'MemoryTracker.stop(): not monitoring; call startMonitor(model) first');
    const source = this.#options.reservedSource;
    if (source) {
      // Counted from start() to stop() only: the model's counters are cumulative.
      this.#numAllocRetries = source.numAllocRetries(this.#device) - this.#retriesAtStart;
      this.#numOoms = source.numOoms(this.#device) - this.#oomsAtStart;
    }
    this.#session = null;
    this.#root = null;
    this.#rootDepth = 0;
    this.#kernelDepth = 0;
    session.detach();
  }

  [Symbol.dispose](): void {
    if (this.#session) this.stop();
  }

  /**
   * Monitors `model` while `fn` runs (sync or async) and stops afterwards,
   * also when `fn` throws or its promise rejects. Returns what `fn` returns.
   */
  track<T>(model: unknown, fn: () => T, options: MonitorOptions = {}): T {
    this.startMonitor(model, options);
    return afterSettled(
      fn,
      (value) => {
        this.stop();
        return value;
      },
      () => this.stop(),
    ) as T;
  }

  /** The results as one plain value (a copy): what saveStats() writes. */
  stats(): OpTraceStats {
    return {
      format: OP_TRACES_FORMAT,
      version: OP_TRACES_VERSION,
      device: this.#device,
      reservedSource: this.#reservedLabel,
      activeSource: this.#activeLabel,
      baseline: { ...this.#baseline },
      records: this.#records.slice(),
      markers: this.#markers.slice(),
      numAllocRetries: this.#numAllocRetries,
      numOoms: this.#numOoms,
    };
  }

  /** Top operators by memory added: total over their calls and the largest single call. */
  summary(top = 20): OpTraceSummary {
    return summarizeOpTraces(this.stats(), top);
  }

  /** The summary as printable text. */
  summaryString(top = 20): string {
    return formatOpSummary(this.summary(top));
  }

  /** The four charts (SVG strings) and the HTML page holding them, without touching files. */
  renderTraces(top = 20): RenderedTraces {
    const stats = this.stats();
    const charts = renderOpTraceCharts(stats);
    return { charts, html: renderOpTracesHtml(stats, charts, top) };
  }

  /** Writes the charts as SVG files plus memory_traces.html into directory `dir` (Node). */
  showTraces(dir: string, top = 20): WrittenTraces {
    return writeOpTracePlots(dir, this.stats(), top);
  }

  statsJson(): string {
    return opTraceStatsToJson(this.stats());
  }

  /** Saves the results as versioned JSON (Node). */
  saveStats(file: string): void {
    saveOpTraceStats(file, this.stats());
  }

  /** Replaces the results with stats parsed from JSON text; `source` names it in errors. */
  loadJson(json: string, source?: string): void {
    this.#assertIdle('loadJson()');
    this.#adopt(parseOpTraceStats(json, source));
  }

  /** Replaces the results with a file written by saveStats() (Node). */
  load(file: string): void {
    this.#assertIdle('load()');
    this.#adopt(loadOpTraceStats(file));
  }

  // -------------------------------------------------------------------------

  #round(bytes: number): number {
    const g = this.#granularity;
    return g <= 1 ? bytes : Math.ceil(bytes / g) * g;
  }

  #readReserved(): number {
    switch (this.#reservedMode) {
      case 'device':
        // Falls back to allocated if the framework stops answering mid-session.
        return this.#session?.deviceMemory(this.#device)?.reservedBytes ?? this.#allocated;
      case 'model':
        return this.#options.reservedSource!.reservedBytes(this.#device);
      default:
        return this.#allocated;
    }
  }

  #record(kernel: KernelEvent, ctx: EventContext): void {
    // Composite ops are named after their op scope ('fusedMatMul__op'); the suffix is TFJS bookkeeping.
    const kernelName = kernel.name.replace(/__op$/, '') || 'composite';
    const n = this.#kernelCalls.get(kernelName) ?? 0;
    this.#kernelCalls.set(kernelName, n + 1);
    const layer = ctx.module ? ctx.module.path : NO_LAYER;
    this.#records.push({
      name: `${layer}.${ctx.phase}.${kernelName}_${n}`,
      step: this.#stepOf(ctx),
      allocated: this.#allocated,
      active: this.#allocated,
      reserved: this.#readReserved(),
    });
  }

  /** Optimizer steps completed since monitoring began. */
  #stepOf(ctx: EventContext): number {
    this.#stepBase ??= ctx.step;
    return ctx.step - this.#stepBase;
  }

  #mark(name: MarkerName, ctx: EventContext): void {
    // Every marker is kept (PyTorch keeps one per name, so a second step overwrote the first).
    this.#markers.push({ name, index: this.#records.length, step: this.#stepOf(ctx) });
  }

  /**
   * A storage made before monitoring began, met only now (the first kernel that reads it): it was
   * allocated all along, as PyTorch's memory_allocated() counts it, so the baseline and every
   * record so far hold it too, and no operator's delta is charged with it.
   */
  #countFromStart(bytes: number): void {
    const inReserved = this.#reservedMode === 'allocated';
    const b = this.#baseline;
    this.#baseline = { allocated: b.allocated + bytes, active: b.active + bytes, reserved: b.reserved + (inReserved ? bytes : 0) };
    this.#records = this.#records.map((r) => ({ ...r, allocated: r.allocated + bytes, active: r.active + bytes, reserved: r.reserved + (inReserved ? bytes : 0) }));
  }

  #assertIdle(what: string): void {
    if (this.#session) throw new MemscopeError('monitoring', `MemoryTracker.${what}: cannot replace results while monitoring; call stop() first`);
  }

  #adopt(stats: OpTraceStats): void {
    this.#clear();
    this.#device = stats.device;
    this.#reservedLabel = stats.reservedSource;
    this.#activeLabel = stats.activeSource;
    this.#baseline = { ...stats.baseline };
    this.#records = stats.records.slice();
    this.#markers = stats.markers.slice();
    this.#numAllocRetries = stats.numAllocRetries;
    this.#numOoms = stats.numOoms;
  }

  #clear(): void {
    this.#kernelCalls.clear();
    this.#activeLabel = ACTIVE_EQUALS_ALLOCATED;
    this.#records = [];
    this.#markers = [];
    this.#counted = new Set();
    this.#allocated = 0;
    this.#rootDepth = 0;
    this.#kernelDepth = 0;
    this.#stepBase = null;
    this.#numAllocRetries = null;
    this.#numOoms = null;
    this.#baseline = { allocated: 0, active: 0, reserved: 0 };
  }
}
