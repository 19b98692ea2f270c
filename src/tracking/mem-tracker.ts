import type { AdapterSession, FrameworkAdapter } from '../core/adapter.js';
import { afterSettled } from '../core/settle.js';
import { MemscopeError } from '../core/errors.js';
import { parseUnit, type Unit } from '../core/units.js';
import { formatModulewise, formatSnapshotTable, formatSnapshotText } from './mem-tracker-text.js';
import { Category } from '../core/mem-categories.js';
import { MemRecorder } from './mem-recorder.js';
import type { MemTrackerSnapshot, ModuleMemStats, SnapshotType } from './mem-types.js';

export interface SnapshotDisplayOptions {
  /** 'B' (default), 'KiB', 'MiB' or 'GiB'. */
  units?: Unit;
  /** Draw a table instead of indented lines. */
  tabulate?: boolean;
}

export interface ModulewiseDisplayOptions extends SnapshotDisplayOptions {
  /** Deepest module level shown; the root model is level 1. Default 2, as PyTorch. */
  depth?: number;
}

function parseSnapshotType(type: unknown): SnapshotType {
  if (type === 'current' || type === 'peak') return type;
  throw new MemscopeError('bad-snapshot-type', `snapshot type ${JSON.stringify(type)} is not 'current' or 'peak'`);
}

function parseDepth(depth: unknown): number {
  if (typeof depth === 'number' && Number.isInteger(depth) && depth >= 1) return depth;
  throw new MemscopeError('bad-depth', `depth ${JSON.stringify(depth)} is not an integer ≥ 1`);
}


function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object' && typeof value !== 'function') return `${typeof value} ${String(value)}`;
  const ctor = (value as { constructor?: { name?: string } }).constructor?.name;
  return ctor ? `a ${ctor}` : 'an object';
}

/** Arrays and plain objects are containers (like PyTorch's tree_flatten); everything else is a leaf. */
function flatten(values: readonly unknown[], out: { value: unknown; where: string }[] = [], at = (i: number | string) => `argument ${i}`): { value: unknown; where: string }[] {
  values.forEach((v, i) => flattenOne(v, at(i), out));
  return out;
}

/** `v` flattened, each item with where it was given: `argument 0`, `argument 1[2]`, `argument 0 (.inputs.x)`. */
function flattenOne(v: unknown, where: string, out: { value: unknown; where: string }[]): void {
  const inside = (key: string): string => (where.endsWith(')') ? `${where.slice(0, -1)}${key})` : `${where} (${key})`);
  if (Array.isArray(v)) v.forEach((x, k) => flattenOne(x, inside(`[${k}]`), out));
  else if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
    for (const [key, x] of Object.entries(v)) flattenOne(x, inside(`.${key}`), out);
  } else out.push({ value: v, where });
}

/**
 * Tracks, categorises and attributes tensor memory while it runs, like
 * PyTorch's `torch.distributed._tools.mem_tracker.MemTracker`: every storage
 * is Parameter, Buffer, Gradient, Activation, Temp, Optstate or Other, and
 * each module gets snapshots at Pre/Peak/Post-Forward and Pre/Peak/Post-Backward.
 *
 * ```ts
 * const tracker = new MemTracker(tfjsAdapter);   // memscope/tfjs exports one bound already
 * tracker.trackExternal(model, optimizer);
 * await tracker.track(() => model.fit(xs, ys, { epochs: 1 }));
 * tracker.displaySnapshot('peak', { units: 'KiB' });
 * tracker.displayModulewiseSnapshots({ depth: 2, units: 'KiB', tabulate: true });
 * ```
 * Storages created before `start()` are classified when the tracker learns
 * what they are (weights of a model it meets, optimizer state, tensors given to
 * `trackExternal`); other old storages count from when a kernel first touches
 * them. See docs/MEMTRACKER.md for the TFJS meaning of every category and state.
 */
export class MemTracker implements Disposable {
  private recorder = new MemRecorder();
  private session: AdapterSession | null = null;
  /** Everything given to trackExternal; (re)classified at every start(), and at once while tracking. */
  private external: unknown[] = [];
  /** Where each of `external` was given, for errors (`argument 0 (.inputs)`). */
  private externalWhere: string[] = [];
  /** Storage ids alive when tracking started; only read while start() resolves external objects. */
  private liveIds: Set<number> | null = null;
  /** Whether a model was given to trackExternal and resolved; without one no weight is Parameter. */
  private moduleRegistered = false;
  private startedOnce = false;
  private warnedNoModule = false;
  /** Models whose companions are watched while tracking (watchCompanions), and how to stop each watch. */
  private companionWatches = new Map<object, () => void>();

