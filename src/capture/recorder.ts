import type {
  EventContext,
  GradientPair,
  KernelEvent,
  MemoryEventSink,
  ModuleRef,
  OptimizerRef,
  StorageRef,
  TensorRef,
} from '../core/events.js';
import {
  Category,
  type CategoryIndex,
  categoryAfterAssign,
  categoryOfAllocation,
  categoryOfGradient,
  categoryOfReplacedStorage,
} from '../core/mem-categories.js';
import type { CaptureWriter } from './writer.js';
import { CATEGORIES, type CaptureEndInfo, type DeviceCategoryBytes, type ModuleStates } from './types.js';

const NCAT = CATEGORIES.length;

export interface RecorderOptions {
  /** Record the JS stack of allocations that outlive a step (see `CaptureRecorder`). */
  stacks?: boolean;
  /** Record at most this many allocations individually; later ones are only counted. */
  maxEntries?: number | null;
  /** Files whose path contains any of these strings are memscope's own: folded with library frames. */
  internalFrames?: readonly string[];
  /** Frames captured per stack, before folding: deep enough to pass a framework's call chain. */
  stackDepth?: number;
  /** Milliseconds, monotonic. */
  now?: () => number;
}

/** A stack captured at an allocation, not yet formatted (V8 formats on first read of `stack`). */
interface PendingStack {
  readonly holder: { stack?: unknown };
  /** Step ends seen when the storage was allocated. */
  readonly boundary: number;
}

interface LiveStorage {
  readonly device: string;
  readonly bytes: number;
  cat: CategoryIndex;
  /** False when --max-entries dropped the alloc record: then its free is not written either. */
  readonly written: boolean;
}

interface KernelStats {
  calls: number;
  bytesAllocated: number;
  bytesRetained: number;
  peakAdded: number;
}

interface OpenKernel {
  /** Null for a composite (customGrad scope): opened and closed, never counted. */
  stats: KernelStats | null;
  allocated: number;
  net: number;
  peakNet: number;
}

/** Live bytes per device per category index, copied (cheap on the hot path; turned into objects when written). */
type RawSnapshot = Map<string, Float64Array>;

interface ModuleRecord {
  readonly id: number;
  readonly ref: ModuleRef;
  states: ModuleStates;
  /** State name → raw snapshot, materialised into `states.states` when the tables are written. */
  raw: Map<string, RawSnapshot>;
  peakFwd: Map<string, number>;
  peakBwd: Map<string, number>;
}

/**
 * A MemoryEventSink that streams every storage alloc/free (with device,
 * bytes, category, layer, phase, kernel and step), step ends (optimizer steps
 * and marks), module state tables and kernel statistics into a CaptureWriter.
 * With `stacks`, the allocating stack of each storage that outlives the step
 * after its own follows in a `t` record (docs/REPORT.md, "Stacks").
 *
 * Categories come from the categoriser MemTracker uses (core/mem-categories.ts):
 * a storage made in forward (or outside any phase) is Activation, in backward
 * Temp, in an optimizer step Optstate; it is re-categorised when it turns out
 * to be a tracked module's weight (Parameter/Buffer), an optimizer's state
 * (Optstate) or a variable's returned gradient (Gradient); a variable keeps its
 * category when `assign` swaps its storage.
 */
export class CaptureRecorder implements MemoryEventSink {
  private readonly live = new Map<number, LiveStorage>();
  /** Category of each categorised variable (by tensor id), so a weight keeps it across `assign`. */
  private readonly variableCategory = new Map<number, CategoryIndex>();
  /** Live bytes per device, per category index. */
  private readonly totals = new Map<string, Float64Array>();
  private readonly kernels = new Map<string, KernelStats>();
  private readonly openKernels: OpenKernel[] = [];
  private readonly modules = new Map<ModuleRef, ModuleRecord>();
  /** Modules whose forward (fwd) or backward (bwd) is running, innermost last. */
  private readonly activeFwd: ModuleRecord[] = [];
  private readonly activeBwd: ModuleRecord[] = [];
  private readonly catIds: number[];
  private readonly phaseIds: Record<string, number> = {};
  private readonly start: number;
  private readonly now: () => number;
  private readonly maxEntries: number;
  private readonly stacks: boolean;
  private readonly internalFrames: readonly string[];
  private readonly stackDepth: number;
  private written = 0;
  private seen = 0;
  private dropped = 0;
  private steps = 0;
  /** Step ends so far: optimizer steps and marks. */
  private boundaries = 0;
  private optimizerDepth = 0;
  private readonly pendingStacks = new Map<number, PendingStack>();
  /** The stack captured when the outermost running gradient computation began, shared by what its backward allocates. */
  private gradientHolder: { stack?: unknown } | null = null;
  private gradientDepth = 0;
  /** Stack ids of holders already formatted (a shared holder is formatted once). */
  private readonly formatted = new WeakMap<object, number>();

