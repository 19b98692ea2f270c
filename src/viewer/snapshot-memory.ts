/**
 * Every allocation of a PyTorch snapshot, per device, for the Active Memory Timeline: what
 * torch/utils/viz/MemoryViz.js draws (one band per allocation from its `alloc` to its
 * `free_completed` entry, with the blocks already live when the trace began at the bottom),
 * plus the exact peaks of active and reserved bytes. Framework-free.
 */
import { DEFAULT_SITE_RULE, type SiteRule } from '../core/site-rule.js';
import { humanBytes } from '../core/units.js';
import { formatFrame, frameLabels, isInformativeFrame } from '../torch/snapshot-analysis.js';
import type { Frame } from '../torch/pytorch-vocabulary.js';
import { DEFAULT_DEVICE_TYPE, deviceLabel } from '../torch/device-type.js';
import { stackFrames, type MemorySnapshot, type TraceTable } from '../torch/snapshot.js';
import type { ReportDeviceMemory, ReportMemory, StringTable } from './report-data.js';

/** 'cuda:0', 'webgpu:0': the snapshot's device type and the index. */
export function deviceName(d: number, deviceType = DEFAULT_DEVICE_TYPE): string {
  return deviceLabel(deviceType, d);
}

/**
 * Interns a snapshot stack for the page: its informative frames innermost first, the ones before
 * the allocating site (allocator and framework internals) counted in `folded` so the page can
 * show the user's frames first and fold the rest. The site is `memscope summary`'s
 * (`allocatingFrame` under the same site rule).
 */
export class SnapshotStacks {
  readonly folded: number[] = [];
  /** Per interned stack, parallel to `folded`: its site, an index into the table's strings. */
  readonly sites: number[] = [];
  private readonly infos = new Map<number, { frames: Frame[]; user: number; site: string }>();
  private readonly siteIds = new Map<number, number>();

  constructor(
    private readonly snap: MemorySnapshot,
    private readonly table: StringTable,
    private readonly rule: SiteRule = DEFAULT_SITE_RULE,
  ) {}

  private info(stack: number): { frames: Frame[]; user: number; site: string } {
    let info = this.infos.get(stack);
    if (!info) {
      const frames = stackFrames(this.snap, stack).filter(isInformativeFrame);
      const labels = frameLabels(this.snap, this.rule);
      info = { frames, user: labels.allocatingIndex(stack), site: labels.allocatingFrame(stack) };
      this.infos.set(stack, info);
    }
    return info;
  }

  /** Index into the table's stacks (-1 for the empty stack). */
  stack(stack: number): number {
    if (stack <= 0) return -1;
    const before = this.table.stacks.length;
    // Every frame is kept: search looks at all of them, and stacks are interned once each.
    const id = this.table.stack(stack, () => this.info(stack).frames.map((f) => formatFrame(f, true)), Number.MAX_SAFE_INTEGER);
    if (id === before) {
      this.folded.push(this.info(stack).user);
      this.sites.push(this.site(stack));
    }
    return id;
  }

  /** Index into the table's strings of the stack's site ("file:line:function"). */
  site(stack: number): number {
    let id = this.siteIds.get(stack);
    if (id === undefined) {
      id = stack > 0 ? this.table.str(this.info(stack).site) : 0;
      this.siteIds.set(stack, id);
    }
    return id;
  }
}

