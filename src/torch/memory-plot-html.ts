/**
 * `memscope plot`: the active memory timeline of a trace as one self-contained
 * HTML file (inline SVG charts from render/svg-line-chart.ts in the page shell
 * of render/html-page.ts: no script, no network).
 */
import { humanBytes } from '../core/units.js';
import { escapeHtml } from '../render/escape.js';
import { renderHtmlPage } from '../render/html-page.js';
import { renderLineChart, PALETTE, type LineSeries } from '../render/svg-line-chart.js';
import { devicePeak, type DeviceMemoryTimeline, type MemoryTrace } from './memory-trace.js';

const SOURCE_LABEL: Record<string, string> = {
  kineto: 'Kineto profiler trace',
  'kineto-2021': 'Kineto profiler trace (2021 layout)',
  'memory-timeline': 'export_memory_timeline',
  'memory-timeline-raw': 'export_memory_timeline_raw',
  snapshot: 'memory snapshot trace',
};

/** One chart per device: allocated (and reserved when recorded) over milliseconds since the first event. */
/** Memory is a step function: hold each value until the next event (two points per event). */
function steps(x: readonly number[], y: ArrayLike<number>): { x: number[]; values: number[] } {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = 0; i < x.length; i++) {
    if (i > 0) {
      xs.push(x[i]!);
      ys.push(y[i - 1]!);
    }
    xs.push(x[i]!);
    ys.push(y[i]!);
  }
  return { x: xs, values: ys };
}

/** First event time over all devices, so device charts share one time axis. */
function traceStart(trace: MemoryTrace): number {
  let t0 = Infinity;
  for (const d of trace.devices) if (d.count && d.time[0]! < t0) t0 = d.time[0]!;
  return Number.isFinite(t0) ? t0 : 0;
}

export function renderDeviceChart(trace: MemoryTrace, d: DeviceMemoryTimeline, id: string): string {
  // Events without timestamps (old snapshots) are placed at their index.
  const timed = trace.source !== 'snapshot' || d.time.some((t, i) => t !== i);
  const t0 = timed ? traceStart(trace) : 0;
  const x = Array.from(d.time, (t) => (timed ? (t - t0) / 1000 : t));
  const series: LineSeries[] = [];
  if (d.categoryBytes && trace.categoryNames) {
    // Stack the categories so the top line is the total, as PyTorch's plot does.
    const running = new Float64Array(d.count);
    trace.categoryNames.forEach((name, k) => {
      const col = d.categoryBytes![k]!;
      if (!col.some((v) => v !== 0)) return;
      for (let i = 0; i < d.count; i++) running[i]! += col[i]!;
      series.push({ label: `${name} (stacked)`, ...steps(x, running), color: PALETTE[k % PALETTE.length], strokeWidth: 1.5 });
    });
  } else {
    series.push({ label: d.allocatedIsRelative ? 'allocated (relative to trace start)' : 'allocated', ...steps(x, d.allocated), color: PALETTE[0], strokeWidth: 1.5 });
  }
  if (d.reserved) series.push({ label: 'reserved', ...steps(x, d.reserved), color: PALETTE[1], dash: '6 4' });
  const p = devicePeak(d);
  const markers = d.count ? [{ x: (timed ? (p.peakAllocatedTime - t0) / 1000 : p.peakAllocatedTime), label: `peak ${humanBytes(p.peakAllocated)}`, color: '#d62728', dash: '2 3' }] : [];
  return renderLineChart({
    title: `${d.device}: ${humanBytes(p.peakAllocated)} peak allocated${p.peakReserved !== null ? `, ${humanBytes(p.peakReserved)} peak reserved` : ''}`,
    xLabel: timed ? 'time since the first memory event (ms)' : 'trace event # (this snapshot records no times)',
    yLabel: 'memory',
    series,
    markers,
    yFromZero: true,
    formatY: (v) => humanBytes(v),
    id,
    description: `${d.count} events from a ${SOURCE_LABEL[trace.source] ?? trace.source}`,
  });
}

const PAGE_CSS = `
body { font-family: system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 12px 0 24px; }
td, th { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
section { margin-bottom: 24px; }
svg { max-width: 100%; height: auto; }
`;

export function renderMemoryPlotHtml(trace: MemoryTrace, title: string): string {
  const charts = trace.devices.map((d, i) => `<section>${renderDeviceChart(trace, d, `dev${i}`)}</section>`);
  const rows = trace.devices
    .map((d) => {
      const p = devicePeak(d);
      return `<tr><td>${escapeHtml(d.device)}</td><td>${p.events}</td><td>${escapeHtml(humanBytes(p.peakAllocated))}</td><td>${
        p.peakReserved === null ? 'not recorded' : escapeHtml(humanBytes(p.peakReserved))
      }</td><td>${escapeHtml(humanBytes(p.finalAllocated))}</td></tr>`;
    })
    .join('\n');
  return renderHtmlPage({
    title,
    css: PAGE_CSS,
    body: `<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(SOURCE_LABEL[trace.source] ?? trace.source)}: ${trace.memoryEventCount} memory events.</p>
<table><thead><tr><th>device</th><th>events</th><th>peak allocated</th><th>peak reserved</th><th>at end</th></tr></thead>
<tbody>
${rows}
</tbody></table>
${charts.length ? charts.join('\n') : '<p>No memory events to plot.</p>'}
`,
  });
}