  constructor(readonly adapter: FrameworkAdapter) {}

  /** True between start() and stop(). */
  get tracking(): boolean {
    return this.session !== null;
  }

  /**
   * Tracks models (their weights, as Parameter and Buffer), optimizers (their
   * state, as Optstate) and tensors (as Other) created outside the tracker.
   * Arrays and plain objects of them are accepted. Call it before or while
   * tracking; before, the objects are resolved when tracking starts.
   */
  trackExternal(...external: unknown[]): void {
    const flat = flatten(external);
    for (const { value: obj, where } of flat) {
      if (obj === null || (typeof obj !== 'object' && typeof obj !== 'function')) {
        throw new MemscopeError('bad-external', `trackExternal: ${where} is ${describe(obj)}; expected a model, an optimizer or a tensor`);
      }
    }
    const first = this.external.length;
    this.external.push(...flat.map((f) => f.value));
    this.externalWhere.push(...flat.map((f) => f.where));
    if (this.session !== null) flat.forEach(({ value }, i) => this.resolveExternal(this.session!, value, first + i));
  }

  private resolveExternal(session: AdapterSession, obj: unknown, index: number): void {
    // The adapter says what an object is by refusing what it is not (with MemscopeError).
    const tryKind = <T>(get: () => T): T | undefined => {
      try {
        return get();
      } catch (err) {
        if (!(err instanceof MemscopeError)) throw err;
        return undefined;
      }
    };
    const tensor = tryKind(() => session.tensor(obj));
    if (tensor !== undefined) {
      // A disposed tensor holds no memory: nothing to count. (A live one made before
      // the adapter knew it is announced by the adapter as it is resolved, so it is tracked.)
      if (this.recorder.isTracked(tensor.storage) || this.liveIds?.has(tensor.storage.id)) {
        this.recorder.classifyVariable(tensor, Category.OTHER);
      }
      return;
    }
    const module = tryKind(() => session.module(obj));
    if (module !== undefined) {
      this.moduleRegistered = true;
      this.recorder.trackModuleWeights(module);
      for (const companion of this.companionsOf(obj)) this.resolveExternal(session, companion, index);
      if (!this.companionWatches.has(obj as object)) {
        const unwatch = this.watchCompanions(obj, () => {
          if (this.session === null) return;
          for (const companion of this.companionsOf(obj)) this.resolveExternal(this.session, companion, index);
        });
        if (unwatch !== null) this.companionWatches.set(obj as object, unwatch);
      }
      return;
    }
    const optimizer = tryKind(() => session.optimizer(obj));
    if (optimizer !== undefined) {
      this.recorder.trackOptimizerState(optimizer);
      return;
    }
    // Reported once: the object is not kept for the next start().
    const where = this.externalWhere[index] ?? `argument ${index}`;
    const at = this.external.indexOf(obj);
    if (at >= 0) {
      this.external.splice(at, 1);
      this.externalWhere.splice(at, 1);
    }
    throw new MemscopeError('bad-external', `trackExternal: ${where} is ${describe(obj)}, which is not a ${this.adapter.name} model, optimizer or tensor`);
  }

  /**
   * Objects that come with a model given to trackExternal (a framework binding
   * adds, e.g., the optimizer a TFJS model was compiled with). None here.
   */
  protected companionsOf(_model: unknown): unknown[] {
    return [];
  }

  /**
   * Calls `changed` while tracking whenever a tracked model's companions may have changed (a TFJS
   * model compiled again gets a new optimizer); returns how to stop watching, or null when the
   * binding has nothing to watch. None here.
   */
  protected watchCompanions(_model: unknown, _changed: () => void): (() => void) | null {
    return null;
  }

