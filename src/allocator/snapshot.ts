/**
 * PyTorch's memory snapshot schema (the dict torch.cuda.memory._snapshot() returns), as plain
 * objects: what the allocator model writes and pickles. memscope's reader turns such a file into
 * the columnar `MemorySnapshot` of src/torch/snapshot.ts.
 */
import { makeTuple } from '../torch/pickle/reader.js';
import { pyFloat, writePickle } from '../torch/pickle/writer.js';
import type { BlockState, Frame } from '../torch/pytorch-vocabulary.js';
import type { CachingAllocatorModel, TraceEntry } from './caching-allocator.js';
import { DEFAULT_SETTINGS, toSnapshotSettings, type SnapshotAllocatorSettings } from './settings.js';

export interface SnapshotBlock {
  address: number;
  size: number;
  requested_size: number;
  state: BlockState;
  frames: Frame[];
}

export interface SnapshotSegment {
  device: number;
  address: number;
  total_size: number;
  allocated_size: number;
  active_size: number;
  requested_size: number;
  stream: number;
  segment_type: 'large' | 'small';
  segment_pool_id: [number, number];
  is_expandable: boolean;
  frames: Frame[];
  blocks: SnapshotBlock[];
}

/** The whole `_snapshot()` dict. */
export interface SnapshotDict {
  segments: SnapshotSegment[];
  device_traces: TraceEntry[][];
  /** The caching allocator's settings; absent for a device that has no such allocator (WebGPU). */
  allocator_settings?: SnapshotAllocatorSettings;
  external_annotations: unknown[];
  /** memscope/webgpu's 'webgpu' (src/torch/device-type.ts); absent in CUDA snapshots, as in PyTorch's. */
  device_type?: string;
}

export function snapshotSegments(model: CachingAllocatorModel): SnapshotSegment[] {
  return model.segments().map(({ head, blocks, isExpandable }) => {
    const seg: SnapshotSegment = {
      device: model.device,
      address: head.address,
      total_size: 0,
      allocated_size: 0,
      active_size: 0,
      requested_size: 0,
      stream: head.stream,
      segment_type: head.pool.isSmall ? 'small' : 'large',
      segment_pool_id: [0, 0],
      is_expandable: isExpandable,
      frames: head.segmentFrames ?? [],
      blocks: [],
    };
    for (const b of blocks) {
      const state: BlockState = b.allocated ? 'active_allocated' : b.pendingFree ? 'active_pending_free' : 'inactive';
      seg.total_size += b.size;
      if (b.allocated) seg.allocated_size += b.size;
      if (state !== 'inactive') {
        seg.active_size += b.size;
        seg.requested_size += b.requestedSize;
      }
      seg.blocks.push({ address: b.address, size: b.size, requested_size: b.requestedSize, state, frames: b.frames ?? [] });
    }
    return seg;
  });
}

/** A full snapshot of several device allocators (device_traces indexed by device). */
export function buildSnapshot(models: readonly CachingAllocatorModel[]): SnapshotDict {
  const segments: SnapshotSegment[] = [];
  const maxDevice = models.reduce((m, a) => Math.max(m, a.device), -1);
  const traces: TraceEntry[][] = Array.from({ length: maxDevice + 1 }, () => []);
  for (const model of models) {
    // As PyTorch: the trace is copied first, then taking the snapshot records a
    // 'snapshot' entry (size = active bytes) that shows in the next snapshot.
    traces[model.device] = model.traceEntries();
    const segs = snapshotSegments(model);
    segments.push(...segs);
    model.recordSnapshotTaken(segs.reduce((n, s) => n + s.active_size, 0));
  }
  return {
    segments,
    device_traces: traces,
    allocator_settings: toSnapshotSettings(models[0]?.settings ?? DEFAULT_SETTINGS),
    external_annotations: [],
  };
}

/**
 * A snapshot as the protocol-4 pickle `_dump_snapshot` writes (what pytorch.org/memory_viz and
 * memscope read), with Python's types where PyTorch has them: segment_pool_id a tuple, the GC
 * threshold a float.
 */
export function encodeSnapshotPickle(s: SnapshotDict): Uint8Array {
  return writePickle({
    segments: s.segments.map((seg) => ({ ...seg, segment_pool_id: makeTuple([...seg.segment_pool_id]) })),
    device_traces: s.device_traces,
    ...(s.allocator_settings === undefined
      ? {}
      : { allocator_settings: { ...s.allocator_settings, garbage_collection_threshold: pyFloat(s.allocator_settings.garbage_collection_threshold) } }),
    external_annotations: s.external_annotations,
    ...(s.device_type === undefined ? {} : { device_type: s.device_type }),
  });
}
