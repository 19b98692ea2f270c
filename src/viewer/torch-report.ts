/**
 * PyTorch inputs for the report: a CUDA memory snapshot (segments, blocks,
 * device traces) or a memory trace (Kineto `[memory]` events,
 * export_memory_timeline). Framework-free: works on memscope's normalised
 * models from src/torch.
 */
import { humanBytes } from '../core/units.js';
import { memoryByOperator, type MemoryTrace } from '../torch/memory-trace.js';
import { formatFrame, isInformativeFrame, outOfMemoryEvents, type OomEvent } from '../torch/snapshot-analysis.js';
import { stackFrames, type MemorySnapshot } from '../torch/snapshot.js';
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

function deviceName(d: number): string {
  return d >= 0 ? `cuda:${d}` : 'cuda';
}

export function snapshotToReport(snap: MemorySnapshot, file: string, caps: ReportCaps): ReportData {
  const notices: string[] = [];
  const table = new StringTable();
  const frameLabels = (stack: number): string[] => stackFrames(snap, stack).filter(isInformativeFrame).map((f) => formatFrame(f, true));
  const stackId = (stack: number): number => (stack > 0 ? table.stack(stack, () => frameLabels(stack), caps.maxFrames) : -1);

  const devices = [...new Set([...snap.segments.map((s) => s.device), ...snap.traces.filter((t) => t.count > 0).map((t) => t.device)])].sort((a, b) => a - b);
  const series: ReportSeries[] = [];
  const seriesOf = new Map<string, number>();
  for (const d of devices) for (const c of [ALLOCATED, CACHED]) {
    seriesOf.set(`${d}/${c}`, series.length);
    series.push({ device: deviceName(d), category: c });
  }
  const allocatedState = snap.stateNames.indexOf('active_allocated');
  const pendingState = snap.stateNames.indexOf('active_pending_free');

  // Final state per device, from the segments: what the trace must end at.
  const finalAllocated = new Map<number, number>();
  const finalReserved = new Map<number, number>();
  for (const seg of snap.segments) {
    finalReserved.set(seg.device, (finalReserved.get(seg.device) ?? 0) + seg.totalSize);
    let active = 0;
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) {
      const st = snap.blocks.state[i];
      if (st === allocatedState || st === pendingState) active += snap.blocks.size[i];
    }
    finalAllocated.set(seg.device, (finalAllocated.get(seg.device) ?? 0) + active);
  }

  const events = new EventList();
  const allocs: { t0: number; t1: number; bytes: number; series: number; stack: number }[] = [];
  const traced = snap.traces.filter((t) => t.count > 0);
  let timeUnit: ReportData['timeUnit'] = 'event';
  let t0us = Infinity;
  for (const tr of traced) for (let i = 0; i < tr.count; i++) if (!Number.isNaN(tr.timeUs[i])) t0us = Math.min(t0us, tr.timeUs[i]);
  if (traced.length && Number.isFinite(t0us)) timeUnit = 'ms';
  let endTime = 0;
  const code = (a: string) => snap.actionNames.indexOf(a);
  const [ALLOC, FREE_DONE, SEG_ALLOC, SEG_FREE, SEG_MAP, SEG_UNMAP] = ['alloc', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap'].map(code);
  for (const tr of traced) {
    const sa = seriesOf.get(`${tr.device}/${ALLOCATED}`)!;
    const sc = seriesOf.get(`${tr.device}/${CACHED}`)!;
    let allocatedDelta = 0;
    let reservedDelta = 0;
    const open = new Map<number, number>();
    const times: number[] = [];
    for (let i = 0; i < tr.count; i++) {
      const t = timeUnit === 'ms' ? (Number.isNaN(tr.timeUs[i]) ? (times.length ? times[times.length - 1] : 0) : (tr.timeUs[i] - t0us) / 1000) : i + 1;
      times.push(t);
      const a = tr.action[i];
      const size = tr.size[i];
      if (a === ALLOC) {
        events.push(t, sa, size);
        events.push(t, sc, -size);
        allocatedDelta += size;
        open.set(tr.addr[i], allocs.length);
        allocs.push({ t0: t, t1: -1, bytes: size, series: sa, stack: tr.stack[i] });
      } else if (a === FREE_DONE) {
        events.push(t, sa, -size);
        events.push(t, sc, size);
        allocatedDelta -= size;
        const k = open.get(tr.addr[i]);
        if (k !== undefined) {
          allocs[k].t1 = t;
          open.delete(tr.addr[i]);
        }
      } else if (a === SEG_ALLOC || a === SEG_MAP) {
        events.push(t, sc, size);
        reservedDelta += size;
      } else if (a === SEG_FREE || a === SEG_UNMAP) {
        events.push(t, sc, -size);
        reservedDelta -= size;
      }
      endTime = Math.max(endTime, t);
    }
    // Memory that existed before the trace began: the final state minus what the trace added.
    const baseAllocated = (finalAllocated.get(tr.device) ?? 0) - allocatedDelta;
    const baseReserved = (finalReserved.get(tr.device) ?? 0) - reservedDelta;
    events.push(0, sa, Math.max(0, baseAllocated));
    events.push(0, sc, Math.max(0, baseReserved - baseAllocated));
    if (baseAllocated < 0 || baseReserved < baseAllocated) notices.push(`${deviceName(tr.device)}: the trace does not add up to the final segments (a ring buffer that dropped its oldest entries?); its baseline is clamped at 0.`);
  }
  // Devices without a trace: show their final state as one step.
  for (const d of devices) {
    if (traced.some((t) => t.device === d)) continue;
    events.push(0, seriesOf.get(`${d}/${ALLOCATED}`)!, finalAllocated.get(d) ?? 0);
    events.push(0, seriesOf.get(`${d}/${CACHED}`)!, (finalReserved.get(d) ?? 0) - (finalAllocated.get(d) ?? 0));
  }
  if (!traced.length) {
    notices.push('This snapshot has no allocation history (device_traces empty): the timeline shows only its final state; the segments view and the largest blocks are exact.');
    // Allocations: the live blocks, with their stacks.
    for (let i = 0; i < snap.blocks.count; i++) {
      const st = snap.blocks.state[i];
      if (st !== allocatedState && st !== pendingState) continue;
      const seg = snap.segments[snap.blocks.segment[i]];
      allocs.push({ t0: 0, t1: -1, bytes: snap.blocks.size[i], series: seriesOf.get(`${seg.device}/${ALLOCATED}`)!, stack: snap.blocks.stack[i] });
    }
  }
  for (const o of outOfMemoryEvents(snap, 3, 2)) notices.push(oomNotice(o));
  for (const w of snap.warnings) notices.push(`Reading note: ${w}.`);
  const timeline = events.build(caps.maxTimelineEvents, notices);

  const kept = allocs.map((_, i) => i).sort((x, y) => allocs[y].bytes - allocs[x].bytes).slice(0, caps.maxAllocations).sort((x, y) => x - y);
  if (kept.length < allocs.length) notices.push(`Allocation details embedded for the ${kept.length.toLocaleString('en-US')} largest of ${allocs.length.toLocaleString('en-US')} allocations.`);
  const allocations: ReportData['allocations'] = { t0: [], t1: [], bytes: [], series: [], layer: [], kernel: [], stack: [] };
  for (const i of kept) {
    const a = allocs[i];
    allocations.t0.push(a.t0);
    allocations.t1.push(a.t1);
    allocations.bytes.push(a.bytes);
    allocations.series.push(a.series);
    allocations.layer.push(0);
    allocations.kernel.push(0);
    allocations.stack.push(stackId(a.stack));
  }

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

  const totalReserved = [...finalReserved.values()].reduce((a, b) => a + b, 0);
  const totalAllocated = [...finalAllocated.values()].reduce((a, b) => a + b, 0);
  return {
    ...emptyReport('snapshot', file, `PyTorch memory snapshot · ${snap.segments.length} segments · ${snap.blocks.count} blocks · ${humanBytes(totalAllocated)} allocated of ${humanBytes(totalReserved)} reserved · ${traced.reduce((s, t) => s + t.count, 0)} trace events`),
    notices,
    timeUnit,
    series,
    timeline: { dt: timeline.dt, series: timeline.series, bytes: timeline.bytes },
    strings: table.strings,
    stacks: table.stacks,
    allocations,
    allocationsTotal: allocs.length,
    segments,
    blockStates: [...snap.stateNames],
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
