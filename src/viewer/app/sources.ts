/**
 * What the page shows differs by source: one chart per device for captures and profiler traces
 * (never a cross-device sum), and words that fit the source (a trace's memory is attributed to
 * operators, a capture's to kernels and layers; a trace marks where each `ProfilerStep#N` begins,
 * a capture where each step ends).
 */
import type { ReportData } from '../report-data.js';
import { el } from './dom.js';
import { formatTime, humanBytes, wholeNumber } from './timeline.js';

/** One device's part of the category timeline. */
export interface DeviceSlice {
  readonly device: string;
  /** The report with only this device's series and events (series renumbered from 0). */
  readonly data: ReportData;
  /** Per series of `data`: its index in the whole report's series. */
  readonly series: readonly number[];
}

/** The report's timeline cut per device, in order of first appearance among the series. */
export function deviceSlices(data: ReportData): DeviceSlice[] {
  const devices = [...new Set(data.series.map((s) => s.device))];
  if (devices.length <= 1) return [{ device: devices[0] ?? '', data, series: data.series.map((_, i) => i) }];
  return devices.map((device) => {
    const series = data.series.flatMap((s, i) => (s.device === device ? [i] : []));
    const local = new Int32Array(data.series.length).fill(-1);
    series.forEach((g, i) => (local[g] = i));
    const { dt, series: ser, bytes } = data.timeline;
    const out = { dt: [] as number[], series: [] as number[], bytes: [] as number[] };
    let us = 0;
    let lastKept = 0;
    for (let i = 0; i < dt.length; i++) {
      us += dt[i]!;
      const s = local[ser[i]!]!;
      if (s < 0) continue;
      out.dt.push(us - lastKept);
      out.series.push(s);
      out.bytes.push(bytes[i]!);
      lastKept = us;
    }
    return { device, data: { ...data, series: series.map((g) => data.series[g]!), timeline: out }, series };
  });
}

/** A device selector before `anchor` (none for one device); `select` gets the chosen slice's index. */
export function deviceSelector(slices: readonly DeviceSlice[], anchor: HTMLElement, select: (i: number) => void): void {
  if (slices.length <= 1) return;
  const box = el('select', { id: 'device', 'aria-label': 'device' });
  slices.forEach((s, i) => box.append(el('option', { value: String(i) }, s.device)));
  box.addEventListener('change', () => select(Number(box.value)));
  anchor.before(el('label', {}, 'device ', box));
}

/** The legend of the series shown (one device's). */
export function legend(data: ReportData, colors: readonly string[], shown: readonly number[]): void {
  const box = document.getElementById('legend')!;
  const several = new Set(data.series.map((s) => s.device)).size > 1;
  box.replaceChildren();
  for (const i of shown) {
    const s = data.series[i]!;
    const sw = el('span', { class: 'swatch' });
    sw.style.background = colors[i]!;
    box.append(el('span', { class: 'legend-item' }, sw, several ? `${s.device} · ${s.category}` : s.category));
  }
}

/** A step mark's text. */
export function stepLabel(s: ReportData['steps'][number]): string {
  return s.label ?? `step ${s.step}`;
}

/** Headings and help that depend on the source; called once the sections are built. */
export function sourceWords(data: ReportData): void {
  if (data.source.kind !== 'trace') return;
  const help = document.querySelector('#timeline-section > p.muted');
  if (help) {
    help.textContent = `One chart per device (choose it above). Wheel to zoom, drag to pan, double-click to reset; hover for totals and the largest allocations alive at that moment.${data.steps.length ? ' Dashed lines mark where each ProfilerStep begins.' : ''}`;
  }
  const allocations = document.querySelector('#allocations > h2');
  if (allocations) allocations.textContent = 'Largest allocations';
}

/**
 * A trace's allocations (paired by address): the largest 100, each with its device, the operator
 * that made it, its address and lifetime. Nothing is shown for a trace without addresses.
 */
export function traceAllocationsSection(data: ReportData, box: HTMLElement): void {
  const a = data.allocations;
  const order = a.bytes.map((_, i) => i).sort((x, y) => a.bytes[y]! - a.bytes[x]!).slice(0, 100);
  const num = { class: 'num' };
  const t = el('table');
  t.append(el('thead', {}, el('tr', {}, el('th', num, 'bytes'), el('th', {}, 'device'), el('th', {}, 'operator'), el('th', {}, 'address'), el('th', num, 'allocated'), el('th', num, 'freed'))));
  const body = el('tbody');
  for (const i of order) {
    const op = data.strings[a.kernel[i]!] || '(no operator)';
    const device = data.series[a.series[i]!]?.device ?? '';
    const address = a.address ? `0x${a.address[i]!.toString(16)}` : '';
    const tr = el('tr', { 'data-search': `${op} ${device} ${address}`.toLowerCase() });
    tr.append(
      el('td', num, humanBytes(a.bytes[i]!)),
      el('td', {}, device),
      el('td', {}, op),
      el('td', {}, address),
      el('td', num, formatTime(a.t0[i]!, data.timeUnit)),
      el('td', num, a.t1[i]! < 0 ? 'alive at end' : formatTime(a.t1[i]!, data.timeUnit)),
    );
    body.append(tr);
  }
  t.append(body);
  box.append(el('p', { class: 'muted' }, `The ${order.length} largest of ${wholeNumber(data.allocationsTotal)} allocations (an allocation runs from the event adding bytes at an address to the next event freeing them), with the operator that made it.`));
  box.append(t);
}
