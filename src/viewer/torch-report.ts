/**
 * PyTorch inputs for the report: a CUDA memory snapshot (segments, blocks,
 * device traces) or a memory trace (Kineto `[memory]` events,
 * export_memory_timeline). Framework-free: works on memscope's normalised
 * models from src/torch.
 */
import { humanBytes } from '../core/units.js';
import { memoryByOperator, outOfMemoryLine, type DeviceMemoryTimeline, type MemoryTrace } from '../torch/memory-trace.js';
import { outOfMemoryEvents, type OomEvent } from '../torch/snapshot-analysis.js';
import type { MemorySnapshot } from '../torch/snapshot.js';
import { DEFAULT_DEVICE_TYPE, deviceTypeTitle } from '../torch/device-type.js';
import { deviceName, hasHistory, snapshotMemory } from './snapshot-memory.js';
import { addQueryColumns } from './query-columns.js';
import { pushBlockStacks, segmentPrefix } from '../torch/snapshot-flamegraph.js';
import { rootFirstFrameLabels } from '../torch/analysis/frame-labels.js';
import { snapshotTotals } from '../torch/analysis/totals.js';
import type { FlameStack } from '../render/flamegraph-svg.js';
import { flameGraphData, type FlameGraphData } from '../render/flamegraph-data.js';
import { REPORT_DATA_VERSION, StringTable, TimelineBuilder, type ReportAllocations, type ReportCaps, type ReportData, type ReportKernel, type ReportSegment, type ReportSeries } from './report-data.js';
import { snapshotHistory } from './snapshot-history.js';

const ALLOCATED = 'allocated';
const CACHED = 'cached (reserved, not allocated)';

/** Time-ordered signed events across series, collected before delta-coding. */
class EventList {
  t: number[] = [];
  s: number[] = [];
  b: number[] = [];
  push(t: number, s: number, b: number): void {
    if (b === 0) return;
    this.t.push(t);
    this.s.push(s);
    this.b.push(b);
  }
  /** Sorted by time (stable), then delta-coded; merged if over the cap. */
  build(maxEvents: number, notices: string[]): TimelineBuilder {
    const n = this.t.length;
    const order = Array.from({ length: n }, (_, i) => i).sort((x, y) => this.t[x] - this.t[y] || x - y);
    const out = new TimelineBuilder();
    const group = Math.max(1, Math.ceil(n / maxEvents));
    if (group > 1) notices.push(`The timeline merges every ${group} consecutive events (${n.toLocaleString('en-US')} events): peaks shorter than a group are not visible.`);
    const acc = new Map<number, number>();
    for (let k = 0; k < n; k++) {
      const i = order[k];
      if (group === 1) {
        out.push(this.t[i], this.s[i], this.b[i]);
        continue;
      }
      acc.set(this.s[i], (acc.get(this.s[i]) ?? 0) + this.b[i]);
      if ((k + 1) % group === 0 || k === n - 1) {
        for (const [s, b] of acc) if (b !== 0) out.push(this.t[i], s, b);
        acc.clear();
      }
    }
    return out;
  }
}

function emptyReport(kind: 'snapshot' | 'trace', file: string, detail: string): Omit<ReportData, 'series' | 'timeline' | 'timeUnit' | 'notices'> {
  return {
    version: REPORT_DATA_VERSION,
    title: `memscope · ${file.split(/[\\/]/).pop()}`,
    source: { kind, file, detail },
    truncated: null,
    steps: [],
    strings: [''],
    stacks: [],
    allocations: { t0: [], t1: [], bytes: [], series: [], layer: [], kernel: [], stack: [], site: [] },
    allocationsTotal: 0,
    modules: [],
    kernels: [],
    leaks: [],
    leakNote: 'leak detection needs a memscope capture spanning several training steps (memscope run)',
    leakCoverage: null,
    leakSteps: 0,
    segments: [],
    blockStates: [],
    memory: null,
  };
}

