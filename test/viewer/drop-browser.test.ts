// The empty viewer (`memscope viewer`) and a report page in Chromium, reading files dropped on them
// or opened with the button: each kind of input is drawn from the same data `memscope report`
// embeds, a bad file shows the CLI's error line, a second file replaces the first, and nothing
// touches the network or logs an error.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { loadReportData } from '../../src/cli/commands/report.js';
import { DeviceMemory } from '../../src/allocator/api.js';
import { dumpSnapshot } from '../../src/allocator/snapshot-node.js';
import { FileCaptureSink } from '../../src/capture/file-sink-node.js';
import { errorLine } from '../../src/viewer/open-file.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { fixture } from '../support/fixtures.js';
import { firstFrame, inkedPixels } from '../support/report-page.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-drop-browser-'));
let browser: Browser;
let emptyViewer: string;
let app: string;

beforeAll(async () => {
  browser = await launchChromium();
  app = await viewerBundle();
  emptyViewer = join(work, 'memscope.html');
  writeFileSync(emptyViewer, renderReportHtml(null, app));
});
afterAll(async () => {
  await browser?.close();
  rmSync(work, { recursive: true, force: true });
});

/** A page with the problems a test must see empty: page errors, console errors, network requests. */
async function openPage(html: string): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith('file:')) problems.push(`network request: ${r.url()}`);
  });
  await page.goto(`file://${html}`);
  return { page, problems };
}

/** Waits until the page has finished reading the `n`-th file (shown or refused). */
async function settled(page: Page, n: number): Promise<string> {
  // A shown file's sections are built after the chart's first paint.
  await page.waitForFunction((k) => (window.memscopeDrop?.opened ?? 0) >= k && window.memscopeDrop!.state !== 'reading' && (window.memscopeDrop!.state !== 'shown' || window.memscopeViewer?.sectionsReady === true), n, { timeout: 120_000 });
  return page.evaluate(() => window.memscopeDrop!.state);
}

/** Drops `path` on the page through a DataTransfer, as a drag from the desktop does. */
async function dropFile(page: Page, path: string, name = basename(path)): Promise<void> {
  const dataTransfer = await page.evaluateHandle(
    ({ b64, fileName }) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], fileName));
      return dt;
    },
    { b64: readFileSync(path).toString('base64'), fileName: name },
  );
  await page.dispatchEvent('#drop-zone', 'dragover', { dataTransfer });
  expect(await page.locator('#drop-veil').isVisible()).toBe(true);
  await page.dispatchEvent('#drop-zone', 'drop', { dataTransfer });
}

/** What `memscope report PATH` embeds, with the path as the page knows the file: by its name. */
async function reportData(path: string): Promise<ReportData> {
  const data = await loadReportData(path, DEFAULT_CAPS);
  return JSON.parse(JSON.stringify(data).split(JSON.stringify(path).slice(1, -1)).join(basename(path))) as ReportData;
}

async function pageData(page: Page): Promise<ReportData> {
  return JSON.parse(await page.evaluate(() => JSON.stringify(window.memscopeDrop!.data()))) as ReportData;
}

/** Event listeners on `window` and `document`, counted by Chromium's debugger. */
async function pageListeners(page: Page): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  let n = 0;
  for (const expression of ['window', 'document']) {
    const { result } = await cdp.send('Runtime.evaluate', { expression });
    const { listeners } = await cdp.send('DOMDebugger.getEventListeners', { objectId: result.objectId! });
    n += listeners.length;
  }
  await cdp.detach();
  return n;
}

/** What `memscope run -o x.ndjson.gz` leaves when the program is killed: its gzip stream has no end. */
function killedGzipCapture(): string {
  const path = join(work, 'killed.capture.ndjson.gz');
  const sink = new FileCaptureSink(path);
  const lines = readFileSync(fixture('captures/train-leak.capture.ndjson'), 'utf8').split(/(?<=\n)/);
  for (let i = 0; i < lines.length * 0.7; i += 50) sink.write(lines.slice(i, i + 50).join(''));
  return path;
}