  constructor(
    private readonly writer: CaptureWriter,
    opts: RecorderOptions = {},
  ) {
    this.now = opts.now ?? (() => performance.now());
    this.start = this.now();
    this.maxEntries = opts.maxEntries ?? Infinity;
    this.stacks = opts.stacks ?? false;
    this.internalFrames = opts.internalFrames ?? [];
    this.stackDepth = opts.stackDepth ?? 120;
    this.catIds = CATEGORIES.map((c) => writer.str(c));
    for (const p of ['forward', 'backward', 'optimizer', 'none']) this.phaseIds[p] = writer.str(p);
  }

  /** Storages alive before the recorder was attached (from `AdapterSession.liveStorages()`). */
  adoptExisting(storages: Iterable<StorageRef>): void {
    const ctx: EventContext = { phase: 'none', module: null, kernel: null, step: 0, seq: 0 };
    for (const s of storages) if (!this.live.has(s.id)) this.onStorageAlloc(s, ctx);
  }

  get stepsCompleted(): number {
    return this.steps;
  }

  onStorageAlloc(storage: StorageRef, ctx: EventContext): void {
    this.seen++;
    // The same data moved to another device keeps its category.
    const cat = (storage.movedFrom !== undefined ? this.live.get(storage.movedFrom)?.cat : undefined) ?? categoryOfAllocation(ctx.phase);
    const written = this.written < this.maxEntries;
    this.live.set(storage.id, { device: storage.device, bytes: storage.bytes, cat, written });
    const tot = this.deviceTotals(storage.device);
    tot[cat] += storage.bytes;
    for (let i = 0; i < this.openKernels.length; i++) {
      const k = this.openKernels[i];
      k.allocated += storage.bytes;
      k.net += storage.bytes;
      if (k.net > k.peakNet) k.peakNet = k.net;
    }
    if (this.activeFwd.length || this.activeBwd.length) this.updateLocalPeaks(storage.device);
    if (!written) {
      this.dropped++;
      return;
    }
    this.written++;
    const w = this.writer;
    if (this.stacks) {
      // Optimizer-step storages are optimizer state, which is owned and never a leak: no stack needed.
      // Backward's storages share the stack of the gradient computation's call (the program's
      // `fit`/`minimize`/`grads` line): backward makes about as many storages as forward and
      // optimizer together, and its own innermost frames are TFJS's gradient closures.
      if (cat === Category.TEMP && this.gradientHolder !== null) this.pendingStacks.set(storage.id, { holder: this.gradientHolder, boundary: this.boundaries });
      else if (cat !== Category.OPT) this.captureStack(storage.id);
    }
    w.alloc(
      this.time(),
      storage.id,
      w.str(storage.device),
      storage.bytes,
      this.catIds[cat],
      ctx.module ? w.str(ctx.module.path) : 0,
      this.phaseIds[ctx.phase] ?? w.str(ctx.phase),
      w.str(ctx.kernel),
      0,
      this.steps,
    );
  }

  onStorageFree(storage: StorageRef, _ctx?: EventContext): void {
    const entry = this.live.get(storage.id);
    if (!entry) return; // made before the recorder attached and never adopted
    this.live.delete(storage.id);
    if (this.stacks) this.pendingStacks.delete(storage.id);
    this.deviceTotals(entry.device)[entry.cat] -= entry.bytes;
    for (let i = 0; i < this.openKernels.length; i++) this.openKernels[i].net -= entry.bytes;
    if (entry.written) this.writer.free(this.time(), storage.id);
  }

  onKernelStart(kernel: KernelEvent, _ctx?: EventContext): void {
    // A composite (a customGrad scope such as fusedMatMul__op) is no kernel: what it allocates is
    // its inner kernels', which the table counts already. It is opened uncounted, to close as a pair.
    if (kernel.composite) {
      this.openKernels.push({ stats: null, allocated: 0, net: 0, peakNet: 0 });
      return;
    }
    let stats = this.kernels.get(kernel.name);
    if (!stats) {
      stats = { calls: 0, bytesAllocated: 0, bytesRetained: 0, peakAdded: 0 };
      this.kernels.set(kernel.name, stats);
    }
    this.openKernels.push({ stats, allocated: 0, net: 0, peakNet: 0 });
  }