function deviceMemory(snap: MemorySnapshot, device: number, trace: TraceTable | null, stacks: SnapshotStacks, notices: string[]): ReportDeviceMemory {
  const code = (a: string): number => snap.actionNames.indexOf(a);
  const [ALLOC, FREE_DONE, SEG_ALLOC, SEG_FREE, SEG_MAP, SEG_UNMAP] = ['alloc', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap'].map(code);
  const allocatedState = snap.stateNames.indexOf('active_allocated');
  const pendingState = snap.stateNames.indexOf('active_pending_free');
  const n = trace?.count ?? 0;

  // The final state, from the segments: what the trace must end at. A trace records each
  // allocation at its requested size (CUDACachingAllocator.cpp's record_trace), so every band is a
  // requested size, as in PyTorch's MemoryViz.js: the blocks live at the end count theirs too.
  let finalActive = 0;
  let finalReserved = 0;
  const liveAtEnd: number[] = [];
  for (const seg of snap.segments) {
    if (seg.device !== device) continue;
    finalReserved += seg.totalSize;
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const st = snap.blocks.state[i];
      if (st === allocatedState || st === pendingState) {
        finalActive += snap.blocks.requestedSize[i];
        liveAtEnd.push(i);
      }
    }
  }

  // Event times: ms from the first timed event, or event numbers when the file has none.
  const eventDt: number[] = new Array(n);
  let t0us = Infinity;
  if (trace) for (let i = 0; i < n; i++) if (!Number.isNaN(trace.timeUs[i])) t0us = Math.min(t0us, trace.timeUs[i]);
  const timed = Number.isFinite(t0us);
  let lastUs = 0;
  for (let i = 0; i < n; i++) {
    let us: number;
    if (timed) us = Number.isNaN(trace!.timeUs[i]) ? lastUs : Math.round(trace!.timeUs[i] - t0us);
    else us = (i + 1) * 1000;
    // Entries are recorded in order; a clock step backwards keeps the previous time.
    if (us < lastUs) us = lastUs;
    eventDt[i] = us - lastUs;
    lastUs = us;
  }

  // Allocations are columns, never one object each: a 1 GB snapshot has millions of them.
  let allocCount = 0;
  for (let i = 0; i < n; i++) if (trace!.action[i] === ALLOC) allocCount++;
  const tracedEvent = new Int32Array(allocCount);
  const tracedEnd = new Int32Array(allocCount).fill(-1);
  let traced = 0;
  // Free events without an alloc in the trace: live when the trace began (the entry's frames are the allocation's).
  const beforeEvents: number[] = [];
  const open = new Map<number, number>();
  const freedBefore = new Set<number>();
  const reservedAt: number[] = [];
  const reservedDelta: number[] = [];
  let activeDelta = 0;
  let reservedTotalDelta = 0;
  // The bands' stack over the trace relative to its start (a free removes its allocation's bytes), and its highest point.
  let activeRun = 0;
  let activeRunPeak = 0;
  let reservedRun = 0;
  let reservedRunPeak = 0;
  for (let i = 0; i < n; i++) {
    const a = trace!.action[i];
    const size = trace!.size[i];
    const addr = trace!.addr[i];
    if (a === ALLOC) {
      activeDelta += size;
      activeRun += size;
      open.set(addr, traced);
      tracedEvent[traced++] = i;
    } else if (a === FREE_DONE) {
      activeDelta -= size;
      const k = open.get(addr);
      if (k !== undefined) {
        tracedEnd[k] = i;
        activeRun -= trace!.size[tracedEvent[k]];
        open.delete(addr);
      } else {
        activeRun -= size;
        beforeEvents.push(i);
        freedBefore.add(addr);
      }
    } else if (a === SEG_ALLOC || a === SEG_MAP || a === SEG_FREE || a === SEG_UNMAP) {
      const d = a === SEG_ALLOC || a === SEG_MAP ? size : -size;
      reservedAt.push(i);
      reservedDelta.push(d);
      reservedTotalDelta += d;
      reservedRun += d;
    }
    if (activeRun > activeRunPeak) activeRunPeak = activeRun;
    if (reservedRun > reservedRunPeak) reservedRunPeak = reservedRun;
  }
  // Blocks live at the end that the trace never allocated were live through all of it.
  const throughout: number[] = [];
  for (const b of liveAtEnd) {
    const addr = snap.blocks.address[b];
    if (open.has(addr) || freedBefore.has(addr)) continue;
    throughout.push(b);
  }

  const baseActive = finalActive - activeDelta;
  const baseReserved = finalReserved - reservedTotalDelta;
  let beforeBytes = 0;
  for (const b of throughout) beforeBytes += snap.blocks.requestedSize[b];
  for (const i of beforeEvents) beforeBytes += trace!.size[i];
  if (n > 0 && (baseActive < 0 || baseReserved < 0)) {
    notices.push(`${deviceName(device, snap.deviceType)}: the trace adds more than the final segments hold (a ring buffer that dropped its oldest entries?); the reserved line starts at 0.`);
  } else if (n > 0 && beforeBytes !== baseActive) {
    notices.push(
      `${deviceName(device, snap.deviceType)}: the ${beforeEvents.length + throughout.length} blocks live before the trace hold ${humanBytes(beforeBytes)} requested; the final blocks less the trace's sizes give ${humanBytes(baseActive)} (the trace and the blocks disagree).`,
    );
  }

  // Exact peaks of what the bands stack up to: the blocks live before the trace, then every event.
  // Columns made at their final length: grown by push, a column of millions leaves copies of itself behind.
  const count = throughout.length + beforeEvents.length + traced;
  const column = (): number[] => new Array<number>(count);
  const out: ReportDeviceMemory = {
    device: deviceName(device, snap.deviceType),
    eventDt,
    start: column(),
    end: column(),
    bytes: column(),
    address: column(),
    stack: column(),
    site: column(),
    reservedBase: Math.max(0, baseReserved),
    reservedAt,
    reservedDelta,
    peakAllocated: beforeBytes + activeRunPeak,
    peakReserved: Math.max(0, baseReserved) + reservedRunPeak,
  };
  let at = 0;
  const add = (start: number, end: number, bytes: number, address: number, stack: number): void => {
    out.start[at] = start;
    out.end[at] = end;
    out.bytes[at] = bytes;
    out.address[at] = address;
    out.stack[at] = stacks.stack(stack);
    out.site[at] = stacks.site(stack);
    at++;
  };
  for (const b of throughout) add(-1, -1, snap.blocks.requestedSize[b], snap.blocks.address[b], snap.blocks.stack[b]);
  // Bottom of the stack: the longest-lived first, so fewer bands move when one below is freed.
  for (let k = beforeEvents.length - 1; k >= 0; k--) {
    const i = beforeEvents[k];
    add(-1, i, trace!.size[i], trace!.addr[i], trace!.stack[i]);
  }
  for (let k = 0; k < traced; k++) {
    const i = tracedEvent[k];
    add(i, tracedEnd[k], trace!.size[i], trace!.addr[i], trace!.stack[i]);
  }
  return out;
}

