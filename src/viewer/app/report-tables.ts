/**
 * The report's tables under the chart: leaks, modules (with their state snapshots), kernels or
 * operators, and the largest allocations (a capture's, or every device's of a PyTorch snapshot).
 * Every string reaches the page through `textContent`.
 */
import type { ReportData } from '../report-data.js';
import { el } from './dom.js';
import { formatTime, humanBytes, wholeNumber } from './timeline.js';
import { hexAddress } from './memory-view.js';
import { leakStepCells } from '../../capture/leaks.js';

/** A string of the report by index ('' for none). */
function strings(data: ReportData): (i: number) => string {
  return (i) => data.strings[i] ?? '';
}

/** A stack's frames, innermost first ([] for none). */
export function stackFrames(data: ReportData, stack: number): string[] {
  return stack >= 0 ? (data.stacks[stack] ?? []).map(strings(data)) : [];
}

/** A table whose rows carry their searchable text. */
function table(headers: string[], rows: { cells: (string | Node)[]; search: string; detail?: Node }[], numeric: number[] = []): HTMLTableElement {
  const t = el('table');
  const head = el('tr');
  headers.forEach((h, i) => head.append(el('th', numeric.includes(i) ? { class: 'num' } : {}, h)));
  t.append(el('thead', {}, head));
  const body = el('tbody');
  for (const r of rows) {
    // Rows without search text (nested state and per-step tables) are never filtered.
    const tr = el('tr', r.search ? { 'data-search': r.search.toLowerCase() } : {});
    r.cells.forEach((c, i) => tr.append(el('td', numeric.includes(i) ? { class: 'num' } : {}, c)));
    body.append(tr);
    if (r.detail) {
      const dr = el('tr', { class: 'detail', 'data-search': r.search.toLowerCase(), hidden: '' });
      dr.append(el('td', { colspan: String(headers.length) }, r.detail));
      tr.classList.add('expandable');
      tr.addEventListener('click', () => dr.toggleAttribute('hidden'));
      body.append(dr);
    }
  }
  t.append(body);
  return t;
}

function stackList(frames: string[]): HTMLElement {
  const ol = el('ol', { class: 'stack' });
  for (const f of frames) ol.append(el('li', {}, f));
  return ol;
}

/** The `file:line:col` of a JS stack frame, or the frame as it is. */
export function location(frame: string | null): string {
  if (!frame) return '';
  const m = /\(([^()]*:\d+:\d+)\)\s*$/.exec(frame);
  return m ? m[1] : frame;
}

/** A series' name in tables and tooltips: its device too when the report has several. */
export function label(data: ReportData, device: string, category: string): string {
  const devices = new Set(data.series.map((s) => s.device));
  return devices.size > 1 ? `${device} · ${category}` : category;
}

export function leaksSection(data: ReportData): void {
  const box = document.getElementById('leaks-body')!;
  if (data.leakCoverage) box.append(el('p', { class: 'muted' }, `Partial capture: ${data.leakCoverage}.`));
  if (data.leaks.length === 0) {
    box.append(el('p', { class: 'muted' }, data.leakNote ? `No verdict: ${data.leakNote}.` : `No leaks: no unowned storage kept growing across ${data.leakSteps} steps.`));
    return;
  }
  data.leaks.forEach((g, i) => {
    const where = location(g.userFrame) || (g.layer ? `layer ${g.layer}` : 'unknown site (recorded without stacks)');
    const card = el('div', { class: 'leak', 'data-search': [g.kernel, g.layer, ...g.frames].join(' ').toLowerCase() });
    card.append(el('div', { class: 'leak-head' }, `#${i + 1} ${humanBytes(g.bytes)} in ${g.count} storage${g.count === 1 ? '' : 's'} · kernel ${g.kernel ?? '(none)'} · ${g.device} · ${g.categories.join('/')}`));
    card.append(el('div', {}, 'allocated at ', el('code', { class: 'leak-site' }, where)));
    card.append(
      table(
        ['step', 'still alive', 'bytes', 'live at step end'],
        g.perStep.map((r) => ({ cells: leakStepCells(g, r), search: '' })),
        [0, 1, 2, 3],
      ),
    );
    if (g.frames.length) card.append(el('details', {}, el('summary', {}, `stack (${g.frames.length} frames)`), stackList(g.frames)));
    box.append(card);
  });
}

export function modulesSection(data: ReportData): void {
  const box = document.getElementById('modules-body')!;
  if (data.modules.length === 0) {
    box.append(el('p', { class: 'muted' }, 'No modules were tracked (the program used no tfjs-layers model, or the source has none).'));
    return;
  }
  const peak = (r: Record<string, number>) => Object.entries(r).map(([d, b]) => (Object.keys(r).length > 1 ? `${d} ${humanBytes(b)}` : humanBytes(b))).join(', ') || '—';
  const rows = data.modules.map((m) => {
    const name = el('span', { class: 'module-name' }, m.path);
    name.style.paddingLeft = `${m.depth * 16}px`;
    return {
      cells: [name, m.className, humanBytes(m.parameterBytes), humanBytes(m.bufferBytes), peak(m.localPeakForward), peak(m.localPeakBackward)],
      search: `${m.path} ${m.className}`,
      detail: stateTable(m.states),
    };
  });
  box.append(table(['module', 'class', 'parameters', 'buffers', 'local peak fwd', 'local peak bwd'], rows, [2, 3, 4, 5]));
  box.append(el('p', { class: 'muted' }, 'Click a module for its state snapshots (Pre/Post/Peak Forward and Backward, by category).'));
}

