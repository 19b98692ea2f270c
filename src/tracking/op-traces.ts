/**
 * Operator-level memory traces as data: the saved-stats format, the top-N
 * summary and the plots. Everything here works on a plain `OpTraceStats`
 * value, so a trace loaded from a file is summarised and plotted exactly like
 * one just recorded. Framework-free and browser-safe.
 */
import { MemscopeError } from '../core/errors.js';
import type { DeviceName } from '../core/events.js';
import { bytesIn, humanBytes } from '../core/units.js';
import { escapeHtml } from '../render/escape.js';
import { renderHtmlPage } from '../render/html-page.js';
import { renderLineChart, type ChartMarker, type LineSeries } from '../render/svg-line-chart.js';

/** The `format` field of a saved stats file; anything else is a foreign file. */
export const OP_TRACES_FORMAT = 'memscope.op-traces';
/** The newest stats layout this code writes and reads. */
export const OP_TRACES_VERSION = 1;

/** Memory right after one top-level kernel ran, in bytes (PyTorch stores MB floats; bytes round-trip exactly). */
export interface OpRecord {
  /** `<layer path>.<phase>.<Kernel>_<n>`, n counting calls of that kernel name in the session. */
  readonly name: string;
  /** Optimizer steps completed when the kernel ran. */
  readonly step: number;
  readonly allocated: number;
  readonly active: number;
  readonly reserved: number;
}

export type MarkerName = 'fw_start' | 'fw_bw_boundary';
export const MARKER_NAMES: readonly MarkerName[] = ['fw_start', 'fw_bw_boundary'];

/** A point between operator calls: `index` is the number of records made before it. */
export interface OpMarker {
  readonly name: MarkerName;
  readonly index: number;
  readonly step: number;
}

export interface MemoryFigures {
  readonly allocated: number;
  readonly active: number;
  readonly reserved: number;
}

export interface OpTraceStats {
  readonly format: typeof OP_TRACES_FORMAT;
  readonly version: typeof OP_TRACES_VERSION;
  readonly device: DeviceName;
  /** Where `reserved` came from, e.g. 'wasm heap', 'caching allocator model', 'allocated (cpu has no pool)'. */
  readonly reservedSource: string;
  /** What `active` means for this device (see docs/OPERATOR_TRACES.md). */
  readonly activeSource: string;
  /** The figures when monitoring started: the first record's delta is taken from here. */
  readonly baseline: MemoryFigures;
  readonly records: readonly OpRecord[];
  readonly markers: readonly OpMarker[];
  /** Allocation retries / OOMs during the session; null when no allocator model was attached. */
  readonly numAllocRetries: number | null;
  readonly numOoms: number | null;
}

// ---------------------------------------------------------------------------
// Summary

/** One operator: a kernel in one layer and phase, over all its calls. */
export interface OperatorSummary {
  /** `<layer path>.<phase>.<Kernel>`: the record name without its call counter. */
  readonly operator: string;
  readonly calls: number;
  /** Sum of the allocated-bytes deltas of all its calls. */
  readonly totalBytes: number;
  /** The largest single-call delta, and the call that made it. */
  readonly maxDeltaBytes: number;
  readonly maxDeltaCall: string;
}

export interface OpTraceSummary {
  readonly device: DeviceName;
  readonly reservedSource: string;
  readonly numRecords: number;
  readonly numOperators: number;
  readonly numAllocRetries: number | null;
  readonly numOoms: number | null;
  /** Peak allocated bytes over the records (baseline included). */
  readonly peakAllocated: number;
  /** Operators by total bytes added (then largest single delta, then name), at most `top` of them. */
  readonly top: readonly OperatorSummary[];
}

/** The operator a record belongs to: its name without the `_<n>` call counter memscope appended. */
export function operatorOf(recordName: string): string {
  return recordName.replace(/_\d+$/, '');
}

/**
 * Deltas are between consecutive records, the first one against the baseline:
 * what memory changed from the end of the previous kernel to the end of this
 * one. Frees that happen between kernels (a tidy scope ending) land on the next
 * kernel, as in PyTorch.
 */
