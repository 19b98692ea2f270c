/**
 * The query box under the Active Memory Timeline (docs/QUERY.md): a query over every allocation,
 * its totals and result table, its matches highlighted on the timeline, a one-line error that
 * marks the offending token, and colouring the bands by inferred category.
 */
import type { ReportData } from '../report-data.js';
import { QueryError, allocationUserFrame, groupKeyOf, query, type QueryResult } from '../query.js';
import { el } from './dom.js';
import { hexAddress, type MemoryView } from './memory-view.js';
import { formatTime, humanBytes, wholeNumber } from './timeline.js';

/** One colour per inferred category, fixed so a page and its docs agree. */
export const CATEGORY_COLORS: Record<string, string> = {
  parameter: '#4e79a7',
  gradient: '#f28e2b',
  optimizer_state: '#59a14f',
  activation: '#e15759',
  temporary: '#edc948',
  unknown: '#79706e',
};

const EXAMPLES = ['alive@peak group:user_frame', 'group:category', 'size>=1MiB lifetime>10ms sort:count group:site', 'never_freed -before_trace'];

declare global {
  interface Window {
    /** For tests: runs a query in the box and reports what the page shows. */
    /** For tests: how many allocations the timeline highlights. */
    memscopeHighlighted?: () => number;
    memscopeQuery?: (text: string) => { count: number; bytes: number; peakBytes: number; groups: { key: string; count: number; bytes: number; peakBytes: number }[] | null; error: string | null };
  }
}

function categoryNames(data: ReportData): string[] {
  return data.memory?.devices.find((d) => d.facets)?.facets?.categoryNames ?? [];
}

/** Builds the query section after the timeline and binds it to `view`. */
export function mountQueryBox(data: ReportData, view: MemoryView): void {
  if (!data.memory || !data.memory.devices.some((d) => d.facets)) return;
  const input = el('input', { id: 'query', type: 'text', spellcheck: 'false', placeholder: 'e.g. alive@peak group:user_frame', 'aria-label': 'query over allocations' }) as HTMLInputElement;
  const run = el('button', { type: 'button', id: 'query-run' }, 'run');
  const clear = el('button', { type: 'button', id: 'query-clear' }, 'clear');
  const error = el('div', { id: 'query-error', role: 'alert', hidden: '' });
  const summary = el('div', { id: 'query-summary', class: 'muted' });
  const results = el('div', { id: 'query-results' });
  const colorBy = el('select', { id: 'color-by', 'aria-label': 'colour bands by' }, el('option', { value: 'site' }, 'site'), el('option', { value: 'category' }, 'category (inferred)')) as HTMLSelectElement;
  const legend = el('div', { id: 'category-legend', class: 'toolbar' });
  legend.style.display = 'none';
  const examples = el('span', { class: 'muted' }, 'examples: ');
  EXAMPLES.forEach((x, i) => {
    const link = el('a', { href: '#', class: 'query-example' }, x);
    link.addEventListener('click', (e) => {
      e.preventDefault();
      input.value = x;
      apply();
    });
    examples.append(...(i ? [' · ', link] : [link]));
  });
  const section = el(
    'section',
    { id: 'query-section' },
    el('h2', {}, 'Query'),
    el('div', { class: 'toolbar' }, input, run, clear, el('label', {}, 'colour bands by ', colorBy)),
    error,
    el('div', { class: 'toolbar' }, examples, el('a', { href: '#', id: 'query-help-toggle' }, 'syntax')),
    el('p', { id: 'query-help', class: 'muted', hidden: '' }, 'Terms are ANDed; "-" negates one. Filters: frame:TEXT (any frame; a bare word means the same), user_frame:, site:, file:, function:, category:, phase:, device:, pool: (TEXT, /regex/ or =exact); size>=1MiB, size:1MiB..1GiB, lifetime>10ms, stream=0, step=1; alive@peak, alive@12.5ms, never_freed, before_trace. Then group:user_frame|site|file|function|category|phase|step|device|stream|pool, sort:bytes|count|peak|key, top:N. Categories are inferred from the stacks (docs/QUERY.md).'),
    summary,
    results,
  );
  const anchor = document.getElementById('timeline-section')!;
  anchor.after(section);
  // The category legend sits where the site legend does, above the chart.
  const siteLegend = document.getElementById('site-legend');
  if (siteLegend) siteLegend.after(legend);
  else anchor.querySelector('.canvas-wrap')?.before(legend);
  section.querySelector('#query-help-toggle')!.addEventListener('click', (e) => {
    e.preventDefault();
    section.querySelector('#query-help')!.toggleAttribute('hidden');
  });

  const names = categoryNames(data);
  for (const name of names) {
    const sw = el('span', { class: 'swatch' });
    sw.style.background = CATEGORY_COLORS[name] ?? '#888';
    legend.append(el('span', { class: 'legend-item' }, sw, name));
  }
  legend.prepend(el('span', { class: 'muted' }, 'categories inferred from the stacks:'));
  colorBy.addEventListener('change', () => {
    const byCategory = colorBy.value === 'category';
    legend.style.display = byCategory ? '' : 'none';
    const bands = document.getElementById('band-legend');
    if (bands) bands.textContent = bands.textContent!.replace(/coloured by [^;]*;/, byCategory ? 'coloured by inferred category;' : 'coloured by site;');
    view.colorBy(byCategory ? (d) => data.memory!.devices[d]!.facets?.category ?? [] : null, (k) => CATEGORY_COLORS[names[k] ?? 'unknown'] ?? '#888');
  });

  let last: QueryResult | null = null;
  let lastError: string | null = null;
  const apply = (): void => {
    const text = input.value;
    results.replaceChildren();
    error.replaceChildren();
    error.hidden = true;
    lastError = null;
    last = null;
    if (!text.trim()) {
      summary.textContent = '';
      view.highlight(null);
      return;
    }
    try {
      last = query(data, text);
    } catch (e) {
      if (!(e instanceof QueryError)) throw e;
      lastError = e.message;
      error.append(el('div', {}, e.message));
      error.append(el('code', { class: 'query-echo' }, text.slice(0, e.at), el('mark', {}, text.slice(e.at, e.at + e.length) || ' '), text.slice(e.at + e.length)));
      error.hidden = false;
      summary.textContent = '';
      view.highlight(null);
      return;
    }
    const r = last;
    view.highlight((d, a) => r.matches[d]![a] === 1);
    summary.textContent = `${wholeNumber(r.count)} allocation${r.count === 1 ? '' : 's'} · ${humanBytes(r.bytes)} allocated · ${humanBytes(r.peakBytes)} live at the peak${r.groups ? ` · ${wholeNumber(r.groupCount)} group${r.groupCount === 1 ? '' : 's'}` : ''}`;
    results.append(r.groups ? groupTable(data, r, view) : allocationTable(data, r, view));
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') apply();
  });
  let timer = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = window.setTimeout(apply, 250);
  });
  run.addEventListener('click', apply);
  clear.addEventListener('click', () => {
    input.value = '';
    apply();
  });

  window.memscopeHighlighted = () => view.highlightedCount();
  window.memscopeQuery = (text: string) => {
    input.value = text;
    apply();
    return { count: last?.count ?? 0, bytes: last?.bytes ?? 0, peakBytes: last?.peakBytes ?? 0, groups: last?.groups ? last.groups.map((g) => ({ ...g })) : null, error: lastError };
  };
}

