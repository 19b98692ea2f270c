/**
 * What MemRecorder keeps per device and per module: a device's live counters and peak, each
 * module's snapshots by state (packed in SnapLogs), and the local peaks of running calls, which
 * fold into the calls around them as PyTorch's MemTracker raises every active module's peak.
 */
import type { DeviceName, ModuleRef } from '../core/events.js';
import type { DeviceSpec } from '../core/device.js';
import { MEM_REF_TYPES } from '../core/mem-categories.js';
import { TOTAL_KEY, type DeviceSnapshot, type MemTrackerSnapshot } from './mem-types.js';

// A device's counters: one per category (CategoryIndex), then the total.
export const TOTAL = 7;

/** One device's live bytes per category and its peak (the counters at the highest total). */
export class DeviceTally {
  readonly counts: number[] = [0, 0, 0, 0, 0, 0, 0, 0];
  peakTotal = 0;
  peak: number[] | null = null;
  constructor(
    readonly name: DeviceName,
    readonly index: number,
    /** PyTorch rounds every CUDA storage up to 512 B; memscope rounds to the device's granularity. */
    readonly spec: DeviceSpec,
  ) {}
}

/**
 * Counters of every device with bytes, copied at one moment, by device index
 * (a hole where the device held nothing).
 */
export type Snap = (number[] | undefined)[];

// Module states as indices into MOD_STATES.
export const PRE_FW = 0;
export const PEAK_FW = 1;
export const POST_FW = 2;
export const PRE_BW = 3;
export const PEAK_BW = 4;
export const POST_BW = 5;

/** Numbers per device in a SnapLog entry: the device index, then its counters. */
const LOG_STRIDE = 1 + TOTAL + 1;

/**
 * One module state's snapshots, packed: each entry is the devices that held bytes at that moment,
 * as (device index, counters) runs in one growing Float64Array. Modules take six snapshots per
 * training step and keep them all (as PyTorch's MemTracker does); as arrays per snapshot they would
 * be ~12 small objects per module per step, each promoted to the old generation and traced by every
 * major GC until resetModStats. Entries become objects only when read.
 */
export class SnapLog {
  private data = new Float64Array(LOG_STRIDE * 8);
  private used = 0;
  /** End offset of each entry in `data`. */
  private readonly ends: number[] = [];

  private reserve(numbers: number): Float64Array {
    if (this.used + numbers > this.data.length) {
      const grown = new Float64Array(Math.max(this.data.length * 2, this.used + numbers));
      grown.set(this.data.subarray(0, this.used));
      this.data = grown;
    }
    return this.data;
  }

  /** Appends one entry: the counters of every device (by index) that holds bytes in `snap`. */
  append(snap: Snap): void {
    const data = this.reserve(snap.length * LOG_STRIDE);
    let at = this.used;
    for (let i = 0; i < snap.length; i++) {
      const counts = snap[i];
      if (counts === undefined || !(counts[TOTAL]! > 0)) continue;
      data[at++] = i;
      for (let k = 0; k <= TOTAL; k++) data[at++] = counts[k]!;
    }
    this.used = at;
    this.ends.push(at);
  }

  toSnapshots(devices: readonly DeviceTally[]): MemTrackerSnapshot[] {
    const out: MemTrackerSnapshot[] = [];
    const data = this.data;
    let at = 0;
    for (const end of this.ends) {
      const snapshot: MemTrackerSnapshot = {};
      for (; at < end; at += LOG_STRIDE) snapshot[devices[data[at]!]!.name] = toDeviceSnapshot(data.subarray(at + 1, at + LOG_STRIDE));
      out.push(snapshot);
    }
    return out;
  }
}