export function hasHistory(snap: MemorySnapshot, trace: TraceTable): boolean {
  const codes = new Set(['alloc', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap'].map((a) => snap.actionNames.indexOf(a)));
  for (let i = 0; i < trace.count; i++) if (codes.has(trace.action[i])) return true;
  return false;
}

/** Per device (each with a trace or with segments), its allocations in stacking order and its peaks. */
export function snapshotMemory(snap: MemorySnapshot, table: StringTable, notices: string[], rule: SiteRule = DEFAULT_SITE_RULE): ReportMemory {
  const stacks = new SnapshotStacks(snap, table, rule);
  const devices = [...new Set([...snap.segments.map((s) => s.device), ...snap.traces.filter((t) => t.count > 0).map((t) => t.device)])].sort((a, b) => a - b);
  const out: ReportDeviceMemory[] = [];
  for (const d of devices) {
    // A trace without allocation or segment events (a lone `snapshot` entry) is no history.
    const trace = snap.traces.find((t) => t.device === d && hasHistory(snap, t)) ?? null;
    out.push(deviceMemory(snap, d, trace, stacks, notices));
  }
  // Stacks interned by other parts of the report (none today) still need an entry.
  while (stacks.folded.length < table.stacks.length) {
    stacks.folded.push(0);
    stacks.sites.push(0);
  }
  return { devices: out, stackFolded: stacks.folded, stackSite: stacks.sites };
}