/** Grouped totals; clicking a row highlights that group's allocations alone, clicking it again all matches. */
function groupTable(data: ReportData, r: QueryResult, view: MemoryView): HTMLTableElement {
  const keyOf = r.group ? groupKeyOf(data, r.group) : null;
  let selected: HTMLElement | null = null;
  const t = el('table', { id: 'query-table' });
  t.append(el('thead', {}, el('tr', {}, el('th', {}, r.group ?? ''), el('th', { class: 'num' }, 'allocations'), el('th', { class: 'num' }, 'bytes'), el('th', { class: 'num' }, 'live at the peak'))));
  const body = el('tbody');
  for (const g of r.groups ?? []) {
    const tr = el('tr', { class: 'expandable', title: 'click to highlight this group alone' }, el('td', {}, g.key), el('td', { class: 'num' }, wholeNumber(g.count)), el('td', { class: 'num' }, humanBytes(g.bytes)), el('td', { class: 'num' }, humanBytes(g.peakBytes)));
    tr.addEventListener('click', () => {
      selected?.classList.remove('selected');
      if (selected === tr || !keyOf) {
        selected = null;
        view.highlight((d, a) => r.matches[d]![a] === 1);
        return;
      }
      selected = tr;
      tr.classList.add('selected');
      view.highlight((d, a) => r.matches[d]![a] === 1 && keyOf(d, a) === g.key);
    });
    body.append(tr);
  }
  t.append(body);
  if (r.groupCount > (r.groups?.length ?? 0)) t.append(el('caption', { class: 'muted' }, `the top ${r.groups!.length} of ${wholeNumber(r.groupCount)} groups`));
  return t;
}

function allocationTable(data: ReportData, r: QueryResult, view: MemoryView): HTMLTableElement {
  const t = el('table', { id: 'query-table' });
  t.append(el('thead', {}, el('tr', {}, ...['bytes', 'device', 'address', 'allocated', 'freed', 'category (inferred)', 'user frame', ''].map((h, i) => el('th', i === 0 ? { class: 'num' } : {}, h)))));
  const body = el('tbody');
  const str = (i: number): string => data.strings[i] ?? '';
  for (const [di, a] of r.allocations) {
    const d = data.memory!.devices[di]!;
    const f = d.facets;
    const when = (event: number, none: string): string => {
      if (event < 0) return none;
      let us = 0;
      for (let i = 0; i <= event && i < d.eventDt.length; i++) us += d.eventDt[i]!;
      return formatTime(us / 1000, data.timeUnit);
    };
    const show = el('button', { type: 'button', class: 'show-alloc' }, 'show');
    show.addEventListener('click', () => view.reveal(di, a));
    body.append(
      el(
        'tr',
        {},
        el('td', { class: 'num' }, humanBytes(d.bytes[a]!)),
        el('td', {}, d.device),
        el('td', {}, hexAddress(d.address[a]!)),
        el('td', {}, when(d.start[a]!, 'before the trace')),
        el('td', {}, when(d.end[a]!, 'never')),
        el('td', {}, f ? f.categoryNames[f.category[a]!]! : ''),
        el('td', {}, str(allocationUserFrame(data, d.stack[a]!).frame) || str(d.site[a]!) || '—'),
        el('td', {}, show),
      ),
    );
  }
  t.append(body);
  if (r.count > r.allocations.length) t.append(el('caption', { class: 'muted' }, `the ${r.allocations.length} largest of ${wholeNumber(r.count)} matching allocations (top:N shows more)`));
  return t;
}
