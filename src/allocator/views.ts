import { writePickle } from '../torch/pickle/writer.js';
import { readSnapshot, type MemorySnapshot as SnapshotFile } from '../torch/snapshot.js';
import { renderSnapshotFlameGraph } from '../torch/snapshot-flamegraph.js';
import { toPickleShape, type MemorySnapshot } from './snapshot.js';

/**
 * torch.cuda.memory._save_segment_usage / _save_memory_usage: the model's
 * snapshot, pickled as PyTorch pickles it and read back as any snapshot file
 * is, drawn by the same flame graphs as `memscope segments` / `memscope memory`
 * (torch/snapshot-flamegraph.ts, `_memory_viz.py segments` and `memory`).
 */

function readBack(snapshot: MemorySnapshot): SnapshotFile {
  return readSnapshot(writePickle(toPickleShape(snapshot)));
}

/** Segments with their blocks (`_save_segment_usage`). */
export function renderSegmentUsage(snapshot: MemorySnapshot): string {
  return renderSnapshotFlameGraph(readBack(snapshot), 'segments');
}

/** Reserved memory by allocating stack (`_save_memory_usage`). */
export function renderMemoryUsage(snapshot: MemorySnapshot): string {
  return renderSnapshotFlameGraph(readBack(snapshot), 'memory');
}
