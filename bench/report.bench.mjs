// Report scale, in headless Chromium:
// 1. a 1,000,000-event capture → `memscope report`: first timeline frame (target < 2 s), size,
//    build time, redraw times;
// 2. PyTorch snapshots of ~100 MB (~613k trace events) and ~1 GB (~6.1M) made by
//    bench/make-big-snapshot.mjs from the transformer fixture → `memscope report` → the Active
//    Memory Timeline: report write time, HTML size, first frame after load, zoom and hover times
//    (p50/p95), JS heap (CDP Performance.getMetrics) and the tab's resident memory. Targets:
//    100 MB: first frame < 1 s, zoom and hover p95 < 16 ms; 1 GB: tab < 2 GB, p95 < 50 ms.
//
// `npm run bench -- report` runs all of it; MEMSCOPE_REPORT_BENCH=snapshots (or 100mb, 1gb)
// runs only those parts; MEMSCOPE_REPORT_BENCH=open only opens the 1 GB file in the empty viewer (open100: the 100 MB file).
// MEMSCOPE_REPORT_BENCH_FRAMES=1 also prints each load's zoom and byte-axis frame times, in order.
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
import { captureToReport, DEFAULT_CAPS } from '../dist/viewer/report-data.js';
import { torchToReport } from '../dist/viewer/torch-report-node.js';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
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

const only = process.env.MEMSCOPE_REPORT_BENCH ?? '';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
let t = 0;
if (!only) await captureBench();

/** The 1,000,000-event capture: report size, first frame, redraws. */
async function captureBench() {
  t = performance.now();
  const events = makeCapture();
  console.log(`capture: ${events.toLocaleString('en-US')} alloc/free events, ${(statSync(capturePath).size / 2 ** 20).toFixed(1)} MiB, written in ${((performance.now() - t) / 1000).toFixed(2)} s`);

  t = performance.now();
  const capture = await readCaptureFile(capturePath);
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
  const first = median(runs.map((r) => r.firstFrameMs));
  console.log(`first frame (navigation start → first timeline frame drawn), median of ${runs.length}: ${first.toFixed(0)} ms [${runs.map((r) => r.firstFrameMs.toFixed(0)).join(', ')}] · target < 2000 ms ${first < 2000 ? 'MET' : 'MISSED'}`);
  console.log(`wall time goto → first frame seen by the driver: ${runs.map((r) => r.wallMs.toFixed(0)).join(', ')} ms`);
  console.log(`redraw, all 1M events in view (ms): ${runs.flatMap((r) => r.redraws.full).map((x) => x.toFixed(1)).join(', ')} · median ${median(runs.flatMap((r) => r.redraws.full)).toFixed(1)}`);
  console.log(`redraw, zoomed in (ms): median ${median(runs.flatMap((r) => r.redraws.zoomed)).toFixed(1)}`);
  console.log(`report file size: ${statSync(htmlPath).size.toLocaleString('en-US')} bytes (${(statSync(htmlPath).size / 2 ** 20).toFixed(1)} MiB)`);
}

// ---------------------------------------------------------------- PyTorch snapshots

/** Resident memory (bytes) of the renderer processes under a browser process. */
function rendererRss(browserPid) {
  const children = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(d));
    } catch {
      // The process ended while we looked.
    }
  }
  let rss = 0;
  let hwm = 0;
  const todo = [browserPid];
  while (todo.length) {
    const pid = todo.pop();
    for (const c of children.get(pid) ?? []) {
      todo.push(c);
      try {
        if (!readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('--type=renderer')) continue;
        const status = readFileSync(`/proc/${c}/status`, 'utf8');
        const m = /VmRSS:\s+(\d+) kB/.exec(status);
        if (m) rss = Math.max(rss, Number(m[1]) * 1024);
        const h = /VmHWM:\s+(\d+) kB/.exec(status);
        if (h) hwm = Math.max(hwm, Number(h[1]) * 1024);
      } catch {
        // Gone already.
      }
    }
  }
  return { rss, hwm };
}

/**
 * Opens `pickle` in the empty viewer through its open button (the drop's reader): time to the
 * first frame, the tab's peak memory. Its own browser, so the peak is this tab's alone.
 */