  /**
   * Starts tracking; returns the tracker so `using t = tracker.start()` stops
   * it at the end of the block. A tracker can be started again after stop():
   * storages freed while it was stopped are dropped then, and the external
   * objects are classified again.
   */
  start(): this {
    if (this.session !== null) throw new MemscopeError('already-tracking', 'MemTracker.start(): this tracker is already tracking');
    const session = this.adapter.attach(this.recorder);
    this.session = session;
    try {
      const live = new Set<number>();
      for (const s of session.liveStorages()) live.add(s.id);
      this.recorder.dropStoragesNotIn(live);
      this.liveIds = live;
      this.external.forEach((obj, i) => this.resolveExternal(session, obj, i));
      // A model's or optimizer's variables disposed while no tracker ran (tf.disposeVariables)
      // are still named by it: resolving them must not count them again.
      const liveNow = new Set<number>();
      for (const s of session.liveStorages()) liveNow.add(s.id);
      this.recorder.dropStoragesNotIn(liveNow);
    } catch (err) {
      this.session = null;
      session.detach();
      throw err;
    } finally {
      this.liveIds = null;
    }
    this.recorder.resetPeak();
    this.startedOnce = true;
    return this;
  }

  /**
   * Warns once when results are read from a tracker that never had a model: unlike PyTorch's,
   * which hooks every module, memscope meets a model only through trackExternal, so without it
   * every weight counts as Activation, Parameter stays 0 and there are no module rows.
   */
  private warnIfNoModule(): void {
    if (this.moduleRegistered || !this.startedOnce || this.warnedNoModule || !this.hasWeights()) return;
    this.warnedNoModule = true;
    this.warn(
      'memscope: MemTracker has no model registered, so no weight counts as Parameter and no module has statistics; ' +
        'call tracker.trackExternal(model) before tracking',
    );
  }

  /** Whether the framework holds trainable weights a model could own (a binding knows; here: assume so). */
  protected hasWeights(): boolean {
    return true;
  }

  /** Where the tracker's one-line warnings go. */
  protected warn(message: string): void {
    console.warn(message);
  }

  /** Stops tracking and restores the framework (the adapter uninstalls when its last subscriber detaches). Idempotent. */
  stop(): void {
    const session = this.session;
    if (session === null) return;
    this.session = null;
    for (const unwatch of [...this.companionWatches.values()].reverse()) unwatch();
    this.companionWatches.clear();
    this.recorder.closeOpenCalls();
    session.detach();
  }

  [Symbol.dispose](): void {
    this.stop();
  }

  /**
   * Runs `fn` under tracking and returns its result (a promise for an async
   * `fn`, settled after tracking stops). Tracking stops even if `fn` throws or
   * rejects, and the same error reaches the caller.
   */
  track<T>(fn: () => Promise<T>): Promise<T>;
  track<T>(fn: () => T): T;
  track<T>(fn: () => T | Promise<T>): T | Promise<T> {
    this.start();
    return afterSettled(
      fn,
      (value) => {
        this.stop();
        return value;
      },
      () => this.stopQuietly(),
    );
  }

  /** On the error path the user's error is the one to report; a failing stop must not replace it. */
  private stopQuietly(): void {
    try {
      this.stop();
    } catch {
      // The session is already marked stopped; detach failures are the adapter's to log.
    }
  }

  /** Bytes per category per device now ('current') or at the highest total since start ('peak'). */
  snapshot(type: SnapshotType = 'current'): MemTrackerSnapshot {
    this.warnIfNoModule();
    return parseSnapshotType(type) === 'current' ? this.recorder.currentSnapshot() : this.recorder.peakSnapshot();
  }

  /** Per-module statistics (copies), in no particular order; displays sort them by name. */
  moduleStats(): ModuleMemStats[] {
    this.warnIfNoModule();
    return this.recorder.moduleStats();
  }

  formatSnapshot(type: SnapshotType = 'current', options: SnapshotDisplayOptions = {}): string {
    const snap = this.snapshot(type);
    const unit = parseUnit(options.units ?? 'B');
    return options.tabulate ? formatSnapshotTable(snap, unit) : formatSnapshotText(snap, unit);
  }

  displaySnapshot(type: SnapshotType = 'current', options: SnapshotDisplayOptions = {}): void {
    console.log(this.formatSnapshot(type, options));
  }

  formatModulewiseSnapshots(options: ModulewiseDisplayOptions = {}): string {
    const depth = parseDepth(options.depth ?? 2);
    const unit = parseUnit(options.units ?? 'B');
    this.warnIfNoModule();
    return formatModulewise(this.recorder.moduleStats(), { depth, unit, tabulate: options.tabulate ?? false });
  }

  displayModulewiseSnapshots(options: ModulewiseDisplayOptions = {}): void {
    console.log(this.formatModulewiseSnapshots(options));
  }

  /** Forgets every module's statistics (e.g. between iterations); storages stay tracked. */
  resetModStats(): void {
    this.recorder.resetModStats();
  }
}