export function recordDeltas(stats: OpTraceStats): number[] {
  let previous = stats.baseline.allocated;
  return stats.records.map((r) => {
    const delta = r.allocated - previous;
    previous = r.allocated;
    return delta;
  });
}

export function summarizeOpTraces(stats: OpTraceStats, top = 20): OpTraceSummary {
  if (!Number.isInteger(top) || top < 0) {
    throw new MemscopeError('bad-argument', `summary(top): expected a non-negative integer, got ${String(top)}`);
  }
  const deltas = recordDeltas(stats);
  const byOperator = new Map<string, { calls: number; total: number; max: number; maxCall: string }>();
  stats.records.forEach((r, i) => {
    const delta = deltas[i]!;
    const key = operatorOf(r.name);
    const entry = byOperator.get(key);
    if (!entry) byOperator.set(key, { calls: 1, total: delta, max: delta, maxCall: r.name });
    else {
      entry.calls++;
      entry.total += delta;
      if (delta > entry.max) {
        entry.max = delta;
        entry.maxCall = r.name;
      }
    }
  });
  const rows: OperatorSummary[] = [...byOperator].map(([operator, e]) => ({
    operator,
    calls: e.calls,
    totalBytes: e.total,
    maxDeltaBytes: e.max,
    maxDeltaCall: e.maxCall,
  }));
  rows.sort(
    (a, b) =>
      b.totalBytes - a.totalBytes ||
      b.maxDeltaBytes - a.maxDeltaBytes ||
      (a.operator < b.operator ? -1 : a.operator > b.operator ? 1 : 0),
  );
  let peak = stats.baseline.allocated;
  for (const r of stats.records) if (r.allocated > peak) peak = r.allocated;
  return {
    device: stats.device,
    reservedSource: stats.reservedSource,
    numRecords: stats.records.length,
    numOperators: rows.length,
    numAllocRetries: stats.numAllocRetries,
    numOoms: stats.numOoms,
    peakAllocated: peak,
    top: rows.slice(0, top),
  };
}

function signedHuman(bytes: number): string {
  return bytes > 0 ? `+${humanBytes(bytes)}` : humanBytes(bytes);
}

function signedBytes(bytes: number): string {
  return bytes > 0 ? `+${bytes} B` : `${bytes} B`;
}

