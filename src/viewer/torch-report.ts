/**
 * PyTorch inputs for the report: a CUDA memory snapshot (segments, blocks,
 * device traces) or a memory trace (Kineto `[memory]` events,
 * export_memory_timeline). Framework-free: works on memscope's normalised
 * models from src/torch.
 */
import { humanBytes } from '../core/units.js';
import { memoryByOperator, type MemoryTrace } from '../torch/memory-trace.js';
import { outOfMemoryEvents, type OomEvent } from '../torch/snapshot-analysis.js';
import type { MemorySnapshot } from '../torch/snapshot.js';
import { deviceName, hasHistory, snapshotMemory } from './snapshot-memory.js';
import { snapshotHistory } from './snapshot-history.js';
import { REPORT_DATA_VERSION, StringTable, TimelineBuilder, type ReportCaps, type ReportData, type ReportKernel, type ReportSegment, type ReportSeries } from './report-data.js';

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
    allocations: { t0: [], t1: [], bytes: [], series: [], layer: [], kernel: [], stack: [] },
    allocationsTotal: 0,
    modules: [],
    kernels: [],
    leaks: [],
    leakNote: 'leak detection needs a memscope capture spanning several training steps (memscope run)',
    segments: [],
    blockStates: [],
    memory: null,
  };
}

/** One OOM for the report's notices: what failed, the device then, and the largest allocations live then. */
function oomNotice(o: OomEvent): string {
  const when = o.timeUs === null ? '' : ` (time_us ${o.timeUs})`;
  const free = o.deviceFree === null ? 'device free unknown' : `${humanBytes(o.deviceFree)} free on the device`;
  const at = o.frames.length ? `, requested at ${o.frames.join(' ← ')}` : '';
  const live = o.largestLive.map((a) => `${humanBytes(a.size)}${a.frames.length ? ` at ${a.frames[0]}` : ''}`).join('; ');
  return (
    `Out of memory on ${deviceName(o.device)}, trace entry ${o.index}${when}: ${humanBytes(o.requestedSize)} requested, ${free}, ` +
    `allocated ${humanBytes(o.allocated)}, reserved ${humanBytes(o.reserved)}${at}.${live ? ` Largest live then: ${live}.` : ''}`
  );
}


export function snapshotToReport(snap: MemorySnapshot, file: string, caps: ReportCaps): ReportData {
  const notices: string[] = [];
  const table = new StringTable();
  const memory = snapshotMemory(snap, table, notices, caps.frameworkPaths);
  const traced = snap.traces.filter((t) => hasHistory(snap, t));
  const timeUnit: ReportData['timeUnit'] = traced.some((t) => t.timeUs.some((x) => !Number.isNaN(x))) ? 'ms' : 'event';
  if (!traced.length) notices.push('This snapshot has no allocation history (device_traces empty): the timeline shows only its final state; the segments view and the largest blocks are exact.');
  for (const o of outOfMemoryEvents(snap, 3, 2)) notices.push(oomNotice(o));
  for (const w of snap.warnings) notices.push(`Reading note: ${w}.`);
  const finalReserved = snap.segments.reduce((s, seg) => s + seg.totalSize, 0);
  let finalAllocated = 0;
  for (const d of memory.devices) for (let i = 0; i < d.bytes.length; i++) if (d.end[i] < 0) finalAllocated += d.bytes[i];
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
      device: deviceName(seg.device),
      address: seg.address,
      size: seg.totalSize,
      label: `${deviceName(seg.device)} 0x${seg.address.toString(16)} · ${seg.segmentType} · stream ${seg.stream} · ${seg.blockCount} block${seg.blockCount === 1 ? '' : 's'} · ${humanBytes(seg.allocatedSize)} allocated`,
      blocks,
    };
  });

  return {
    ...emptyReport('snapshot', file, `PyTorch memory snapshot · ${snap.segments.length} segments · ${snap.blocks.count} blocks · ${humanBytes(finalAllocated)} allocated of ${humanBytes(finalReserved)} reserved · ${traced.reduce((s, t) => s + t.count, 0)} trace events`),
    notices,
    timeUnit,
    series: [],
    timeline: { dt: [], series: [], bytes: [] },
    strings: table.strings,
    stacks: table.stacks,
    allocationsTotal,
    segments,
    blockStates: [...snap.stateNames],
    memory,
    // Allocator State History, segment timeline, settings, OOM marks (src/viewer/snapshot-history.ts).
    history: snapshotHistory(snap, table, memory, caps.frameworkPaths),
  };
}

export function traceToReport(trace: MemoryTrace, file: string, caps: ReportCaps): ReportData {
  const notices: string[] = [];
  const series: ReportSeries[] = [];
  const events = new EventList();
  let tMin = Infinity;
  for (const d of trace.devices) if (d.count) tMin = Math.min(tMin, d.time[0]);
  if (!Number.isFinite(tMin)) tMin = 0;
  const kernels: ReportKernel[] = [];
  for (const d of trace.devices) {
    const sa = series.length;
    series.push({ device: d.device, category: ALLOCATED });
    const sc = d.reserved ? series.length : -1;
    if (d.reserved) series.push({ device: d.device, category: CACHED });
    if (d.count) events.push((d.time[0] - tMin) / 1000, sa, d.baseline);
    let prevCached = 0;
    for (let i = 0; i < d.count; i++) {
      const t = (d.time[i] - tMin) / 1000;
      events.push(t, sa, d.bytes[i]);
      if (d.reserved) {
        const cached = Math.max(0, d.reserved[i] - d.allocated[i]);
        events.push(t, sc, cached - prevCached);
        prevCached = cached;
      }
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
  if (kernels.length > caps.maxKernels) notices.push(`Operator table: the top ${caps.maxKernels} of ${kernels.length} by bytes allocated.`);
  const timeline = events.build(caps.maxTimelineEvents, notices);
  return {
    ...emptyReport('trace', file, `PyTorch ${trace.source} trace · ${trace.memoryEventCount.toLocaleString('en-US')} memory events · ${trace.devices.map((d) => d.device).join(', ')}`),
    notices,
    timeUnit: 'ms',
    series,
    timeline: { dt: timeline.dt, series: timeline.series, bytes: timeline.bytes },
    kernels: kernels.slice(0, caps.maxKernels),
  };
}
