import { escapeHtml } from '../render/escape.js';
import { jsonForScript, renderHtmlPage } from '../render/html-page.js';
import type { ReportData } from './report-data.js';
import { embedReportData, type EmbedCodec } from './report-embed.js';
import { DROP_CSS, dropZoneHtml, VIEWER_TITLE } from './drop-page.js';

const CSS = `
:root { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; background: #fafafa; }
body { margin: 0 auto; max-width: 1400px; padding: 12px 20px 40px; }
h1 { font-size: 20px; margin: 8px 0 2px; } h2 { font-size: 16px; margin: 22px 0 8px; }
.muted, #source { color: #666; } #source { font-size: 12px; overflow-wrap: anywhere; }
#truncated { background: #fff3cd; border: 1px solid #e0c36c; padding: 8px 12px; border-radius: 4px; margin: 10px 0; font-weight: 600; }
#notices { color: #555; font-size: 12px; margin: 6px 0; padding-left: 18px; }
[hidden] { display: none !important; }
.toolbar { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin: 6px 0; }
.toolbar button { font: inherit; padding: 2px 10px; }
#range { color: #444; font-size: 12px; }
.legend-item { display: inline-flex; align-items: center; gap: 4px; margin-right: 10px; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; }
.canvas-wrap { position: relative; background: #fff; border: 1px solid #ddd; border-radius: 4px; }
#timeline { display: block; width: 100%; height: 340px; cursor: crosshair; }
#timeline.dragging { cursor: grabbing; }
#overview { display: block; width: 100%; height: 48px; margin-top: 4px; border: 1px solid #ddd; border-radius: 4px; cursor: grab; } #overview.dragging { cursor: grabbing; }
#tooltip { position: absolute; pointer-events: none; background: rgba(255,255,255,0.97); border: 1px solid #bbb; border-radius: 4px; padding: 6px 8px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,0.15); max-width: 520px; }
#tooltip table { border: 0; } #tooltip td { border: 0; padding: 0 6px 0 0; }
.tip-head { font-weight: 600; margin: 2px 0; } .tip-allocs { margin: 0; padding-left: 18px; overflow-wrap: anywhere; }
#search { font: inherit; padding: 4px 8px; width: 420px; max-width: 100%; } #flame-search { width: 260px; max-width: 100%; }
table { border-collapse: collapse; background: #fff; font-size: 13px; margin: 4px 0; }
th, td { border: 1px solid #e2e2e2; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } .num { text-align: right; font-variant-numeric: tabular-nums; }
tr.expandable { cursor: pointer; } tr.expandable:hover { background: #f5f9ff; }
tr.detail > td { background: #fbfbfb; }
.filtered { display: none; }
.leak { background: #fff; border: 1px solid #e6b0b0; border-left: 4px solid #e15759; border-radius: 4px; padding: 8px 12px; margin: 8px 0; }
.leak-head { font-weight: 600; } .leak-site { background: #f6f6f6; padding: 1px 4px; }
ol.stack { font: 12px ui-monospace, monospace; margin: 4px 0; padding-left: 28px; word-break: break-all; }
.segments { display: grid; gap: 3px; } .segment { display: grid; grid-template-columns: 420px 1fr; gap: 8px; align-items: center; font-size: 12px; }
#query { font: 13px ui-monospace, monospace; padding: 4px 8px; width: 520px; }
#query-error { color: #a4161a; font-size: 13px; margin: 4px 0; } #query-error mark { background: #ffccd0; color: inherit; text-decoration: underline wavy #a4161a; }
#query-summary { margin: 6px 0; } #query-table tr.selected { background: #e8f0fe; } #query-help { max-width: 1000px; } .query-example { margin: 0 2px; }
.segment-bar { display: flex; height: 14px; border: 1px solid #ccc; background: #eee; } .segment-bar span { min-width: 1px; border-right: 1px solid #fff; }
/* Allocator State History, Active Cached Segment Timeline, allocator settings (src/viewer/app/state-history*.ts, segment-timeline.ts, settings.ts). */
#state-history-body { position: relative; outline: none; } #state-history-body:focus-visible { outline: 2px solid #a0cbe8; }
#history-slider { flex: 1 1 400px; } #history-label { font-size: 12px; color: #444; }
#history-marks { display: block; width: 100%; height: 12px; cursor: pointer; }
.history-grid { display: grid; grid-template-columns: minmax(640px, 7fr) 5fr; gap: 10px; align-items: start; }
@media (max-width: 1000px) { .history-grid { grid-template-columns: minmax(0, 1fr); } }
.history-events { font: 12px ui-monospace, monospace; background: #fff; border: 1px solid #ddd; border-radius: 4px; overflow: hidden; user-select: none; }
.history-event { display: grid; grid-template-columns: 52px 74px 108px 118px 76px 86px minmax(0, 1fr); column-gap: 6px; padding: 1px 6px; white-space: pre; cursor: pointer; line-height: 17px; }
.history-event > span { overflow: hidden; text-overflow: ellipsis; } .history-event .ev-wide { grid-column: 3 / 7; }
.history-event .ev-idx, .history-event .ev-time, .history-event .ev-size { text-align: right; } .history-event .ev-idx, .history-event .ev-time, .history-event .ev-site { color: #777; }
.history-head { font-weight: 600; background: #f2f2f2; cursor: default; }
.history-event.selected { background: #fdf0c2; } .history-event.oom { color: #b4141d; font-weight: 600; }
.history-map-wrap { background: #fff; border: 1px solid #ddd; border-radius: 4px; }
#history-map { display: block; width: 100%; }
.history-stack { margin-top: 8px; max-height: 260px; overflow: auto; background: #fff; border: 1px solid #eee; border-radius: 4px; padding: 4px 8px; font-size: 12px; }
.history-tip { position: absolute; pointer-events: none; background: rgba(255,255,255,0.97); border: 1px solid #bbb; border-radius: 4px; padding: 6px 8px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,0.15); max-width: 560px; z-index: 2; overflow-wrap: anywhere; }
.oom-tip { color: #b4141d; }
#settings-table { max-width: 100%; } #settings-table td { overflow-wrap: anywhere; } #settings-table code { white-space: pre-wrap; }
#segment-timeline-chart { display: block; width: 100%; height: 320px; cursor: crosshair; }
tr.unknown-setting td:first-child code { background: #fff3cd; }
`;