/** The summary as the plain text PyTorch prints (with memscope's extra columns). */
export function formatOpSummary(summary: OpTraceSummary): string {
  const rule = '-'.repeat(48);
  const lines: string[] = [rule];
  if (summary.numRecords === 0) {
    // A tracker that never ran has no device and no reserved figures to name.
    lines.push('No operator calls recorded (the tracker has not run).', rule);
    return lines.join('\n');
  }
  lines.push(
    `Device ${summary.device}: ${summary.numRecords} operator calls, ${summary.numOperators} operators, ` +
      `peak allocated ${humanBytes(summary.peakAllocated)}`,
  );
  lines.push(`Reserved memory: ${summary.reservedSource}`);
  const none = 'n/a (no allocator model attached)';
  lines.push(
    `Allocation retries: ${summary.numAllocRetries ?? none}; OOMs: ${summary.numOoms ?? none}`,
  );
  lines.push(`Top ${summary.top.length} operators by memory added (total over their calls; largest single call):`);
  const header = ['#', 'operator', 'calls', 'total', 'total bytes', 'largest', 'largest bytes', 'largest call'];
  const body = summary.top.map((row, i) => [
    String(i + 1),
    row.operator,
    String(row.calls),
    signedHuman(row.totalBytes),
    signedBytes(row.totalBytes),
    signedHuman(row.maxDeltaBytes),
    signedBytes(row.maxDeltaBytes),
    row.maxDeltaCall,
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...body.map((r) => r[c]!.length)));
  // Numbers right-aligned, names left-aligned; the last column is not padded.
  const rightAligned = new Set([0, 2, 3, 4, 5, 6]);
  const fmt = (cells: string[]): string =>
    cells
      .map((cell, c) => (c === cells.length - 1 ? cell : rightAligned.has(c) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd();
  if (body.length === 0) lines.push('(no operator calls recorded)');
  else {
    lines.push(fmt(header));
    for (const r of body) lines.push(fmt(r));
  }
  lines.push(rule);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// Saved stats (JSON)

export function opTraceStatsToJson(stats: OpTraceStats): string {
  // Fixed key order, so files diff well and round-trips compare equal as text.
  const ordered: OpTraceStats = {
    format: OP_TRACES_FORMAT,
    version: OP_TRACES_VERSION,
    device: stats.device,
    reservedSource: stats.reservedSource,
    activeSource: stats.activeSource,
    baseline: { allocated: stats.baseline.allocated, active: stats.baseline.active, reserved: stats.baseline.reserved },
    records: stats.records.map((r) => ({ name: r.name, step: r.step, allocated: r.allocated, active: r.active, reserved: r.reserved })),
    markers: stats.markers.map((m) => ({ name: m.name, index: m.index, step: m.step })),
    numAllocRetries: stats.numAllocRetries,
    numOoms: stats.numOoms,
  };
  return `${JSON.stringify(ordered, null, 1)}\n`;
}

function fail(source: string, what: string): never {
  throw new MemscopeError('bad-op-traces', `${source}: ${what}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown, source: string, where: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(source, `${where} must be a non-negative integer, found ${JSON.stringify(v) ?? String(v)}`);
  }
  return v;
}

function text(v: unknown, source: string, where: string): string {
  if (typeof v !== 'string') fail(source, `${where} must be a string, found ${JSON.stringify(v) ?? String(v)}`);
  return v;
}

/**
 * Parses and validates a saved stats file. `source` names the file in every
 * error. A file from a newer memscope, a different format, or a truncated or
 * hand-broken file is a MemscopeError naming the file and what was found.
 */
export function parseOpTraceStats(json: string, source = 'op-traces stats'): OpTraceStats {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new MemscopeError(
      'bad-op-traces',
      `${source}: not valid JSON (${json.trim().length === 0 ? 'empty file' : 'truncated or corrupt'}: ${reason})`,
      { cause: err },
    );
  }
  if (!isObject(value)) fail(source, `expected a JSON object with format "${OP_TRACES_FORMAT}", found ${Array.isArray(value) ? 'an array' : typeof value}`);
  if (value.format !== OP_TRACES_FORMAT) {
    fail(
      source,
      `not a memscope operator-trace stats file: format is ${value.format === undefined ? 'missing' : JSON.stringify(value.format)}, expected "${OP_TRACES_FORMAT}"`,
    );
  }
  const version = value.version;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    fail(source, `format "${OP_TRACES_FORMAT}" with invalid version ${JSON.stringify(version) ?? 'missing'}`);
  }
  if (version > OP_TRACES_VERSION) {
    fail(
      source,
      `written by a newer memscope (format "${OP_TRACES_FORMAT}" version ${version}); this memscope reads version ${OP_TRACES_VERSION} — upgrade memscope to read it`,
    );
  }
  const baseline = value.baseline;
  if (!isObject(baseline)) fail(source, 'baseline must be an object with allocated/active/reserved');
  if (!Array.isArray(value.records)) fail(source, 'records must be an array');
  if (!Array.isArray(value.markers)) fail(source, 'markers must be an array');
  const records: OpRecord[] = value.records.map((r: unknown, i: number) => {
    const where = `records[${i}]`;
    if (!isObject(r)) fail(source, `${where} must be an object`);
    return {
      name: text(r.name, source, `${where}.name`),
      step: count(r.step, source, `${where}.step`),
      allocated: count(r.allocated, source, `${where}.allocated`),
      active: count(r.active, source, `${where}.active`),
      reserved: count(r.reserved, source, `${where}.reserved`),
    };
  });
  const markers: OpMarker[] = value.markers.map((m: unknown, i: number) => {
    const where = `markers[${i}]`;
    if (!isObject(m)) fail(source, `${where} must be an object`);
    const name = text(m.name, source, `${where}.name`);
    if (!(MARKER_NAMES as readonly string[]).includes(name)) {
      fail(source, `${where}.name is ${JSON.stringify(name)}, expected one of ${MARKER_NAMES.join(', ')}`);
    }
    const index = count(m.index, source, `${where}.index`);
    if (index > records.length) fail(source, `${where}.index ${index} is past the ${records.length} records`);
    return { name: name as MarkerName, index, step: count(m.step, source, `${where}.step`) };
  });
  const optionalCount = (v: unknown, where: string): number | null => (v === null ? null : count(v, source, where));
  return {
    format: OP_TRACES_FORMAT,
    version: OP_TRACES_VERSION,
    device: text(value.device, source, 'device'),
    reservedSource: text(value.reservedSource, source, 'reservedSource'),
    activeSource: text(value.activeSource, source, 'activeSource'),
    baseline: {
      allocated: count(baseline.allocated, source, 'baseline.allocated'),
      active: count(baseline.active, source, 'baseline.active'),
      reserved: count(baseline.reserved, source, 'baseline.reserved'),
    },
    records,
    markers,
    numAllocRetries: optionalCount(value.numAllocRetries, 'numAllocRetries'),
    numOoms: optionalCount(value.numOoms, 'numOoms'),
  };
}

// ---------------------------------------------------------------------------
// Plots

export interface TraceChart {
  /** File name for the chart, e.g. 'allocated_memory.svg'. */
  readonly file: string;
  readonly title: string;
  readonly svg: string;
}

/** Colours per memory kind, the same in every chart (matplotlib's first three). */
const KIND_STYLE = {
  allocated_memory: { color: '#1f77b4', z: 1 },
  // Dashed and drawn over allocated: on TFJS backends active equals allocated,
  // and a solid line would hide the other exactly.
  active_memory: { color: '#ff7f0e', dash: '7 5', z: 2 },
  // Wide, translucent and drawn first: where reserved equals allocated (cpu
  // without an allocator model) it shows as a halo around the allocated line.
  reserved_memory: { color: '#2ca02c', strokeWidth: 5, opacity: 0.45, z: 0 },
} as const;

type Kind = keyof typeof KIND_STYLE;

const MARKER_STYLE: Record<MarkerName, { color: string; dash?: string }> = {
  fw_start: { color: '#000000' },
  fw_bw_boundary: { color: '#d62728', dash: '5 3' },
};

/** Markers as chart markers, labelled with their step so several steps stay apart. */
export function chartMarkers(markers: readonly OpMarker[]): ChartMarker[] {
  return markers.map((m) => ({
    x: m.index,
    label: `${m.name} (step ${m.step})`,
    group: m.name,
    color: MARKER_STYLE[m.name].color,
    dash: MARKER_STYLE[m.name].dash,
  }));
}

/**
 * The four plots PyTorch's `show_traces` draws: the three memory kinds
 * together, then each alone. x = operator call index, y = MiB.
 */
export function renderOpTraceCharts(stats: OpTraceStats): TraceChart[] {
  const mib = (k: 'allocated' | 'active' | 'reserved'): number[] => stats.records.map((r) => bytesIn(r[k], 'MiB'));
  const values: Record<Kind, number[]> = {
    allocated_memory: mib('allocated'),
    active_memory: mib('active'),
    reserved_memory: mib('reserved'),
  };
  // Alone, every series is a plain solid line in its colour; the dash and band only matter where lines overlap.
  const seriesOf = (kind: Kind, alone: boolean): LineSeries =>
    alone ? { label: kind, values: values[kind], color: KIND_STYLE[kind].color } : { label: kind, values: values[kind], ...KIND_STYLE[kind] };
  const markers = chartMarkers(stats.markers);
  const chart = (file: string, title: string, kinds: Kind[]): TraceChart => ({
    file,
    title,
    svg: renderLineChart({
      id: file.replace(/\.svg$/, ''),
      title,
      xLabel: '# Operator Calls',
      yLabel: 'Memory (MiB)',
      series: kinds.map((k) => seriesOf(k, kinds.length === 1)),
      markers,
      description:
        `${kinds.join(', ')} on device ${stats.device} after each of ${stats.records.length} operator calls; ` +
        `reserved = ${stats.reservedSource}; active = ${stats.activeSource}.`,
    }),
  });
  return [
    chart('memory_traces.svg', `Allocated, active and reserved memory per operator call (${stats.device})`, [
      'allocated_memory',
      'active_memory',
      'reserved_memory',
    ]),
    chart('allocated_memory.svg', `Allocated memory per operator call (${stats.device})`, ['allocated_memory']),
    chart('active_memory.svg', `Active memory per operator call (${stats.device})`, ['active_memory']),
    chart('reserved_memory.svg', `Reserved memory per operator call (${stats.device})`, ['reserved_memory']),
  ];
}

const OP_TRACES_CSS = `
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #111; max-width: 1000px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
p.meta { color: #444; margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { font-family: ui-monospace, Menlo, Consolas, monospace; word-break: break-all; }
figure { margin: 16px 0 28px; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 13px; }
`;

/** One self-contained HTML page: summary, markers and the four charts inline. No scripts, no network. */
export function renderOpTracesHtml(stats: OpTraceStats, charts: readonly TraceChart[] = renderOpTraceCharts(stats), top = 20): string {
  const summary = summarizeOpTraces(stats, top);
  const e = escapeHtml;
  const none = 'n/a (no allocator model attached)';
  const rows = summary.top
    .map(
      (r, i) =>
        `<tr><td class="n">${i + 1}</td><td class="name">${e(r.operator)}</td><td class="n">${r.calls}</td>` +
        `<td class="n" title="${r.totalBytes} B">${e(signedHuman(r.totalBytes))}</td>` +
        `<td class="n" title="${r.maxDeltaBytes} B">${e(signedHuman(r.maxDeltaBytes))}</td><td class="name">${e(r.maxDeltaCall)}</td></tr>`,
    )
    .join('\n');
  const markerRows = stats.markers
    .map((m) => {
      const next = stats.records[m.index];
      return `<tr><td>${e(m.name)}</td><td class="n">${m.step}</td><td class="n">${m.index}</td><td class="name">${next ? e(next.name) : '(end of trace)'}</td></tr>`;
    })
    .join('\n');
  return renderHtmlPage({
    title: `memscope operator memory traces (${stats.device})`,
    css: OP_TRACES_CSS,
    body: `<h1>Operator-level memory traces</h1>
<p class="meta">Device <b>${e(stats.device)}</b>: ${stats.records.length} operator calls, ${summary.numOperators} operators, peak allocated ${e(humanBytes(summary.peakAllocated))} (baseline ${e(humanBytes(stats.baseline.allocated))}).</p>
<p class="meta">Reserved = ${e(stats.reservedSource)}. Active = ${e(stats.activeSource)}.</p>
<p class="meta">Allocation retries: ${e(String(stats.numAllocRetries ?? none))}; OOMs: ${e(String(stats.numOoms ?? none))}.</p>
<h2>Top ${summary.top.length} operators by memory added</h2>
<table>
<thead><tr><th>#</th><th>operator</th><th>calls</th><th>total added</th><th>largest call</th><th>largest call name</th></tr></thead>
<tbody>
${rows || '<tr><td colspan="6">no operator calls recorded</td></tr>'}
</tbody>
</table>
<h2>Markers</h2>
<table>
<thead><tr><th>marker</th><th>step</th><th>index</th><th>next operator call</th></tr></thead>
<tbody>
${markerRows || '<tr><td colspan="4">no markers (the root model never ran forward while monitored)</td></tr>'}
</tbody>
</table>
<h2>Plots</h2>
${charts.map((c) => `<figure id="${e(c.file.replace(/\.svg$/, ''))}">\n${c.svg}\n<figcaption>${e(c.title)} — ${e(c.file)}</figcaption>\n</figure>`).join('\n')}
`,
  });
}
