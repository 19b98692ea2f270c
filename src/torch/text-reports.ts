/**
 * Text reports for PyTorch files (snapshots and traces): the bodies of
 * `memscope summary`, `stats` and `compare`. Pure functions returning strings;
 * the CLI decides about colour by passing a `TextStyle`.
 */
import { DEFAULT_SITE_RULE, type SiteRule } from '../core/site-rule.js';
import { humanBytes } from '../core/units.js';
import { renderMemorySummary } from './memory-summary.js';
import { renderTable } from '../render/table.js';
import { devicePeak, memoryByOperator, outOfMemoryLine, traceStartTime, type MemoryTrace } from './memory-trace.js';
import {
  compareSnapshots,
  fragmentation,
  largestAllocations,
  outOfMemoryEvents,
  SEGMENT_MAP_LEGEND,
  SEGMENT_MAP_PAGE,
  snapshotDevices,
  snapshotMemoryStats,
  snapshotTotals,
  totalsByFrame,
  traceActionCounts,
  type OomEvent,
  type SnapshotComparison,
} from './snapshot-analysis.js';
import type { MemorySnapshot } from './snapshot.js';
import { deviceLabel, deviceTypeTitle } from './device-type.js';

/** Emphasis hooks (picocolors functions on a TTY, identity elsewhere). */
export interface TextStyle {
  readonly heading: (s: string) => string;
  readonly dim: (s: string) => string;
  readonly up: (s: string) => string;
  readonly down: (s: string) => string;
}

export const PLAIN: TextStyle = { heading: (s) => s, dim: (s) => s, up: (s) => s, down: (s) => s };

const count = (n: number): string => n.toLocaleString('en-US');
const signedBytes = (n: number): string => (n > 0 ? `+${humanBytes(n)}` : n < 0 ? `-${humanBytes(-n)}` : '0 B');
const percent = (x: number): string => `${(x * 100).toFixed(1)}%`;

// ---------------------------------------------------------------- traces

const SOURCE_DESCRIPTION: Record<string, string> = {
  kineto: 'Kineto chrome trace ([memory] events with Addr / Total Allocated / Total Reserved)',
  'kineto-2021': 'Kineto chrome trace, 2021 layout ([memory] events with Bytes only; totals summed by memscope)',
  'memory-timeline': 'export_memory_timeline JSON ([times, sizes by category])',
  'memory-timeline-raw': 'export_memory_timeline_raw JSON ([time, action, bytes, category] events)',
  snapshot: "snapshot's device_traces",
};

export interface TraceSummaryOptions {
  /** Operators listed per device. */
  readonly top?: number;
  readonly style?: TextStyle;
}