function allocatorSnapshot(): string {
  const m = new DeviceMemory();
  m.recordMemoryHistory({ enabled: 'all', context: 'all' });
  m.cachingAllocatorAlloc(3 << 20);
  m.cachingAllocatorDelete(m.cachingAllocatorAlloc(1 << 20));
  const path = join(work, 'allocator-snapshot.pickle');
  dumpSnapshot(m, path);
  return path;
}

describe('the viewer reads a dropped file', () => {
  it('the empty viewer says what it reads and draws nothing else', async () => {
    const { page, problems } = await openPage(emptyViewer);
    expect(await page.title()).toBe('memscope viewer');
    const zone = await page.locator('#drop-zone').innerText();
    for (const kind of ['PyTorch memory snapshots', 'gzipped', 'Kineto profiler traces', 'export_memory_timeline', 'memscope captures']) expect(zone).toContain(kind);
    expect(await page.locator('#timeline').isVisible()).toBe(false);
    expect(await page.locator('#search').isVisible()).toBe(false);
    expect(await page.evaluate(() => window.memscopeDrop!.state)).toBe('empty');
    expect(problems).toEqual([]);
    await page.close();
  });

  const kinds: [string, () => string, 'snapshot' | 'trace' | 'capture'][] = [
    ['a snapshot pickle', () => fixture('torch/transformer_forward_trace.pickle'), 'snapshot'],
    ['a protocol 5 pickle, gzipped', () => fixture('torch/torch20_history_protocol5.pickle.gz'), 'snapshot'],
    ["memscope's allocator snapshot", allocatorSnapshot, 'snapshot'],
    ['a Kineto trace (.json.gz)', () => fixture('traces/kineto_modern_memory.json.gz'), 'trace'],
    ['export_memory_timeline JSON', () => fixture('traces/memory_timeline_small.json'), 'trace'],
    ['a memscope capture', () => fixture('captures/train-leak.capture.ndjson'), 'capture'],
    ['a gzipped capture its program left unfinished (no gzip trailer)', killedGzipCapture, 'capture'],
  ];
  it.each(kinds)('%s, opened with the button and dropped: drawn from the data memscope report embeds', { timeout: 240_000 }, async (_kind, file, sourceKind) => {
    const path = file();
    const want = await reportData(path);
    for (const how of ['button', 'drop'] as const) {
      const { page, problems } = await openPage(emptyViewer);
      if (how === 'button') await page.setInputFiles('#drop-input', path);
      else await dropFile(page, path);
      expect(await settled(page, 1), how).toBe('shown');
      await firstFrame(page);
      const got = await pageData(page);
      expect(got.source.kind).toBe(sourceKind);
      expect(got).toEqual(want);
      expect(await page.title()).toBe(want.title);
      expect(await page.locator('#source').innerText()).toContain(basename(path));
      expect(await page.locator('#timeline').isVisible()).toBe(true);
      // The chart is drawn: the canvas has non-white pixels inside the plot.
      expect(await inkedPixels(page)).toBeGreaterThan(1000);
      expect(problems, how).toEqual([]);
      await page.close();
    }
  });

  it('a corrupt file shows the error line memscope report prints; the page stays usable', async () => {
    const cut = join(work, 'cut.pickle');
    writeFileSync(cut, readFileSync(fixture('torch/small_3seg.pickle')).subarray(0, 900));
    let cliLine = '';
    try {
      await loadReportData(cut, DEFAULT_CAPS);
    } catch (err) {
      cliLine = errorLine(err).split(cut).join('cut.pickle');
    }
    expect(cliLine).toMatch(/^memscope: cut\.pickle: pickle offset \d+: /);
    const { page, problems } = await openPage(emptyViewer);
    await dropFile(page, cut);
    expect(await settled(page, 1)).toBe('error');
    expect(await page.locator('#drop-error').innerText()).toBe(cliLine);
    expect(await page.locator('#drop-zone').isVisible()).toBe(true);

    // Gzip that stops short: the browser's inflater words the cause, memscope the rest.
    const cutGz = join(work, 'cut.pickle.gz');
    writeFileSync(cutGz, readFileSync(fixture('torch/torch20_history_protocol5.pickle.gz')).subarray(0, 200));
    await page.setInputFiles('#drop-input', cutGz);
    expect(await settled(page, 2)).toBe('error');
    expect(await page.locator('#drop-error').innerText()).toMatch(/^memscope: cut\.pickle\.gz: the gzip data ends early \(.+\): the file was cut short or is still being written$/);

    const text = join(work, 'notes.txt');
    writeFileSync(text, 'hello');
    await page.setInputFiles('#drop-input', text);
    expect(await settled(page, 3)).toBe('error');
    expect(await page.locator('#drop-error').innerText()).toBe('memscope: notes.txt: not a memscope capture, PyTorch memory snapshot or Kineto trace: looks like text ("hello")');

    // A good file after the errors is shown, and the error line goes.
    await page.setInputFiles('#drop-input', fixture('traces/memory_timeline_small.json'));
    expect(await settled(page, 4)).toBe('shown');
    expect(await page.locator('#drop-error').isVisible()).toBe(false);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('a report page accepts a drop, and a second file replaces the first', async () => {
    const first = fixture('torch/long_stack.pickle');
    const report = join(work, 'report.html');
    writeFileSync(report, renderReportHtml(await loadReportData(first, DEFAULT_CAPS), app));
    const { page, problems } = await openPage(report);
    await firstFrame(page);
    expect(await page.evaluate(() => window.memscopeDrop!.state)).toBe('shown');
    expect(await page.locator('h1').innerText()).toContain('long_stack.pickle');
    expect(await page.locator('#allocations-body').innerText()).toContain('train.py');

    const second = fixture('traces/memory_timeline_small.json');
    await dropFile(page, second);
    expect(await settled(page, 1)).toBe('shown');
    await firstFrame(page);
    expect(await page.locator('h1').innerText()).toBe('memscope · memory_timeline_small.json');
    expect(await pageData(page)).toEqual(await reportData(second));
    // One page's worth of views: nothing of the snapshot is left.
    expect(await page.locator('canvas#timeline').count()).toBe(1);
    expect(await page.locator('#memscope-data').count()).toBe(0);
    expect(await page.locator('#allocations-body').innerText()).not.toContain('train.py');
    expect(await page.locator('#kernels h2').innerText()).toBe('Operators by memory added');

    // The snapshot's views are gone from the page's events too: listeners on window and document
    // belong to the page shown, so their number does not grow with each file shown.
    const afterSecond = await pageListeners(page);
    const full = await page.evaluate(() => window.memscopeViewer!.range());
    const box = (await page.locator('#timeline').boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -400);
    await page.waitForFunction((r) => window.memscopeViewer!.range().t1 - window.memscopeViewer!.range().t0 < r.t1 - r.t0, full);

    // And a third, dropped on the second: the snapshot again, identical to its report.
    await page.setInputFiles('#drop-input', first);
    expect(await settled(page, 2)).toBe('shown');
    expect(await pageData(page)).toEqual(await reportData(first));
    await firstFrame(page);
    expect(afterSecond).toBeGreaterThan(0);
    // Each kind of file adds its own views' listeners; showing it again adds none of the old ones.
    const afterThird = await pageListeners(page);
    await page.setInputFiles('#drop-input', second);
    expect(await settled(page, 3)).toBe('shown');
    expect(await pageListeners(page)).toBe(afterSecond);
    await page.setInputFiles('#drop-input', first);
    expect(await settled(page, 4)).toBe('shown');
    await firstFrame(page);
    expect(await pageListeners(page)).toBe(afterThird);
    expect(problems).toEqual([]);
    await page.close();
  }, 240_000);
});
