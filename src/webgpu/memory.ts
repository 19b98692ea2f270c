/**
 * torch.cuda.memory for WebGPU: PyTorch's device memory functions (camelCase) over what
 * `WebGPURecorder` records, per device `webgpu:N`, and snapshots in PyTorch's schema.
 *
 * The mapping: every live buffer, texture and query set is reserved memory (a segment);
 * allocated memory is the part the program holds, which is all of it unless a framework marks a
 * resource as idle in its pool (`markPooled`). There is no splitting, rounding, small pool,
 * stream or retry in WebGPU, so the statistics for those are 0 (see docs/WEBGPU.md).
 */
import { MemscopeError } from '../core/errors.js';
import { encodeSnapshotPickle, type SnapshotDict, type SnapshotSegment } from '../allocator/snapshot.js';
import { nestedStats, type NestedMemoryStats } from '../allocator/stats.js';
import { renderMemorySummary } from '../torch/memory-summary.js';
import type { ResourceKind, ResourceRecord } from './device-record.js';
import { WebGPURecorder, type InstallOptions } from './recorder.js';

/** A device: its index, 'webgpu:N', 'webgpu' (device 0) or a tracked GPUDevice. */
export type WebGPUDeviceArg = number | string | object | undefined;

export interface RecordMemoryHistoryOptions {
  /** 'all' (default): live blocks' stacks and the trace of events; 'state': stacks only; null/false: off. */
  enabled?: 'state' | 'all' | null | false;
  /** Most trace entries kept per device (the oldest go first); default unlimited. */
  maxEntries?: number;
  /** 'js' or 'all' (the same: there is no native layer under the page's JavaScript) capture creating stacks; 'none' does not. */
  stacks?: 'js' | 'all' | 'python' | 'none';
}

/** One row of `devices()`. */
export interface WebGPUDeviceListing {
  device: string;
  index: number;
  label: string;
  allocatedBytes: number;
  reservedBytes: number;
  resources: number;
}

/** Bytes held and reserved by one group (a category, framework or kind). */
export interface GroupFigures {
  allocated: number;
  reserved: number;
  count: number;
}

/** Live figures of one device, for a panel: totals, peaks and the breakdowns. */
export interface WebGPUFigures {
  device: string;
  allocated: number;
  reserved: number;
  peakAllocated: number;
  peakReserved: number;
  byKind: Record<ResourceKind, GroupFigures>;
  /** By attribution category ('Unattributed' when none). */
  byCategory: Record<string, GroupFigures>;
  /** By framework ('Unattributed' when none). */
  byFramework: Record<string, GroupFigures>;
  /** Resources never destroyed, reclaimed only by garbage collection since install. */
  gcReclaimed: { count: number; bytes: number };
}

export const UNATTRIBUTED = 'Unattributed';

export class WebGPUMemory extends WebGPURecorder {
  constructor(options: InstallOptions = {}) {
    super(options);
  }

  /** Every tracked device, in the order it was tracked. */
  devices(): WebGPUDeviceListing[] {
    return this.deviceList.map((d) => ({
      device: d.name,
      index: d.index,
      label: d.label,
      allocatedBytes: d.stats.allocated_bytes[0].current,
      reservedBytes: d.stats.reserved_bytes[0].current,
      resources: d.live.size,
    }));
  }

  get deviceCount(): number {
    return this.deviceList.length;
  }

  memoryStats(device?: WebGPUDeviceArg): Record<string, number> {
    return this.deviceRecord(device).memoryStats();
  }

  memoryStatsAsNestedDict(device?: WebGPUDeviceArg): NestedMemoryStats {
    return nestedStats(this.deviceRecord(device).stats, Infinity);
  }

  memoryAllocated(device?: WebGPUDeviceArg): number {
    return this.deviceRecord(device).stats.allocated_bytes[0].current;
  }

  maxMemoryAllocated(device?: WebGPUDeviceArg): number {
    return this.deviceRecord(device).stats.allocated_bytes[0].peak;
  }

  memoryReserved(device?: WebGPUDeviceArg): number {
    return this.deviceRecord(device).stats.reserved_bytes[0].current;
  }

  maxMemoryReserved(device?: WebGPUDeviceArg): number {
    return this.deviceRecord(device).stats.reserved_bytes[0].peak;
  }

  resetPeakMemoryStats(device?: WebGPUDeviceArg): void {
    this.deviceRecord(device).stats.resetPeak();
  }

  resetAccumulatedMemoryStats(device?: WebGPUDeviceArg): void {
    this.deviceRecord(device).stats.resetAccumulated();
  }

  /** torch.cuda.memory_summary's table for one device. */
  memorySummary(device?: WebGPUDeviceArg, abbreviated = false): string {
    const d = this.deviceRecord(device);
    return renderMemorySummary(d.memoryStats(), d.index, abbreviated, 'WebGPU');
  }

