// MemTracker in headless Chromium on the webgl backend: the TFJS adapter and
// the framework-free tracker are bundled for the browser (esbuild, in memory),
// a training step runs in the page, and the page reports the categories.
import { describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium, openPageWithScript } from '../support/browser.js';

// The page's program (pages/mem-tracker-step.ts) on the webgl backend.
const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgl';
import { memTrackerStep } from './test/browser/pages/mem-tracker-step.ts';

globalThis.runMemTracker = async () => {
  const ok = await tf.setBackend('webgl');
  if (!ok) throw new Error('webgl backend failed to initialise');
  return memTrackerStep('webgl');
};
`;

describe('MemTracker in headless Chromium (webgl)', () => {
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
