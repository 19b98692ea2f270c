/**
 * The flame graphs of torch/cuda/_memory_viz.py over a normalised snapshot:
 * `segments` (stream → segment → block state → allocating stack), `memory`
 * (stream → block state → allocating stack) and `compare` (segments found in
 * only one of two snapshots). Each block weighs its requested bytes under its
 * allocating stack, and what it holds beyond them (rounding, or the whole of
 * an inactive block) under a `<gaps>` leaf, as `_write_blocks` writes them for
 * flamegraph.pl. memscope draws them itself (render/flamegraph-svg.ts), for
 * the CLI's `segments`/`memory`/`compare` and the allocator's
 * saveSegmentUsage/saveMemoryUsage alike.
 */
import { humanBytes } from '../core/units.js';
import { renderFlameGraph, warmColor, type FlameStack } from '../render/flamegraph-svg.js';
import { segmentKey } from './analysis/compare.js';
import { rootFirstFrameLabels } from './analysis/frame-labels.js';
import { snapshotTotals } from './analysis/totals.js';
import type { MemorySnapshot, Segment } from './snapshot.js';
import { DEFAULT_DEVICE_TYPE, deviceTypeTitle } from './device-type.js';

/** Where a segment sits in the graph, as much of it as `segmentPrefix` names. */
export interface FlameSegment {
  readonly index: number;
  readonly device: number;
  readonly address: number;
  readonly totalSize: number;
  readonly stream: number;
  readonly segmentType: string;
}

/** The frames above a segment's blocks: [rootFrame,] [device_N when several devices,] stream_S[, seg_I @0xADDR (size, type)]. */
export function segmentPrefix(seg: FlameSegment, bySegment: boolean, multiDevice: boolean, rootFrame?: string): string[] {
  return [
    ...(rootFrame ? [rootFrame] : []),
    ...(multiDevice ? [`device_${seg.device}`] : []),
    `stream_${seg.stream}`,
    ...(bySegment ? [`seg_${seg.index} @0x${seg.address.toString(16)} (${humanBytes(seg.totalSize)}, ${seg.segmentType})`] : []),
  ];
}

/**
 * `_write_blocks` for one block: its requested bytes under its allocating
 * frames (root first; `<non-python>` when none were recorded), what it holds
 * beyond them under `<gaps>`. Only active blocks hold requested bytes.
 */
export function pushBlockStacks<Stack>(
  out: FlameStack[],
  prefix: readonly string[],
  state: string,
  size: number,
  requestedSize: number,
  rootFirstFrames: (stack: Stack) => readonly string[],
  stack: Stack,
): void {
  const accounted = state.startsWith('active') ? Math.min(size, requestedSize) : 0;
  if (accounted > 0) {
    const frames = rootFirstFrames(stack);
    out.push({ frames: [...prefix, state, ...(frames.length ? frames : ['<non-python>'])], weight: accounted });
  }
  if (size - accounted > 0) out.push({ frames: [...prefix, state, '<gaps>'], weight: size - accounted });
}

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
  const labelsOf = (stack: number): string[] => rootFirstFrameLabels(snapshot, stack);
  const multiDevice = new Set(snapshot.segments.map((s) => s.device)).size > 1;
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    if (options.segments && !options.segments(seg)) continue;
    const prefix = segmentPrefix(seg, bySegment, multiDevice, options.rootFrame);
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      pushBlockStacks(out, prefix, snapshot.stateNames[b.state[i]!]!, b.size[i]!, b.requestedSize[i]!, labelsOf, b.stack[i]!);
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

const STATE_COLORS: Record<string, string> = {
  active_allocated: 'rgb(230,120,90)',
  active_pending_free: 'rgb(240,190,90)',
  inactive: 'rgb(170,200,225)',
};

function frameColor(name: string, _depth: number, path: readonly string[]): string {
  if (STATE_COLORS[name]) return STATE_COLORS[name]!;
  if (name === '<gaps>') return 'rgb(215,215,215)';
  if (name.startsWith('stream_') || name.startsWith('seg_') || name.startsWith('device_')) return 'rgb(200,200,170)';
  // Frames under an inactive block are history, not live memory: keep them cool.
  if (path.includes('inactive')) return 'rgb(190,210,230)';
  return warmColor(name);
}

export type SnapshotFlameKind = 'segments' | 'memory';

/** The figures a snapshot flame graph's subtitle and root label show. */
export interface FlameTotals {
  readonly reserved: number;
  readonly segments: number;
  /** Bytes in active_allocated blocks. */
  readonly allocated: number;
}

function defaultFlameTitle(kind: SnapshotFlameKind): string {
  return kind === 'segments' ? 'Segments: what each allocator segment holds' : 'Memory: reserved memory by allocating stack';
}

/** Draws `_memory_viz` stacks (from blockFlameStacks or a model's own walk with pushBlockStacks) as an SVG. */
export function renderMemoryVizFlameGraph(stacks: readonly FlameStack[], kind: SnapshotFlameKind, totals: FlameTotals, options: { title?: string; width?: number } = {}): string {
  const title = options.title ?? defaultFlameTitle(kind);
  return renderFlameGraph(stacks, {
    title,
    subtitle: `${humanBytes(totals.reserved)} reserved in ${totals.segments} segments, ${humanBytes(totals.allocated)} allocated; widths are bytes (requested; <gaps> is rounding or free space)`,
    rootLabel: `all (${humanBytes(totals.reserved)})`,
    colorFor: frameColor,
    width: options.width,
  });
}

export function renderSnapshotFlameGraph(snapshot: MemorySnapshot, kind: SnapshotFlameKind, options: { title?: string; device?: number | null; width?: number } = {}): string {
  const device = options.device ?? null;
  const stacks = blockFlameStacks(snapshot, kind === 'segments', device);
  const { all } = snapshotTotals(snapshot, device);
  // PyTorch's files keep _memory_viz's titles; another device type says which it is.
  const title = options.title ?? (snapshot.deviceType === DEFAULT_DEVICE_TYPE ? undefined : `${deviceTypeTitle(snapshot.deviceType)} ${defaultFlameTitle(kind).toLowerCase()}`);
  return renderMemoryVizFlameGraph(stacks, kind, { reserved: all.reserved, segments: all.segments, allocated: all.allocatedFromBlocks }, { ...options, title });
}
