// MemoryTracker in headless Chromium on the webgl backend: reserved is the
// texture manager's figure, and the plots render in the page itself (no files).
import { describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium, openPageWithScript } from '../support/browser.js';


const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgl';
import * as tfl from '@tensorflow/tfjs-layers';
import { MemoryTracker } from './src/tfjs/memory-tracker.ts';

globalThis.runOpTracker = async () => {
  const ok = await tf.setBackend('webgl');
  if (!ok) throw new Error('webgl backend failed to initialise');
  const model = tfl.sequential({ name: 'net' });
  model.add(tfl.layers.dense({ name: 'fc1', units: 16, inputShape: [8], activation: 'relu' }));
  model.add(tfl.layers.batchNormalization({ name: 'bn' }));
  model.add(tfl.layers.dense({ name: 'fc2', units: 4 }));
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  const xs = tf.randomNormal([6, 8]);
  const ys = tf.randomNormal([6, 4]);
  const tracker = new MemoryTracker();
  await tracker.track(model, async () => {
    await model.trainOnBatch(xs, ys);
    await model.trainOnBatch(xs, ys);
  });
  const { charts, html } = tracker.renderTraces();
  document.body.innerHTML = html.slice(html.indexOf('<body>') + 6, html.indexOf('</body>'));
  const svgErrors = charts.map((c) => new DOMParser().parseFromString(c.svg, 'image/svg+xml').getElementsByTagName('parsererror').length);
  let fileError = '';
  try { tracker.saveStats('x.json'); } catch (err) { fileError = String(err.message); }
  return {
    stats: tracker.stats(),
    summary: tracker.summaryString(5),
    svgErrors,
    drawnSeries: document.querySelectorAll('#memory_traces g.series path').length,
    fileError,
  };
};
`;

describe('MemoryTracker in headless Chromium (webgl)', () => {
  it('traces two trainOnBatch steps with the webgl texture pool as reserved, and renders the plots in the page', async () => {
    const script = await bundlePageScript(ENTRY, 'op-tracker-page.ts');
    const browser = await launchChromium();
    try {
      const { page, errors: pageErrors } = await openPageWithScript(browser, script);
      const r = await page.evaluate(() => (globalThis as unknown as { runOpTracker: () => Promise<any> }).runOpTracker());
      expect(pageErrors).toEqual([]);
      expect(r.stats.device).toBe('webgl');
      expect(r.stats.reservedSource).toMatch(/webgl texture manager/);
      const records = r.stats.records as { name: string; allocated: number; active: number; reserved: number }[];
      expect(records.length).toBeGreaterThan(50);
      expect(records.some((x) => x.name.startsWith('net.bn.forward.'))).toBe(true);
      expect(records.some((x) => x.name.startsWith('net.fc1.backward.'))).toBe(true);
      expect(records.some((x) => x.name.startsWith('(no layer).optimizer.'))).toBe(true);
      expect(records.every((x) => x.active === x.allocated && x.reserved > 0)).toBe(true);
      expect(r.stats.markers.map((m: { name: string; step: number }) => `${m.name}@${m.step}`)).toEqual([
        'fw_start@0',
        'fw_bw_boundary@0',
        'fw_start@1',
        'fw_bw_boundary@1',
      ]);
      expect(r.summary).toContain('Reserved memory: webgl texture manager');
      expect(r.svgErrors).toEqual([0, 0, 0, 0]);
      expect(r.drawnSeries).toBe(3);
      expect(r.fileError).toMatch(/uses the file system and needs Node/);
    } finally {
      await browser.close();
    }
  });
});
