// The snapshot report in Chromium, checked against CPython's reading of the same pickle
// (test/viewer/snapshot_truth.py): the Active Memory Timeline's bands, the allocating site in
// hover and tables, the exact peaks, blocks live before the trace, axis ticks, and search.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { humanBytes } from '../../src/core/units.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage, redrawn, saturatedPixels, timelinePixelAt } from '../support/report-page.js';
import { fixture } from '../support/fixtures.js';

const here = import.meta.dirname;
const artifacts = resolve(here, '../../test-artifacts');
const work = mkdtempSync(join(tmpdir(), 'memscope-snapviewer-'));

interface Truth {
  devices: { device: number; events: number; peakAllocated: number; peakReserved: number; liveBeforeTrace: number; liveBeforeTraceBytes: number }[];
  matches: number;
  largest: { size: number; addr: number; userFrame: string } | null;
}

function truth(file: string, search = ''): Truth {
  const r = spawnSync('python3', [join(here, 'snapshot_truth.py'), file, ...(search ? [search] : [])], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Truth;
}

async function open(browser: Browser, file: string): Promise<{ page: Page; errors: string[] }> {
  const f = await openMemoryFile(file);
  if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
  const html = join(work, `${file.split(/[\\/]/).pop()}.html`);
  writeFileSync(html, renderReportHtml(snapshotToReport(f.snapshot, file, DEFAULT_CAPS), await viewerBundle()));
  return openReportPage(browser, html, { width: 1280, height: 1000 });
}

describe('snapshot report in the browser', () => {
  let browser: Browser;
  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('a snapshot with history: sites, peaks, live-before blocks, bands, pinning, ticks and search agree with CPython', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const want = truth(file, 'optimizers.py:84');
    const dev = want.devices[0];
    const largest = want.largest!;
    const { page, errors } = await open(browser, file);

    // Peaks: the label and the exact figures are CPython's.
    const canvas = page.locator('#timeline');
    const label = await page.locator('#range').innerText();
    expect(label).toContain(`peak ${humanBytes(dev.peakAllocated)} requested, ${humanBytes(dev.peakReserved)} reserved`);
    expect(Number(await canvas.getAttribute('data-peak-allocated'))).toBe(dev.peakAllocated);
    expect(Number(await canvas.getAttribute('data-peak-reserved'))).toBe(dev.peakReserved);

    // Byte ticks are round binary units: "20 GiB", never "18.63 GiB" or "1000.00 KiB".
    const yTicks = (await canvas.getAttribute('data-y-ticks'))!.split('|');
    expect(yTicks.length).toBeGreaterThan(2);
    for (const t of yTicks) expect(t).toMatch(/^(0 B|[1-9]\d{0,2} (B|KiB|MiB|GiB|TiB))$/);

    // The tables: every site is a user frame, never the allocator; blocks live before the trace listed.
    const table = page.locator('#allocations-body table');
    const sites = await table.locator('tbody tr:not(.detail) td:nth-child(6)').allInnerTexts();
    expect(sites.length).toBe(100);
    expect(sites[0]).toBe(largest.userFrame);
    for (const s of sites) expect(s).not.toMatch(/CUDACachingAllocator|c10::/);
    const allocatedCells = await table.locator('tbody tr:not(.detail) td:nth-child(4)').allInnerTexts();
    expect(allocatedCells.filter((c) => c === 'before the trace').length).toBeGreaterThan(0);
    const allocs = spawnSync('python3', ['-c', `import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); print(sum(1 for e in d['device_traces'][0] if e['action']=='alloc'))`, file], { encoding: 'utf8' });
    const total = Number(allocs.stdout) + dev.liveBeforeTrace;
    expect(await page.locator('#allocations-body').innerText()).toContain(`of ${total.toLocaleString('en-US')} allocations`);

    // Full byte range: a pixel is ~128 MiB, so most allocations are summed. The chart still reads:
    // sites' sums in their colours, the rest in the hatched "smaller allocations" band, both in the
    // legend and on hover with their bytes.
    expect(await page.locator('#legend').innerText()).toContain('smaller allocations');
    expect(await saturatedPixels(page)).toBeGreaterThan(5000);
    // The sites the legend names are told apart by colour (this file's eight include two sites
    // whose string indexes are twenty apart).
    const swatches = await page.$$eval('#site-legend .swatch', (xs) => xs.map((x) => (x as HTMLElement).style.background));
    expect(swatches.length).toBe(8);
    expect(new Set(swatches).size).toBe(swatches.length);
    const plotBox = (await canvas.boundingBox())!;
    const tipAt = async (x: number, y: number): Promise<string> => {
      await page.mouse.move(x, y);
      await expect.poll(() => page.locator('#tooltip').isVisible()).toBe(true);
      return page.locator('#tooltip').innerText();
    };
    // Just above the time axis, left of the first event: the blocks live before the trace, summed.
    const summedTip = await tipAt(plotBox.x + 80, plotBox.y + plotBox.height - 28);
    expect(summedTip).toMatch(/^\s*[\d.]+ \w?i?B in [\d,]+ allocations? under a pixel each, (from |summed in "smaller allocations")/);

    // Zooming the byte axis under a resting pointer: the tooltip describes what is under it now
    // (what a fresh hover there gives), and the byte ticks stay exact in the step's unit.
    const rest = { x: plotBox.x + plotBox.width * 0.3, y: plotBox.y + plotBox.height * 0.8 };
    const before = await tipAt(rest.x, rest.y);
    await page.keyboard.down('Shift');
    for (let k = 0; k < 6; k++) await redrawn(page, () => page.mouse.wheel(0, -100));
    await page.keyboard.up('Shift');
    await expect.poll(() => page.locator('#tooltip').innerText()).not.toBe(before);
    const afterZoom = await page.locator('#tooltip').innerText();
    await page.mouse.move(rest.x + 1, rest.y);
    expect(await tipAt(rest.x, rest.y)).toBe(afterZoom);
    const zoomedTicks = (await canvas.getAttribute('data-y-ticks'))!.split('|');
    expect(zoomedTicks.length).toBeGreaterThan(1);
    for (const t of zoomedTicks) expect(t).toMatch(/^(0 B|[1-9][\d,]*(\.\d)? (B|KiB|MiB|GiB|TiB))$/);
    await redrawn(page, () => page.mouse.dblclick(rest.x, rest.y));

    // The overview strip: dragging the window pans (same span), dragging its right edge zooms.
    const strip = page.locator('#overview');
    const stripBox = (await strip.boundingBox())!;
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setRange(100, 150)));
    const win = (await strip.getAttribute('data-window'))!.split(',').map(Number);
    const before0 = await page.evaluate(() => window.memscopeViewer!.range());
    const midX = stripBox.x + ((win[0] + win[1]) / 2) * stripBox.width;
    await redrawn(page, async () => {
      await page.mouse.move(midX, stripBox.y + stripBox.height / 2);
      await page.mouse.down();
      await page.mouse.move(midX + stripBox.width * 0.2, stripBox.y + stripBox.height / 2, { steps: 4 });
      await page.mouse.up();
    });
    const panned = await page.evaluate(() => window.memscopeViewer!.range());
    expect(panned.t1 - panned.t0).toBeCloseTo(before0.t1 - before0.t0, 6);
    expect(panned.t0).toBeGreaterThan(before0.t0 + 40);
    const win2 = (await strip.getAttribute('data-window'))!.split(',').map(Number);
    const rightX = stripBox.x + win2[1] * stripBox.width;
    await redrawn(page, async () => {
      await page.mouse.move(rightX - 1, stripBox.y + stripBox.height / 2);
      await page.mouse.down();
      await page.mouse.move(rightX + stripBox.width * 0.15, stripBox.y + stripBox.height / 2, { steps: 4 });
      await page.mouse.up();
    });
    const widened = await page.evaluate(() => window.memscopeViewer!.range());
    expect(widened.t0).toBeCloseTo(panned.t0, 6);
    expect(widened.t1 - widened.t0).toBeGreaterThan(panned.t1 - panned.t0 + 30);
    await page.screenshot({ path: join(artifacts, 'snapshot-timeline-overview.png') });
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setRange(0, 1e9)));

    // The largest allocation gets its own band once the byte axis is zoomed: hover shows size, address, user frame.
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setBytes(12 * 2 ** 30, 20 * 2 ** 30)));
    expect(await saturatedPixels(page)).toBeGreaterThan(500);
    const at = await page.evaluate((a) => window.memscopeViewer!.locate(a, -2), largest.addr);
    expect(at).not.toBeNull();
    await page.mouse.move(at!.x, at!.y);
    const tip = page.locator('#tooltip');
    await expect.poll(() => tip.innerText()).toContain(humanBytes(largest.size));
    const tipText = await tip.innerText();
    expect(tipText).toContain(`0x${largest.addr.toString(16)}`);
    expect(tipText).toContain(`site ${largest.userFrame}`);
    expect(tipText).toMatch(/allocator\/framework frames/);
    expect(tipText.split('\n').filter((l) => /^\s*\d*\.?\s*CUDACachingAllocator/.test(l))).toEqual([]);
    await page.screenshot({ path: join(artifacts, 'snapshot-timeline-hover.png') });

    // Click pins it: its details stay below the chart and its band is drawn dark.
    await redrawn(page, () => page.mouse.click(at!.x, at!.y));
    expect(await page.evaluate(() => window.memscopeViewer!.pinned())).toBeGreaterThanOrEqual(0);
    expect(await page.locator('#pinned').innerText()).toContain(largest.userFrame);
    const dark = await timelinePixelAt(page, at!);
    expect(dark[0] + dark[1] + dark[2]).toBeLessThan(100);

    // A block live before the trace began is hoverable too.
    const rows = await table.locator('tbody tr:not(.detail)').allInnerTexts();
    const beforeRow = rows.find((r) => r.includes('before the trace'))!;
    const beforeAddr = parseInt(/0x([0-9a-f]+)/.exec(beforeRow)![1], 16);
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setBytes(0, 20 * 2 ** 30)));
    const pre = await page.evaluate((a) => window.memscopeViewer!.locate(a, -1), beforeAddr);
    expect(pre).not.toBeNull();
    await page.mouse.move(pre!.x, pre!.y);
    await expect.poll(() => tip.innerText()).toContain(`0x${beforeAddr.toString(16)}`);
    expect(await tip.innerText()).toContain('allocated before the trace began');

    // Deep zoom: time ticks stay distinct down to microseconds.
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setRange(153.8, 153.81)));
    const xTicks = (await canvas.getAttribute('data-x-ticks'))!.split('|');
    expect(xTicks.length).toBeGreaterThan(2);
    expect(new Set(xTicks).size).toBe(xTicks.length);

    // Search counts every allocation whose stack has the frame, as python3 counts them.
    const hits = await page.evaluate(() => window.memscopeViewer!.search('optimizers.py:84'));
    expect(hits).toBe(want.matches);
    expect(await page.locator('#search-count').innerText()).toBe(`${want.matches} allocations match`);
    await redrawn(page, () => page.evaluate(() => window.memscopeViewer!.setRange(0, 1e9)));
    await page.screenshot({ path: join(artifacts, 'snapshot-timeline-search.png') });
    // An address finds every allocation whose block held it (the allocator reuses addresses).
    const inside = `0x${(largest.addr + 16).toString(16)}`;
    expect(await page.evaluate((q) => window.memscopeViewer!.search(q), inside)).toBe(truth(file, inside).matches);
    // "show" in the table pins that allocation on the timeline and zooms to its life.
    await page.evaluate(() => window.memscopeViewer!.search(''));
    await redrawn(page, () => table.locator('tbody tr:not(.detail)').nth(0).locator('button.show-alloc').click());
    expect(await page.locator('#pinned').innerText()).toContain(`0x${largest.addr.toString(16)}`);
    const shown = await page.evaluate(() => window.memscopeViewer!.range());
    expect(shown.t1 - shown.t0).toBeLessThan(5);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a state-only snapshot: one "final state" label, its blocks listed as live before the trace', async () => {
    const file = fixture('torch/older_no_settings_6633blocks.pickle');
    const { page, errors } = await open(browser, file);
    const canvas = page.locator('#timeline');
    expect(await canvas.getAttribute('data-x-ticks')).toBe('final state');
    expect(await page.locator('#range').innerText()).not.toMatch(/event 0/);
    const allocated = await page.locator('#allocations-body table tbody tr:not(.detail) td:nth-child(4)').allInnerTexts();
    expect(allocated.length).toBeGreaterThan(0);
    expect(new Set(allocated)).toEqual(new Set(['before the trace']));
    await page.screenshot({ path: join(artifacts, 'snapshot-state-only.png') });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('several devices: a selector, one chart per device with that device\u2019s own peaks', async () => {
    const file = fixture('torch/replay_devices_oom.pickle');
    const want = truth(file);
    const { page, errors } = await open(browser, file);
    const options = await page.locator('#device option').allInnerTexts();
    expect(options).toEqual(want.devices.map((d) => `cuda:${d.device}`));
    const canvas = page.locator('#timeline');
    for (const [i, d] of want.devices.entries()) {
      await redrawn(page, () => page.locator('#device').selectOption(String(i)));
      expect(await canvas.getAttribute('data-device')).toBe(`cuda:${d.device}`);
      expect(Number(await canvas.getAttribute('data-peak-allocated'))).toBe(d.peakAllocated);
      expect(Number(await canvas.getAttribute('data-peak-reserved'))).toBe(d.peakReserved);
      expect(await page.locator('#range').innerText()).toContain(`peak ${humanBytes(d.peakAllocated)} requested, ${humanBytes(d.peakReserved)} reserved`);
    }
    await page.screenshot({ path: join(artifacts, 'snapshot-devices.png') });
    expect(errors).toEqual([]);
    await page.close();
  });
});
