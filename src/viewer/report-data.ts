/**
 * The data a report page embeds, and how a capture becomes it. The browser
 * app (src/viewer/app) reads exactly this shape from the page's
 * `<script type="application/json" id="memscope-data">`. Framework-free.
 *
 * The timeline is columnar and delta-coded so a million events stay a few
 * megabytes of JSON that parses in well under a second: event i happens at
 * `sum(dt[0..i]) / 1000` ms (or event index, for sources without time), adds
 * `bytes[i]` (negative for a free) to series `series[i]`.
 */
import { CATEGORIES, recordedFrom, recordingOption } from '../capture/types.js';
import { DEFAULT_SITE_RULE, siteFrame, type SiteRule } from '../core/site-rule.js';
import { findLeaks } from '../capture/leaks.js';
import type { FlameGraphData } from '../render/flamegraph-data.js';
import type { Capture } from '../capture/reader.js';
import type { ReportHistory } from './snapshot-history-data.js';

export const REPORT_DATA_VERSION = 2;

export interface ReportSeries {
  readonly device: string;
  /** A MemTracker category, or a PyTorch block state / category for imported files. */
  readonly category: string;
}

export interface ReportModule {
  readonly path: string;
  readonly className: string;
  readonly depth: number;
  /** Bytes of its parameters and buffers, its submodules' included. */
  readonly parameterBytes: number;
  readonly bufferBytes: number;
  /** State name → device → category → bytes. */
  readonly states: Record<string, Record<string, Record<string, number>>>;
  readonly localPeakForward: Record<string, number>;
  readonly localPeakBackward: Record<string, number>;
}

export interface ReportKernel {
  readonly name: string;
  readonly calls: number;
  readonly bytesAllocated: number;
  /** Bytes of the kernel's allocations still alive when the record ended. */
  readonly bytesRetained: number;
  /** Largest net growth of live bytes during one call. */
  readonly peakAdded: number;
}

export interface ReportLeak {
  readonly bytes: number;
  readonly count: number;
  readonly kernel: string | null;
  readonly layer: string | null;
  readonly device: string;
  readonly categories: string[];
  readonly userFrame: string | null;
  readonly frames: string[];
  readonly perStep: { step: number; count: number; bytes: number }[];
  readonly liveAtStepEnd: number[];
}

/** Columnar allocation table (the embedded subset: the largest ones). */
export interface ReportAllocations {
  /** Start and end time (end -1: alive when the record ended). */
  readonly t0: number[];
  readonly t1: number[];
  readonly bytes: number[];
  readonly series: number[];
  /** Indexes into `strings` (0 = none). */
  readonly layer: number[];
  readonly kernel: number[];
  /** Index into `stacks` (-1 = none). */
  readonly stack: number[];
  /** Index into `strings`: the site (the first frame outside the allocator and the framework; 0 = none). */
  readonly site: number[];
  /** Block addresses (profiler traces that record them; absent for captures). */
  readonly address?: number[];
}

export interface ReportSegment {
  readonly device: string;
  readonly address: number;
  readonly size: number;
  readonly label: string;
  /** Blocks in address order: size, state name index into `blockStates`, stack (-1 none). */
  readonly blocks: { size: number[]; state: number[]; stack: number[] };
}

/**
 * One device's allocations, for the Active Memory Timeline (PyTorch snapshots). Allocations are
 * listed in stacking order, bottom first: blocks live before the trace began, then the trace's
 * allocations in the order they were made (as torch/utils/viz/MemoryViz.js stacks them).
 */
