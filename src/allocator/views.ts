import type { FlameStack } from '../render/flamegraph-svg.js';
import { formatFrame, isInformativeFrame } from '../torch/snapshot-analysis.js';
import { pushBlockStacks, renderMemoryVizFlameGraph, segmentPrefix, type SnapshotFlameKind } from '../torch/snapshot-flamegraph.js';
import type { Frame } from '../torch/pytorch-vocabulary.js';
import type { SnapshotDict } from './snapshot.js';

/**
 * torch.cuda.memory._save_segment_usage / _save_memory_usage: the model's
 * snapshot drawn as the flame graphs of `memscope segments` / `memscope
 * memory` (torch/snapshot-flamegraph.ts, `_memory_viz.py segments` and
 * `memory`): the same stacks, weights, labels and drawing, walked over the
 * model's plain snapshot objects.
 */

/** Informative frames, outermost first, labelled as `_memory_viz` labels them. */
function rootFirstLabels(frames: readonly Frame[]): string[] {
  return frames
    .filter(isInformativeFrame)
    .map((f) => formatFrame(f))
    .reverse();
}

function renderUsage(snapshot: SnapshotDict, kind: SnapshotFlameKind): string {
  const stacks: FlameStack[] = [];
  const multiDevice = new Set(snapshot.segments.map((s) => s.device)).size > 1;
  let reserved = 0;
  let allocated = 0;
  snapshot.segments.forEach((seg, index) => {
    reserved += seg.total_size;
    const place = { index, device: seg.device, address: seg.address, totalSize: seg.total_size, stream: seg.stream, segmentType: seg.segment_type };
    const prefix = segmentPrefix(place, kind === 'segments', multiDevice);
    for (const b of seg.blocks) {
      if (b.state === 'active_allocated') allocated += b.size;
      pushBlockStacks(stacks, prefix, b.state, b.size, b.requested_size, rootFirstLabels, b.frames);
    }
  });
  return renderMemoryVizFlameGraph(stacks, kind, { reserved, segments: snapshot.segments.length, allocated });
}

/** Segments with their blocks (`_save_segment_usage`). */
export function renderSegmentUsage(snapshot: SnapshotDict): string {
  return renderUsage(snapshot, 'segments');
}

/** Reserved memory by allocating stack (`_save_memory_usage`). */
export function renderMemoryUsage(snapshot: SnapshotDict): string {
  return renderUsage(snapshot, 'memory');
}
