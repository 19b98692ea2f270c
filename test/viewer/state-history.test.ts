// The snapshot report's Allocator State History, Active Cached Segment Timeline, allocator
// settings and OOM marks in Chromium, checked against CPython's reading of the same pickles:
// state_history_truth.py (the state after event N) and snapshot_truth.py (peaks).
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
import { openReportPage, timelinePixelAt } from '../support/report-page.js';
import { fixture } from '../support/fixtures.js';
import { pythonStates } from './state-history-truth.js';

const here = import.meta.dirname;
const artifacts = resolve(here, '../../test-artifacts');
const work = mkdtempSync(join(tmpdir(), 'memscope-history-'));
const MiB = 2 ** 20;

function python(code: string, file: string): string {
  const r = spawnSync('python3', ['-c', code, file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

function peakReserved(file: string, device: number): number {
  const r = spawnSync('python3', [join(here, 'snapshot_truth.py'), file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return (JSON.parse(r.stdout) as { devices: { device: number; peakReserved: number }[] }).devices.find((d) => d.device === device)!.peakReserved;
}

async function open(browser: Browser, file: string): Promise<{ page: Page; errors: string[] }> {
  const f = await openMemoryFile(file);
  if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
  const html = join(work, `${file.split(/[\\/]/).pop()}.html`);
  writeFileSync(html, renderReportHtml(snapshotToReport(f.snapshot, file, DEFAULT_CAPS), await viewerBundle()));
  return openReportPage(browser, html, { width: 1400, height: 1000 });
}

const state = (page: Page) => page.evaluate(() => window.memscopeHistory!.state());
const position = (page: Page) => page.evaluate(() => window.memscopeHistory!.position());

describe('allocator state history, segment timeline and settings in the browser', () => {
  let browser: Browser;
  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('private pool, expandable segment, pending free and an OOM: keys, slider and clicks reach CPython\u2019s state; hover names pools and OOMs', async () => {
    const file = fixture('torch/history_pools.pickle');
    const want = pythonStates(file, 0, [-1, 0, 3, 4, 13, 14, 20, 24]);
    const { page, errors } = await open(browser, file);
    for (const id of ['state-history', 'segment-timeline', 'allocator-settings']) expect(await page.locator(`#${id}`).isVisible()).toBe(true);
    // The views are built when they come into view, or when asked.
    expect(await page.locator('#state-history-body').innerText()).toContain('Built when this section comes into view.');
    await page.locator('#state-history').scrollIntoViewIfNeeded();
    await page.waitForFunction(() => document.getElementById('history-map') !== null);
    expect(await page.locator('#state-history-body').innerText()).not.toContain('Built when this section comes into view.');

    // Opens at the last event, the snapshot's own state.
    expect(await position(page)).toBe(24);
    expect(await state(page)).toEqual(want['24']);
    // Keys: Home, → one event, PgDn a hundred (clamped), ← one back.
    await page.locator('#state-history-body').focus();
    await page.keyboard.press('Home');
    expect(await position(page)).toBe(-1);
    expect(await state(page)).toEqual(want['-1']);
    await page.keyboard.press('ArrowRight');
    expect(await state(page)).toEqual(want['0']);
    for (let i = 0; i < 4; i++) await page.keyboard.press('ArrowRight');
    expect(await position(page)).toBe(4);
    expect(await state(page)).toEqual(want['4']);
    await page.keyboard.press('ArrowLeft');
    expect(await state(page)).toEqual(want['3']);
    await page.keyboard.press('PageDown');
    expect(await position(page)).toBe(24);
    await page.keyboard.press('PageUp');
    expect(await position(page)).toBe(-1);
    // The slider.
    await page.locator('#history-slider').fill('13');
    expect(await position(page)).toBe(13);
    expect(await state(page)).toEqual(want['13']);
    // A click on the event list: the OOM entry, with its requested size and the device's free bytes.
    const oomRow = page.locator('.history-event.oom');
    expect(await oomRow.innerText()).toContain(`${humanBytes(64 * MiB)} requested, ${humanBytes(6 * MiB)} free on the device`);
    await oomRow.click();
    expect(await position(page)).toBe(14);
    expect(await state(page)).toEqual(want['14']);
    await page.evaluate(() => window.memscopeHistory!.select(0, 20));
    expect(await state(page)).toEqual(want['20']);

    // The selected event: its row shows the first user frame, the panel below its whole stack.
    await page.evaluate(() => window.memscopeHistory!.select(0, 4));
    const selected = page.locator('.history-event.selected');
    expect(await selected.innerText()).toMatch(/alloc\s+0x7f1000000000\s+512\.00 KiB/);
    expect(await selected.locator('.ev-site').innerText()).toBe('train.py:20:capture_graph');
    const stack = await page.locator('#history-stack').innerText();
    expect(stack).toContain('/home/user/project/train.py:20:capture_graph');
    expect(stack).toContain('/home/user/project/main.py:7:<module>');
    expect(stack).toMatch(/2 allocator\/framework frames/);

    // Hover: the private pool's block, the expandable segment's free space.
    await page.evaluate(() => window.memscopeHistory!.select(0, 24));
    await page.locator('#history-map').scrollIntoViewIfNeeded();
    const tip = page.locator('#state-history-body .history-tip');
    const pool = (await page.evaluate(() => window.memscopeHistory!.locate(0x7f1000000000)))!;
    await page.mouse.move(pool.x, pool.y);
    await expect.poll(() => tip.innerText()).toContain('private pool (1, 0)');
    expect(await tip.innerText()).toContain('active allocated block 0x7f1000000000 · 512.00 KiB');
    expect(await tip.innerText()).toContain('site train.py:20:capture_graph');
    const free = (await page.evaluate(() => window.memscopeHistory!.locate(0x7f2000000000 + 36 * 2 ** 20)))!;
    await page.mouse.move(free.x, free.y);
    await expect.poll(() => tip.innerText()).toContain('inactive (cached, free) space');
    expect(await tip.innerText()).toContain('expandable segment (mapped range) 0x7f2000800000 · 32.00 MiB');
    const pending = (await page.evaluate(() => window.memscopeHistory!.locate(0x7f0000400000)))!;
    await page.mouse.move(pending.x, pending.y);
    await expect.poll(() => tip.innerText()).toContain('pending free');
    await page.locator('#state-history').screenshot({ path: join(artifacts, 'state-history.png') });

    // Segment timeline: its peak is CPython's peak of reserved bytes; hover names the segment, and the OOM.
    expect(await page.evaluate(() => window.memscopeSegments!.peak())).toBe(peakReserved(file, 0));
    const chart = page.locator('#segment-timeline-chart');
    await chart.scrollIntoViewIfNeeded();
    await page.waitForFunction(() => window.memscopeSegments!.frames > 0);
    expect(await chart.getAttribute('data-ooms')).toBe('1');
    const band = (await page.evaluate(() => window.memscopeSegments!.locate(0x7f1000000000)))!;
    await page.mouse.move(band.x, band.y);
    const segTip = page.locator('#segment-timeline-body .history-tip');
    await expect.poll(() => segTip.innerText()).toContain('2.00 MiB reserved at 0x7f1000000000');
    expect(await segTip.innerText()).toContain('small-pool segment 0x7f1000000000 · 2.00 MiB · private pool (1, 0) · stream 0x557e149be000');
    const mark = (await page.evaluate(() => window.memscopeSegments!.locateOom(0)))!;
    await page.mouse.move(mark.x, mark.y);
    await expect.poll(() => segTip.innerText()).toContain(`Out of memory at 3.500 ms (event 14): ${humanBytes(64 * MiB)} requested, ${humanBytes(6 * MiB)} free on the device`);
    await page.locator('#segment-timeline').screenshot({ path: join(artifacts, 'segment-timeline.png') });

    // Active Memory Timeline: the same OOM is marked, with the same tooltip.
    await page.locator('#timeline').scrollIntoViewIfNeeded();
    const onMemory = await page.evaluate(() => {
      const c = document.getElementById('timeline') as HTMLCanvasElement;
      const data = JSON.parse(Array.from(document.querySelectorAll('script.memscope-data'), (s) => s.textContent).join(''));
      const t = data.memory.devices[0].eventDt.slice(0, 15).reduce((s: number, x: number) => s + x, 0) / 1000;
      const r = c.getBoundingClientRect();
      const t0 = Number(c.dataset.t0);
      const t1 = Number(c.dataset.t1);
      return { x: r.left + 72 + ((t - t0) / (t1 - t0)) * (r.width - 84), y: r.top + 30 };
    });
    await page.mouse.move(onMemory.x, onMemory.y);
    await expect.poll(() => page.locator('#tooltip').innerText()).toContain(`Out of memory at 3.500 ms (event 14): ${humanBytes(64 * MiB)} requested`);
    const red = await timelinePixelAt(page, onMemory);
    expect(red[0]).toBeGreaterThan(180);
    expect(red[1]).toBeLessThan(80);

    // Settings: every key the file has, the unknown one as it is.
    const keys = JSON.parse(python('import pickle,sys,json; print(json.dumps(list(pickle.load(open(sys.argv[1],"rb"))["allocator_settings"])))', file)) as string[];
    const rows = await page.locator('#settings-table tbody tr td:first-child').allInnerTexts();
    expect(rows).toEqual(keys);
    expect(await page.locator('#settings-table tr.unknown-setting').innerText()).toMatch(/future_knob\s+3\s+not known to memscope/);
    await page.locator('#allocator-settings').screenshot({ path: join(artifacts, 'allocator-settings.png') });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a real training step and a three-device file: the state at N is CPython\u2019s, per device, and the segment peaks are CPython\u2019s', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const events = [19769, 0, 9000, 9001, 15000, -1, 4567];
    const want = pythonStates(file, 0, events);
    const { page, errors } = await open(browser, file);
    for (const n of events) {
      await page.evaluate((k) => window.memscopeHistory!.select(0, k), n);
      expect(await state(page), `event ${n}`).toEqual(want[String(n)]);
    }
    expect(await page.evaluate(() => window.memscopeSegments!.peak())).toBe(peakReserved(file, 0));
    // Most of this file's 1,010 segments are under a pixel of the segment timeline (56.9 GiB over
    // 300 px): hover over them gives their total, count and the largest, as the allocation timeline does.
    const segChart = page.locator('#segment-timeline-chart');
    await segChart.scrollIntoViewIfNeeded();
    await page.waitForFunction(() => window.memscopeSegments!.frames > 0);
    const segBox = (await segChart.boundingBox())!;
    const segTips: string[] = [];
    for (const fy of [0.85, 0.75]) {
      await page.mouse.move(segBox.x + segBox.width * 0.5, segBox.y + segBox.height * fy);
      const tip = page.locator('#segment-timeline-body .history-tip');
      await expect.poll(() => tip.getAttribute('hidden')).toBeNull();
      segTips.push(await tip.innerText());
    }
    for (const t of segTips) expect(t).toMatch(/^\s*[\d.]+ \w?i?B reserved in [\d,]+ segments? under a pixel each, summed/);
    // The event list names each event's site as the rest of the report does: never the allocator's
    // own frames; on a C++-only stack (the autograd thread) the ATen operator it runs.
    await page.evaluate(() => window.memscopeHistory!.select(0, 9000));
    const sites = await page.locator('.history-event:not(.history-head) .ev-site').allInnerTexts();
    expect(sites.length).toBeGreaterThan(10);
    expect(sites.filter((s) => /CUDACachingAllocator|^c10::|^at::detail::|^std::/.test(s))).toEqual([]);
    expect(sites.filter((s) => /^aten::\w+ \(C\+\+ stack\)$/.test(s)).length).toBeGreaterThan(0);
    // The selected event's stack starts at its site; the allocator's frames are folded under it.
    expect(await page.locator('.history-stack > ol.stack > li').first().innerText()).not.toMatch(/CUDACachingAllocator|^c10::/);
    // Settings fit the page: PyTorch's 16 round-up divisions read as one run.
    const divisions = page.locator('#settings-table tr', { hasText: 'roundup_power2_divisions' }).locator('td').nth(1);
    expect(await divisions.innerText()).toBe('1 MiB\u201332 GiB: 0');
    expect(await page.evaluate(() => document.getElementById('settings-table')!.getBoundingClientRect().right <= document.documentElement.clientWidth)).toBe(true);
    await page.close();
    expect(errors).toEqual([]);

    const devices = fixture('torch/replay_devices_oom.pickle');
    const d = await open(browser, devices);
    await d.page.evaluate(() => window.memscopeHistory!.position());
    expect(await d.page.locator('#history-device option').allInnerTexts()).toEqual(['cuda:0', 'cuda:1', 'cuda:2']);
    // cuda:1 has segments but no trace: the history shows its final state; the segment timeline has only traced devices.
    expect(await d.page.locator('#segments-device option').allInnerTexts()).toEqual(['cuda:0', 'cuda:2']);
    await d.page.locator('#history-device').selectOption('1');
    expect(await d.page.locator('#history-label').innerText()).toContain('cuda:1 · final state (the snapshot has no trace)');
    const dev2 = pythonStates(devices, 2, [-1, 1, 3]);
    await d.page.locator('#history-device').selectOption('2');
    for (const n of [-1, 1, 3]) {
      await d.page.locator('#history-slider').fill(String(n));
      expect(await state(d.page)).toEqual(dev2[String(n)]);
    }
    const dev0 = pythonStates(devices, 0, [6, 7]);
    await d.page.evaluate(() => window.memscopeHistory!.select(0, 6));
    expect(await state(d.page)).toEqual(dev0['6']);
    await d.page.keyboard.press('ArrowRight');
    expect(await state(d.page)).toEqual(dev0['7']);
    await d.page.evaluate(() => window.memscopeSegments!.selectDevice(1));
    expect(await d.page.evaluate(() => window.memscopeSegments!.peak())).toBe(peakReserved(devices, 2));
    expect(d.errors).toEqual([]);
    await d.page.close();
  });

  it('a state-only snapshot without settings: one line says so; no segment timeline; the state is the final one', async () => {
    const file = fixture('torch/older_no_settings_6633blocks.pickle');
    const { page, errors } = await open(browser, file);
    expect(await page.locator('#settings-absent').innerText()).toBe('This snapshot records no allocator settings (PyTorch writes allocator_settings from 2.1 on).');
    expect(await page.locator('#segment-timeline').isHidden()).toBe(true);
    expect(await page.evaluate(() => window.memscopeHistory!.position())).toBe(-1);
    expect(await page.locator('#history-label').innerText()).toContain('final state (the snapshot has no trace)');
    const finalState = JSON.parse(
      python(
        'import pickle,sys,json\nd=pickle.load(open(sys.argv[1],"rb"))\nsegs=d["segments"] if isinstance(d,dict) else d\nprint(json.dumps([len(segs), sum(1 for s in segs for b in s["blocks"] if b["state"]!="inactive")]))',
        file,
      ),
    ) as [number, number];
    const map = page.locator('#history-map');
    expect(Number(await map.getAttribute('data-segments'))).toBe(finalState[0]);
    expect(Number(await map.getAttribute('data-blocks'))).toBe(finalState[1]);
    await page.locator('#state-history').screenshot({ path: join(artifacts, 'state-history-final-only.png') });
    expect(errors).toEqual([]);
    await page.close();
  });
});
