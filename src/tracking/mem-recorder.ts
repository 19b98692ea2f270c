import { deviceSpec, roundToDevice } from '../core/device.js';
import type {
  DeviceName,
  EventContext,
  GradientPair,
  ModuleRef,
  OptimizerRef,
  StorageBatchSink,
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
import { MOD_STATES, type MemTrackerSnapshot, type ModState, type ModuleMemStats } from './mem-types.js';
import { RecentIdTable } from './id-table.js';
import {
  DeviceTally, ModuleRecord, POST_BW, POST_FW, PEAK_BW, PEAK_FW, PRE_BW, PRE_FW, TOTAL, copyInto, endCall,
  raiseLocalPeak, settleLocalPeaks, toSnapshot, type Snap,
} from './module-records.js';

const { PARAM, BUFFER, OPT } = Category;

/*
 * What the recorder knows of a storage: its device-rounded bytes and a tag,
 * device index × 8 + category, kept in a RecentIdTable by storage id. Every tensor
 * allocation and free goes through this table; typed-array columns cost no
 * allocation, where an object per storage would.
 */
const CATEGORY_SLOTS = 8;
const DEVICE_SLOTS = 32;
const tagOf = (device: number, category: number): number => device * CATEGORY_SLOTS + category;
const categoryOf = (tag: number): CategoryIndex => (tag & (CATEGORY_SLOTS - 1)) as CategoryIndex;
const deviceOf = (tag: number): number => tag >> 3;

/**
 * The event sink behind MemTracker: classifies every storage it sees into one
 * category, keeps per-device counters and peaks, and per-module snapshots.
 * Framework-free: it sees only the events of src/core/events.ts.
 *
 * Classification follows PyTorch's MemTracker: a storage made by a kernel is
 * Optstate inside an optimizer step, Temp in backward, Activation otherwise;
 * module weights, gradients of variables, optimizer state and external
 * tensors are then re-classified when the tracker learns what they are.
 */
export class MemRecorder implements StorageBatchSink {
  // A StorageBatchSink: categories come from phases, never from kernels (PyTorch's MemTracker
  // ignores operators too); storages are kept by id and variables' categories by tensor id, so no
  // TensorRef is kept.
  /** Storage id → (device-rounded bytes, tag); see `tagOf`. */
  private readonly storages = new RecentIdTable();
  private readonly devices = new Map<DeviceName, DeviceTally>();
  private readonly deviceList: DeviceTally[] = [];
  /** Each device's live counters, by device index: the current moment, as a Snap to log. */
  private readonly liveCounts: Snap = [];
  private lastDevice: DeviceTally | null = null;
  /** Category of each classified variable (by tensor id), so a weight keeps it across `assign`. */
  private readonly variableCategory = new Map<number, CategoryIndex>();
  private readonly records = new Map<ModuleRef, ModuleRecord>();
  // The arrays below are emptied in place, never replaced: V8 treats a field assigned only in the
  // constructor as a constant and embeds it in optimised code, including TFJS functions that
  // inlined this recorder's handlers; the first reassignment would make all of that code
  // deoptimise at once (resetModStats or stop() would then cost ~200 slow training steps).
  /** Modules whose forward is running, innermost last (PyTorch's ModTracker.parents in forward). */
  private readonly forwardActive: ModuleRecord[] = [];
  /** Modules whose backward has begun and not ended. */
  private readonly backwardActive: ModuleRecord[] = [];
  private gradientDepth = 0;
  private readonly optimizersSeen = new WeakSet<OptimizerRef>();
  /** Roots whose backward ended inside a gradient computation; their Post-Backward waits for its end. */
  private readonly pendingPostBackward: ModuleRecord[] = [];

  // ---- hot path -------------------------------------------------------------

  // Storages are known by id only (a StorageBatchSink): an allocation of a known id and a free of
  // an unknown one change nothing, as `insert` and `take` see to.

  onStorageAlloc(storage: StorageRef, ctx: EventContext): void {
    if (storage.movedFrom !== undefined) {
      // The same data on another device keeps its category (a weight stays Parameter after tf.setBackend).
      const slot = this.storages.find(storage.movedFrom);
      if (slot >= 0) {
        this.insert(storage.id, storage.bytes, tagOf(this.device(storage.device).index, categoryOf(this.storages.tagAt(slot))));
        return;
      }
    }
    this.insert(storage.id, storage.bytes, this.allocationTag(storage.device, ctx));
  }

  onStorageFree(storage: StorageRef): void {
    this.remove(storage.id);
  }

  /** A batch of allocations and frees, all in one phase on one device: handled in one loop. */
  onStorageBatch(batch: Float64Array, length: number, device: DeviceName, ctx: EventContext): void {
    const tag = this.allocationTag(device, ctx);
    for (let at = 0; at < length; at += 2) {
      const bytes = batch[at + 1]!;
      if (bytes >= 0) this.insert(batch[at]!, bytes, tag);
      else this.remove(batch[at]!);
    }
  }

  /** The tag of a storage allocated now on `device`: its category follows the phase. */
  private allocationTag(device: DeviceName, ctx: EventContext): number {
    return tagOf(this.device(device).index, categoryOfAllocation(ctx.phase));
  }

  private remove(id: number): void {
    const table = this.storages;
    const bytes = table.take(id);
    if (bytes >= 0) this.subtract(bytes, table.takenTag);
  }

  private subtract(bytes: number, tag: number): void {
    const counts = this.deviceList[deviceOf(tag)]!.counts;
    counts[categoryOf(tag)]! -= bytes;
    counts[TOTAL]! -= bytes;
  }

  private device(name: DeviceName): DeviceTally {
    const last = this.lastDevice;
    if (last !== null && last.name === name) return last;
    let dev = this.devices.get(name);
    if (dev === undefined) {
      if (this.deviceList.length === DEVICE_SLOTS) throw new Error(`memscope tracks at most ${DEVICE_SLOTS} devices`);
      dev = new DeviceTally(name, this.deviceList.length, deviceSpec(name));
      this.devices.set(name, dev);
      this.deviceList.push(dev);
      this.liveCounts.push(dev.counts);
    }
    this.lastDevice = dev;
    return dev;
  }

  /** Tracks a storage not tracked yet in `category`; returns its device-rounded bytes (-1 if it was tracked already). */
  private add(storage: StorageRef, category: CategoryIndex): number {
    return this.insert(storage.id, storage.bytes, tagOf(this.device(storage.device).index, category));
  }

  /** `add` by id, reported bytes and tag. */
  private insert(id: number, reportedBytes: number, tag: number): number {
    const dev = this.deviceList[deviceOf(tag)]!;
    const bytes = roundToDevice(reportedBytes, dev.spec);
    if (!this.storages.insert(id, bytes, tag)) return -1;
    if (bytes === 0) return 0;
    const counts = dev.counts;
    counts[categoryOf(tag)]! += bytes;
    const total = (counts[TOTAL]! += bytes);
    // Only an allocation can raise a total, so peaks are updated here and nowhere else.
    if (total > dev.peakTotal) {
      dev.peakTotal = total;
      if (dev.peak === null) dev.peak = counts.slice();
      else copyInto(dev.peak, counts);
    }
    // Only the innermost call of each kind is raised here; the calls around it learn its peak
    // when it ends (endCall), which saves copying the counters once per enclosing module on
    // nearly every allocation in forward.
    const forward = this.forwardActive;
    if (forward.length > 0) raiseLocalPeak(forward[forward.length - 1]!, dev, total);
    const backward = this.backwardActive;
    if (backward.length > 0) raiseLocalPeak(backward[backward.length - 1]!, dev, total);
    return bytes;
  }

  // ---- classification ---------------------------------------------------------

  /** Puts `storage` in `category`, tracking it first if it is new (PyTorch's `_update_and_maybe_create_winfos`). */
  classify(storage: StorageRef, category: CategoryIndex): number {
    const table = this.storages;
    const slot = table.find(storage.id);
    if (slot < 0) return this.add(storage, category);
    const bytes = table.bytesAt(slot);
    const tag = table.tagAt(slot);
    const old = categoryOf(tag);
    if (old !== category) {
      const device = deviceOf(tag);
      const counts = this.deviceList[device]!.counts;
      counts[old]! -= bytes;
      counts[category]! += bytes;
      table.setTagAt(slot, tagOf(device, category));
    }
    return bytes;
  }

  /** Classifies a variable's storage and remembers the variable's category for later `assign`s. */
  classifyVariable(tensor: TensorRef, category: CategoryIndex): number {
    if (tensor.variableName !== undefined) this.variableCategory.set(tensor.id, category);
    return this.classify(tensor.storage, category);
  }

  isTracked(storage: StorageRef): boolean {
    return this.storages.has(storage.id);
  }

  /** Forgets storages that died while no events arrived (between a stop and the next start). */
  dropStoragesNotIn(live: ReadonlySet<number>): void {
    const dead: number[] = [];
    this.storages.forEach((bytes, tag, id) => {
      if (live.has(id)) return;
      dead.push(id);
      this.subtract(bytes, tag);
    });
    for (const id of dead) this.storages.delete(id);
  }

  /** Parameters and buffers of `module` and its descendants; returns their bytes (each storage once). */
  trackModuleWeights(module: ModuleRef): { parameterMem: number; bufferMem: number } {
    const seen = new Set<number>();
    let parameterMem = 0;
    let bufferMem = 0;
    const visit = (m: ModuleRef): void => {
      for (const p of m.parameters()) {
        const bytes = this.classifyVariable(p, PARAM);
        if (!seen.has(p.storage.id)) {
          seen.add(p.storage.id);
          parameterMem += bytes;
        }
      }
      for (const b of m.buffers()) {
        const bytes = this.classifyVariable(b, BUFFER);
        if (!seen.has(b.storage.id)) {
          seen.add(b.storage.id);
          bufferMem += bytes;
        }
      }
      for (const child of m.children) visit(child);
    };
    visit(module);
    return { parameterMem, bufferMem };
  }

  trackOptimizerState(optimizer: OptimizerRef): void {
    for (const v of optimizer.stateVariables()) this.classifyVariable(v, OPT);
  }

  /** Bytes of the tracked storages behind `tensors`, each storage counted once. */
  private trackedBytes(tensors: readonly TensorRef[]): number {
    let bytes = 0;
    const seen = tensors.length > 1 ? new Set<number>() : null;
    for (const t of tensors) {
      const id = t.storage.id;
      if (seen !== null) {
        if (seen.has(id)) continue;
        seen.add(id);
      }
      const slot = this.storages.find(id);
      if (slot >= 0) bytes += this.storages.bytesAt(slot);
    }
    return bytes;
  }

  // ---- modules ------------------------------------------------------------------

  private record(module: ModuleRef): ModuleRecord {
    let rec = this.records.get(module);
    if (rec === undefined) {
      rec = new ModuleRecord(module);
      this.records.set(module, rec);
    }
    return rec;
  }

  private updateWeights(rec: ModuleRecord): void {
    const { parameterMem, bufferMem } = this.trackModuleWeights(rec.module);
    rec.parameterMem = parameterMem;
    rec.bufferMem = bufferMem;
  }

  /** Starts a call's Peak snapshot and local peaks at the current counters (PyTorch's pre-hooks). */
  private beginCall(rec: ModuleRecord, pre: number, peak: number): void {
    // The same module called again inside its own call (or its backward inside its forward): the
    // outer call's Peak snapshot stays as it is now, and the new call's starts afresh (PyTorch
    // appends a new Peak snapshot and raises only the latest).
    rec.closePeak();
    const devices = this.deviceList;
    const localPeak = rec.localPeak;
    const snap = rec.peakSnap;
    localPeak.length = 0;
    snap.length = devices.length;
    for (let i = 0; i < devices.length; i++) {
      const counts = devices[i]!.counts;
      if (counts[TOTAL]! > 0) {
        localPeak[i] = counts[TOTAL]!;
        const held = snap[i];
        if (held !== undefined) copyInto(held, counts);
        else snap[i] = counts.slice();
      } else snap[i] = undefined;
    }
    rec.openPeak = peak;
    rec.log(pre).append(this.liveCounts);
  }

  onModuleEnter(module: ModuleRef, inputs: readonly TensorRef[]): void {
    this.flushPendingPostBackward();
    const firstCall = !this.records.has(module);
    const rec = this.record(module);
    // Weights are classified once per module, as PyTorch does on a module's first
    // pre-forward; later `assign`s keep their category (onVariableAssign).
    if (firstCall) this.updateWeights(rec);
    rec.inputMem = this.trackedBytes(inputs);
    this.beginCall(rec, PRE_FW, PEAK_FW);
    this.forwardActive.push(rec);
  }

  onModuleExit(module: ModuleRef, outputs: readonly TensorRef[]): void {
    const rec = this.record(module);
    // Weights are built lazily by the first call, inside forward: classify them again after it.
    if (rec.logs[POST_FW] === undefined) this.updateWeights(rec);
    rec.outputMem = this.trackedBytes(outputs);
    rec.log(POST_FW).append(this.liveCounts);
    this.finishCall(this.forwardActive, rec);
  }

  onBackwardModuleEnter(module: ModuleRef): void {
    const rec = this.record(module);
    this.beginCall(rec, PRE_BW, PEAK_BW);
    this.backwardActive.push(rec);
  }

  onBackwardModuleExit(module: ModuleRef): void {
    const rec = this.record(module);
    this.finishCall(this.backwardActive, rec);
    // TFJS knows a variable's final (accumulated) gradient only when the gradient
    // computation returns, so a root's Post-Backward is taken then, after the
    // returned gradients are classified, as PyTorch's is after its grad hooks ran.
    if (module.parent === null && this.gradientDepth > 0) this.pendingPostBackward.push(rec);
    else rec.log(POST_BW).append(this.liveCounts);
  }

  /**
   * Ends a forward or backward call of `rec`. Its Peak snapshot is final once no call of the
   * module runs any more: a module called inside its own call keeps raising the snapshot the inner
   * call began, as PyTorch's MemTracker raises a running module's latest Peak snapshot.
   */
  private finishCall(active: ModuleRecord[], rec: ModuleRecord): void {
    endCall(active, rec);
    if (!this.forwardActive.includes(rec) && !this.backwardActive.includes(rec)) rec.closePeak();
  }

  private flushPendingPostBackward(): void {
    if (this.pendingPostBackward.length === 0) return;
    for (const rec of this.pendingPostBackward) rec.log(POST_BW).append(this.liveCounts);
    this.pendingPostBackward.length = 0;
  }

  // ---- gradients, optimizer, variables --------------------------------------------

  onGradientStart(): void {
    this.gradientDepth++;
  }

  onGradientEnd(pairs: readonly GradientPair[]): void {
    for (const { x, grad } of pairs) {
      const category = grad !== null ? categoryOfGradient(x) : null;
      if (category !== null) this.classify(grad!.storage, category);
    }
    if (this.gradientDepth > 0) this.gradientDepth--;
    if (this.gradientDepth === 0) this.flushPendingPostBackward();
  }

  onOptimizerStepStart(): void {
    this.flushPendingPostBackward();
  }

  onOptimizerStepEnd(optimizer: OptimizerRef): void {
    // PyTorch re-reads the state after every step. Once an optimizer's state has been
    // read, later state is caught without the walk: what a step allocates is Optstate by
    // phase, and a state variable's new storage after assign keeps its category.
    if (this.optimizersSeen.has(optimizer)) return;
    this.optimizersSeen.add(optimizer);
    this.trackOptimizerState(optimizer);
  }

  onVariableAssign(variable: TensorRef, previous: StorageRef): void {
    const slot = this.storages.find(previous.id);
    const remembered = this.variableCategory.get(variable.id);
    if (slot < 0 && remembered === undefined) {
      // A variable this tracker never counted (made before start() and not given to
      // trackExternal, as PyTorch leaves such a tensor): PyTorch would update it in place, so its
      // new storage is not counted either — not as optimizer state for being made in a step.
      if (variable.storage.id !== previous.id) this.remove(variable.storage.id);
      return;
    }
    const category = categoryAfterAssign(remembered, slot >= 0 ? categoryOf(this.storages.tagAt(slot)) : undefined);
    if (category !== undefined) this.classify(variable.storage, category);
    // The old storage outlives the assign only while other tensors still hold it.
    if (slot >= 0 && this.storages.find(previous.id) >= 0 && previous.id !== variable.storage.id) {
      const replaced = categoryOfReplacedStorage(categoryOf(this.storages.tagAt(this.storages.find(previous.id))));
      if (replaced !== null) this.classify(previous, replaced);
    }
  }

  // ---- reading --------------------------------------------------------------------

  private takeSnap(): Snap {
    const snap: Snap = [];
    const devices = this.deviceList;
    for (let i = 0; i < devices.length; i++) {
      const counts = devices[i]!.counts;
      if (counts[TOTAL]! > 0) snap[i] = counts.slice();
    }
    return snap;
  }

  currentSnapshot(): MemTrackerSnapshot {
    return toSnapshot(this.takeSnap(), this.deviceList);
  }

  peakSnapshot(): MemTrackerSnapshot {
    const snap: Snap = [];
    for (const dev of this.deviceList) if (dev.peak !== null && dev.peakTotal > 0) snap[dev.index] = dev.peak;
    return toSnapshot(snap, this.deviceList);
  }

  /** PyTorch resets the peak to the current snapshot whenever the tracker is entered. */
  resetPeak(): void {
    for (const dev of this.devices.values()) {
      dev.peakTotal = dev.counts[TOTAL]!;
      dev.peak = dev.counts.slice();
    }
  }

  /** Ends calls left open (a user exception in forward or backward) so no module keeps collecting peaks. */
  closeOpenCalls(): void {
    this.flushPendingPostBackward();
    settleLocalPeaks(this.forwardActive);
    settleLocalPeaks(this.backwardActive);
    this.forwardActive.length = 0;
    this.backwardActive.length = 0;
    this.gradientDepth = 0;
  }

  resetModStats(): void {
    this.records.clear();
    this.forwardActive.length = 0;
    this.backwardActive.length = 0;
    this.pendingPostBackward.length = 0;
  }

  moduleStats(): ModuleMemStats[] {
    // Read in the middle of a call (a display inside a layer), the enclosing calls have not yet
    // learnt the peaks of the calls inside them.
    settleLocalPeaks(this.forwardActive);
    settleLocalPeaks(this.backwardActive);
    const out: ModuleMemStats[] = [];
    for (const rec of this.records.values()) {
      const snapshots: Partial<Record<ModState, MemTrackerSnapshot[]>> = {};
      for (let state = 0; state < MOD_STATES.length; state++) {
        const list = rec.logs[state]?.toSnapshots(this.deviceList) ?? [];
        // A call still running: its Peak snapshot so far.
        if (rec.openPeak === state) list.push(toSnapshot(rec.peakSnap, this.deviceList));
        if (list.length > 0) snapshots[MOD_STATES[state]!] = list;
      }
      const localPeak: Record<DeviceName, number> = {};
      rec.localPeak.forEach((bytes, i) => {
        if (bytes !== undefined) localPeak[this.deviceList[i]!.name] = bytes;
      });
      out.push({
        modFqn: rec.fqn,
        className: rec.module.className,
        depth: rec.depth,
        parameterMem: rec.parameterMem,
        bufferMem: rec.bufferMem,
        inputMem: rec.inputMem,
        outputMem: rec.outputMem,
        localPeak,
        snapshots,
      });
    }
    return out;
  }
}

