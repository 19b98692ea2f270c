import { humanBytes } from '../core/units.js';
import { renderFlameGraph, type FlameStack } from '../report/flamegraph-svg.js';
import type { Frame } from '../torch/pytorch-vocabulary.js';
import type { SnapshotDict, SnapshotBlock } from './snapshot.js';

/**
 * The two SVG views of torch.cuda.memory._save_segment_usage /
 * _save_memory_usage (torch/cuda/_memory_viz.py `segments` and `memory`),
 * drawn with memscope's flame-graph renderer: the same stacks PyTorch feeds
 * flamegraph.pl — stream → segment → block state → allocating frames for the
 * segment view; stream → state → allocating frames for the memory view — with
 * the same weights (requested bytes, plus a `<gap>` frame for rounding).
 */

function frameLabel(f: Frame): string {
  return `${f.name} (${f.filename}:${f.line})`;
}

/** Allocating frames outermost first, or `<non-python>` as PyTorch writes when there are none. */
function framesFragment(frames: readonly Frame[]): string[] {
  if (frames.length === 0) return ['<non-python>'];
  return [...frames].reverse().map(frameLabel);
}

function blockStacks(prefix: readonly string[], blocks: readonly SnapshotBlock[], out: FlameStack[]): void {
  for (const b of blocks) {
    const accounted = b.state === 'inactive' ? b.size : Math.min(b.requested_size, b.size);
    const base = [...prefix, b.state];
    out.push({ frames: b.state === 'inactive' ? base : [...base, ...framesFragment(b.frames)], weight: accounted });
    if (b.size - accounted > 0) out.push({ frames: [...base, '<gap>'], weight: b.size - accounted });
  }
}

/** Segments with their blocks (`_save_segment_usage`). */
export function renderSegmentUsage(snapshot: SnapshotDict): string {
  const stacks: FlameStack[] = [];
  let total = 0;
  for (const seg of snapshot.segments) {
    total += seg.total_size;
    blockStacks([`stream_${seg.stream}`, `seg_${seg.address}`], seg.blocks, stacks);
  }
  return renderFlameGraph(stacks, {
    title: 'Segment usage',
    subtitle: `${snapshot.segments.length} segments, ${humanBytes(total)} reserved`,
    rootLabel: 'segments',
    countName: 'bytes',
  });
}

/** Memory by allocating stack (`_save_memory_usage`). */
export function renderMemoryUsage(snapshot: SnapshotDict): string {
  const stacks: FlameStack[] = [];
  let allocated = 0;
  for (const seg of snapshot.segments) {
    allocated += seg.allocated_size;
    blockStacks([`stream_${seg.stream}`], seg.blocks.filter((b) => b.state !== 'inactive'), stacks);
  }
  return renderFlameGraph(stacks, {
    title: 'Memory usage by allocating stack',
    subtitle: `${humanBytes(allocated)} allocated`,
    rootLabel: 'allocated',
    countName: 'bytes',
  });
}
