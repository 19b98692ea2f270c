// Report scale: a 1,000,000-event capture → `memscope report` → headless
// Chromium. Prints how long the page takes to draw its first timeline frame
// (target < 2 s), the report's size, and the time to build it.
//
// The capture is synthetic but goes through the real recorder and writer: 250
// training steps over a 4-layer model, each step allocating and freeing 2,000
// storages of mixed sizes in forward/backward/optimizer, plus one leaked tensor
// per step — 1,000,000 alloc/free events in all.
import { mkdirSync, writeFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CaptureWriter } from '../dist/capture/writer.js';
import { CaptureRecorder } from '../dist/capture/recorder.js';
import { FileCaptureSink } from '../dist/capture/file-sink-node.js';
import { readCaptureFile } from '../dist/capture/read-node.js';
import { captureToReport } from '../dist/viewer/report-data.js';
import { renderReportHtml } from '../dist/viewer/html.js';
import { viewerBundle } from '../dist/viewer/bundle-node.js';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'out');
mkdirSync(out, { recursive: true });
const capturePath = join(out, 'report-1m.capture.ndjson');
const htmlPath = join(out, 'report-1m.html');
const TARGET_EVENTS = 1_000_000;

function makeCapture() {
  const sink = new FileCaptureSink(capturePath);
  let clock = 0;
  const writer = new CaptureWriter(sink, { created: new Date().toISOString(), argv: ['synthetic-train.js'], backend: 'cpu', stacks: false, maxEntries: null });
  const rec = new CaptureRecorder(writer, { now: () => clock });
  let id = 1;
  let events = 0;
  const ctx = { phase: 'none', module: null, kernel: null, step: 0, seq: 0 };
  const alloc = (bytes) => {
    const s = { id: id++, device: 'cpu', bytes, dtype: 'float32', shape: [bytes / 4] };
    clock += 0.01;
    rec.onStorageAlloc(s, ctx);
    events++;
    return s;
  };
  const free = (s) => {
    clock += 0.01;
    rec.onStorageFree(s, ctx);
    events++;
  };
  const mk = (path, parent) => ({ id: id++, path, className: 'Dense', parent, children: [], parameters: () => [], buffers: () => [] });
  const root = mk('model', null);
  const layers = [0, 1, 2, 3].map((i) => mk(`model.dense_${i + 1}`, root));
  root.children.push(...layers);
  const opt = { id: 1, className: 'AdamOptimizer', stateVariables: () => [] };
  const kernels = ['MatMul', 'Add', 'Relu', 'Mul', 'Sub', 'Sum'];
  let seed = 1;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  while (events < TARGET_EVENTS) {
    const live = [];
    ctx.phase = 'forward';
    for (const layer of layers) {
      ctx.module = layer;
      rec.onModuleEnter(layer, [], ctx);
      for (let k = 0; k < 250 && events < TARGET_EVENTS; k++) {
        ctx.kernel = kernels[k % kernels.length];
        live.push(alloc(4 * Math.floor(1 + rand() * 65536)));
        if (k % 3 === 2) free(live.splice(Math.floor(rand() * live.length), 1)[0]);
      }
      rec.onModuleExit(layer, [], ctx);
    }
    ctx.phase = 'backward';
    for (let k = 0; k < 700 && events < TARGET_EVENTS; k++) {
      ctx.kernel = kernels[(k * 7) % kernels.length];
      live.push(alloc(4 * Math.floor(1 + rand() * 32768)));
      if (k % 2 === 1) free(live.splice(Math.floor(rand() * live.length), 1)[0]);
    }
    ctx.phase = 'optimizer';
    ctx.module = null;
    rec.onOptimizerStepStart(opt, ctx);
    while (live.length > 1 && events < TARGET_EVENTS) free(live.pop());
    rec.onOptimizerStepEnd(opt, ctx);
    ctx.phase = 'none';
  }
  rec.finish({ exitCode: 0, error: null });
  sink.close();
  return events;
}

let t = performance.now();
const events = makeCapture();
console.log(`capture: ${events.toLocaleString('en-US')} alloc/free events, ${(statSync(capturePath).size / 2 ** 20).toFixed(1)} MiB, written in ${((performance.now() - t) / 1000).toFixed(2)} s`);

t = performance.now();
const capture = readCaptureFile(capturePath);
const data = captureToReport(capture, capturePath);
const html = renderReportHtml(data, await viewerBundle());
writeFileSync(htmlPath, html);
console.log(`report: ${(Buffer.byteLength(html) / 2 ** 20).toFixed(1)} MiB HTML, ${data.timeline.dt.length.toLocaleString('en-US')} timeline events embedded, built in ${((performance.now() - t) / 1000).toFixed(2)} s`);

const browser = await chromium.launch({
  executablePath: process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const runs = [];
for (let i = 0; i < 3; i++) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const wall = performance.now();
  await page.goto(`file://${htmlPath}`, { waitUntil: 'commit' });
  await page.waitForFunction(() => (window.memscopeViewer?.frames ?? 0) > 0, null, { timeout: 60_000, polling: 20 });
  const wallMs = performance.now() - wall;
  const m = await page.evaluate(() => {
    const v = window.memscopeViewer;
    // Time a full-range redraw and a zoomed one too: interaction must stay smooth.
    const c = document.getElementById('timeline');
    v.setRange(0, 1e12);
    const r = v.range();
    return { firstFrameMs: v.firstFrameMs, frameMs: v.lastFrameMs, span: r.t1 - r.t0, width: c.width };
  });
  const redraws = await page.evaluate(async () => {
    const v = window.memscopeViewer;
    const r = v.range();
    const frame = () => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
    const full = [];
    const zoomed = [];
    for (let k = 1; k <= 5; k++) {
      // Alternate between two full-range views (a 1-pixel nudge forces a redraw of all 1M events).
      v.setRange(r.t0 + (k % 2) * 1e-6 * (r.t1 - r.t0), r.t1);
      await frame();
      full.push(v.lastFrameMs);
      v.setRange(r.t0 + (r.t1 - r.t0) * 0.1 * k, r.t1 - (r.t1 - r.t0) * 0.05 * k);
      await frame();
      zoomed.push(v.lastFrameMs);
    }
    return { full, zoomed };
  });
  runs.push({ ...m, wallMs, redraws });
  await page.close();
}
await browser.close();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const first = median(runs.map((r) => r.firstFrameMs));
console.log(`first frame (navigation start → first timeline frame drawn), median of ${runs.length}: ${first.toFixed(0)} ms [${runs.map((r) => r.firstFrameMs.toFixed(0)).join(', ')}] · target < 2000 ms ${first < 2000 ? 'MET' : 'MISSED'}`);
console.log(`wall time goto → first frame seen by the driver: ${runs.map((r) => r.wallMs.toFixed(0)).join(', ')} ms`);
console.log(`redraw, all 1M events in view (ms): ${runs.flatMap((r) => r.redraws.full).map((x) => x.toFixed(1)).join(', ')} · median ${median(runs.flatMap((r) => r.redraws.full)).toFixed(1)}`);
console.log(`redraw, zoomed in (ms): median ${median(runs.flatMap((r) => r.redraws.zoomed)).toFixed(1)}`);
console.log(`report file size: ${statSync(htmlPath).size.toLocaleString('en-US')} bytes (${(statSync(htmlPath).size / 2 ** 20).toFixed(1)} MiB)`);