  onKernelEnd(_kernel?: KernelEvent, _ctx?: EventContext): void {
    const open = this.openKernels.pop();
    if (!open || open.stats === null) return;
    const s = open.stats;
    s.calls++;
    s.bytesAllocated += open.allocated;
    s.bytesRetained += open.net;
    if (open.peakNet > s.peakAdded) s.peakAdded = open.peakNet;
  }

  onModuleEnter(module: ModuleRef, _inputs?: readonly TensorRef[], _ctx?: EventContext): void {
    const rec = this.moduleRecord(module);
    this.classifyWeights(module);
    rec.peakFwd = new Map();
    rec.raw.set('Pre-Forward', this.snapshot());
    this.activeFwd.push(rec);
    this.updateLocalPeaks(null);
  }

  onModuleExit(module: ModuleRef, _outputs?: readonly TensorRef[], _ctx?: EventContext): void {
    const rec = this.moduleRecord(module);
    this.classifyWeights(module); // weights are built lazily during the first call
    rec.raw.set('Post-Forward', this.snapshot());
    rec.states.localPeakForward = Object.fromEntries(rec.peakFwd);
    removeLast(this.activeFwd, rec);
  }

  onBackwardModuleEnter(module: ModuleRef, _ctx?: EventContext): void {
    const rec = this.moduleRecord(module);
    rec.peakBwd = new Map();
    rec.raw.set('Pre-Backward', this.snapshot());
    this.activeBwd.push(rec);
    this.updateLocalPeaks(null);
  }

  onBackwardModuleExit(module: ModuleRef, _ctx?: EventContext): void {
    const rec = this.moduleRecord(module);
    rec.raw.set('Post-Backward', this.snapshot());
    rec.states.localPeakBackward = Object.fromEntries(rec.peakBwd);
    removeLast(this.activeBwd, rec);
  }

  onGradientStart(_xs?: readonly TensorRef[], _ctx?: EventContext): void {
    if (this.gradientDepth++ === 0 && this.stacks) this.gradientHolder = this.captureHolder();
  }

  onGradientEnd(pairs: readonly GradientPair[], _ctx?: EventContext): void {
    if (this.gradientDepth > 0 && --this.gradientDepth === 0) this.gradientHolder = null;
    for (const p of pairs) {
      const cat = p.grad ? categoryOfGradient(p.x) : null;
      if (cat !== null) this.recategorise(p.grad!.storage.id, cat);
    }
  }

  onOptimizerStepStart(_optimizer?: OptimizerRef, _ctx?: EventContext): void {
    this.optimizerDepth++;
  }

  onOptimizerStepEnd(optimizer: OptimizerRef, _ctx?: EventContext): void {
    this.optimizerDepth = Math.max(0, this.optimizerDepth - 1);
    for (const t of optimizer.stateVariables()) this.recategoriseVariable(t, Category.OPT);
    if (this.optimizerDepth > 0) return;
    this.steps++;
    this.writer.stepEnd(this.time(), this.steps, this.liveByDevice());
    this.boundaryPassed();
    this.writeTables();
    this.writer.flush();
  }

  /**
   * A step end that is not an optimizer step: a top-level inference call
   * returned ('predict', 'execute', 'executeAsync') or the program called
   * `step()` ('step'). Ignored inside an optimizer step.
   */
  mark(kind: string): void {
    if (this.optimizerDepth > 0 || this.writer.isClosed) return;
    this.writer.mark(this.time(), this.writer.str(kind));
    this.boundaryPassed();
  }

  onVariableAssign(variable: TensorRef, previous: StorageRef, _ctx?: EventContext): void {
    const prev = this.live.get(previous.id);
    if (!this.live.has(variable.storage.id)) return;
    const cat = categoryAfterAssign(this.variableCategory.get(variable.id), prev?.cat);
    if (cat !== undefined) this.recategorise(variable.storage.id, cat);
    // The old storage outlives the assign only while other tensors still hold it.
    if (prev && previous.id !== variable.storage.id) {
      const replaced = categoryOfReplacedStorage(prev.cat);
      if (replaced !== null) this.recategorise(previous.id, replaced);
    }
  }

  /** Writes the module tables and kernel statistics (readers keep the latest) and the end record. */
  finish(info: Omit<CaptureEndInfo, 'events' | 'dropped'>): void {
    if (this.writer.isClosed) return;
    this.writePendingStacks(Infinity);
    this.writeTables();
    this.writer.end(this.time(), { events: this.seen, dropped: this.dropped, ...info });
  }

