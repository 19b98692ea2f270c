/**
 * `attachMemoryPanel`: a small overlay in a corner of the page with the live GPU memory that
 * memscope/webgpu records — allocated and reserved, their peaks, a sparkline of recent
 * allocated bytes, the bytes by category and by framework — and two buttons: save the snapshot
 * (the pickle `memscope summary` reads) and open the report (memscope's viewer, in a new tab).
 *
 * The panel lives in a shadow root on one host element, so its style sheet neither leaks into
 * the page nor takes the page's; every string reaches it as text (`textContent`), never as HTML.
 */
import { humanBytes } from '../core/units.js';
import type { GroupFigures, WebGPUDeviceArg, WebGPUFigures, WebGPUMemory } from '../webgpu/memory.js';
import { downloadFile, timestampedName } from './download.js';
import { loadViewerScript, openHtmlInNewTab, snapshotReportHtml, type ViewerScript } from './report-page.js';

export type PanelCorner = 'bottom-right' | 'bottom-left' | 'top-right' | 'top-left';

export interface MemoryPanelOptions {
  /** memscope/webgpu's recording (`installWebGPU()`). */
  memory: WebGPUMemory;
  /** The device shown: an index, 'webgpu:N' or a tracked GPUDevice (device 0 by default). */
  device?: WebGPUDeviceArg;
  /** Milliseconds between redraws while memory changes, and between sparkline samples (250). */
  refreshMs?: number;
  /** Sparkline samples kept (120: 30 s at the default rate). */
  samples?: number;
  corner?: PanelCorner;
  /** Where the panel's host element goes (document.body by default). */
  parent?: HTMLElement;
  /** memscope's viewer app for "open report" (see `loadViewerScript`). */
  viewerScript?: ViewerScript;
  /** File name of saved snapshots (`webgpu-snapshot-<time>.pickle` by default). */
  snapshotName?: string;
}

export interface MemoryPanel {
  /** The host element (its shadow root holds the panel). */
  readonly element: HTMLElement;
  /** Redraws now. */
  refresh(): void;
  /** Saves the snapshot, as the button does. */
  saveSnapshot(): void;
  /** Opens the report in a new tab, as the button does; resolves to the tab's Blob URL. */
  openReport(): Promise<string>;
  /** Removes the panel, its timer and its subscription. Idempotent. */
  detach(): void;
}

const CSS = `
:host { all: initial; direction: ltr; }
.panel { position: fixed; z-index: 2147483647; width: 300px; box-sizing: border-box; padding: 8px 10px;
  font: 12px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; background: rgba(255,255,255,0.96);
  border: 1px solid #c8c8cc; border-radius: 6px; box-shadow: 0 2px 10px rgba(0,0,0,0.18); }
.bottom-right { right: 12px; bottom: 12px; } .bottom-left { left: 12px; bottom: 12px; }
.top-right { right: 12px; top: 12px; } .top-left { left: 12px; top: 12px; }
.head { display: flex; justify-content: space-between; align-items: baseline; font-weight: 600; }
.device { color: #666; font-weight: 400; }
.totals { display: grid; grid-template-columns: auto 1fr 1fr; gap: 0 8px; margin: 4px 0; font-variant-numeric: tabular-nums; }
.totals .num, td.num { text-align: right; }
svg { display: block; width: 100%; height: 36px; background: #f6f6f8; border-radius: 3px; }
polyline { fill: none; stroke: #4e79a7; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
table { width: 100%; border-collapse: collapse; margin-top: 4px; font-variant-numeric: tabular-nums; }
th { text-align: left; font-weight: 600; color: #444; border-bottom: 1px solid #ddd; }
td { padding: 0 2px; max-width: 130px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.buttons { display: flex; gap: 6px; margin-top: 6px; }
button { font: inherit; padding: 2px 8px; border: 1px solid #b8b8bc; border-radius: 4px; background: #fff; cursor: pointer; }
.status { color: #a33; margin-top: 4px; min-height: 0; word-break: break-word; }
`;

type Attrs = Record<string, string>;

/** An element with attributes and text or element children (text always as a text node). */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (string | Node)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';

/** Rows of a group table, largest reserved first. */
function groupRows(groups: Record<string, GroupFigures>): HTMLTableRowElement[] {
  return Object.entries(groups)
    .sort((a, b) => b[1].reserved - a[1].reserved || (a[0] < b[0] ? -1 : 1))
    .map(([name, g]) => h('tr', {}, h('td', { title: name }, name), h('td', { class: 'num' }, humanBytes(g.allocated)), h('td', { class: 'num' }, humanBytes(g.reserved))));
}