export interface ReportDeviceMemory {
  readonly device: string;
  /**
   * The device's trace events: event k happens at `sum(eventDt[0..k]) / 1000` (ms, or the event
   * number for files without `time_us`).
   */
  readonly eventDt: number[];
  /** Per allocation: the event that made it (-1: live before the trace) and that freed it (-1: live at the end). */
  readonly start: number[];
  readonly end: number[];
  readonly bytes: number[];
  /** Block address (-1: unknown). */
  readonly address: number[];
  /** Index into `stacks` (-1 = none). */
  readonly stack: number[];
  /** Index into `strings`: the first frame outside the allocator and the framework. */
  readonly site: number[];
  /** Reserved bytes before the trace, and each change: at event `reservedAt[i]`, `reservedDelta[i]` bytes. */
  readonly reservedBase: number;
  readonly reservedAt: number[];
  readonly reservedDelta: number[];
  /**
   * Highest active bytes (alloc … free_completed, each at its requested size, as the trace records
   * it) and reserved bytes over the trace, live-before included.
   */
  readonly peakAllocated: number;
  readonly peakReserved: number;
  /** The query box's columns (src/viewer/query-columns.ts); absent for pages built without them. */
  readonly facets?: AllocationFacets;
}

/** Per-allocation columns the query box reads (docs/QUERY.md), parallel to the device's allocations. */
export interface AllocationFacets {
  /** CUDA stream of the allocation (-1: unknown). */
  readonly stream: number[];
  /** Index into `strings`: the pool ("small", "large", or a private pool "(a, b)"). */
  readonly pool: number[];
  /** Index into `categoryNames`: the inferred category. */
  readonly category: number[];
  readonly categoryNames: string[];
  /** The trace's phases, run by run: from event `phaseAt[k]` on, phase `phaseNames[phaseOf[k]]` in training step `stepOf[k]`. */
  readonly phaseAt: number[];
  readonly phaseOf: number[];
  readonly stepOf: number[];
  readonly phaseNames: string[];
  /** The device's peak of allocated bytes holds after this many events (0: before the first). */
  readonly peakEvents: number;
}

/** Per stack (parallel to `stacks`), indexes into `strings`: its first user frame ("file.py:line:function"), that frame's file path and function (0: none). */
export interface StackUserFrames {
  readonly frame: number[];
  readonly file: number[];
  readonly function: number[];
}

export interface ReportMemory {
  readonly devices: ReportDeviceMemory[];
  /** Per stack (parallel to `stacks`): how many innermost frames are the allocator's or the framework's (shown folded). */
  readonly stackFolded: number[];
  /** Per stack (parallel to `stacks`): its site as the allocations' `site` names it, an index into `strings`. */
  readonly stackSite: number[];
  /** The query box's per-stack columns (src/viewer/query-columns.ts). */
  readonly userFrames?: StackUserFrames;
}

export interface ReportData {
  readonly version: number;
  readonly title: string;
  readonly source: { kind: 'capture' | 'snapshot' | 'trace'; file: string; detail: string };
  /** Things the reader should know: truncation, dropped events, what the caps left out. */
  readonly notices: string[];
  /** A snapshot's reading notes (MemorySnapshot.warnings: what was read other than exactly as written); absent for other sources. */
  readonly warnings?: readonly string[];
  readonly truncated: string | null;
  readonly timeUnit: 'ms' | 'event';
  readonly series: ReportSeries[];
  readonly timeline: { dt: number[]; series: number[]; bytes: number[] };
  /** Step marks: a capture's step ends; a profiler trace's `ProfilerStep#N` starts, with their name as `label`. */
  readonly steps: { t: number; step: number; label?: string }[];
  readonly strings: string[];
  /** Each stack: indexes into `strings`, innermost first. */
  readonly stacks: number[][];
  readonly allocations: ReportAllocations;
  /** How many allocations the source had (the table holds the largest `allocations.bytes.length`). */
  readonly allocationsTotal: number;
  readonly modules: ReportModule[];
  readonly kernels: ReportKernel[];
  readonly leaks: ReportLeak[];
  readonly leakNote: string | null;
  /** What part of the run the leak verdict covers when a capture dropped allocations (LeakReport.coverage). */
  readonly leakCoverage: string | null;
  /** The step ends the leak verdict compared (LeakReport.steps: training, inference and marked), as `memscope leaks` counts them. */
  readonly leakSteps: number;
  readonly segments: ReportSegment[];
  readonly blockStates: string[];
  /** Per-allocation timelines (PyTorch snapshots); null for other sources. */
  readonly memory: ReportMemory | null;
  /** Flame graphs drawn, zoomed and searched in the page (PyTorch snapshots: segments, memory). */
  readonly flames?: FlameGraphData[];
  /** Allocator state history, segment timeline, settings and OOMs (PyTorch snapshots); absent for other sources. */
  readonly history?: ReportHistory | null;
}