  /** Writes the module tables and kernel statistics so far (readers keep the latest of each). */
  writeTables(): void {
    for (const rec of this.modules.values()) {
      for (const [state, raw] of rec.raw) rec.states.states[state] = this.liveByDevice(raw);
      this.writer.moduleState(rec.id, rec.states);
    }
    for (const [name, s] of this.kernels) this.writer.kernel(name, s.calls, s.bytesAllocated, s.bytesRetained, s.peakAdded);
  }

  /** Categorises a variable's storage and remembers the variable's category for later `assign`s. */
  private recategoriseVariable(t: TensorRef, cat: CategoryIndex): void {
    if (t.variableName !== undefined) this.variableCategory.set(t.id, cat);
    this.recategorise(t.storage.id, cat);
  }

  private recategorise(storageId: number, cat: CategoryIndex): void {
    const entry = this.live.get(storageId);
    if (!entry || entry.cat === cat) return;
    const tot = this.deviceTotals(entry.device);
    tot[entry.cat] -= entry.bytes;
    tot[cat] += entry.bytes;
    entry.cat = cat;
    if (entry.written) this.writer.category(storageId, this.catIds[cat]);
  }

  private classifyWeights(module: ModuleRef): void {
    const rec = this.moduleRecord(module);
    let params = 0;
    let buffers = 0;
    for (const t of module.parameters()) {
      params += t.storage.bytes;
      this.recategoriseVariable(t, Category.PARAM);
    }
    for (const t of module.buffers()) {
      buffers += t.storage.bytes;
      this.recategoriseVariable(t, Category.BUFFER);
    }
    rec.states.parameterBytes = params;
    rec.states.bufferBytes = buffers;
  }

  private moduleRecord(module: ModuleRef): ModuleRecord {
    let rec = this.modules.get(module);
    if (!rec) {
      const parent = module.parent ? this.moduleRecord(module.parent).id : -1;
      rec = {
        id: module.id,
        ref: module,
        states: { states: {}, localPeakForward: {}, localPeakBackward: {}, parameterBytes: 0, bufferBytes: 0 },
        peakFwd: new Map(),
        peakBwd: new Map(),
        raw: new Map(),
      };
      this.modules.set(module, rec);
      this.writer.module(module.id, module.path, module.className, parent);
      // Declare the children too, so the module tree is complete even for layers that never run.
      for (const child of module.children) this.moduleRecord(child);
    }
    return rec;
  }

  /** Raises the local peaks of running modules on `device` (or every device when null). */
  private updateLocalPeaks(device: string | null): void {
    const devices = device === null ? [...this.totals.keys()] : [device];
    for (const d of devices) {
      const total = sum(this.deviceTotals(d));
      for (const rec of this.activeFwd) {
        if (total > (rec.peakFwd.get(d) ?? -1)) {
          rec.peakFwd.set(d, total);
          rec.raw.set('Peak-Forward', this.snapshot());
        }
      }
      for (const rec of this.activeBwd) {
        if (total > (rec.peakBwd.get(d) ?? -1)) {
          rec.peakBwd.set(d, total);
          rec.raw.set('Peak-Backward', this.snapshot());
        }
      }
    }
  }

  private snapshot(): RawSnapshot {
    const out: RawSnapshot = new Map();
    for (const [device, tot] of this.totals) out.set(device, tot.slice());
    return out;
  }

  private liveByDevice(raw: RawSnapshot = this.totals): DeviceCategoryBytes {
    const out: DeviceCategoryBytes = {};
    for (const [device, tot] of raw) {
      const row: Record<string, number> = {};
      for (let i = 0; i < NCAT; i++) if (tot[i] !== 0) row[CATEGORIES[i]] = tot[i];
      out[device] = row;
    }
    return out;
  }

  private deviceTotals(device: string): Float64Array {
    let t = this.totals.get(device);
    if (!t) {
      t = new Float64Array(NCAT);
      this.totals.set(device, t);
    }
    return t;
  }

  private time(): number {
    return Math.round((this.now() - this.start) * 1000) / 1000;
  }

  /**
   * Captures the allocating call stack unformatted: V8 records the frames,
   * and formatting (the costly part) waits until the storage turns out to
   * outlive a step (`writePendingStacks`); most storages are freed before.
   */
  private captureStack(storageId: number): void {
    this.pendingStacks.set(storageId, { holder: this.captureHolder(), boundary: this.boundaries });
  }

