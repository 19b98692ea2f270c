// attachMemoryPanel in headless Chromium (SwiftShader's WebGPU): live figures by category and
// framework in a shadow root that neither takes nor gives style, strings shown as text, a saved
// snapshot that `memscope summary` reads in Node, a report opened in a new tab, detach.
import type { Browser } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { bundlePageScript, launchChromium } from '../support/browser.js';
import { sourceCli } from '../support/child.js';
import { openServedPage } from './pages/browser-server.js';

const HOSTILE = '<img src=x onerror="window.__injected=1">';

const ENTRY = `
import { installWebGPU } from './src/webgpu/index.ts';
import { attachMemoryPanel } from './src/browser/index.ts';

const MiB = 1 << 20;
let memory, device, panel;
const live = [];
globalThis.setUp = async (viewerScript) => {
  memory = installWebGPU();
  memory.recordMemoryHistory();
  const adapter = await navigator.gpu.requestAdapter();
  device = await adapter.requestDevice();
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  memory.withAttribution({ category: 'Parameter', framework: ${JSON.stringify(HOSTILE)} }, () => {
    live.push(device.createBuffer({ size: 4 * MiB, usage, label: 'weights' }));
  });
  memory.withAttribution({ category: 'Activation', framework: 'demo' }, () => {
    live.push(device.createBuffer({ size: 2 * MiB, usage }));
    const pooled = device.createBuffer({ size: 1 * MiB, usage });
    memory.markPooled(pooled);
    live.push(pooled);
  });
  panel = attachMemoryPanel({ memory, viewerScript, refreshMs: 50, snapshotName: 'panel.pickle' });
  return { sheets: document.styleSheets.length, hosts: document.querySelectorAll('[data-memscope-panel]').length };
};
globalThis.grow = () => {
  memory.withAttribution({ category: 'Activation', framework: 'demo' }, () => {
    live.push(device.createBuffer({ size: 3 * MiB, usage: GPUBufferUsage.STORAGE }));
  });
};
globalThis.detachPanel = () => {
  panel.detach();
  panel.detach();
  device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE });
  return { hosts: document.querySelectorAll('[data-memscope-panel]').length, injected: globalThis.__injected ?? null };
};
`;

const work = mkdtempSync(join(tmpdir(), 'memscope-browser-panel-'));

describe('attachMemoryPanel in headless Chromium', () => {
  let browser: Browser;
  let script: string;
  let viewer: string;
  beforeAll(async () => {
    script = await bundlePageScript(ENTRY, 'browser-panel-page.ts');
    viewer = await viewerBundle();
    browser = await launchChromium({ webgpu: true });
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('shows live figures, saves a snapshot memscope summary reads, opens the report, and leaves nothing behind', async () => {
    // The page styles buttons and a .panel class of its own: neither may reach into the panel, nor the panel's out.
    const body = '<style>button { color: rgb(255, 0, 0); } .panel { position: static; }</style><div class="panel" id="pages-own">page</div>';
    const { page, errors } = await openServedPage(browser, { body });
    try {
      await page.addScriptTag({ content: script });
      const sheetsBefore = await page.evaluate(() => document.styleSheets.length);
      const setUp = await page.evaluate((v) => (globalThis as any).setUp(v), viewer);
      expect(setUp).toEqual({ sheets: sheetsBefore, hosts: 1 });

      const panel = page.locator('[data-memscope-panel]');
      const text = async (selector: string): Promise<string> => (await panel.locator(selector).first().textContent()) ?? '';
      expect(await text('.device')).toBe('webgpu:0');
      expect(await text('.allocated')).toBe('6.00 MiB');
      expect(await text('.reserved')).toBe('7.00 MiB');
      const rows = await panel.locator('tbody tr').allTextContents();
      expect(rows).toContain('Parameter4.00 MiB4.00 MiB');
      expect(rows).toContain('Activation2.00 MiB3.00 MiB');
      // The hostile framework name is a row's text, not markup.
      expect(rows).toContain(`${HOSTILE}4.00 MiB4.00 MiB`);
      expect(await panel.locator('img').count()).toBe(0);
      // Styles stay on their side of the shadow root.
      expect(await panel.locator('button.save').evaluate((b) => getComputedStyle(b).color)).not.toBe('rgb(255, 0, 0)');
      expect(await page.locator('#pages-own').evaluate((d) => getComputedStyle(d).position)).toBe('static');
      // A right-to-left page does not mirror the panel's table.
      await page.evaluate(() => document.documentElement.setAttribute('dir', 'rtl'));
      expect(await panel.locator('tbody td').first().evaluate((td) => getComputedStyle(td).direction)).toBe('ltr');

      await page.evaluate(() => (globalThis as any).grow());
      await expect.poll(() => text('.allocated')).toBe('9.00 MiB');
      expect(await text('.peak-allocated')).toBe('9.00 MiB');
      const points = (await panel.locator('polyline').getAttribute('points')) ?? '';
      expect(points.split(' ').length).toBeGreaterThan(1);
      await page.screenshot({ path: join(work, 'panel.png') });

      // save snapshot → the browser's download → memscope summary in Node.
      const [download] = await Promise.all([page.waitForEvent('download'), panel.locator('button.save').click()]);
      expect(download.suggestedFilename()).toBe('panel.pickle');
      const saved = join(work, 'panel.pickle');
      await download.saveAs(saved);
      const summary = await sourceCli(['summary', '--json', saved]);
      expect(summary.status, summary.stderr).toBe(0);
      const totals = JSON.parse(summary.stdout);
      expect(JSON.stringify(totals)).toContain(String(9 * (1 << 20)));

      // open report → a new tab from a Blob URL holding the viewer with the snapshot's data.
      const [tab] = await Promise.all([page.context().waitForEvent('page'), panel.locator('button.report').click()]);
      await tab.waitForLoadState();
      expect(tab.url()).toMatch(/^blob:http:\/\/localhost\//);
      await expect.poll(() => tab.evaluate(() => document.querySelector('#segments-body')?.childElementCount ?? 0)).toBeGreaterThan(0);
      const report = await tab.evaluate(() => ({
        title: document.title,
        data: JSON.parse(Array.from(document.querySelectorAll('script.memscope-data'), (s) => s.textContent).join('')),
        imgs: document.querySelectorAll('img').length,
        injected: (globalThis as any).__injected ?? null,
      }));
      expect(report.title).toMatch(/^memscope · WebGPU snapshot/);
      expect(report.data.segments).toHaveLength(4);
      expect(report.imgs).toBe(0);
      expect(report.injected).toBeNull();
      await tab.screenshot({ path: join(work, 'report.png') });
      await tab.close();
      expect(await text('.status')).toBe('');

      const after = await page.evaluate(() => (globalThis as any).detachPanel());
      expect(after).toEqual({ hosts: 0, injected: null });
      expect(await page.evaluate(() => document.styleSheets.length)).toBe(sheetsBefore);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