function groupTable(title: string, groups: Record<string, GroupFigures>): HTMLTableElement {
  return h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, title), h('th', { class: 'num' }, 'allocated'), h('th', { class: 'num' }, 'reserved'))), h('tbody', {}, ...groupRows(groups)));
}

/** Attaches the panel to the page; `detach()` removes everything it added. */
export function attachMemoryPanel(options: MemoryPanelOptions): MemoryPanel {
  const { memory } = options;
  const refreshMs = Math.max(16, options.refreshMs ?? 250);
  const maxSamples = Math.max(2, options.samples ?? 120);
  const host = h('div', { 'data-memscope-panel': '' });
  const root = host.attachShadow({ mode: 'open' });
  const style = h('style', {}, CSS);
  const panel = h('div', { class: `panel ${options.corner ?? 'bottom-right'}`, role: 'region', 'aria-label': 'memscope GPU memory' });
  const deviceLabel = h('span', { class: 'device' });
  const totals = h('div', { class: 'totals' });
  const spark = document.createElementNS(SVG, 'svg');
  spark.setAttribute('viewBox', `0 0 ${maxSamples - 1} 100`);
  spark.setAttribute('preserveAspectRatio', 'none');
  spark.setAttribute('aria-label', 'allocated bytes, recent');
  const line = document.createElementNS(SVG, 'polyline');
  spark.append(line);
  const groups = h('div', { class: 'groups' });
  const saveButton = h('button', { type: 'button', class: 'save' }, 'save snapshot');
  const reportButton = h('button', { type: 'button', class: 'report' }, 'open report');
  const status = h('div', { class: 'status', role: 'status' });
  panel.append(h('div', { class: 'head' }, h('span', {}, 'GPU memory'), deviceLabel), totals, spark, groups, h('div', { class: 'buttons' }, saveButton, reportButton), status);
  root.append(style, panel);
  (options.parent ?? document.body).append(host);

  const samples: number[] = [];
  let dirty = true;
  let detached = false;

  const read = (): WebGPUFigures | null => {
    try {
      return memory.figures(options.device);
    } catch {
      return null; // the device does not exist yet
    }
  };

  const draw = (f: WebGPUFigures | null): void => {
    deviceLabel.textContent = f ? f.device : 'no device yet';
    totals.replaceChildren(
      h('span', {}, ''), h('span', { class: 'num' }, 'now'), h('span', { class: 'num' }, 'peak'),
      h('span', {}, 'allocated'), h('span', { class: 'num allocated' }, humanBytes(f?.allocated ?? 0)), h('span', { class: 'num peak-allocated' }, humanBytes(f?.peakAllocated ?? 0)),
      h('span', {}, 'reserved'), h('span', { class: 'num reserved' }, humanBytes(f?.reserved ?? 0)), h('span', { class: 'num peak-reserved' }, humanBytes(f?.peakReserved ?? 0)),
    );
    groups.replaceChildren(...(f ? [groupTable('category', f.byCategory), groupTable('framework', f.byFramework)] : []));
    drawLine();
  };

  /** The sparkline: the latest sample at the right edge, scaled to the highest one shown. */
  const drawLine = (): void => {
    const top = Math.max(1, ...samples);
    line.setAttribute('points', samples.map((v, i) => `${i + maxSamples - samples.length},${(100 - (v / top) * 96).toFixed(2)}`).join(' '));
  };

  const tick = (): void => {
    const f = read();
    samples.push(f?.allocated ?? 0);
    if (samples.length > maxSamples) samples.shift();
    if (dirty || samples.length <= 2) draw(f);
    else drawLine();
    dirty = false;
  };

  const unsubscribe = memory.subscribe(() => {
    dirty = true;
  });
  const timer = setInterval(tick, refreshMs);
  tick();

  const show = (message: string): void => {
    status.textContent = message;
  };
  const saveSnapshot = (): void => {
    downloadFile(memory.dumpSnapshot(), options.snapshotName ?? timestampedName('webgpu-snapshot', 'pickle'));
  };
  const openReport = async (): Promise<string> => {
    const bytes = memory.dumpSnapshot();
    const js = await loadViewerScript(options.viewerScript);
    return openHtmlInNewTab(snapshotReportHtml(bytes, `WebGPU snapshot ${new Date().toISOString()}`, js));
  };
  saveButton.addEventListener('click', () => {
    try {
      saveSnapshot();
      show('');
    } catch (err) {
      show(`save failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  });
  reportButton.addEventListener('click', () => {
    openReport().then(
      () => show(''),
      (err: unknown) => show(`report failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  });

  return {
    element: host,
    refresh: () => draw(read()),
    saveSnapshot,
    openReport,
    detach() {
      if (detached) return;
      detached = true;
      clearInterval(timer);
      unsubscribe();
      host.remove();
    },
  };
}
