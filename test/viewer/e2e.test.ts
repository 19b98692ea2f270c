// End to end: `memscope run` on a real TFJS training script → capture →
// `memscope leaks` / `memscope report` → the page in headless Chromium.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../support/browser.js';
import { inkedPixels, openReportPage } from '../support/report-page.js';

const root = resolve(import.meta.dirname, '../..');
const script = join(root, 'test/fixtures/scripts/train.mjs');
const artifacts = join(root, 'test-artifacts');
const work = mkdtempSync(join(tmpdir(), 'memscope-e2e-'));
const leakLine = readFileSync(script, 'utf8').split('\n').findIndex((l) => l.includes('planted leak')) + 1;

function memscope(...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'src/cli/main.ts'), ...args], { cwd: root, encoding: 'utf8', timeout: 180_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const open = (browser: Browser, html: string) => openReportPage(browser, html);

describe('memscope run → report → browser', () => {
  let browser: Browser;
  const leakCapture = join(work, 'leak.ndjson');
  const cleanCapture = join(work, 'clean.ndjson');

  beforeAll(async () => {
    mkdirSync(artifacts, { recursive: true });
    const leak = memscope('run', '--stacks', '-q', '-o', leakCapture, script, '--leak');
    expect(leak.stderr).not.toMatch(/capture hook failed/);
    expect(leak.status).toBe(0);
    const clean = memscope('run', '--stacks', '-q', '-o', cleanCapture, script);
    expect(clean.status).toBe(0);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('memscope leaks finds the planted leak at the script line, and nothing in the clean run', () => {
    const leak = memscope('leaks', leakCapture);
    expect(leak.status).toBe(3); // leaks found
    expect(leak.stdout).toContain(`${script}:${leakLine}:`);
    expect(leak.stdout).toMatch(/^1 leak over 6 steps/);
    expect(leak.stdout).toMatch(/kernel Relu/);
    const clean = memscope('leaks', cleanCapture);
    expect(clean.stdout).toMatch(/^No leaks/);
    expect(clean.status).toBe(0);
  });

  it('the report draws the timeline, lists the layers and the leak, and zooms', async () => {
    const html = join(work, 'leak.html');
    const r = memscope('report', leakCapture, '-o', html);
    expect(r.status).toBe(0);
    const text = readFileSync(html, 'utf8');
    expect(text).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org)/);
    const { page, errors } = await open(browser, html);
    expect(await inkedPixels(page)).toBeGreaterThan(5000);
    const modules = await page.locator('#modules-body').innerText();
    for (const layer of ['mlp.hidden', 'mlp.norm', 'mlp.out']) expect(modules).toContain(layer);
    expect(modules).toMatch(/BatchNormalization/);
    const site = await page.locator('#leaks-body .leak-site').allInnerTexts();
    expect(site).toEqual([expect.stringContaining(`train.mjs:${leakLine}:`)]);
    await page.screenshot({ path: join(artifacts, 'report-leak.png') });

    const before = await page.evaluate(() => window.memscopeViewer!.range());
    const box = (await page.locator('#timeline').boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.8, box.y + box.height / 2);
    await page.mouse.wheel(0, -600);
    await page.waitForFunction((b) => window.memscopeViewer!.range().t1 - window.memscopeViewer!.range().t0 < b.t1 - b.t0, before);
    const after = await page.evaluate(() => window.memscopeViewer!.range());
    expect(after.t1 - after.t0).toBeLessThan((before.t1 - before.t0) / 2);
    expect(await page.locator('#timeline').getAttribute('data-t0')).toBe(String(after.t0));
    // Drag pans: the span stays, the start moves left-to-right the opposite way.
    await page.mouse.move(box.x + box.width * 0.5, box.y + 50);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.3, box.y + 50, { steps: 4 });
    await page.mouse.up();
    const panned = await page.evaluate(() => window.memscopeViewer!.range());
    expect(panned.t1 - panned.t0).toBeCloseTo(after.t1 - after.t0, 6);
    expect(panned.t0).toBeGreaterThan(after.t0);
    // Hover shows the time, the totals and the largest allocations alive.
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
    await expect.poll(() => page.locator('#tooltip').innerText()).toMatch(/live[\s\S]*largest allocations alive/);
    await page.screenshot({ path: join(artifacts, 'report-leak-zoomed.png') });
    // Search filters the tables by layer name.
    const hits = await page.evaluate(() => window.memscopeViewer!.search('mlp.norm'));
    expect(hits).toBeGreaterThan(0);
    expect(await page.locator('#modules-body > table > tbody > tr:not(.detail):not(.filtered)').allInnerTexts()).toEqual([expect.stringContaining('mlp.norm')]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the clean run reports no leaks', async () => {
    const html = join(work, 'clean.html');
    expect(memscope('report', cleanCapture, '-o', html).status).toBe(0);
    const { page, errors } = await open(browser, html);
    expect(await page.locator('#leaks-body').innerText()).toMatch(/^No leaks/);
    expect(await page.locator('#leaks-body .leak').count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a capture cut mid-record still makes a report that says it was truncated', async () => {
    const full = readFileSync(leakCapture, 'utf8');
    let cut = Math.floor(full.length * 0.6);
    while (full[cut] === '\n' || full[cut - 1] === '\n') cut++; // land inside a line
    const truncated = join(work, 'cut.ndjson');
    writeFileSync(truncated, full.slice(0, cut));
    const html = join(work, 'cut.html');
    const r = memscope('report', truncated, '-o', html);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/truncated/);
    const { page, errors } = await open(browser, html);
    const banner = page.locator('#truncated');
    expect(await banner.isVisible()).toBe(true);
    expect(await banner.innerText()).toMatch(/truncated: the last record was cut off mid-write \(line \d+/);
    expect(await inkedPixels(page)).toBeGreaterThan(1000);
    await page.screenshot({ path: join(artifacts, 'report-truncated.png') });
    expect(errors).toEqual([]);
    await page.close();
  });
});