async function openedInPage(pickle, label) {
  const server = await chromium.launchServer({ executablePath: process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const browser = await chromium.connect(server.wsEndpoint());
  const viewer = join(out, 'viewer.html');
  writeFileSync(viewer, renderReportHtml(null, await viewerBundle()));
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('request', (q) => !q.url().startsWith('file:') && errors.push(`network request: ${q.url()}`));
  await page.goto(`file://${viewer}`);
  const started = performance.now();
  await page.locator('#drop-input').setInputFiles(pickle);
  await page.waitForFunction(() => window.memscopeDrop?.state !== 'reading' && (window.memscopeViewer?.frames ?? 0) > 0, null, { timeout: 1_800_000, polling: 200 });
  const ms = performance.now() - started;
  const { hwm } = rendererRss(server.process().pid);
  if (await page.evaluate(() => window.memscopeDrop.state) !== 'shown') errors.push(`not shown: ${await page.locator('#drop-error').innerText()}`);
  await page.screenshot({ path: join(out, `big-${label}-opened.png`) });
  await context.close();
  await browser.close();
  await server.close();
  return { ms, hwmMiB: hwm / 2 ** 20, errors };
}

async function snapshotBench(label, targetMb, targets) {
  const pickle = join(out, `big-${label}.pickle`);
  const html = join(out, `big-${label}.html`);
  if (!existsSync(pickle)) {
    const r = spawnSync(process.execPath, [join(here, 'make-big-snapshot.mjs'), join(here, '../test/fixtures/torch/transformer_fullstep_trace.pickle'), pickle, String(targetMb)], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('make-big-snapshot failed');
  }
  const started = performance.now();
  const r = spawnSync(process.execPath, [join(here, '../dist/cli/memscope.cjs'), 'report', pickle, '-o', html], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`memscope report failed: ${r.stderr}`);
  const writeS = (performance.now() - started) / 1000;
  console.log(`\n${label} snapshot: ${(statSync(pickle).size / 2 ** 20).toFixed(1)} MiB pickle → \`memscope report\` in ${writeS.toFixed(1)} s → ${(statSync(html).size / 2 ** 20).toFixed(1)} MiB HTML`);

  const server = await chromium.launchServer({ executablePath: process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  const browser = await chromium.connect(server.wsEndpoint());
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('request', (q) => !q.url().startsWith('file:') && errors.push(`network request: ${q.url()}`));
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    await page.goto(`file://${html}`, { waitUntil: 'commit' });
    await page.waitForFunction(() => (window.memscopeViewer?.frames ?? 0) > 0, null, { timeout: 600_000, polling: 50 });
    const firstFrameMs = await page.evaluate(() => window.memscopeViewer.firstFrameMs);
    const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark').map((e) => [e.name, e.startTime])));
    const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    // Zoom: 40 views from the whole trace down to a few events and back, one frame each.
    const zoom = await page.evaluate(async () => {
      const v = window.memscopeViewer;
      const r = v.range();
      const frame = () => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
      const times = [];
      for (let k = 0; k < 40; k++) {
        const f = Math.pow(0.5, k % 20);
        const mid = r.t0 + (r.t1 - r.t0) * (0.3 + 0.4 * (k / 40));
        v.setRange(mid - ((r.t1 - r.t0) * f) / 2, mid + ((r.t1 - r.t0) * f) / 2);
        await frame();
        times.push(v.lastFrameMs);
      }
      v.setRange(r.t0, r.t1);
      await frame();
      return times;
    });
    // Pan: 30 steps of a twentieth of the view, one frame each, at an eighth of the trace.
    const pan = await page.evaluate(async () => {
      const v = window.memscopeViewer;
      const r = v.range();
      const frame = () => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
      const span = (r.t1 - r.t0) / 8;
      const times = [];
      for (let k = 0; k < 30; k++) {
        const t0 = r.t0 + (r.t1 - r.t0) * 0.3 + (span / 20) * k;
        v.setRange(t0, t0 + span);
        await frame();
        times.push(v.lastFrameMs);
      }
      v.setRange(r.t0, r.t1);
      await frame();
      return times;
    });
    // The byte axis: 16 views from the whole height down to 1/2^15 of it (the bottom of the
    // stack, where most allocations become a pixel tall), over the whole trace and an eighth of it.
    const bytes = await page.evaluate(async () => {
      const v = window.memscopeViewer;
      const r = v.range();
      const frame = () => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
      const c = document.getElementById('timeline');
      const top = Math.max(Number(c.dataset.peakAllocated), Number(c.dataset.peakReserved));
      const times = [];
      for (const zoomed of [false, true]) {
        if (zoomed) v.setRange(r.t0 + (r.t1 - r.t0) * 0.4, r.t0 + (r.t1 - r.t0) * 0.525);
        for (let k = 0; k < 16; k++) {
          v.setBytes(0, top / 2 ** k);
          await frame();
          times.push(v.lastFrameMs);
        }
      }
      v.setBytes(0, Infinity);
      v.setRange(r.t0, r.t1);
      await frame();
      return times;
    });
    // Hover: 100 pointer positions over the whole view, by what is under the pointer.
    const box = await page.locator('#timeline').boundingBox();
    const hover = [];
    const hoverSummed = [];
    for (let k = 0; k < 100; k++) {
      await page.mouse.move(box.x + 80 + ((box.width - 100) * k) / 100, box.y + 20 + ((box.height - 60) * ((k * 37) % 100)) / 100);
      const h = await page.evaluate(() => ({ ms: window.memscopeViewer.lastHoverMs, summed: /under a pixel each/.test(document.getElementById('tooltip').textContent ?? '') }));
      hover.push(h.ms);
      if (h.summed) hoverSummed.push(h.ms);
    }
    const after = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    const rss = rendererRss(server.process().pid);
    if (i === 0) await page.screenshot({ path: join(out, `big-${label}.png`) });
    runs.push({ firstFrameMs, marks, zoom, pan, bytes, hover, hoverSummed, heapMiB: Math.max(metrics.JSHeapUsedSize, after.JSHeapUsedSize) / 2 ** 20, heapTotalMiB: after.JSHeapTotalSize / 2 ** 20, threadS: metrics.ThreadTime, rssMiB: rss.rss / 2 ** 20, hwmMiB: rss.hwm / 2 ** 20, errors });
    await context.close();
  }
  await browser.close();
  await server.close();
  if (targets.opened) runs.opened = await openedInPage(pickle, label);

  const list = (xs, d = 0) => xs.map((x) => x.toFixed(d)).join(', ');
  const first = median(runs.map((x) => x.firstFrameMs));
  console.log(`${label} first frame (navigation start → first timeline frame): median ${first.toFixed(0)} ms [${list(runs.map((x) => x.firstFrameMs))}]${targets.first ? ` · target < ${targets.first} ms ${first < targets.first ? 'MET' : 'MISSED'}` : ''}`);
  const phase = (from, to) => median(runs.map((x) => (x.marks[to] ?? x.firstFrameMs) - (from ? x.marks[from] : 0)));
  console.log(`  of which: page load until the script runs ${phase(null, 'memscope-start').toFixed(0)} ms, inflate and unpack ${phase('memscope-start', 'memscope-parsed').toFixed(0)} ms, timeline model ${phase('memscope-parsed', 'memscope-model').toFixed(0)} ms, first draw ${median(runs.map((x) => x.firstFrameMs - x.marks['memscope-model'])).toFixed(0)} ms`);
  console.log(`  main-thread CPU time until then (CDP ThreadTime): ${list(runs.map((x) => (x.threadS ?? NaN) * 1000))} ms`);
  const stat = (name, xs) => {
    if (!xs.length) return console.log(`${label} ${name}: none`);
    console.log(`${label} ${name}: p50 ${median(xs).toFixed(1)} ms, p95 ${p95(xs).toFixed(1)} ms (${xs.length}) · target < ${targets.interaction} ms ${p95(xs) < targets.interaction ? 'MET' : 'MISSED'}`);
  };
  stat('zoom frame', runs.flatMap((x) => x.zoom));
  stat('pan frame', runs.flatMap((x) => x.pan));
  stat('byte-axis zoom frame', runs.flatMap((x) => x.bytes));
  if (process.env.MEMSCOPE_REPORT_BENCH_FRAMES) for (const x of runs) console.log('  raw bytes', x.bytes.map((v) => v.toFixed(1)).join(' '), '| zoom', x.zoom.map((v) => v.toFixed(1)).join(' '));
  stat('hover', runs.flatMap((x) => x.hover));
  stat('hover on summed bands', runs.flatMap((x) => x.hoverSummed));
  const rss = Math.max(...runs.map((x) => x.rssMiB), ...runs.map((x) => x.hwmMiB));
  console.log(`${label} JS heap used ${list(runs.map((x) => x.heapMiB))} MiB (total ${list(runs.map((x) => x.heapTotalMiB))} MiB); tab resident memory ${list(runs.map((x) => x.rssMiB))} MiB, peak ${list(runs.map((x) => x.hwmMiB))} MiB${targets.rssMiB ? ` · target < ${targets.rssMiB} MiB ${rss < targets.rssMiB ? 'MET' : 'MISSED'}` : ''}`);
  if (runs.opened) {
    const o = runs.opened;
    console.log(`${label} opened in the page (the open button; a drop reads the same way): drawn after ${(o.ms / 1000).toFixed(1)} s, tab peak resident ${o.hwmMiB.toFixed(0)} MiB${targets.rssMiB ? ` · target < ${targets.rssMiB} MiB ${o.hwmMiB < targets.rssMiB ? 'MET' : 'MISSED'}` : ''}; ${o.errors.length ? o.errors.join('; ') : 'no console errors or network requests'}`);
  }
  const errors = runs.flatMap((x) => x.errors);
  console.log(`${label} console errors and network requests: ${errors.length ? errors.join('; ') : 'none'}`);
}

if (!only || only === 'snapshots' || only === '100mb') await snapshotBench('100mb', 100, { first: 1000, interaction: 16 });
if (!only || only === 'snapshots' || only === '1gb') await snapshotBench('1gb', 1000, { interaction: 50, rssMiB: 2048, opened: true });
if (only === 'open' || only === 'open100') {
  // Only the 1 GB (or, for open100, the 100 MB) file opened in the empty viewer (made by an earlier run of its part).
  const label = only === 'open' ? '1gb' : '100mb';
  const o = await openedInPage(join(out, `big-${label}.pickle`), label);
  console.log(`${label} opened in the page (the open button; a drop reads the same way): drawn after ${(o.ms / 1000).toFixed(1)} s, tab peak resident ${o.hwmMiB.toFixed(0)} MiB${label === '1gb' ? ` · target < 2048 MiB ${o.hwmMiB < 2048 ? 'MET' : 'MISSED'}` : ''}; ${o.errors.length ? o.errors.join('; ') : 'no console errors or network requests'}`);
}