  /** The live resources of a device, oldest first. */
  resources(device?: WebGPUDeviceArg): Readonly<ResourceRecord>[] {
    return [...this.deviceRecord(device).live.values()];
  }

  /**
   * The WebGPU leak: resources the page dropped without destroy(), reclaimed only when the
   * garbage collector got to them (their memory stayed on the GPU until then). The latest 1000
   * with their details; `figures().gcReclaimed` counts all.
   */
  gcReclaimed(device?: WebGPUDeviceArg): Readonly<ResourceRecord>[] {
    return [...this.deviceRecord(device).gcReclaimed];
  }

  figures(device?: WebGPUDeviceArg): WebGPUFigures {
    const d = this.deviceRecord(device);
    const group = (): GroupFigures => ({ allocated: 0, reserved: 0, count: 0 });
    const byKind: Record<ResourceKind, GroupFigures> = { buffer: group(), texture: group(), querySet: group() };
    const byCategory: Record<string, GroupFigures> = {};
    const byFramework: Record<string, GroupFigures> = {};
    const add = (g: GroupFigures, r: ResourceRecord): void => {
      g.reserved += r.bytes;
      if (r.inUse) g.allocated += r.bytes;
      g.count++;
    };
    for (const r of d.live.values()) {
      add(byKind[r.kind], r);
      add((byCategory[r.attribution.category ?? UNATTRIBUTED] ??= group()), r);
      add((byFramework[r.attribution.framework ?? UNATTRIBUTED] ??= group()), r);
    }
    const s = d.stats;
    return {
      device: d.name,
      allocated: s.allocated_bytes[0].current,
      reserved: s.reserved_bytes[0].current,
      peakAllocated: s.allocated_bytes[0].peak,
      peakReserved: s.reserved_bytes[0].peak,
      byKind,
      byCategory,
      byFramework,
      gcReclaimed: { count: d.gcReclaimedCount, bytes: d.gcReclaimedBytes },
    };
  }

  /**
   * torch.cuda.memory._record_memory_history for every WebGPU device: from now on keep a trace
   * of creates, pool moves and frees (enabled 'all'), of at most maxEntries per device.
   */
  recordMemoryHistory(options: RecordMemoryHistoryOptions = {}): void {
    const enabled = options.enabled === undefined ? 'all' : options.enabled === false ? null : options.enabled;
    if (enabled !== null && enabled !== 'state' && enabled !== 'all') {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: enabled must be 'all', 'state' or null, got ${JSON.stringify(options.enabled)}`);
    }
    const maxEntries = options.maxEntries ?? Number.MAX_SAFE_INTEGER;
    if (!(Number.isSafeInteger(maxEntries) && maxEntries >= 0)) {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: maxEntries must be a non-negative integer, got ${String(options.maxEntries)}`);
    }
    const stacks = options.stacks ?? 'js';
    if (!['js', 'all', 'python', 'none'].includes(stacks)) {
      throw new MemscopeError('bad-argument', `recordMemoryHistory: stacks must be 'js', 'all' or 'none', got ${JSON.stringify(stacks)}`);
    }
    const ringChanged = enabled !== 'all' || this.history.enabled !== 'all' || this.history.maxEntries !== maxEntries;
    this.history.enabled = enabled;
    this.history.maxEntries = enabled === 'all' ? maxEntries : 0;
    this.history.stacks = stacks !== 'none';
    if (ringChanged) for (const d of this.deviceList) d.clearTrace();
  }

  /** torch.cuda.memory._snapshot(): every device's segments, their traces and the step/marker annotations. */
  snapshot(): SnapshotDict {
    const segments: SnapshotSegment[] = [];
    for (const d of this.deviceList) segments.push(...d.segments());
    return {
      segments,
      device_traces: this.deviceList.map((d) => d.traceEntries()),
      // No allocator_settings: those are PyTorch's CUDA caching allocator's, which WebGPU has none of.
      external_annotations: [...this.annotations],
      device_type: 'webgpu',
    };
  }

  /** torch.cuda.memory_snapshot(): the segments only. */
  memorySnapshot(): SnapshotSegment[] {
    return this.snapshot().segments;
  }

  /** torch.cuda.memory._dump_snapshot as bytes: the pickle `memscope summary` and pytorch.org/memory_viz read. */
  dumpSnapshot(): Uint8Array {
    return encodeSnapshotPickle(this.snapshot());
  }

  /** In a page: saves dumpSnapshot() as a file through the browser's download. */
  downloadSnapshot(filename = 'webgpu_snapshot.pickle'): void {
    const doc = (globalThis as { document?: Document }).document;
    if (!doc || typeof URL.createObjectURL !== 'function') throw new MemscopeError('unsupported', 'downloadSnapshot needs a page (document and URL.createObjectURL)');
    const bytes = this.dumpSnapshot();
    const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type: 'application/octet-stream' }));
    const a = doc.createElement('a');
    a.href = url;
    a.download = filename;
    doc.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }
}