/** One OOM for the report's notices: what failed, the device then, and the largest allocations live then. */
function oomNotice(o: OomEvent, deviceType: string): string {
  const when = o.timeUs === null ? '' : ` (time_us ${o.timeUs})`;
  const free = o.deviceFree === null ? 'device free unknown' : `${humanBytes(o.deviceFree)} free on the device`;
  const at = o.frames.length ? `, requested at ${o.frames.join(' ← ')}` : '';
  const live = o.largestLive.map((a) => `${humanBytes(a.size)}${a.frames.length ? ` at ${a.frames[0]}` : ''}`).join('; ');
  return (
    `Out of memory on ${deviceName(o.device, deviceType)}, trace entry ${o.index}${when}: ${humanBytes(o.requestedSize)} requested, ${free}, ` +
    `allocated ${humanBytes(o.allocated)}, reserved ${humanBytes(o.reserved)}${at}.${live ? ` Largest live then: ${live}.` : ''}`
  );
}


/**
 * blockFlameStacks' stacks (src/torch/snapshot-flamegraph.ts), in its order, one block at a time:
 * the tree takes them as they come, so a snapshot's hundreds of thousands of blocks are never held
 * as stacks all at once, and each allocating stack's frame labels are made once.
 */
function* blockStacks(snap: MemorySnapshot, bySegment: boolean): Generator<FlameStack> {
  const b = snap.blocks;
  const labels = new Map<number, readonly string[]>();
  const labelsOf = (stack: number): readonly string[] => {
    let l = labels.get(stack);
    if (l === undefined) {
      l = rootFirstFrameLabels(snap, stack);
      labels.set(stack, l);
    }
    return l;
  };
  const multiDevice = new Set(snap.segments.map((s) => s.device)).size > 1;
  const out: FlameStack[] = [];
  for (const seg of snap.segments) {
    const prefix = segmentPrefix(seg, bySegment, multiDevice);
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      pushBlockStacks(out, prefix, snap.stateNames[b.state[i]!]!, b.size[i]!, b.requestedSize[i]!, labelsOf, b.stack[i]!);
      yield* out;
      out.length = 0;
    }
  }
}

/** The `segments` and `memory` flame graphs (`memscope segments` / `memory`, _memory_viz.py's) for the page. */
function snapshotFlames(snap: MemorySnapshot): FlameGraphData[] {
  if (snap.blocks.count === 0) return [];
  const unit = 'bytes (requested; <gaps>: rounding or free space)';
  return [
    flameGraphData(blockStacks(snap, false), 'Memory: reserved memory by allocating stack', unit),
    flameGraphData(blockStacks(snap, true), 'Segments: what each allocator segment holds', unit),
  ];
}

export function snapshotToReport(snap: MemorySnapshot, file: string, caps: ReportCaps): ReportData {
  const notices: string[] = [];
  const table = new StringTable();
  // The query box's columns (docs/QUERY.md) ride on the timeline's allocations.
  const memory = addQueryColumns(snap, snapshotMemory(snap, table, notices, caps.site), table);
  const traced = snap.traces.filter((t) => hasHistory(snap, t));
  const timeUnit: ReportData['timeUnit'] = traced.some((t) => t.timeUs.some((x) => !Number.isNaN(x))) ? 'ms' : 'event';
  const entries = snap.traces.reduce((s, t) => s + t.count, 0);
  if (!traced.length) {
    const why = entries === 0 ? 'device_traces empty' : `its ${entries.toLocaleString('en-US')} trace event${entries === 1 ? ' is' : 's are'} no allocation or segment event`;
    notices.push(
      snap.segments.length
        ? `This snapshot has no allocation history (${why}): the timeline shows only its final state; the segments view and the largest blocks are exact.`
        : `This snapshot holds no segment and no allocation history (${why}).`,
    );
  }
  for (const o of outOfMemoryEvents(snap, 3, 2, caps.site)) notices.push(oomNotice(o, snap.deviceType));
  for (const w of snap.warnings) notices.push(`Reading note: ${w}.`);
  // The final state as `memscope summary` gives it: the segments' own fields (allocated = block sizes).
  const { reserved: finalReserved, allocated: finalAllocated } = snapshotTotals(snap).all;
  const allocationsTotal = memory.devices.reduce((s, d) => s + d.bytes.length, 0);

  // Segments, largest first, with their blocks in address order.
  const segOrder = [...snap.segments].sort((a, b) => b.totalSize - a.totalSize);
  const maxSegments = 2000;
  if (segOrder.length > maxSegments) notices.push(`Segments view: the ${maxSegments} largest of ${segOrder.length} segments.`);
  const segments: ReportSegment[] = segOrder.slice(0, maxSegments).map((seg) => {
    const blocks = { size: [] as number[], state: [] as number[], stack: [] as number[] };
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      blocks.size.push(snap.blocks.size[i]);
      blocks.state.push(snap.blocks.state[i]);
      blocks.stack.push(-1);
    }
    return {
      device: deviceName(seg.device, snap.deviceType),
      address: seg.address,
      size: seg.totalSize,
      label: `${deviceName(seg.device, snap.deviceType)} 0x${seg.address.toString(16)} · ${seg.segmentType} · stream ${seg.stream} · ${seg.blockCount} block${seg.blockCount === 1 ? '' : 's'} · ${humanBytes(seg.allocatedSize)} allocated`,
      blocks,
    };
  });

  return {
    ...emptyReport('snapshot', file, `${snap.deviceType === DEFAULT_DEVICE_TYPE ? 'PyTorch' : deviceTypeTitle(snap.deviceType)} memory snapshot · ${snap.segments.length} segments · ${snap.blocks.count} blocks · ${humanBytes(finalAllocated)} allocated of ${humanBytes(finalReserved)} reserved · ${entries.toLocaleString('en-US')} trace event${entries === 1 ? '' : 's'}`),
    notices,
    warnings: [...snap.warnings],
    timeUnit,
    series: [],
    timeline: { dt: [], series: [], bytes: [] },
    strings: table.strings,
    stacks: table.stacks,
    allocationsTotal,
    segments,
    blockStates: [...snap.stateNames],
    memory,
    flames: snapshotFlames(snap),
    // Allocator State History, segment timeline, settings, OOM marks (src/viewer/snapshot-history.ts).
    history: snapshotHistory(snap, table, memory, caps.site),
  };
}