export interface ReportCaps {
  /** Timeline events embedded exactly; beyond this, consecutive events are merged. */
  readonly maxTimelineEvents: number;
  /** Allocations embedded with detail (the largest by bytes). */
  readonly maxAllocations: number;
  readonly maxKernels: number;
  readonly maxLeaks: number;
  /** Frames kept per stack. */
  readonly maxFrames: number;
  /**
   * Which frame is an allocation's site (src/core/site-rule.ts); `siteRule(["site-packages/transformers/"])`
   * makes a library's frames count as framework too. Default: PyTorch's and TFJS's internal frames.
   */
  readonly site?: SiteRule;
}

export const DEFAULT_CAPS: ReportCaps = {
  maxTimelineEvents: 2_000_000,
  maxAllocations: 50_000,
  maxKernels: 200,
  maxLeaks: 50,
  maxFrames: 40,
};

/** Interns strings and stacks for the embedded tables. */
export class StringTable {
  readonly strings: string[] = [''];
  readonly stacks: number[][] = [];
  private readonly ids = new Map<string, number>();
  private readonly stackIds = new Map<unknown, number>();

  str(s: string | null | undefined): number {
    if (!s) return 0;
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.strings.length;
      this.strings.push(s);
      this.ids.set(s, id);
    }
    return id;
  }

  /** `key` identifies the stack in its source; frames are read only the first time. */
  stack(key: unknown, frames: () => readonly string[], maxFrames: number): number {
    let id = this.stackIds.get(key);
    if (id === undefined) {
      id = this.stacks.length;
      this.stacks.push(frames().slice(0, maxFrames).map((f) => this.str(f)));
      this.stackIds.set(key, id);
    }
    return id;
  }
}

/** Builds the timeline columns from time-ordered (t, series, bytes) events, merging when over the cap. */
export class TimelineBuilder {
  readonly dt: number[] = [];
  readonly series: number[] = [];
  readonly bytes: number[] = [];
  private lastUs = 0;

  push(t: number, series: number, bytes: number): void {
    const us = Math.round(t * 1000);
    this.dt.push(us - this.lastUs);
    this.series.push(series);
    this.bytes.push(bytes);
    this.lastUs = us;
  }
}

/**
 * Merges groups of consecutive events into one event per series per group
 * (at the group's last time), so at most about `max` events remain. Peaks
 * inside a group are lost; the caller says so in the notices.
 */
export function mergeEvents(t: Float64Array, series: Int32Array, bytes: Float64Array, max: number, nSeries: number, out: TimelineBuilder): number {
  const n = t.length;
  const group = Math.max(1, Math.ceil((n * Math.max(1, Math.min(nSeries, 4))) / max));
  if (group === 1) {
    for (let i = 0; i < n; i++) out.push(t[i], series[i], bytes[i]);
    return 1;
  }
  const acc = new Float64Array(nSeries);
  for (let start = 0; start < n; start += group) {
    const end = Math.min(n, start + group);
    for (let i = start; i < end; i++) acc[series[i]] += bytes[i];
    for (let s = 0; s < nSeries; s++) {
      if (acc[s] !== 0) out.push(t[end - 1], s, acc[s]);
      acc[s] = 0;
    }
  }
  return group;
}

