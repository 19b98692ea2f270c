// The TFJS adapter in headless Chromium on the webgl backend: storages on
// device 'webgl', the storage invariant at every kernel boundary (against the
// engine's own dataId map, as in test/tfjs/support/engine-oracle.ts), webgl's
// deferred release (a tensor disposed while a read is pending is freed when
// the read completes), modules and backward order, device memory, and restore.
import { describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium, openPageWithScript } from '../support/browser.js';


const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgl';
import { attachWithOracle } from './test/browser/pages/adapter-oracle.ts';

globalThis.runAdapter = async () => {
  const oracle = await attachWithOracle(async () => {
    if (!(await tf.setBackend('webgl'))) throw new Error('webgl backend failed to initialise');
  });
  const s = oracle.session;
  const { loss, xs, ys } = await oracle.trainStep();

  // Deferred release: dispose while an async read is pending.
  const t = tf.square(tf.tidy(() => tf.add(tf.ones([64]), 1)));
  const storage = s.tensor(t).storage;
  const reading = t.data();
  t.dispose();
  const freedBeforeRead = oracle.frees.includes(storage.id);
  await reading;
  const freedAfterRead = oracle.frees.includes(storage.id);

  const deviceMemory = s.deviceMemory('webgl');
  tf.dispose([xs, ys]);
  oracle.check('after dispose');
  return { ...oracle.finish(), loss, freedBeforeRead, freedAfterRead, deviceMemory };
};
`;

describe('TFJS adapter in headless Chromium (webgl)', () => {
  it('storage invariant, deferred release, backward order, device memory and restore on webgl', async () => {
    const script = await bundlePageScript(ENTRY, 'tfjs-adapter-page.ts');
    const browser = await launchChromium();
    try {
      const { page, errors: pageErrors } = await openPageWithScript(browser, script);
      const r = await page.evaluate(() => (globalThis as unknown as { runAdapter: () => Promise<any> }).runAdapter());
      expect(pageErrors).toEqual([]);
      expect(r.backend).toBe('webgl');
      expect(Number.isFinite(r.loss)).toBe(true);
      expect(r.mismatches).toEqual([]);
      expect(r.checks).toBeGreaterThan(100);
      expect(r.devices).toEqual(['webgl']);
      expect(r.log).toEqual(['bw-enter mlp', 'bw-enter mlp.l3', 'bw-exit mlp.l3', 'bw-enter mlp.l2', 'bw-exit mlp.l2', 'bw-enter mlp.l1', 'bw-exit mlp.l1', 'bw-exit mlp']);
      // webgl keeps the texture until the pending read completes; the engine
      // drops the dataId then, and so does memscope.
      expect(r.freedBeforeRead).toBe(false);
      expect(r.freedAfterRead).toBe(true);
      expect(r.deviceMemory.source).toMatch(/webgl texture manager/);
      expect(r.deviceMemory.reservedBytes).toBeGreaterThan(0);
      expect(r.finalMemscope).toBe(r.finalEngine);
      expect(r.finalCount).toBe(r.engineCount);
      expect(r.restored).toBe(true);
    } finally {
      await browser.close();
    }
  });
});