export class ModuleRecord {
  readonly fqn: string;
  readonly depth: number;
  parameterMem = 0;
  bufferMem = 0;
  inputMem = 0;
  outputMem = 0;
  /** Highest total of the running call, by device index (0 where the call has seen none). */
  readonly localPeak: number[] = [];
  /** Snapshots by state index (PRE_FW…POST_BW); undefined until the state's first snapshot. */
  readonly logs: (SnapLog | undefined)[] = [undefined, undefined, undefined, undefined, undefined, undefined];
  /**
   * The Peak-Forward / Peak-Backward snapshot of the call running now, raised in place on new
   * local peaks; its arrays are reused from call to call. It joins its log when the call ends.
   */
  readonly peakSnap: Snap = [];
  /**
   * The state index `peakSnap` belongs to until it joins its log, else -1. A call abandoned by an
   * exception (closeOpenCalls) leaves it set: nothing raises the snapshot any more, reads include
   * it as they do a running call's, and the module's next call puts it in the log.
   */
  openPeak = -1;
  constructor(readonly module: ModuleRef) {
    this.fqn = module.path;
    let depth = 1;
    for (let p = module.parent; p; p = p.parent) depth++;
    this.depth = depth;
  }
  log(state: number): SnapLog {
    return (this.logs[state] ??= new SnapLog());
  }
  /** Puts the running call's Peak snapshot in its log: it changes no more. */
  closePeak(): void {
    if (this.openPeak < 0) return;
    this.log(this.openPeak).append(this.peakSnap);
    this.openPeak = -1;
  }
}

export function copyInto(target: number[], source: readonly number[]): void {
  for (let i = 0; i <= TOTAL; i++) target[i] = source[i]!;
}

function toDeviceSnapshot(counts: ArrayLike<number>): DeviceSnapshot {
  const out = {} as DeviceSnapshot;
  for (let i = 0; i < MEM_REF_TYPES.length; i++) out[MEM_REF_TYPES[i]!] = counts[i]!;
  out[TOTAL_KEY] = counts[TOTAL]!;
  return out;
}

export function toSnapshot(snap: Snap, devices: readonly DeviceTally[]): MemTrackerSnapshot {
  const out: MemTrackerSnapshot = {};
  for (let i = 0; i < snap.length; i++) {
    const counts = snap[i];
    if (counts !== undefined) out[devices[i]!.name] = toDeviceSnapshot(counts);
  }
  return out;
}

/** Raises a running call's local peak on `dev` to `total`, keeping the counters of that moment. */
export function raiseLocalPeak(rec: ModuleRecord, dev: DeviceTally, total: number): void {
  if ((rec.localPeak[dev.index] ?? 0) < total) setLocalPeak(rec, dev.index, total, dev.counts);
}

function setLocalPeak(rec: ModuleRecord, device: number, total: number, counts: readonly number[]): void {
  rec.localPeak[device] = total;
  // Peaks rise on most allocations in forward: overwrite in place rather than allocate.
  const held = rec.peakSnap[device];
  if (held !== undefined) copyInto(held, counts);
  else rec.peakSnap[device] = counts.slice();
}

/**
 * Folds a call's local peaks into the call around it. Only a strictly higher peak moves: on equal
 * totals the outer call keeps its own moment, which is the earlier one (its own peaks and those it
 * learnt are all from before the inner call began, or from the inner call itself), as when every
 * active call was raised on every allocation.
 */
function mergeLocalPeaks(inner: ModuleRecord, outer: ModuleRecord): void {
  const peaks = inner.localPeak;
  for (let i = 0; i < peaks.length; i++) {
    const bytes = peaks[i];
    const counts = inner.peakSnap[i];
    if (bytes !== undefined && counts !== undefined && bytes > (outer.localPeak[i] ?? 0)) setLocalPeak(outer, i, bytes, counts);
  }
}

/** Makes the local peaks of the active calls from index `outermost` on include those of the calls inside them (all stay active). */
export function settleLocalPeaks(active: readonly ModuleRecord[], outermost = 0): void {
  for (let k = active.length - 1; k > outermost; k--) mergeLocalPeaks(active[k]!, active[k - 1]!);
}

/**
 * Ends `rec`'s call: its caller learns its peaks, and it leaves the active list. Calls are ended
 * innermost first; should one end early, the calls still open inside it are folded into it first,
 * and they stay active under its caller.
 */
export function endCall(active: ModuleRecord[], rec: ModuleRecord): void {
  const i = active.lastIndexOf(rec);
  if (i < 0) return;
  settleLocalPeaks(active, i);
  if (i > 0) mergeLocalPeaks(rec, active[i - 1]!);
  active.splice(i, 1);
}