/**
 * The report page's markup between `<body>` and the data: the same for a report, the empty viewer
 * and a file dropped on either (the app rebuilds the page from it, src/viewer/app/drop.ts).
 */
export function reportBody(title: string, file: string): string {
  return `<header>
<h1 id="title">${escapeHtml(title)}</h1>
<div id="source">${escapeHtml(file)}</div>
</header>
${dropZoneHtml()}
<div id="truncated" role="alert" hidden></div>
<ul id="notices"></ul>
<section id="timeline-section">
<h2>Live memory</h2>
<div class="toolbar"><span id="legend"></span><button id="zoom-in" type="button">zoom in</button><button id="zoom-out" type="button">zoom out</button><button id="zoom-reset" type="button">reset</button><span id="range"></span></div>
<div class="canvas-wrap"><canvas id="timeline" aria-label="stacked timeline of live memory by category"></canvas><div id="tooltip" hidden></div></div>
<p class="muted">Wheel to zoom, drag to pan, double-click to reset; hover for totals and the largest allocations alive at that moment. Dashed lines mark training steps.</p>
</section>
<div class="toolbar"><input id="search" type="search" placeholder="search layer, kernel or frame" aria-label="search"><span id="search-count" class="muted"></span></div>
<section id="leaks"><h2>Leaks</h2><div id="leaks-body"></div></section>
<section id="modules"><h2>Modules</h2><div id="modules-body"></div></section>
<section id="kernels"><h2>Top kernels by memory added</h2><div id="kernels-body"></div></section>
<section id="allocations"><h2>Largest allocations</h2><div id="allocations-body"></div></section>
<section id="segment-timeline" hidden><h2>Active Cached Segment Timeline</h2><div id="segment-timeline-body"></div></section>
<section id="state-history" hidden><h2>Allocator State History</h2><div id="state-history-body"></div></section>
<section id="allocator-settings" hidden><h2>Allocator settings</h2><div id="allocator-settings-body"></div></section>
<section id="segments"><h2>Segments and blocks</h2><div id="segments-body"></div></section>
<!-- flame graphs (src/viewer/app/flamegraph.ts) -->
<section id="flames"><h2>Flame graphs</h2><div id="flames-body"></div><p class="muted">Click a frame to zoom to it, the top frame or "reset zoom" to zoom out; the search box highlights frames and totals them.</p></section>
`;
}

