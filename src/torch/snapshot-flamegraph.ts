/**
 * The flame graphs of torch/cuda/_memory_viz.py over a normalised snapshot:
 * `segments` (stream → segment → block state → allocating stack), `memory`
 * (stream → block state → allocating stack) and `compare` (segments found in
 * only one of two snapshots). Each block weighs its requested bytes under its
 * allocating stack, and what it holds beyond them (rounding, or the whole of
 * an inactive block) under a `<gaps>` leaf, as `_write_blocks` writes them for
 * flamegraph.pl.
 */
import { humanBytes } from '../core/units.js';
import type { FlameStack } from '../render/flamegraph-svg.js';
import { rootFirstFrameLabels, segmentKey } from './snapshot-analysis.js';
import type { MemorySnapshot, Segment } from './snapshot.js';

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
        const frames = rootFirstFrameLabels(snapshot, b.stack[i]!);
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