/** The profiler's step spans (`ProfilerStep#N`, one per `prof.step()`), by start time, each step once. */
function profilerSteps(trace: MemoryTrace): { start: number; step: number; label: string }[] {
  const ops = trace.operators;
  const byStep = new Map<number, { start: number; step: number; label: string }>();
  for (let i = 0; i < ops.count; i++) {
    const name = ops.names[ops.nameIndex[i]!]!;
    const m = /^ProfilerStep#(\d+)$/.exec(name);
    if (!m) continue;
    const step = Number(m[1]);
    const seen = byStep.get(step);
    if (!seen || ops.start[i]! < seen.start) byStep.set(step, { start: ops.start[i]!, step, label: name });
  }
  return [...byStep.values()].sort((a, b) => a.start - b.start);
}

/**
 * A device's allocations, paired by address: an event adding bytes at an address opens an
 * allocation, the next event there taking bytes away closes it. Traces without addresses (the
 * 2021 layout) have none to pair.
 */
function traceAllocations(trace: MemoryTrace, d: DeviceMemoryTimeline, tMin: number, series: number, table: StringTable, out: ReportAllocations): number {
  if (!d.addr) return 0;
  const open = new Map<number, number>();
  let count = 0;
  for (let i = 0; i < d.count; i++) {
    const b = d.bytes[i]!;
    const addr = d.addr[i]!;
    const t = (d.time[i]! - tMin) / 1000;
    if (b > 0) {
      const op = d.operator[i]!;
      open.set(addr, out.t0.length);
      out.t0.push(t);
      out.t1.push(-1);
      out.bytes.push(b);
      out.series.push(series);
      out.layer.push(0);
      out.kernel.push(op >= 0 ? table.str(trace.operators.names[trace.operators.nameIndex[op]!]) : 0);
      out.stack.push(-1);
      out.site.push(0);
      out.address!.push(addr);
      count++;
    } else if (b < 0) {
      const k = open.get(addr);
      if (k === undefined) continue;
      out.t1[k] = t;
      open.delete(addr);
    }
  }
  return count;
}

/** Keeps the `max` largest allocations (in their order), or all of them. */
function largestOf(a: ReportAllocations, max: number): ReportAllocations {
  if (a.bytes.length <= max) return a;
  const keep = a.bytes.map((_, i) => i).sort((x, y) => a.bytes[y]! - a.bytes[x]! || x - y).slice(0, max).sort((x, y) => x - y);
  const pick = <T,>(col: T[]): T[] => keep.map((i) => col[i]!);
  return { t0: pick(a.t0), t1: pick(a.t1), bytes: pick(a.bytes), series: pick(a.series), layer: pick(a.layer), kernel: pick(a.kernel), stack: pick(a.stack), site: pick(a.site), address: pick(a.address!) };
}