/**
 * The report page: one self-contained HTML file. The data is embedded as JSON with its number
 * columns as (deflated, where `codec` deflates) bytes (src/viewer/report-embed.ts), the app as one
 * inline script; nothing is fetched. Without data it is the empty viewer, which reads a file
 * dropped on it (`memscope viewer`); a report reads one too.
 *
 * A packed report's second buffer (what the chart's first frame does not read) comes after the
 * app's script, so the app starts, and the chart draws, before the HTML parser has read it.
 */
export function renderReportHtml(data: ReportData | null, appJs: string, codec?: EmbedCodec): string {
  const title = data?.title ?? VIEWER_TITLE;
  const body = reportBody(title, data?.source.file ?? '');
  if (!data) return renderHtmlPage({ title, css: CSS + DROP_CSS, body, script: appJs });
  const embedded = embedReportData(data, codec) as { $packed?: { rest?: { b64?: string } } };
  const rest = embedded.$packed?.rest;
  const restB64 = rest?.b64 ?? '';
  if (rest) delete rest.b64;
  return renderHtmlPage({
    title,
    css: CSS + DROP_CSS,
    body: body + dataScripts(jsonForScript(embedded), 'memscope-data'),
    script: appJs,
    afterScript: restB64 ? dataScripts(restB64, 'memscope-rest') : undefined,
  });
}

/** Characters of the data per script element. */
const DATA_PART = 32 * 1024;

/**
 * `text` as `<script class="CLASS">` data elements (not run: JSON, or base64 as plain text), in parts that the page joins
 * in document order (the first data part also has `id="memscope-data"`). Browsers' HTML parsers
 * read one script text of a megabyte markedly slower than the same text in parts of tens of KiB,
 * and a report's data is mostly base64. The text has no `<` (JSON's is escaped; base64 has none),
 * so no cut can make a tag. The rest's parts are base64 alone, not JSON: the page joins them first.
 */
function dataScripts(text: string, cls: 'memscope-data' | 'memscope-rest'): string {
  const parts: string[] = [];
  for (let at = 0; at < text.length; at += DATA_PART) {
    const id = at === 0 && cls === 'memscope-data' ? ' id="memscope-data"' : '';
    const type = cls === 'memscope-data' ? 'application/json' : 'text/plain';
    parts.push(`<script type="${type}" class="${cls}"${id}>${text.slice(at, at + DATA_PART)}</script>\n`);
  }
  return parts.join('');
}

/** The text of a report page's script elements of class `cls`, joined. */
function joinedScripts(html: string, cls: string): string {
  return [...html.matchAll(new RegExp(`<script type="[^"]*" class="${cls}"[^>]*>([^<]*)</script>`, 'g'))].map((m) => m[1]!).join('');
}

/**
 * The embedded data's JSON text of a report page's HTML, with a packed page's second buffer back
 * in its place (as `embedReportData` wrote it), or null for the empty viewer.
 */
export function embeddedDataJson(html: string): string | null {
  const json = joinedScripts(html, 'memscope-data');
  if (!json) return null;
  const rest = joinedScripts(html, 'memscope-rest');
  if (!rest) return json;
  const value = JSON.parse(json) as { $packed: { rest: { b64?: string } } };
  value.$packed.rest.b64 = rest;
  return JSON.stringify(value);
}
