// The query box in Chromium on a real training snapshot: typed queries show CPython's totals
// (test/viewer/query_truth.py) and highlight their allocations on the Active Memory Timeline, a bad
// query shows one line pointing at its token, bands colour by inferred category; no network, no
// console errors. Screenshots go to the system's temporary folder (memscope-query-shots/).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { humanBytes } from '../../src/core/units.js';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage, redrawn } from '../support/report-page.js';
import { fixture } from '../support/fixtures.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-query-'));
const shots = join(tmpdir(), 'memscope-query-shots');

async function open(browser: Browser, file: string): Promise<{ page: Page; errors: string[] }> {
  const html = join(work, 'report.html');
  writeFileSync(html, renderReportHtml(snapshotToReport(readSnapshotFile(file), file, DEFAULT_CAPS), await viewerBundle()));
  return openReportPage(browser, html, { width: 1280, height: 1100 });
}

/** Types a query into the box and presses Enter; waits for the chart to redraw. */
async function typeQuery(page: Page, text: string): Promise<void> {
  await redrawn(page, async () => {
    await page.locator('#query').fill(text);
    await page.locator('#query').press('Enter');
  });
}

/** Pixels of the plot per colour class: saturated (a band at full colour) and faded (a band drawn pale). */
async function pixelClasses(page: Page): Promise<{ saturated: number; pale: number; colours: Set<string> }> {
  const r = await page.evaluate(() => {
    const c = document.getElementById('timeline') as HTMLCanvasElement;
    const img = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let saturated = 0;
    let pale = 0;
    const colours: Record<string, number> = {};
    for (let i = 0; i < img.length; i += 4) {
      const hi = Math.max(img[i], img[i + 1], img[i + 2]);
      const lo = Math.min(img[i], img[i + 1], img[i + 2]);
      if (hi - lo > 60) {
        saturated++;
        const key = `#${[img[i], img[i + 1], img[i + 2]].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
        colours[key] = (colours[key] ?? 0) + 1;
      } else if (lo > 200 && hi < 255 && hi - lo > 8) pale++;
    }
    return { saturated, pale, colours: Object.entries(colours).filter(([, n]) => n > 200).map(([k]) => k) };
  });
  return { saturated: r.saturated, pale: r.pale, colours: new Set(r.colours) };
}

describe('query box in the browser', () => {
  let browser: Browser;
  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('shows CPython\'s totals for a typed query, highlights its allocations, marks a bad token, colours by category', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const r = spawnSync('python3', [join(import.meta.dirname, 'query_truth.py'), file], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    const want = JSON.parse(r.stdout)['0'] as { peak: number; groups: Record<string, [number, number]> };
    const { page, errors } = await open(browser, file);

    // "Live at the peak, grouped by first user frame": the table and the summary are CPython's.
    await typeQuery(page, 'alive@peak group:user_frame top:100');
    const rows = await page.locator('#query-table tbody tr').evaluateAll((trs) => trs.map((tr) => Array.from(tr.children, (td) => (td as HTMLElement).innerText)));
    const expected = Object.entries(want.groups).sort((x, y) => y[1][1] - x[1][1] || x[0].localeCompare(y[0]));
    expect(rows.map((c) => c[0])).toEqual(expected.map(([k]) => k));
    expect(rows.map((c) => c[1])).toEqual(expected.map(([, [n]]) => n.toLocaleString('en-US')));
    expect(rows.map((c) => c[2])).toEqual(expected.map(([, [, b]]) => humanBytes(b)));
    const count = expected.reduce((s, [, [n]]) => s + n, 0);
    await expect.poll(() => page.locator('#query-summary').innerText()).toContain(`${count.toLocaleString('en-US')} allocations · ${humanBytes(want.peak)} allocated · ${humanBytes(want.peak)} live at the peak`);
    const exact = await page.evaluate(() => window.memscopeQuery!('alive@peak group:user_frame top:100'));
    expect(exact.bytes).toBe(want.peak);
    for (const g of exact.groups!) expect([g.count, g.bytes]).toEqual(want.groups[g.key]);
    await page.locator('#query-section').screenshot({ path: join(shots, 'query-alive-at-peak.png') });
    // Clicking a group highlights it alone: its count of allocations, as the query for it gives.
    const highlightedCount = (): Promise<number> => page.evaluate(() => window.memscopeHighlighted!());
    expect(await highlightedCount()).toBe(count);
    await page.locator('#query-table tbody tr', { hasText: 'optimizers.py:82:step' }).click();
    expect(await highlightedCount()).toBe(want.groups['optimizers.py:82:step']![0]);
    await page.locator('#query-table tbody tr', { hasText: 'optimizers.py:82:step' }).click();
    expect(await highlightedCount()).toBe(count);

    // Highlighting: a query for one line leaves its bands coloured and fades the rest (bytes zoomed
    // to where the optimizer's buffers stack, so each gets a band of its own).
    await typeQuery(page, '');
    await page.evaluate(() => window.memscopeViewer!.setBytes(40 * 2 ** 30, 50 * 2 ** 30));
    await page.waitForTimeout(100);
    const zoomed = await pixelClasses(page);
    await typeQuery(page, 'alive@peak user_frame:"optimizers.py:84:step"');
    const highlighted = await pixelClasses(page);
    expect(highlighted.saturated).toBeGreaterThan(5000);
    expect(highlighted.saturated).toBeLessThan(zoomed.saturated * 0.8);
    expect(highlighted.pale).toBeGreaterThan(zoomed.pale + 5000);
    const [n84, bytes84] = want.groups['optimizers.py:84:step']!;
    expect(await page.locator('#query-summary').innerText()).toBe(`${n84} allocations · ${humanBytes(bytes84)} allocated · ${humanBytes(bytes84)} live at the peak`);
    await page.locator('#timeline-section').screenshot({ path: join(shots, 'query-highlight.png') });

    // A bad query: one line naming the column and the problem, the token marked, nothing highlighted.
    await page.locator('#query').fill('alive@peak size>3Q group:user_frame');
    await page.locator('#query').press('Enter');
    const err = page.locator('#query-error');
    await expect.poll(() => err.isVisible()).toBe(true);
    const lines = (await err.locator('div').innerText()).split('\n');
    expect(lines).toEqual(['column 17: "3Q" is not a size such as 512, 4KiB, 1.5MiB, 2GB']);
    expect(await err.locator('mark').innerText()).toBe('3Q');
    expect(await page.locator('#query-table').count()).toBe(0);
    await page.locator('#query-section').screenshot({ path: join(shots, 'query-error.png') });

    // Colour by inferred category: the legend says so, and the category colours are on the chart.
    await typeQuery(page, '');
    await page.locator('#color-by').selectOption('category');
    await expect.poll(() => page.locator('#category-legend').isVisible()).toBe(true);
    expect(await page.locator('#category-legend').innerText()).toContain('inferred');
    expect(await page.locator('#band-legend').innerText()).toContain('coloured by inferred category;');
    // Where the optimizer's buffers stack: its state's green; at the bottom, the parameters' blue.
    await page.waitForTimeout(100);
    expect([...(await pixelClasses(page)).colours]).toContain('#59a14f');
    await page.locator('#timeline-section').screenshot({ path: join(shots, 'query-colour-by-category.png') });
    await page.evaluate(() => window.memscopeViewer!.setBytes(0, 10 * 2 ** 30));
    await page.waitForTimeout(100);
    expect([...(await pixelClasses(page)).colours]).toContain('#4e79a7');
    await page.locator('#timeline-section').screenshot({ path: join(shots, 'query-colour-by-category-bottom.png') });

    // The tooltip names the inferred category.
    const at = await page.evaluate(() => {
      const q = window.memscopeQuery!('category=optimizer_state size>=16MiB top:1');
      return q.count;
    });
    expect(at).toBeGreaterThan(0);
    await page.locator('#query-table tbody button.show-alloc').first().click();
    await expect.poll(() => page.locator('#pinned').innerText()).toContain('category optimizer_state (inferred)');

    expect(errors).toEqual([]);
  });
});
