import { describe, it, expect } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EventContext, ModuleRef, StorageRef } from '../../src/core/events.js';
import { CaptureRecorder } from '../../src/capture/recorder.js';
import { CaptureWriter } from '../../src/capture/writer.js';
import { parseCapture } from '../../src/capture/reader.js';
import { captureToReport, mergeEvents, TimelineBuilder, DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { jsonForScript } from '../../src/render/html-page.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage } from '../support/report-page.js';

const HOSTILE = `</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2"><!--`;

/** A capture whose layer, kernel, script name and stack frames are all hostile markup. */
function hostileCapture(): string {
  let text = '';
  const writer = new CaptureWriter({ write: (c) => (text += c) }, { created: HOSTILE, argv: [`/tmp/${HOSTILE}.js`], backend: null, stacks: true, maxEntries: null });
  const rec = new CaptureRecorder(writer, { stacks: true });
  const module: ModuleRef = { id: 1, path: `model.${HOSTILE}`, className: HOSTILE, parent: null, children: [], parameters: () => [], buffers: () => [] };
  const ctx: EventContext = { phase: 'forward', module, kernel: HOSTILE, step: 0, seq: 0 };
  rec.onModuleEnter(module, [], ctx);
  const s: StorageRef = { id: 1, device: HOSTILE, bytes: 4096, dtype: 'float32', shape: [1024] };
  rec.onStorageAlloc(s, ctx);
  rec.onModuleExit(module, [], ctx);
  rec.finish({ exitCode: 1, error: HOSTILE });
  return text;
}

describe('report escaping', () => {
  it('embedded JSON cannot close its script element', () => {
    const json = jsonForScript({ a: HOSTILE, b: '\u2028' });
    expect(json).not.toContain('<');
    expect(JSON.parse(json)).toEqual({ a: HOSTILE, b: '\u2028' });
  });

  it('the timeline merge keeps totals exact when over the cap', () => {
    const t = Float64Array.from({ length: 1000 }, (_, i) => i);
    const series = Int32Array.from({ length: 1000 }, (_, i) => i % 2);
    const bytes = Float64Array.from({ length: 1000 }, (_, i) => (i % 4 < 2 ? 10 : -5));
    const out = new TimelineBuilder();
    const group = mergeEvents(t, series, bytes, 200, 2, out);
    expect(group).toBe(10);
    expect(out.bytes.length).toBeLessThanOrEqual(200);
    const sum = (xs: ArrayLike<number>) => Array.from(xs).reduce((a, b) => a + b, 0);
    expect(sum(out.bytes)).toBe(sum(bytes));
  });

  it('hostile names are shown as text and never run', async () => {
    const capture = parseCapture(hostileCapture());
    const data = captureToReport(capture, `${HOSTILE}.ndjson`, DEFAULT_CAPS);
    const html = renderReportHtml(data, await viewerBundle());
    expect(html.match(/<script/g)).toHaveLength(2); // the data element and the app, nothing injected
    const dir = mkdtempSync(join(tmpdir(), 'memscope-esc-'));
    writeFileSync(join(dir, 'r.html'), html);
    const browser = await launchChromium();
    try {
      const { page, errors } = await openReportPage(browser, join(dir, 'r.html'));
      expect(await page.evaluate(() => (window as { pwned?: number }).pwned)).toBeUndefined();
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('#modules-body').innerText()).toContain(`model.${HOSTILE}`);
      expect(await page.locator('#notices').innerText()).toContain(HOSTILE);
      expect(await page.title()).toContain('onerror="window.pwned=2"');
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
