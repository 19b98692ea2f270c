/**
 * Analyses of a normalised CUDA memory snapshot (src/torch/snapshot.ts), the questions PyTorch's
 * torch/cuda/_memory_viz.py answers, as plain functions over the model so the CLI, the allocator's
 * saveSegmentUsage/saveMemoryUsage and the browser viewer share them. Each concern has its file
 * under analysis/; this module gathers them, beside the flame-graph stacks.
 */
import { humanBytes } from '../core/units.js';
import type { FlameStack } from '../report/flamegraph-svg.js';
import { frameLabels as labels } from './analysis/frame-labels.js';
import { segmentKey } from './analysis/compare.js';
import type { MemorySnapshot, Segment } from './snapshot.js';

export { allocatingFrame, formatFrame, isInformativeFrame, NO_FRAMES, rootFirstFrameLabels } from './analysis/frame-labels.js';
export * from './analysis/totals.js';
export * from './analysis/memory-stats.js';
export * from './analysis/live-allocations.js';
export * from './analysis/fragmentation.js';
export { compareSnapshots, type FrameChange, type SnapshotComparison } from './analysis/compare.js';
export * from './analysis/trace-lines.js';
export * from './analysis/timeline.js';
export * from './analysis/out-of-memory.js';

// ---------------------------------------------------------------- flame-graph stacks

/**
 * `_memory_viz.py segments`/`memory` stacks: [stream, (segment,) state, frames…]
 * weighted by requested bytes, plus a `<gaps>` leaf for what the block holds
 * beyond them (rounding, or a whole inactive block).
 */
export function blockFlameStacks(
  snapshot: MemorySnapshot,
  bySegment: boolean,
  device: number | null = null,
  options: { rootFrame?: string; segments?: (seg: Segment) => boolean } = {},
): FlameStack[] {
  const b = snapshot.blocks;
  const l = labels(snapshot);
  const out: FlameStack[] = [];
  const multiDevice = new Set(snapshot.segments.map((s) => s.device)).size > 1;
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    if (options.segments && !options.segments(seg)) continue;
    const prefix = [
      ...(options.rootFrame ? [options.rootFrame] : []),
      ...(multiDevice ? [`device_${seg.device}`] : []),
      `stream_${seg.stream}`,
      ...(bySegment ? [`seg_${seg.index} @0x${seg.address.toString(16)} (${humanBytes(seg.totalSize)}, ${seg.segmentType})`] : []),
    ];
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const state = snapshot.stateNames[b.state[i]!]!;
      const size = b.size[i]!;
      const active = state.startsWith('active');
      const accounted = active ? Math.min(size, b.requestedSize[i]!) : 0;
      if (accounted > 0) {
        const frames = l.rootFirst(b.stack[i]!);
        out.push({ frames: [...prefix, state, ...(frames.length ? frames : ['<non-python>'])], weight: accounted });
      }
      if (size - accounted > 0) out.push({ frames: [...prefix, state, '<gaps>'], weight: size - accounted });
    }
  }
  return out;
}

/**
 * `_memory_viz.py compare`'s flame graph: the blocks of segments present only
 * before (under `only_before`) or only after (under `only_after`), by segment.
 */
export function compareFlameStacks(before: MemorySnapshot, after: MemorySnapshot): FlameStack[] {
  const beforeKeys = new Set(before.segments.map(segmentKey));
  const afterKeys = new Set(after.segments.map(segmentKey));
  return [
    ...blockFlameStacks(before, true, null, { rootFrame: 'only_before', segments: (s) => !afterKeys.has(segmentKey(s)) }),
    ...blockFlameStacks(after, true, null, { rootFrame: 'only_after', segments: (s) => !beforeKeys.has(segmentKey(s)) }),
  ];
}
