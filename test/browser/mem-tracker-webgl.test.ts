// MemTracker in headless Chromium on the webgl backend: the TFJS adapter and
// the framework-free tracker are bundled for the browser (esbuild, in memory),
// a training step runs in the page, and the page reports the categories.
import { describe, expect, it } from 'vitest';
import { bundlePageScript, chromiumAvailable, launchChromium, openPageWithScript, CHROMIUM_PATH } from '../support/browser.js';


// The page's program: an MLP with BatchNorm and Adam, one trainOnBatch under MemTracker.
const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgl';
import * as tfl from '@tensorflow/tfjs-layers';
import { MemTracker } from './src/tfjs/mem-tracker.ts';

globalThis.runMemTracker = async () => {
  const ok = await tf.setBackend('webgl');
  if (!ok) throw new Error('webgl backend failed to initialise');
  const model = tfl.sequential({ name: 'net' });
  model.add(tfl.layers.dense({ name: 'fc1', units: 16, inputShape: [8], activation: 'relu' }));
  model.add(tfl.layers.batchNormalization({ name: 'bn' }));
  model.add(tfl.layers.dense({ name: 'fc2', units: 4 }));
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  const xs = tf.randomNormal([6, 8]);
  const ys = tf.randomNormal([6, 4]);
  const tracker = new MemTracker();
  tracker.trackExternal(model, xs, ys);
  const loss = await tracker.track(() => model.trainOnBatch(xs, ys));
  const bytes = (ws) => ws.reduce((s, w) => s + w.read().size * 4, 0);
  const rootStats = tracker.moduleStats().find((s) => s.modFqn === 'net');
  return {
    backend: tf.getBackend(),
    loss,
    trainable: bytes(model.trainableWeights),
    nonTrainable: bytes(model.nonTrainableWeights),
    current: tracker.snapshot('current'),
    peak: tracker.snapshot('peak'),
    modules: tracker.moduleStats().map((s) => s.modFqn).sort(),
    postBackwardGradient: rootStats.snapshots['Post-Backward'].map((s) => s.webgl.Gradient),
    localPeaks: tracker.moduleStats().map((s) => s.localPeak.webgl ?? 0),
    table: tracker.formatSnapshot('current', { tabulate: true }),
  };
};
`;

describe('MemTracker in headless Chromium (webgl)', () => {
  if (!chromiumAvailable()) {
    it.skip(`needs Chromium at ${CHROMIUM_PATH} (set MEMSCOPE_CHROMIUM); CI installs it`, () => {});
    return;
  }

  it('tracks a trainOnBatch step on the webgl backend in the page', async () => {
    const script = await bundlePageScript(ENTRY, 'mem-tracker-page.ts');
    const browser = await launchChromium();
    try {
      const { page, errors: pageErrors } = await openPageWithScript(browser, script);
      const r = await page.evaluate(() => (globalThis as unknown as { runMemTracker: () => Promise<any> }).runMemTracker());
      expect(pageErrors).toEqual([]);
      expect(r.backend).toBe('webgl');
      expect(Number.isFinite(r.loss)).toBe(true);
      expect(Object.keys(r.current)).toEqual(['webgl']);
      const now = r.current.webgl;
      expect(now.Parameter).toBe(r.trainable);
      expect(now.Buffer).toBe(r.nonTrainable);
      expect(now.Optstate).toBe(2 * r.trainable + 8);
      expect(now.Gradient).toBe(0);
      expect(now.Other).toBe((6 * 8 + 6 * 4) * 4);
      expect(r.postBackwardGradient).toEqual([r.trainable]);
      expect(r.modules).toEqual(['net', 'net.bn', 'net.fc1', 'net.fc2']);
      for (const p of r.localPeaks) expect(p).toBeLessThanOrEqual(r.peak.webgl.Total);
      expect(r.table).toContain('│ webgl ');
    } finally {
      await browser.close();
    }
  });
});
