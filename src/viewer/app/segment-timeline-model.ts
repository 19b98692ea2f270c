/**
 * The Active Cached Segment Timeline's bands (PyTorch snapshots): each segment's reserved bytes
 * over time as its own band, stacked in the order they were reserved, as
 * torch/utils/viz/MemoryViz.js draws it from `segment_alloc` / `segment_free`. Expandable
 * segments grow and shrink by `segment_map` / `segment_unmap`; here each mapped range is a band,
 * and an unmap that cuts a band keeps its remaining parts as new bands, so the stack's height is
 * the reserved bytes at every event. Segments alive before the trace began come from the
 * allocator state before its first event (state-history-model.ts). No DOM.
 */
import type { ReportDeviceMemory } from '../report-data.js';
import type { AllocatorHistory, SegmentState } from './state-history-model.js';
import { poolText, streamName } from './state-history-text.js';

export interface SegmentBands {
  /** In the Active Memory Timeline's shape, so its renderer draws the bands. */
  readonly memory: ReportDeviceMemory;
  /** Per band: the segment (or mapped range) it belongs to, for hover. */
  readonly segment: SegmentState[];
  /** Per band: its colour group (pool, stream and kind), 1-based; `groups[k - 1]` names it. */
  readonly group: number[];
  readonly groups: string[];
}

interface Open {
  band: number;
  address: number;
  size: number;
  segment: SegmentState;
}

function groupName(s: SegmentState): string {
  return `${poolText(s)}${s.expandable ? ', expandable' : ''}, stream ${streamName(s.stream)}`;
}

export function segmentBands(model: AllocatorHistory, eventDt: number[], device: string): SegmentBands {
  const start: number[] = [];
  const end: number[] = [];
  const bytes: number[] = [];
  const address: number[] = [];
  const segment: SegmentState[] = [];
  const group: number[] = [];
  const groups: string[] = [];
  const groupIds = new Map<string, number>();
  const open = new Map<number, Open>();
  const begin = (at: number, addr: number, size: number, seg: SegmentState): void => {
    if (size <= 0) return;
    const name = groupName(seg);
    let g = groupIds.get(name);
    if (g === undefined) {
      groups.push(name);
      g = groups.length;
      groupIds.set(name, g);
    }
    open.set(addr, { band: start.length, address: addr, size, segment: seg });
    start.push(at);
    end.push(-1);
    bytes.push(size);
    address.push(addr);
    segment.push(seg);
    group.push(g);
  };
  const back = model.position;
  model.goTo(-1);
  for (const s of model.segments()) begin(-1, s.address, s.size, s);
  model.goTo(back);
  const containing = (list: readonly SegmentState[], addr: number): SegmentState | undefined => list.find((s) => s.address <= addr && addr < s.address + s.size);
  for (let i = 0; i < model.n; i++) {
    const { removed, added } = model.segmentChanges(i);
    if (!removed.length && !added.length) continue;
    const action = model.action(i);
    const addr = model.address(i);
    const size = model.device.events.size[i];
    if (action === 'segment_alloc' || action === 'segment_map') {
      const seg = containing(added, addr) ?? added[0];
      if (seg) begin(i, addr, size, seg);
    } else if (action === 'segment_free' || action === 'segment_unmap') {
      const exact = open.get(addr);
      if (exact && exact.size === size) {
        end[exact.band] = i;
        open.delete(addr);
        continue;
      }
      // A cut across bands: end each band it touches, keep the parts outside it as new bands.
      const lo = addr;
      const hi = addr + size;
      for (const o of [...open.values()]) {
        if (o.address >= hi || o.address + o.size <= lo) continue;
        end[o.band] = i;
        open.delete(o.address);
        if (o.address < lo) begin(i, o.address, lo - o.address, o.segment);
        if (o.address + o.size > hi) begin(i, hi, o.address + o.size - hi, o.segment);
      }
    }
  }
  // Exact peak of the stack: every band's bytes from its start to its end.
  const n = model.n;
  const delta = new Float64Array(n + 1);
  let base = 0;
  for (let b = 0; b < start.length; b++) {
    if (start[b] < 0) base += bytes[b];
    else delta[start[b]] += bytes[b];
    if (end[b] >= 0) delta[end[b]] -= bytes[b];
  }
  let total = base;
  let peak = base;
  for (let i = 0; i < n; i++) {
    total += delta[i];
    if (total > peak) peak = total;
  }
  const memory: ReportDeviceMemory = {
    device,
    eventDt,
    start,
    end,
    bytes,
    address,
    stack: start.map(() => -1),
    site: group,
    reservedBase: 0,
    reservedAt: [],
    reservedDelta: [],
    peakAllocated: peak,
    peakReserved: peak,
  };
  return { memory, segment, group, groups };
}