/** Peak allocated/reserved per device and memory added per operator. */
export function formatTraceSummary(trace: MemoryTrace, options: TraceSummaryOptions = {}): string {
  const style = options.style ?? PLAIN;
  const top = options.top ?? 15;
  const out: string[] = [];
  const noMemory = trace.memoryEventCount === 0 && trace.source.startsWith('kineto');
  out.push(style.heading(noMemory ? 'Kineto chrome trace' : (SOURCE_DESCRIPTION[trace.source] ?? trace.source)));
  out.push(`${count(trace.eventCount)} events, ${count(trace.memoryEventCount)} memory events, ${count(trace.operators.count)} CPU operator spans`);
  out.push('');
  if (trace.devices.length === 0) {
    out.push('No memory events in this trace: record them with torch.profiler.profile(profile_memory=True).');
    for (const o of trace.outOfMemory) out.push(outOfMemoryLine(o, traceStartTime(trace)));
    return out.join('\n') + '\n';
  }
  // One origin for every device: times compare across the table.
  const t0 = traceStartTime(trace);
  const rows = trace.devices.map((d) => {
    const p = devicePeak(d);
    const gpu = /^cuda:(\d+)$/.exec(d.device);
    const name = gpu && trace.deviceNames[Number(gpu[1])] ? `${d.device} (${trace.deviceNames[Number(gpu[1])]})` : d.device;
    return [
      name,
      count(p.events),
      count(p.allocations),
      count(p.frees),
      humanBytes(p.peakAllocated),
      `${((p.peakAllocatedTime - t0) / 1000).toFixed(1)} ms`,
      p.peakReserved === null ? 'not recorded' : humanBytes(p.peakReserved),
      d.allocatedIsRelative ? 'unknown' : humanBytes(p.baseline),
      humanBytes(p.finalAllocated),
    ];
  });
  out.push(
    renderTable(
      ['device', 'events', 'allocs', 'frees', 'peak allocated', 'peak at', 'peak reserved', 'in use at start', 'in use at end'],
      rows,
      { align: ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'] },
    ),
  );
  out.push(style.dim("peak at: time since the trace's first memory event."));
  if (trace.outOfMemory.length > 0) {
    out.push('');
    out.push(style.heading(`Out-of-memory errors (${trace.outOfMemory.length})`));
    for (const o of trace.outOfMemory) out.push(`  ${outOfMemoryLine(o, t0)}`);
  }
  if (trace.devices.some((d) => d.allocatedIsRelative)) {
    out.push(
      style.dim(
        'This layout records no totals: allocated is summed from the start of the trace (memory allocated before profiling is not counted), and reserved memory is not recorded.',
      ),
    );
  }
  for (const d of trace.devices) {
    if (d.inconsistentTotals > 0) {
      out.push(`warning: ${d.device}: ${d.inconsistentTotals} events whose Total Allocated is not the previous total plus Bytes (events lost or reordered)`);
    }
  }
  if (trace.operators.count > 0) {
    for (const d of trace.devices) {
      // Operators that only enclose others (no event of their own) show in "incl." only.
      const rowsByOp = memoryByOperator(trace, d).filter((r) => r.allocations + r.frees > 0);
      out.push('');
      out.push(style.heading(`Memory added per operator on ${d.device} (top ${Math.min(top, rowsByOp.length)} of ${rowsByOp.length}, by self net)`));
      out.push(
        renderTable(
          ['operator', 'allocs', 'frees', 'self allocated', 'self freed', 'self net', 'incl. net'],
          rowsByOp
            .slice(0, top)
            .map((r) => [r.name, count(r.allocations), count(r.frees), humanBytes(r.selfAllocated), humanBytes(r.selfFreed), signedBytes(r.selfNet), signedBytes(r.inclusiveNet)]),
          { align: ['left', 'right', 'right', 'right', 'right', 'right', 'right'] },
        ),
      );
    }
    out.push(style.dim('self: events whose innermost enclosing CPU operator (same thread) is this one; incl.: nested operators too.'));
  }
  if (trace.categoryNames && trace.devices[0]?.categoryBytes) {
    const d = trace.devices[0];
    const peakIndex = indexOfMax(d.allocated);
    out.push('');
    out.push(style.heading('By category at the peak'));
    out.push(
      renderTable(
        ['category', 'bytes at peak', 'max'],
        trace.categoryNames.map((c, k) => [c, humanBytes(d.categoryBytes![k]![peakIndex] ?? 0), humanBytes(maxOf(d.categoryBytes![k]!))]),
        { align: ['left', 'right', 'right'] },
      ),
    );
  }
  return out.join('\n') + '\n';
}

function indexOfMax(a: Float64Array): number {
  let k = 0;
  for (let i = 1; i < a.length; i++) if (a[i]! > a[k]!) k = i;
  return k;
}

function maxOf(a: Float64Array): number {
  let m = 0;
  for (const v of a) if (v > m) m = v;
  return m;
}

/** The JSON form of the trace summary. */
export function traceSummaryJson(trace: MemoryTrace, top = 15): unknown {
  return {
    kind: 'trace',
    source: trace.source,
    events: trace.eventCount,
    memoryEvents: trace.memoryEventCount,
    operatorSpans: trace.operators.count,
    devices: trace.devices.map((d) => ({
      ...devicePeak(d),
      name: trace.deviceNames[Number(/^cuda:(\d+)$/.exec(d.device)?.[1] ?? NaN)] ?? null,
      inconsistentTotals: d.inconsistentTotals,
      operators: trace.operators.count > 0 ? memoryByOperator(trace, d).slice(0, top) : [],
    })),
    // NaN (a time or size the event lacked) is not JSON: null.
    outOfMemory: trace.outOfMemory.map((o) => ({ ...o, time: Number.isFinite(o.time) ? o.time : null, bytes: Number.isFinite(o.bytes) ? o.bytes : null })),
  };
}

// ---------------------------------------------------------------- snapshots

export interface SnapshotSummaryOptions {
  readonly top?: number;
  readonly frames?: number;
  readonly style?: TextStyle;
  /** Which frame an allocation is charged to (src/core/site-rule.ts). */
  readonly site?: SiteRule;
}

/** memory_summary-style table per device, largest live allocations, totals by allocating frame. */
export function formatSnapshotSummary(snapshot: MemorySnapshot, options: SnapshotSummaryOptions = {}): string {
  const style = options.style ?? PLAIN;
  const top = options.top ?? 10;
  const frames = options.frames ?? 3;
  const site = options.site ?? DEFAULT_SITE_RULE;
  const out: string[] = [];
  const totals = snapshotTotals(snapshot);
  out.push(
    style.heading(
      `${deviceTypeTitle(snapshot.deviceType)} memory snapshot: ${count(snapshot.segments.length)} segments, ${count(snapshot.blocks.count)} blocks, ` +
        `${count(snapshot.traces.reduce((s, t) => s + t.count, 0))} trace events`,
    ),
  );
  out.push(
    `reserved ${humanBytes(totals.all.reserved)}, allocated ${humanBytes(totals.all.allocated)}, active ${humanBytes(totals.all.active)}` +
      (totals.all.requested === null ? '' : `, requested ${humanBytes(totals.all.requested)}`) +
      ` (from the segments' own fields)`,
  );
  const disagree: string[] = [];
  if (totals.all.allocated !== totals.all.allocatedFromBlocks) disagree.push(`allocated ${humanBytes(totals.all.allocatedFromBlocks)} from blocks`);
  if (totals.all.active !== totals.all.activeFromBlocks) disagree.push(`active ${humanBytes(totals.all.activeFromBlocks)} from blocks`);
  if (totals.all.requested !== null && totals.all.requested !== totals.all.requestedFromBlocks) disagree.push(`requested ${humanBytes(totals.all.requestedFromBlocks)} from blocks`);
  if (disagree.length) out.push(`warning: segment fields and blocks disagree: ${disagree.join(', ')}`);
  const counts = traceActionCounts(snapshot);
  for (const c of counts) {
    out.push(`trace, device ${c.device}: ${Object.entries(c.counts).map(([a, n]) => `${count(n)} ${a}`).join(', ')}`);
  }
  if (snapshot.warnings.length > 0) {
    out.push('notes:');
    for (const w of snapshot.warnings) out.push(style.dim(`  ${w}`));
  }
  const ooms = outOfMemoryEvents(snapshot, Math.min(top, 5), frames, site);
  if (ooms.length > 0) {
    out.push('');
    out.push(style.heading(`Out-of-memory errors (${ooms.length})`));
    for (const o of ooms) out.push(...formatOom(o, '', snapshot.deviceType));
  }
  for (const device of snapshotDevices(snapshot)) {
    const { stats, notes } = snapshotMemoryStats(snapshot, device);
    out.push('');
    out.push(renderMemorySummary(stats, device, false, deviceTypeTitle(snapshot.deviceType)).trimEnd());
    for (const n of notes) out.push(style.dim(n));
  }
  const pools = summarisePools(snapshot);
  if (pools.length > 1) {
    out.push('');
    out.push(style.heading('Memory pools'));
    out.push(renderTable(['pool', 'segments', 'reserved', 'allocated'], pools, { align: ['left', 'right', 'right', 'right'] }));
  }
  const largest = largestAllocations(snapshot, top, frames, null, site);
  out.push('');
  out.push(style.heading(`Largest live allocations (top ${largest.length})`));
  out.push(
    renderTable(
      ['size', 'requested', 'device', 'address', 'allocated at ← called from'],
      largest.map((a) => [humanBytes(a.size), humanBytes(a.requestedSize), deviceLabel(snapshot.deviceType, a.device), `0x${a.address.toString(16)}`, a.frames.length ? a.frames.join(' ← ') : '<no frames recorded>']),
      { align: ['right', 'right', 'left', 'left', 'left'] },
    ),
  );
  const byFrame = totalsByFrame(snapshot, null, site);
  out.push('');
  out.push(style.heading(`Live memory by allocating frame (top ${Math.min(top, byFrame.length)} of ${byFrame.length})`));
  out.push(
    renderTable(
      ['allocating frame', 'blocks', 'bytes', 'share'],
      byFrame.slice(0, top).map((r) => [r.frame, count(r.blocks), humanBytes(r.bytes), percent(totals.all.allocatedFromBlocks ? r.bytes / totals.all.allocatedFromBlocks : 0)]),
      { align: ['left', 'right', 'right', 'right'] },
    ),
  );
  out.push(style.dim('allocating frame: the site, the innermost Python frame outside torch itself (and outside --site-skip); else the innermost Python frame; for C++-only stacks (autograd thread) the ATen operator.'));
  return out.join('\n') + '\n';
}

/** When an event happened: a date for epoch microseconds, else the raw figure. */
function formatTimeUs(t: number | null): string {
  if (t === null) return 'time unknown';
  // After 2001 in epoch microseconds: a real clock (hand-made and test files count from 0).
  return t > 1e15 ? new Date(t / 1000).toISOString() : `time_us ${t}`;
}

/** An OOM as lines: what failed, the device's state then, and the largest allocations live then. */
export function formatOom(o: OomEvent, indent = '', deviceType = 'cuda'): string[] {
  const out = [
    `${indent}${deviceLabel(deviceType, o.device)} trace entry ${count(o.index)}, ${formatTimeUs(o.timeUs)}: ${humanBytes(o.requestedSize)} requested, ` +
      `${o.deviceFree === null ? 'device free unknown' : `${humanBytes(o.deviceFree)} free on the device`}; ` +
      `allocated ${humanBytes(o.allocated)}, reserved ${humanBytes(o.reserved)}`,
  ];
  if (o.frames.length > 0) out.push(`${indent}  requested at ${o.frames.join(' ← ')}`);
  if (o.largestLive.length > 0) {
    out.push(`${indent}  largest live allocations then:`);
    for (const a of o.largestLive) {
      out.push(`${indent}    ${humanBytes(a.size).padStart(11)}  0x${a.address.toString(16)}  ${a.frames.length ? a.frames.join(' ← ') : '<no frames recorded>'}`);
    }
  }
  return out;
}

function summarisePools(snapshot: MemorySnapshot): string[][] {
  const acc = new Map<string, { device: number; pool: readonly [number, number]; type: string; segments: number; reserved: number; allocated: number }>();
  for (const s of snapshot.segments) {
    const key = `${deviceLabel(snapshot.deviceType, s.device)} ${s.poolId ? `(${s.poolId[0]}, ${s.poolId[1]})` : '(default)'} ${s.segmentType}`;
    let a = acc.get(key);
    if (!a) acc.set(key, (a = { device: s.device, pool: s.poolId ?? [-1, -1], type: s.segmentType, segments: 0, reserved: 0, allocated: 0 }));
    a.segments++;
    a.reserved += s.totalSize;
    a.allocated += s.allocatedSize;
  }
  // Devices and pool ids in numeric order (cuda:2 before cuda:10), then the pool type.
  return [...acc]
    .sort(([, x], [, y]) => x.device - y.device || x.pool[0] - y.pool[0] || x.pool[1] - y.pool[1] || (x.type < y.type ? -1 : x.type > y.type ? 1 : 0))
    .map(([k, a]) => [k, count(a.segments), humanBytes(a.reserved), humanBytes(a.allocated)]);
}

export function snapshotSummaryJson(snapshot: MemorySnapshot, top = 10, frames = 3, site: SiteRule = DEFAULT_SITE_RULE): unknown {
  return {
    kind: 'snapshot',
    deviceType: snapshot.deviceType,
    segments: snapshot.segments.length,
    blocks: snapshot.blocks.count,
    totals: snapshotTotals(snapshot),
    traceActions: traceActionCounts(snapshot),
    devices: snapshotDevices(snapshot).map((device) => ({ device, name: deviceLabel(snapshot.deviceType, device), ...snapshotMemoryStats(snapshot, device) })),
    largestAllocations: largestAllocations(snapshot, top, frames, null, site),
    byAllocatingFrame: totalsByFrame(snapshot, null, site).slice(0, top),
    outOfMemory: outOfMemoryEvents(snapshot, Math.min(top, 5), frames, site),
    warnings: snapshot.warnings,
  };
}

/** `_memory_viz.py stats`: segment map, internal vs external free, fragmentation. */
export function formatFragmentation(snapshot: MemorySnapshot, options: { style?: TextStyle } = {}): string {
  const style = options.style ?? PLAIN;
  const r = fragmentation(snapshot);
  const out: string[] = [];
  const devices = [...new Set(r.segments.map((s) => s.deviceName))];
  out.push(style.heading(`${deviceTypeTitle(r.deviceType)} memory snapshot${devices.length ? `: ${devices.join(', ')}` : ', no segments'}`));
  out.push(style.heading(`Segments of ${humanBytes(SEGMENT_MAP_PAGE)} or more (one character per ${humanBytes(SEGMENT_MAP_PAGE)} page)`));
  const sorted = [...r.segments].sort((a, b) => a.totalSize - b.totalSize || a.allocated - b.allocated);
  for (const s of sorted) {
    if (s.totalSize < SEGMENT_MAP_PAGE) continue;
    const free = s.freeInternal + s.freeExternal;
    const internal = free > 0 ? ` (${percent(s.freeInternal / free)} internal)` : '';
    out.push(`[${s.map}] ${humanBytes(s.totalSize)} reserved, ${humanBytes(free)} free${internal}${s.stream ? `, stream_${s.stream}` : ''}`);
  }
  const free = r.freeInternal + r.freeExternal;
  out.push('');
  out.push(
    renderTable(
      ['figure', 'value'],
      [
        ['segments', count(r.segments.length)],
        ['reserved', humanBytes(r.totalReserved)],
        ['allocated (requested bytes)', humanBytes(r.totalAllocated)],
        ['free', `${humanBytes(free)}${free ? ` (${percent(r.freeInternal / free)} internal)` : ''}`],
        ['  internal (rounding inside allocations)', humanBytes(r.freeInternal)],
        ['  external (gaps between allocations)', humanBytes(r.freeExternal)],
        ['external fragmentation (external / reserved)', percent(r.externalFragmentation)],
        ['largest free block', humanBytes(r.largestFreeBlock)],
        ['free scatter (1 − largest free / external free)', percent(r.freeScatter)],
      ],
      { align: ['left', 'right'] },
    ),
  );
  out.push(style.dim(SEGMENT_MAP_LEGEND));
  return out.join('\n') + '\n';
}

/** What changed between two snapshots, by allocating frame. */
export function formatComparison(cmp: SnapshotComparison, options: { top?: number; style?: TextStyle; before?: string; after?: string } = {}): string {
  const style = options.style ?? PLAIN;
  const top = options.top ?? 20;
  const out: string[] = [];
  const kinds = [...new Set([cmp.deviceTypeBefore, cmp.deviceTypeAfter])].map(deviceTypeTitle).join(' and ');
  out.push(style.heading(`${kinds} memory snapshots: ${options.before ?? 'before'} → ${options.after ?? 'after'}`));
  out.push(
    renderTable(
      ['', 'before', 'after', 'change'],
      [
        ['allocated', humanBytes(cmp.allocatedBefore), humanBytes(cmp.allocatedAfter), signedBytes(cmp.allocatedAfter - cmp.allocatedBefore)],
        ['reserved', humanBytes(cmp.reservedBefore), humanBytes(cmp.reservedAfter), signedBytes(cmp.reservedAfter - cmp.reservedBefore)],
        ['segments only here', count(cmp.segmentsOnlyBefore.length), count(cmp.segmentsOnlyAfter.length), ''],
      ],
      { align: ['left', 'right', 'right', 'right'] },
    ),
  );
  out.push('');
  out.push(style.heading(`Changes by allocating frame (top ${Math.min(top, cmp.changes.length)} of ${cmp.changes.length})`));
  if (cmp.changes.length === 0) out.push('(no change in live memory by frame)');
  else {
    out.push(
      renderTable(
        ['allocating frame', 'before', 'after', 'change', 'blocks'],
        cmp.changes.slice(0, top).map((c) => [
          c.frame,
          humanBytes(c.before),
          humanBytes(c.after),
          c.delta > 0 ? style.up(signedBytes(c.delta)) : c.delta < 0 ? style.down(signedBytes(c.delta)) : '0 B',
          `${c.blocksBefore} → ${c.blocksAfter}`,
        ]),
        { align: ['left', 'right', 'right', 'right', 'right'] },
      ),
    );
  }
  return out.join('\n') + '\n';
}

export { compareSnapshots };

/**
 * A profiler trace's memory events as readable lines, per device:
 * time since the device's first event, signed size, allocated total after the
 * event (and reserved when it changed), the innermost enclosing operator.
 */
export function traceEventLines(trace: MemoryTrace, options: { limit?: number } = {}): string[] {
  const limit = options.limit ?? Infinity;
  const out: string[] = [];
  const ops = trace.operators;
  // Times count from the trace's first memory event on every device, so lines of two devices compare.
  const t0 = traceStartTime(trace);
  for (const d of trace.devices) {
    out.push(`Device ${d.device} ---------------- ${d.count} events${d.allocatedIsRelative ? ' (totals relative to the trace start)' : ''}`);
    let lastReserved = NaN;
    const n = Math.min(d.count, limit);
    const ooms = trace.outOfMemory.filter((o) => o.device === d.device);
    let nextOom = 0;
    for (let i = 0; i < n; i++) {
      for (; nextOom < ooms.length && ooms[nextOom]!.time < d.time[i]!; nextOom++) out.push(`${((ooms[nextOom]!.time - t0) / 1000).toFixed(3).padStart(10)} ms  ${outOfMemoryLine(ooms[nextOom]!, null)}`);
      const b = d.bytes[i]!;
      const op = d.operator[i]!;
      const where = op >= 0 ? `  in ${ops.names[ops.nameIndex[op]!]}` : '';
      let reserved = '';
      if (d.reserved && d.reserved[i] !== lastReserved) {
        reserved = `, reserved ${humanBytes(d.reserved[i]!)}`;
        lastReserved = d.reserved[i]!;
      }
      const addr = d.addr && Number.isFinite(d.addr[i]!) ? ` @0x${d.addr[i]!.toString(16)}` : '';
      out.push(
        `${((d.time[i]! - t0) / 1000).toFixed(3).padStart(10)} ms  ${(b >= 0 ? 'alloc ' : 'free  ')}${humanBytes(Math.abs(b)).padStart(11)}${addr}  → ${humanBytes(d.allocated[i]!)}${reserved}${where}`,
      );
    }
    if (n < d.count) out.push(`… ${d.count - n} more events (raise --limit)`);
    else for (; nextOom < ooms.length; nextOom++) out.push(`${((ooms[nextOom]!.time - t0) / 1000).toFixed(3).padStart(10)} ms  ${outOfMemoryLine(ooms[nextOom]!, null)}`);
    const p = devicePeak(d);
    out.push(`peak ${humanBytes(p.peakAllocated)} at ${((p.peakAllocatedTime - t0) / 1000).toFixed(3)} ms; ${humanBytes(p.finalAllocated)} at the end`);
  }
  // OOMs of a device that recorded no memory event.
  const drawn = new Set(trace.devices.map((d) => d.device));
  for (const o of trace.outOfMemory) if (!drawn.has(o.device)) out.push(`${((o.time - t0) / 1000).toFixed(3).padStart(10)} ms  ${outOfMemoryLine(o, null)}`);
  return out;
}
