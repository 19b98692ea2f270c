/** Per-segment fill, internal/external free memory and the segment map, like `_memory_viz.py stats`. */
import { humanBytes } from '../../core/units.js';
import type { MemorySnapshot, Segment } from '../snapshot.js';
import { deviceLabel } from '../device-type.js';

/** Page size of the segment map (20 MiB), as in _memory_viz.py's segsum. */
export const SEGMENT_MAP_PAGE = 20 << 20;

export interface SegmentFill {
  readonly segment: number;
  readonly device: number;
  /** The device as memscope names it: 'cuda:0', 'webgpu:0' (src/torch/device-type.ts). */
  readonly deviceName: string;
  readonly address: number;
  readonly totalSize: number;
  readonly stream: number;
  readonly segmentType: string;
  /** Requested bytes of active_allocated blocks. */
  readonly allocated: number;
  /** Rounding waste inside active_allocated blocks (size − requested). */
  readonly freeInternal: number;
  /** Bytes in blocks not allocated (inactive or pending free): gaps between allocations. */
  readonly freeExternal: number;
  readonly largestFreeBlock: number;
  /** One character per 20 MiB page (see SEGMENT_MAP_LEGEND). */
  readonly map: string;
}

export interface FragmentationReport {
  /** The snapshot's device type ('cuda', 'webgpu'). */
  readonly deviceType: string;
  readonly segments: SegmentFill[];
  readonly totalReserved: number;
  readonly totalAllocated: number;
  readonly freeInternal: number;
  readonly freeExternal: number;
  /** freeExternal / totalReserved: reserved memory unusable for a request larger than its gaps. */
  readonly externalFragmentation: number;
  /** 1 − largest free block / all external free: how scattered the free memory is. */
  readonly freeScatter: number;
  readonly largestFreeBlock: number;
  /** The snapshot's reading warnings (MemorySnapshot.warnings). */
  readonly warnings: readonly string[];
}

export const SEGMENT_MAP_LEGEND = [
  'Legend:',
  '    [a     ] - a segment in the allocator',
  `     ^-- a page (${humanBytes(SEGMENT_MAP_PAGE)}) of memory in the segment`,
  "    a-z: pages filled with a single block's content",
  "    ' ': page is completely free",
  '    *: page is completely full with multiple blocks',
  '    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)',
  '    (X% internal) - of the free memory, X% is free because the allocator rounded the allocation size up.',
].join('\n');

/** Per-segment fill and internal/external free memory, like `_memory_viz.py stats`. */
export function fragmentation(snapshot: MemorySnapshot, device: number | null = null): FragmentationReport {
  const b = snapshot.blocks;
  const allocatedState = snapshot.stateNames.indexOf('active_allocated');
  const fills: SegmentFill[] = [];
  let totalReserved = 0;
  let totalAllocated = 0;
  let freeInternal = 0;
  let freeExternal = 0;
  let largestFree = 0;
  for (const seg of snapshot.segments) {
    if (device !== null && seg.device !== device) continue;
    let allocated = 0;
    let internal = 0;
    let external = 0;
    let largest = 0;
    const ranges: [number, number][] = [];
    let offset = 0;
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const size = b.size[i]!;
      if (b.state[i] === allocatedState) {
        const req = b.requestedSize[i]!;
        ranges.push([offset, req]);
        allocated += req;
        internal += size - req;
      } else {
        external += size;
        if (size > largest) largest = size;
      }
      offset += size;
    }
    totalReserved += seg.totalSize;
    totalAllocated += allocated;
    freeInternal += internal;
    freeExternal += external;
    if (largest > largestFree) largestFree = largest;
    fills.push({
      segment: seg.index,
      device: seg.device,
      deviceName: deviceLabel(snapshot.deviceType, seg.device),
      address: seg.address,
      totalSize: seg.totalSize,
      stream: seg.stream,
      segmentType: seg.segmentType,
      allocated,
      freeInternal: internal,
      freeExternal: external,
      largestFreeBlock: largest,
      map: segmentMap(seg, ranges),
    });
  }
  return {
    deviceType: snapshot.deviceType,
    segments: fills,
    totalReserved,
    totalAllocated,
    freeInternal,
    freeExternal,
    externalFragmentation: totalReserved > 0 ? freeExternal / totalReserved : 0,
    freeScatter: freeExternal > 0 ? 1 - largestFree / freeExternal : 0,
    largestFreeBlock: largestFree,
    warnings: snapshot.warnings,
  };
}

/** Most pages a segment map draws (80 GiB at 20 MiB a page); a larger total_size ends the map with '…'. */
const SEGMENT_MAP_MAX_PAGES = 4096;

function segmentMap(seg: Segment, ranges: readonly [number, number][]): string {
  const allPages = Math.max(1, Math.ceil(seg.totalSize / SEGMENT_MAP_PAGE));
  const pages = Math.min(allPages, SEGMENT_MAP_MAX_PAGES);
  const chars: string[] = new Array(pages).fill(' ');
  const frac = new Float64Array(pages);
  ranges.forEach(([start, size], k) => {
    if (size <= 0) return;
    const end = start + size;
    const mark = String.fromCharCode(97 + (k % 26));
    for (let p = Math.floor(start / SEGMENT_MAP_PAGE), last = Math.min(pages, Math.ceil(end / SEGMENT_MAP_PAGE)); p < last; p++) {
      const s = Math.max(start, p * SEGMENT_MAP_PAGE);
      const e = Math.min(end, (p + 1) * SEGMENT_MAP_PAGE);
      frac[p]! += (e - s) / SEGMENT_MAP_PAGE;
      chars[p] = chars[p] === ' ' ? mark : '0123456789*'[Math.min(10, Math.floor(frac[p]! * 10))]!;
    }
  });
  return allPages > pages ? `${chars.join('')}…` : chars.join('');
}
