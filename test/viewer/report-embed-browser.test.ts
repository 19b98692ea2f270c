// A report page whose data is deflated and packed (as `memscope report` writes a large one) read
// in Chromium: the data the page reads is the data the report was written from, every column and
// lazily parsed part included, with no error, warning or network request.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { embeddedDataJson, renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { nodeEmbedCodec } from '../../src/viewer/report-embed-node.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage } from '../support/report-page.js';
import { fixture } from '../support/fixtures.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-embed-'));
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('a deflated report page in Chromium', () => {
  it('gives the page exactly the data it was written from', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const f = await openMemoryFile(file);
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const data = snapshotToReport(f.snapshot, file, DEFAULT_CAPS);
    const html = join(work, 'packed.html');
    const app = await viewerBundle();
    // Wrapped so V8 compiles the app with the script, not again when the wrapper is called.
    expect(app).toMatch(/^"use strict";\(function\(\)\{/);
    writeFileSync(html, renderReportHtml(data, app, nodeEmbedCodec));
    const text = readFileSync(html, 'utf8');
    // All of it Latin-1, so the browser holds and parses the page as one-byte text.
    expect(text.match(/[^\u0000-\u00ff]/g)).toBeNull();
    // Packed and deflated: the embedded data is well under a fifth of the data's JSON.
    const embedded = embeddedDataJson(text)!;
    // The JSON comes in parts, so the HTML parser never reads one long script text.
    expect(text.match(/<script type="application\/json" class="memscope-data"/g)!.length).toBeGreaterThan(1);
    expect(embedded).toMatch(/^\{"\$packed":\{"encoding":"deflate-raw"/);
    expect(embedded.length).toBeLessThan(JSON.stringify(data).length / 5);
    const { page, errors } = await openReportPage(browser, html);
    // JSON.stringify reads every column and part, so each is decoded in the page.
    const shown = JSON.parse(await page.evaluate(() => JSON.stringify(window.memscopeDrop!.data())));
    expect(shown).toEqual(JSON.parse(JSON.stringify(data)));
    expect(errors).toEqual([]);
    await page.close();
  });

  it('draws the chart from the first buffer, before the rest after the app\'s script; damage in the rest shows its line and no sections', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const f = await openMemoryFile(file);
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const good = renderReportHtml(snapshotToReport(f.snapshot, file, DEFAULT_CAPS), await viewerBundle(), nodeEmbedCodec);
    // The rest comes after the app's script, and is the larger buffer.
    const app = good.indexOf('<script>');
    const restParts = [...good.matchAll(/<script type="text\/plain" class="memscope-rest">([^<]*)<\/script>/g)];
    expect(restParts.length).toBeGreaterThan(0);
    expect(restParts[0]!.index).toBeGreaterThan(app);
    const page = JSON.parse(embeddedDataJson(good)!) as { $packed: { bytes: number; rest: { bytes: number } } };
    expect(page.$packed.bytes).toBeLessThan(page.$packed.rest.bytes);
    // The rest's deflated stream loses its last 300 bytes: the chart draws, the rest cannot be read.
    const last = restParts[restParts.length - 1]!;
    const cut = last[1]!.length > 400 ? last[0].replace(last[1]!, last[1]!.slice(0, -400)) : '';
    const html = join(work, 'damaged-rest.html');
    writeFileSync(html, good.slice(0, last.index) + cut + good.slice(last.index! + last[0].length));
    const tab = await browser.newPage();
    const problems: string[] = [];
    tab.on('pageerror', (e) => problems.push(String(e)));
    await tab.goto(`file://${html}`);
    await tab.waitForFunction(() => window.memscopeDrop?.state === 'error');
    expect(await tab.locator('#drop-error').innerText()).toMatch(/^memscope: the embedded report data is damaged: \$packed\.rest (does not inflate|holds \d+ bytes, not \d+)$/);
    expect(await tab.evaluate(() => window.memscopeViewer?.frames ?? 0)).toBeGreaterThan(0);
    expect(await tab.evaluate(() => window.memscopeViewer!.sectionsReady)).toBe(false);
    expect(await tab.locator('#allocations-body').innerText()).toBe('');
    expect(problems).toEqual([]);
    await tab.close();
  });

  it('a page whose embedded data is damaged shows one line saying so, and draws nothing', async () => {
    const file = fixture('torch/small_3seg.pickle');
    const f = await openMemoryFile(file);
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const good = renderReportHtml(snapshotToReport(f.snapshot, file, DEFAULT_CAPS), await viewerBundle(), nodeEmbedCodec);
    const html = join(work, 'damaged.html');
    writeFileSync(html, good.replace(/("\$columns":\{"encoding":"deflate-raw","bytes":)(\d+)/, (_, head: string, n: string) => `${head}${Number(n) + 5}`));
    expect(readFileSync(html, 'utf8')).not.toBe(good);
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(String(e)));
    await page.goto(`file://${html}`);
    await page.waitForFunction(() => window.memscopeDrop?.state === 'error');
    expect(await page.locator('#drop-error').innerText()).toMatch(/^memscope: the embedded report data is damaged: \$columns holds \d+ bytes, not \d+$/);
    expect(await page.evaluate(() => window.memscopeViewer)).toBeUndefined();
    expect(problems).toEqual([]);
    await page.close();
  });
});