export function captureToReport(capture: Capture, file: string, caps: ReportCaps = DEFAULT_CAPS): ReportData {
  const notices: string[] = [];
  const table = new StringTable();

  // Series: one per (device, category) that occurs, categories in MemTracker order.
  const allocs = capture.allocs;
  const count = allocs.length;
  const seriesIndex = new Map<string, number>();
  const deviceIds = new Set<number>();
  const categoryIds = new Set<number>();
  for (let i = 0; i < count; i++) {
    deviceIds.add(allocs.device[i]!);
    categoryIds.add(allocs.category[i]!);
  }
  const text = (id: number): string => allocs.strings[id] ?? '';
  const devices = [...new Set([...deviceIds].map(text))].sort();
  const categories = [...new Set([...categoryIds].map(text))].sort((a, b) => catOrder(a) - catOrder(b));
  const series: ReportSeries[] = [];
  for (const device of devices) {
    for (const category of categories) {
      seriesIndex.set(`${device}\u0000${category}`, series.length);
      series.push({ device, category });
    }
  }
  // Per (device, category) string ids: the series, found once per pair rather than per allocation.
  const seriesOfIds = new Map<number, number>();
  const allocSeries = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const key = allocs.device[i]! * 2 ** 26 + allocs.category[i]!;
    let k = seriesOfIds.get(key);
    if (k === undefined) seriesOfIds.set(key, (k = seriesIndex.get(`${allocs.deviceOf(i)}\u0000${allocs.categoryOf(i)}`)!));
    allocSeries[i] = k;
  }

  // The timeline's events in capture order: each allocation's alloc at `seq`, its free at `freeSeq`.
  const n = capture.eventCount;
  const t = new Float64Array(n);
  const s = new Int32Array(n);
  const b = new Float64Array(n);
  for (let k = 0; k < count; k++) {
    const at = allocs.seq[k]!;
    t[at] = allocs.t[k]!;
    s[at] = allocSeries[k]!;
    b[at] = allocs.bytes[k]!;
    const freed = allocs.freeSeq[k]!;
    if (freed >= 0) {
      t[freed] = allocs.freeT[k]!;
      s[freed] = allocSeries[k]!;
      b[freed] = -allocs.bytes[k]!;
    }
  }
  const timeline = new TimelineBuilder();
  const group = mergeEvents(t, s, b, caps.maxTimelineEvents, series.length, timeline);
  if (group > 1) notices.push(`The timeline merges every ${group} consecutive events (${n.toLocaleString('en-US')} events, cap ${caps.maxTimelineEvents.toLocaleString('en-US')}): peaks shorter than a group are not visible.`);

  // The largest allocations, with detail, for hover and the allocation table.
  const order = Array.from({ length: count }, (_, i) => i).sort((x, y) => allocs.bytes[y]! - allocs.bytes[x]!);
  const kept = order.slice(0, caps.maxAllocations).sort((x, y) => x - y);
  if (order.length > kept.length) {
    notices.push(`Allocation details embedded for the ${kept.length.toLocaleString('en-US')} largest of ${order.length.toLocaleString('en-US')} allocations; hover and the table list only those.`);
  }
  const allocations: ReportAllocations = { t0: [], t1: [], bytes: [], series: [], layer: [], kernel: [], stack: [], site: [] };
  const rule = caps.site ?? DEFAULT_SITE_RULE;
  const siteOf = new Map<number, number>();
  for (const i of kept) {
    const a = allocs.at(i);
    allocations.t0.push(a.t);
    allocations.t1.push(a.freeT ?? -1);
    allocations.bytes.push(a.bytes);
    allocations.series.push(allocSeries[i]!);
    allocations.layer.push(table.str(a.layer));
    allocations.kernel.push(table.str(a.kernel));
    allocations.stack.push(a.stack ? table.stack(a.stack, () => capture.stacks.get(a.stack) ?? [], caps.maxFrames) : -1);
    let site = siteOf.get(a.stack);
    if (site === undefined) siteOf.set(a.stack, (site = a.stack ? table.str(siteFrame(rule, capture.stacks.get(a.stack) ?? [])) : 0));
    allocations.site.push(site);
  }

  // Modules in tree order (parents before children, siblings by natural path order).
  const byParent = new Map<number, typeof capture.modules>();
  for (const m of capture.modules) {
    const list = byParent.get(m.parentId) ?? [];
    list.push(m);
    byParent.set(m.parentId, list);
  }
  const modules: ReportModule[] = [];
  const bySiblingOrder = (x: (typeof capture.modules)[number], y: (typeof capture.modules)[number]): number => x.path.localeCompare(y.path, 'en', { numeric: true });
  for (const list of byParent.values()) list.sort(bySiblingOrder);
  // Depth first, parents before children, with an explicit stack: a capture's module chain can be
  // thousands deep, and a damaged one can name a module as its own ancestor. Each module is placed
  // once; one that no chain from the root reaches (it sits on a parent cycle) is placed at the top.
  const placed = new Set<(typeof capture.modules)[number]>();
  const place = (m: (typeof capture.modules)[number], depth: number): void => {
    placed.add(m);
    const st = m.states;
    modules.push({
      path: m.path,
      className: m.className,
      depth,
      parameterBytes: st?.parameterBytes ?? 0,
      bufferBytes: st?.bufferBytes ?? 0,
      states: st?.states ?? {},
      localPeakForward: st?.localPeakForward ?? {},
      localPeakBackward: st?.localPeakBackward ?? {},
    });
  };
  const walkFrom = (rootParent: number, rootDepth: number): void => {
    const todo: { list: typeof capture.modules; next: number; depth: number }[] = [{ list: byParent.get(rootParent) ?? [], next: 0, depth: rootDepth }];
    const expanded = new Set<number>([rootParent]);
    while (todo.length > 0) {
      const top = todo[todo.length - 1]!;
      if (top.next >= top.list.length) {
        todo.pop();
        continue;
      }
      const m = top.list[top.next++]!;
      if (placed.has(m)) continue;
      place(m, top.depth);
      // A module id seen before as a parent on this walk would start the same children again.
      if (expanded.has(m.id)) continue;
      expanded.add(m.id);
      todo.push({ list: byParent.get(m.id) ?? [], next: 0, depth: top.depth + 1 });
    }
  };
  walkFrom(-1, 0);
  const unreached = capture.modules.filter((m) => !placed.has(m));
  if (unreached.length > 0) {
    notices.push(
      `${unreached.length.toLocaleString('en-US')} module(s) are not under the root: their parent chain loops (e.g. ${JSON.stringify(unreached[0]!.path)}); each is listed at the top level with what is under it.`,
    );
    for (const m of unreached) {
      if (placed.has(m)) continue;
      place(m, 0);
      walkFrom(m.id, 1);
    }
  }

  rollUpWeights(modules);

  // Kernels: the recorder's statistics; derived from allocations if the capture ended before any were written.
  // "Retained" is what the kernel's outputs still hold when the record ends (tidy frees most of them).
  const aliveAtEnd = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const kernel = allocs.kernelOf(i);
    if (kernel && !allocs.isFreed(i)) aliveAtEnd.set(kernel, (aliveAtEnd.get(kernel) ?? 0) + allocs.bytes[i]!);
  }
  let kernels: ReportKernel[] = capture.kernels.map((k) => ({ ...k, bytesRetained: aliveAtEnd.get(k.name) ?? 0 }));
  if (kernels.length === 0) {
    const derived = new Map<string, { name: string; calls: number; bytesAllocated: number; bytesRetained: number; peakAdded: number }>();
    for (let i = 0; i < count; i++) {
      const kernel = allocs.kernelOf(i);
      if (!kernel) continue;
      const bytes = allocs.bytes[i]!;
      const k = derived.get(kernel) ?? { name: kernel, calls: 0, bytesAllocated: 0, bytesRetained: 0, peakAdded: 0 };
      k.bytesAllocated += bytes;
      if (!allocs.isFreed(i)) k.bytesRetained += bytes;
      k.peakAdded = Math.max(k.peakAdded, bytes);
      derived.set(kernel, k);
    }
    kernels = [...derived.values()];
    if (kernels.length) notices.push('Kernel call counts were not written before the capture ended; the kernel table is derived from allocations (calls unknown).');
  }
  kernels.sort((x, y) => y.bytesAllocated - x.bytesAllocated);
  if (kernels.length > caps.maxKernels) {
    notices.push(`Kernel table: the top ${caps.maxKernels} of ${kernels.length} kernels by bytes allocated.`);
    kernels = kernels.slice(0, caps.maxKernels);
  }

  const leakReport = findLeaks(capture, rule);
  let leaks: ReportLeak[] = leakReport.groups.map((g) => ({
    bytes: g.bytes,
    count: g.count,
    kernel: g.kernel,
    layer: g.layer,
    device: g.device,
    categories: g.categories,
    userFrame: g.userFrame,
    frames: g.stack.slice(0, caps.maxFrames),
    perStep: g.perStep,
    liveAtStepEnd: g.liveAtStepEnd,
  }));
  if (leaks.length > caps.maxLeaks) {
    notices.push(`Leaks: the ${caps.maxLeaks} largest of ${leaks.length} groups.`);
    leaks = leaks.slice(0, caps.maxLeaks);
  }

  let truncated: string | null = null;
  if (capture.truncated) {
    truncated = `This capture is truncated: ${capture.truncated.reason} (line ${capture.truncated.line}${capture.truncated.bytesIgnored ? `, ${capture.truncated.bytesIgnored} bytes ignored` : ''}). The report shows what was written up to there.`;
  }
  if (capture.end?.dropped) {
    notices.push(`${capture.end.dropped.toLocaleString('en-US')} allocations were not recorded individually (${recordingOption(capture.header, 'maxEntries')} ${capture.header.maxEntries}); step totals still count them.`);
  }
  if (capture.end?.error) notices.push(`The program ended with an error: ${capture.end.error}`);
  if (capture.unmatchedFrees) notices.push(`${capture.unmatchedFrees} frees of storages made before recording began were ignored.`);
  if (count === 0) notices.push('No tensor allocation was recorded: the program never created a TensorFlow.js tensor (or did not load TensorFlow.js).');
  if (!capture.header.stacks) notices.push(`Recorded without ${recordingOption(capture.header, 'stacks')}: leaks and allocations are located by layer and kernel only.`);

  const script = capture.header.argv[0] ?? 'program';
  return {
    version: REPORT_DATA_VERSION,
    title: `memscope · ${script.split(/[\\/]/).pop()}`,
    source: { kind: 'capture', file, detail: `${recordedFrom(capture.header)} · ${capture.header.created}` },
    notices,
    truncated,
    timeUnit: 'ms',
    series,
    timeline: { dt: timeline.dt, series: timeline.series, bytes: timeline.bytes },
    steps: capture.steps.map((p) => ({ t: p.t, step: p.step })),
    strings: table.strings,
    stacks: table.stacks,
    allocations,
    allocationsTotal: count,
    modules,
    kernels,
    leaks,
    leakNote: leakReport.note,
    leakCoverage: leakReport.coverage,
    leakSteps: leakReport.steps,
    segments: [],
    blockStates: [],
    memory: null,
  };
}

