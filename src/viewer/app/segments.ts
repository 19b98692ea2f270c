import type { ReportData } from '../report-data.js';
import { humanBytes } from './timeline.js';

/** Block colours by state name (`data.blockStates`); states not listed are drawn in UNKNOWN_STATE_COLOR. */
export const BLOCK_STATE_COLORS: Readonly<Record<string, string>> = {
  active_allocated: '#4e79a7',
  active_pending_free: '#f28e2b',
  inactive: '#d9d9d9',
};
export const UNKNOWN_STATE_COLOR = '#edc948';

/** PyTorch snapshot segments: one bar per segment, blocks coloured by state, widths by bytes. */
export function renderSegments(box: HTMLElement, data: ReportData): void {
  const list = document.createElement('div');
  list.className = 'segments';
  const shown = data.segments.slice(0, 400);
  const largest = Math.max(1, ...shown.map((s) => s.size));
  for (const seg of shown) {
    const row = document.createElement('div');
    row.className = 'segment';
    row.dataset.search = seg.label.toLowerCase();
    const name = document.createElement('div');
    name.className = 'segment-label';
    name.textContent = `${humanBytes(seg.size)} · ${seg.label}`;
    const bar = document.createElement('div');
    bar.className = 'segment-bar';
    // Bars share one scale, so a 2 MiB segment looks small next to a 1 GiB one.
    bar.style.width = `${Math.max(0.3, (seg.size / largest) * 100)}%`;
    for (let i = 0; i < seg.blocks.size.length; i++) {
      const b = document.createElement('span');
      const state = data.blockStates[seg.blocks.state[i]] ?? '?';
      b.style.flexGrow = String(seg.blocks.size[i]);
      b.style.background = BLOCK_STATE_COLORS[state] ?? UNKNOWN_STATE_COLOR;
      b.title = `${humanBytes(seg.blocks.size[i])} · ${state}`;
      bar.append(b);
    }
    row.append(name, bar);
    list.append(row);
  }
  if (data.segments.length > shown.length) {
    const p = document.createElement('p');
    p.className = 'muted';
    p.textContent = `The ${shown.length} largest of ${data.segments.length} segments.`;
    box.append(p);
  }
  box.append(list);
}
