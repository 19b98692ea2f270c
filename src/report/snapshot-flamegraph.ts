/**
 * The two flame graphs of `_memory_viz.py`, drawn by memscope: `segments`
 * (stream → segment → block state → allocating stack) and `memory` (stream →
 * state → allocating stack). Functions over the normalised snapshot so the CLI
 * and the allocator's saveSegmentUsage / saveMemoryUsage share them.
 */
import { humanBytes } from '../core/units.js';
import { snapshotTotals } from '../torch/snapshot-analysis.js';
import { blockFlameStacks } from '../torch/snapshot-flamegraph.js';
import type { MemorySnapshot } from '../torch/snapshot.js';
import { renderFlameGraph, warmColor } from '../render/flamegraph-svg.js';

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

export function renderSnapshotFlameGraph(snapshot: MemorySnapshot, kind: SnapshotFlameKind, options: { title?: string; device?: number | null; width?: number } = {}): string {
  const device = options.device ?? null;
  const stacks = blockFlameStacks(snapshot, kind === 'segments', device);
  const totals = snapshotTotals(snapshot, device);
  const title =
    options.title ??
    (kind === 'segments' ? 'Segments: what each allocator segment holds' : 'Memory: reserved memory by allocating stack');
  return renderFlameGraph(stacks, {
    title,
    subtitle: `${humanBytes(totals.all.reserved)} reserved in ${totals.all.segments} segments, ${humanBytes(totals.all.allocatedFromBlocks)} allocated; widths are bytes (requested; <gaps> is rounding or free space)`,
    rootLabel: `all (${humanBytes(totals.all.reserved)})`,
    colorFor: frameColor,
    width: options.width,
  });
}