/**
 * A module's parameters and buffers include its submodules', as PyTorch's `module.parameters()`
 * recurses and as its state table counts them: a TFJS container (`sequential_1`) holds no
 * weights of its own, its layers do. `modules` is in tree order (each parent before its subtree,
 * one level shallower), so each module's parent is the nearest earlier module one level up.
 */
function rollUpWeights(modules: ReportModule[]): void {
  const parent = new Int32Array(modules.length).fill(-1);
  const open: number[] = [];
  modules.forEach((m, i) => {
    open.length = Math.min(open.length, m.depth);
    if (m.depth > 0 && open.length === m.depth) parent[i] = open[m.depth - 1]!;
    open.push(i);
  });
  const params = modules.map((m) => m.parameterBytes);
  const buffers = modules.map((m) => m.bufferBytes);
  for (let i = modules.length - 1; i >= 0; i--) {
    const p = parent[i]!;
    if (p < 0) continue;
    params[p] += params[i]!;
    buffers[p] += buffers[i]!;
  }
  modules.forEach((m, i) => (modules[i] = { ...m, parameterBytes: params[i]!, bufferBytes: buffers[i]! }));
}

function catOrder(c: string): number {
  const i = (CATEGORIES as readonly string[]).indexOf(c);
  return i < 0 ? CATEGORIES.length : i;
}
