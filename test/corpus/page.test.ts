// The report page of every real snapshot of the corpus, in Chromium: it opens without an error
// line, a console error or a network request, builds its sections, and its header states the
// segments, blocks and bytes CPython counts (truth.json); a snapshot with nothing in it says so
// instead of an empty chart.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { loadReportData } from '../../src/cli/commands/report.js';
import { humanBytes } from '../../src/core/units.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage } from '../support/report-page.js';
import { corpusFiles, corpusPath, truth } from './corpus.js';

let browser: Browser;
let app: string;
const work = mkdtempSync(join(tmpdir(), 'memscope-corpus-page-'));

beforeAll(async () => {
  app = await viewerBundle();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('the report page of every corpus snapshot', () => {
  it.each(corpusFiles)('%s', async (name) => {
    const data = await loadReportData(corpusPath(name), DEFAULT_CAPS);
    const html = join(work, `${name}.html`);
    writeFileSync(html, renderReportHtml(data, app));
    const { page, errors } = await openReportPage(browser, html);
    try {
      expect(errors).toEqual([]);
      const t = truth[name]!;
      expect(await page.locator('#source').innerText()).toContain(
        ` memory snapshot · ${t.segments} segments · ${t.blocks} blocks · ${humanBytes(t.allocated)} allocated of ${humanBytes(t.reserved)} reserved · `,
      );
      const nothing = page.locator('#nothing-to-draw');
      if (t.segments === 0 && Object.values(t.trace_actions_per_device).every((d) => Object.keys(d).length === 0)) {
        expect(await nothing.innerText()).toBe('Nothing to draw: the snapshot holds no segment and no trace event.');
        expect(await page.locator('#timeline').isVisible()).toBe(false);
      } else {
        expect(await nothing.count()).toBe(0);
        expect(await page.evaluate(() => window.memscopeViewer!.frames)).toBeGreaterThan(0);
      }
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