function stateTable(states: ReportData['modules'][number]['states']): Node {
  // MemTracker's order of states.
  const ORDER = ['Pre-Forward', 'Post-Forward', 'Peak-Forward', 'Pre-Backward', 'Post-Backward', 'Peak-Backward'];
  const rank = (n: string) => (ORDER.includes(n) ? ORDER.indexOf(n) : ORDER.length);
  const names = Object.keys(states).sort((a, b) => rank(a) - rank(b));
  if (!names.length) return el('span', { class: 'muted' }, 'no state recorded (the module never ran)');
  const cats = new Set<string>();
  const devices = new Set<string>();
  for (const st of Object.values(states)) for (const [d, row] of Object.entries(st)) {
    devices.add(d);
    for (const c of Object.keys(row)) cats.add(c);
  }
  const catList = [...cats];
  const rows: { cells: string[]; search: string }[] = [];
  for (const n of names) for (const d of devices) {
    const row = states[n][d] ?? {};
    const total = Object.values(row).reduce((a, b) => a + b, 0);
    rows.push({ cells: [n, d, ...catList.map((c) => humanBytes(row[c] ?? 0)), humanBytes(total)], search: '' });
  }
  return table(['state', 'device', ...catList, 'Total'], rows, catList.map((_, i) => i + 2).concat(catList.length + 2));
}

export function kernelsSection(data: ReportData): void {
  const box = document.getElementById('kernels-body')!;
  // PyTorch traces attribute memory to CPU operators (self / inclusive), not to kernel calls.
  const headers =
    data.source.kind === 'trace'
      ? ['operator', 'allocations', 'self bytes allocated', 'self net', 'inclusive net']
      : ['kernel', 'calls', 'bytes allocated', 'alive at end', 'largest growth in one call'];
  box.append(
    table(
      headers,
      data.kernels.map((k) => ({ cells: [k.name, k.calls ? wholeNumber(k.calls) : '—', humanBytes(k.bytesAllocated), humanBytes(k.bytesRetained), humanBytes(k.peakAdded)], search: k.name })),
      [1, 2, 3, 4],
    ),
  );
}

export function allocationsSection(data: ReportData): void {
  const str = strings(data);
  const box = document.getElementById('allocations-body')!;
  const a = data.allocations;
  const order = a.bytes.map((_, i) => i).sort((x, y) => a.bytes[y] - a.bytes[x]).slice(0, 100);
  const rows = order.map((i) => {
    const fr = stackFrames(data, a.stack[i]);
    const s = data.series[a.series[i]];
    return {
      cells: [
        humanBytes(a.bytes[i]),
        s ? label(data, s.device, s.category) : '',
        str(a.layer[i]) || '—',
        str(a.kernel[i]) || '—',
        formatTime(a.t0[i], data.timeUnit),
        a.t1[i] < 0 ? 'alive at end' : formatTime(a.t1[i], data.timeUnit),
        // The site (computed with the report: src/core/site-rule.ts); a stack wholly inside the framework has none.
        location(str(a.site[i])) || (fr.length ? 'framework frames only' : '—'),
      ],
      search: [str(a.layer[i]), str(a.kernel[i]), ...fr].join(' '),
      detail: fr.length ? stackList(fr) : undefined,
    };
  });
  box.append(el('p', { class: 'muted' }, `The ${order.length} largest of ${wholeNumber(data.allocationsTotal)} allocations. Click a row for its stack.`));
  box.append(table(['bytes', 'category', 'layer', 'kernel', 'allocated', 'freed', 'site'], rows, [0]));
}

/** PyTorch snapshots: the largest allocations of every device, those live before the trace included; "show" calls `reveal`. */
export function snapshotAllocationsSection(data: ReportData, reveal: (device: number, allocation: number) => void): void {
  const str = strings(data);
  const box = document.getElementById('allocations-body')!;
  const devices = data.memory!.devices;
  const all: [number, number][] = [];
  devices.forEach((d, di) => d.bytes.forEach((_, a) => all.push([di, a])));
  all.sort((x, y) => devices[y[0]].bytes[y[1]] - devices[x[0]].bytes[x[1]]);
  const top = all.slice(0, 100);
  // Each device's event times, summed once (a row's time is the sum of its device's deltas so far).
  const times = new Map<(typeof devices)[number], Float64Array>();
  const when = (d: (typeof devices)[number], event: number, none: string): string => {
    if (event < 0) return none;
    let t = times.get(d);
    if (!t) {
      t = new Float64Array(d.eventDt.length);
      let us = 0;
      for (let i = 0; i < t.length; i++) t[i] = us += d.eventDt[i];
      times.set(d, t);
    }
    return formatTime((t.length ? t[Math.min(event, t.length - 1)] : 0) / 1000, data.timeUnit);
  };
  const rows = top.map(([di, a]) => {
    const d = devices[di];
    const fr = stackFrames(data, d.stack[a]);
    const site = str(d.site[a]) || '(no frames recorded)';
    const show = el('button', { type: 'button', class: 'show-alloc' }, 'show');
    show.addEventListener('click', (e) => {
      e.stopPropagation();
      reveal(di, a);
    });
    return {
      cells: [humanBytes(d.bytes[a]), d.device, hexAddress(d.address[a]), when(d, d.start[a], 'before the trace'), when(d, d.end[a], 'alive at end'), site, show],
      search: [site, hexAddress(d.address[a]), ...fr].join(' '),
      detail: fr.length ? stackList(fr) : undefined,
    };
  });
  box.append(el('p', { class: 'muted' }, `The ${top.length} largest of ${wholeNumber(data.allocationsTotal)} allocations (blocks live before the trace began included). Click a row for its stack, "show" to pin it on the timeline.`));
  box.append(table(['bytes', 'device', 'address', 'allocated', 'freed', 'site', ''], rows, [0]));
}