export function traceToReport(trace: MemoryTrace, file: string, caps: ReportCaps): ReportData {
  const notices: string[] = [];
  const series: ReportSeries[] = [];
  const events = new EventList();
  const table = new StringTable();
  const steps = profilerSteps(trace);
  // Time 0 is the first memory event or step start, whichever is first.
  let tMin = steps.length ? steps[0]!.start : Infinity;
  for (const d of trace.devices) if (d.count) tMin = Math.min(tMin, d.time[0]);
  if (!Number.isFinite(tMin)) tMin = 0;
  let allocations: ReportAllocations = { t0: [], t1: [], bytes: [], series: [], layer: [], kernel: [], stack: [], site: [], address: [] };
  let allocationsTotal = 0;
  const kernels: ReportKernel[] = [];
  for (const d of trace.devices) {
    const sa = series.length;
    series.push({ device: d.device, category: ALLOCATED });
    const sc = d.reserved ? series.length : -1;
    if (d.reserved) series.push({ device: d.device, category: CACHED });
    if (d.count) events.push((d.time[0] - tMin) / 1000, sa, d.baseline);
    allocationsTotal += traceAllocations(trace, d, tMin, sa, table, allocations);
    let prevCached = 0;
    for (let i = 0; i < d.count; i++) {
      const t = (d.time[i] - tMin) / 1000;
      if (!d.reserved) {
        events.push(t, sa, d.bytes[i]);
        continue;
      }
      // Allocated and cached change together; the falling one goes first, so the stack between
      // the two events never rises above the reserved bytes.
      const cached = Math.max(0, d.reserved[i] - d.allocated[i]);
      const dc = cached - prevCached;
      prevCached = cached;
      if (dc < d.bytes[i]) events.push(t, sc, dc);
      events.push(t, sa, d.bytes[i]);
      if (dc >= d.bytes[i]) events.push(t, sc, dc);
    }
    if (d.allocatedIsRelative) notices.push(`${d.device}: this trace layout records only signed sizes, so live bytes are relative to the trace start (memory allocated before it is not shown).`);
    if (d.inconsistentTotals) notices.push(`${d.device}: ${d.inconsistentTotals} events disagree with the recorded totals (events lost or reordered by the recorder).`);
    if (trace.operators.count) {
      for (const row of memoryByOperator(trace, d)) {
        kernels.push({ name: trace.devices.length > 1 ? `${row.name} (${d.device})` : row.name, calls: row.allocations, bytesAllocated: row.selfAllocated, bytesRetained: row.selfNet, peakAdded: row.inclusiveNet });
      }
    }
  }
  kernels.sort((a, b) => b.bytesAllocated - a.bytesAllocated);
  for (const o of trace.outOfMemory) notices.push(`${capitalised(outOfMemoryLine(o, tMin))}.`);
  if (kernels.length > caps.maxKernels) notices.push(`Operator table: the top ${caps.maxKernels} of ${kernels.length} by bytes allocated.`);
  const timeline = events.build(caps.maxTimelineEvents, notices);
  if (allocationsTotal > caps.maxAllocations) notices.push(`Allocation details embedded for the ${caps.maxAllocations.toLocaleString('en-US')} largest of ${allocationsTotal.toLocaleString('en-US')} allocations; hover and the table list only those.`);
  allocations = largestOf(allocations, caps.maxAllocations);
  return {
    ...emptyReport('trace', file, [`PyTorch ${trace.source} trace`, `${trace.memoryEventCount.toLocaleString('en-US')} memory event${trace.memoryEventCount === 1 ? '' : 's'}`, trace.devices.map((d) => d.device).join(', ')].filter(Boolean).join(' · ')),
    notices,
    timeUnit: 'ms',
    series,
    timeline: { dt: timeline.dt, series: timeline.series, bytes: timeline.bytes },
    steps: steps.map((s) => ({ t: (s.start - tMin) / 1000, step: s.step, label: s.label })),
    strings: table.strings,
    allocations,
    allocationsTotal,
    kernels: kernels.slice(0, caps.maxKernels),
  };
}

function capitalised(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