  private captureHolder(): { stack?: unknown } {
    const holder: { stack?: unknown } = {};
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = this.stackDepth;
    Error.captureStackTrace(holder);
    Error.stackTraceLimit = limit;
    return holder;
  }

  private boundaryPassed(): void {
    this.boundaries++;
    // Alive at the second step end after its allocation: a leak candidate, so its stack is needed.
    if (this.stacks) this.writePendingStacks(this.boundaries - 2);
  }

  /** Writes the stacks of live storages allocated before step end `upTo` (0-based count) and forgets them. */
  private writePendingStacks(upTo: number): void {
    if (this.pendingStacks.size === 0) return;
    const w = this.writer;
    const previous = Error.prepareStackTrace;
    Error.prepareStackTrace = (_err, sites) => sites;
    try {
      for (const [id, pending] of this.pendingStacks) {
        if (pending.boundary > upTo) continue;
        this.pendingStacks.delete(id);
        let stack = this.formatted.get(pending.holder);
        if (stack === undefined) {
          const sites = pending.holder.stack;
          stack = Array.isArray(sites) ? this.internStack(sites as NodeJS.CallSite[]) : 0;
          this.formatted.set(pending.holder, stack);
        }
        if (stack !== 0) w.allocStack(id, stack);
      }
    } finally {
      Error.prepareStackTrace = previous;
    }
  }

  /** The writer's id for a stack of call sites, folded; keyed by the sites' locations. */
  private internStack(sites: readonly NodeJS.CallSite[]): number {
    let key = '';
    for (const site of sites) key += `${site.getFileName() ?? ''}:${site.getLineNumber() ?? 0}:${site.getColumnNumber() ?? 0}\n`;
    return this.writer.stack(key, () => foldFrames(sites, this.internalFrames));
  }
}

/** The package a file belongs to ('@scope/name' or 'name' under node_modules, 'node' for Node's own), or null for the program's. */
function libraryOf(file: string, internal: readonly string[]): string | null {
  if (file.startsWith('node:')) return 'node';
  if (internal.some((p) => file.includes(p))) return 'memscope';
  const at = file.lastIndexOf('node_modules/');
  if (at < 0) return null;
  const rest = file.slice(at + 'node_modules/'.length).split('/');
  return rest[0].startsWith('@') ? `${rest[0]}/${rest[1] ?? ''}` : rest[0];
}

/** V8's rendering of one frame: "fn (file:line:col)", or "file:line:col" for top-level code. */
function formatSite(site: NodeJS.CallSite, file: string): string {
  const where = `${file}:${site.getLineNumber() ?? 0}:${site.getColumnNumber() ?? 0}`;
  let fn = site.getFunctionName();
  const type = site.isToplevel() ? null : site.getTypeName();
  if (fn && type && !fn.startsWith(`${type}.`) && type !== 'Object') fn = `${type}.${fn}`;
  else if (!fn && type && site.getMethodName()) fn = `${type}.${site.getMethodName()}`;
  if (fn && site.isConstructor()) fn = `new ${fn}`;
  const prefix = site.isAsync() ? 'async ' : '';
  return fn ? `${prefix}${fn} (${where})` : `${prefix}${where}`;
}

/**
 * Frames of a stack with every run of library frames (installed packages,
 * Node's internals, memscope itself) folded into one entry
 * "[N frames in pkg, pkg]", so the program's own frames stand out and the
 * first unfolded frame is the program's line.
 */
export function foldFrames(sites: readonly NodeJS.CallSite[], internal: readonly string[]): string[] {
  const out: string[] = [];
  let run = 0;
  let packages: string[] = [];
  const closeRun = (): void => {
    if (run > 0) out.push(`[${run} frame${run === 1 ? '' : 's'} in ${packages.join(', ')}]`);
    run = 0;
    packages = [];
  };
  for (const site of sites) {
    const raw = site.getFileName() ?? (site.isNative() ? 'native' : '<anonymous>');
    const file = raw.startsWith('file://') ? decodeURIComponent(raw.slice('file://'.length)) : raw;
    const library = file === '<anonymous>' || file === 'native' ? 'node' : libraryOf(file, internal);
    if (library !== null) {
      run++;
      if (!packages.includes(library)) packages.push(library);
      continue;
    }
    closeRun();
    out.push(formatSite(site, file));
  }
  closeRun();
  return out;
}

function sum(a: Float64Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i];
  return s;
}

function removeLast<T>(list: T[], item: T): void {
  const i = list.lastIndexOf(item);
  if (i >= 0) list.splice(i, 1);
}
