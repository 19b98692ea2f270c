// The TFJS adapter in headless Chromium on the webgl backend: storages on
// device 'webgl', the storage invariant at every kernel boundary (against the
// engine's own dataId map, as in test/tfjs/support/engine-oracle.ts), webgl's
// deferred release (a tensor disposed while a read is pending is freed when
// the read completes), modules and backward order, device memory, and restore.
import { describe, expect, it } from 'vitest';
import { bundlePageScript, chromiumAvailable, launchChromium, openPageWithScript, CHROMIUM_PATH } from '../support/browser.js';


const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgl';
import * as tfl from '@tensorflow/tfjs-layers';
import { tfjsAdapter } from './src/tfjs/index.ts';

globalThis.runAdapter = async () => {
  const engine = tf.engine();
  // The oracle: the engine's dataId map made enumerable before any tensor exists.
  const infos = new Map();
  engine.state.tensorInfo = infos;
  if (!(await tf.setBackend('webgl'))) throw new Error('webgl backend failed to initialise');
  const proto = Object.getPrototypeOf(engine);
  const originals = ['trackTensor', 'disposeTensor', 'removeDataId', 'runKernelFunc', 'gradients', 'startScope', 'endScope'].map((m) => proto[m]);
  const engineBytes = () => { let n = 0; for (const e of infos.values()) n += e.bytes; return n; };

  let memscopeBytes = 0;
  const mismatches = [];
  const log = [];
  let checks = 0;
  const check = (where) => { checks++; if (memscopeBytes !== engineBytes()) mismatches.push(where + ': ' + memscopeBytes + ' vs ' + engineBytes()); };
  const devices = new Set();
  const frees = [];
  const s = tfjsAdapter.attach({
    onStorageAlloc: (st) => { memscopeBytes += st.bytes; devices.add(st.device); },
    onStorageFree: (st) => { memscopeBytes -= st.bytes; frees.push(st.id); },
    onKernelStart: (k) => check('start ' + k.name),
    onKernelEnd: (k) => check('end ' + k.name),
    onBackwardModuleEnter: (m) => log.push('bw-enter ' + m.path),
    onBackwardModuleExit: (m) => log.push('bw-exit ' + m.path),
  });
  for (const st of s.liveStorages()) memscopeBytes += st.bytes;

  const model = tfl.sequential({ name: 'mlp', layers: [
    tfl.layers.dense({ units: 8, inputShape: [4], activation: 'relu', name: 'l1' }),
    tfl.layers.dense({ units: 8, activation: 'relu', name: 'l2' }),
    tfl.layers.dense({ units: 2, name: 'l3' }),
  ] });
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  s.module(model);
  s.optimizer(model.optimizer);
  const xs = tf.randomNormal([5, 4]);
  const ys = tf.randomNormal([5, 2]);
  const loss = await model.trainOnBatch(xs, ys);

  // Deferred release: dispose while an async read is pending.
  const t = tf.square(tf.tidy(() => tf.add(tf.ones([64]), 1)));
  const storage = s.tensor(t).storage;
  const reading = t.data();
  t.dispose();
  const freedBeforeRead = frees.includes(storage.id);
  await reading;
  const freedAfterRead = frees.includes(storage.id);

  const reading2 = s.deviceMemory('webgl');
  const live = [...s.liveStorages()].reduce((n, st) => n + st.bytes, 0);
  tf.dispose([xs, ys]);
  s.detach();
  const restored = ['trackTensor', 'disposeTensor', 'removeDataId', 'runKernelFunc', 'gradients', 'startScope', 'endScope'].every((m, i) => proto[m] === originals[i]);
  return { backend: tf.getBackend(), loss, checks, mismatches, devices: [...devices], log, freedBeforeRead, freedAfterRead,
    deviceMemory: reading2, live, finalMemscope: memscopeBytes, finalEngine: engineBytes(), restored };
};
`;

describe('TFJS adapter in headless Chromium (webgl)', () => {
  if (!chromiumAvailable()) {
    it.skip(`needs Chromium at ${CHROMIUM_PATH} (set MEMSCOPE_CHROMIUM); CI installs it`, () => {});
    return;
  }

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
      expect(r.restored).toBe(true);
    } finally {
      await browser.close();
    }
  });
});
