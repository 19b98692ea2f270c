// TFJS's webgpu backend under memscope/webgpu with memscope/browser's attribution, in headless
// Chromium (SwiftShader's WebGPU): the buffer pool shows as allocated (in use) vs reserved (in use
// + pooled), equal at every step to the backend's own counts.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium } from '../support/browser.js';
import { openServedPage } from './pages/browser-server.js';

const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { installWebGPU } from './src/webgpu/index.ts';
import { attachOnnxRuntime, attachTfjsWebGPU, startCapture } from './src/browser/index.ts';

const refusal = (fn) => {
  try {
    fn();
    return null;
  } catch (err) {
    return err.name + ' ' + err.code + ': ' + err.message;
  }
};

globalThis.runTraining = async () => {
  const memory = installWebGPU();
  const refusals = [
    refusal(() => attachTfjsWebGPU({ tf, memory })),
    refusal(() => attachOnnxRuntime({ ort: {}, memory })),
    refusal(() => startCapture({ maxEntries: -1 })),
  ];
  if (!(await tf.setBackend('webgpu'))) throw new Error('webgpu backend failed to initialise');
  const tfjs = attachTfjsWebGPU({ tf, memory });
  const device = tfjs.device;
  const read = (when) => {
    const f = memory.figures(device);
    const own = tfjs.backendFigures();
    return { when, allocated: f.allocated, reserved: f.reserved, backendInUse: own.inUse, backendHeld: own.held, byCategory: f.byCategory, byFramework: f.byFramework };
  };
  const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 64, inputShape: [32], activation: 'relu' }), tfl.layers.dense({ units: 8 })] });
  model.compile({ optimizer: 'adam', loss: 'meanSquaredError' });
  tfjs.optimizer(model.optimizer);
  const xs = tf.randomNormal([128, 32]);
  const ys = tf.randomNormal([128, 8]);
  const rows = [read('start')];
  for (let i = 0; i < 4; i++) {
    const loss = await model.trainOnBatch(xs, ys);
    tfjs.step(i + 1);
    rows.push(read('step ' + (i + 1)));
  }
  const p = model.predict(xs);
  await p.data();
  rows.push(read('after predict'));
  p.dispose();
  rows.push(read('after dispose'));
  // One step by hand: the gradients are live between variableGrads and their dispose.
  const { value, grads } = tf.variableGrads(() => tf.losses.meanSquaredError(ys, model.apply(xs)));
  rows.push(read('gradients'));
  model.optimizer.applyGradients(grads);
  rows.push(read('applied'));
  value.dispose();
  tf.dispose(Object.values(grads));
  rows.push(read('gradients disposed'));
  let trainable = 0;
  for (const w of model.trainableWeights) trainable += w.read().size * 4;
  const warnings = [...memory.warnings];
  tfjs.detach();
  const bm = tf.engine().backend.bufferManager;
  const restored = !Object.prototype.hasOwnProperty.call(bm, 'acquireBuffer') && !Object.prototype.hasOwnProperty.call(bm, 'releaseBuffer');
  memory.uninstall();
  return { device, rows, trainable, warnings, restored, refusals };
};
`;

describe('TFJS webgpu attribution in headless Chromium', () => {
  let browser: Browser;
  let script: string;
  beforeAll(async () => {
    script = await bundlePageScript(ENTRY, 'browser-tfjs-webgpu-page.ts');
    browser = await launchChromium({ webgpu: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("training on the buffer pool: allocated = the backend's numBytesInGPU ≤ reserved = its numBytesAllocatedInGPU at every step", async () => {
    const { page, errors } = await openServedPage(browser, {});
    try {
      await page.addScriptTag({ content: script });
      const r = await page.evaluate(() => (globalThis as any).runTraining());
      expect(errors).toEqual([]);
      expect(r.warnings).toEqual([]);
      expect(r.device).toBe('webgpu:0');
      expect(r.rows).toHaveLength(10);
      for (const row of r.rows.slice(1)) {
        // Every buffer is in one of PyTorch MemTracker's categories.
        expect(Object.keys(row.byCategory).filter((c) => !['Parameter', 'Buffer', 'Gradient', 'Activation', 'Temp', 'Optstate', 'Other'].includes(c)), row.when).toEqual([]);
        expect(row.allocated, row.when).toBeLessThanOrEqual(row.reserved);
        expect(row.allocated, row.when).toBe(row.backendInUse);
        expect(row.reserved, row.when).toBe(row.backendHeld);
        // Every buffer on the device is the backend's.
        expect(row.byFramework['tfjs-webgpu'].reserved, row.when).toBe(row.reserved);
      }
      // The pool keeps what training freed: reserved above allocated once steps have run.
      const last = r.rows[4];
      expect(last.reserved).toBeGreaterThan(last.allocated);
      // The model's weights are Parameter (the kernel and bias of both layers, on the GPU).
      expect(last.byCategory.Parameter.allocated).toBe(r.trainable);
      expect(r.trainable).toBe((32 * 64 + 64 + 64 * 8 + 8) * 4);
      // The prediction's buffer goes back to the pool at dispose: allocated drops, reserved stays.
      const [predicted, disposed] = r.rows.slice(5);
      expect(disposed.reserved).toBe(predicted.reserved);
      expect(disposed.allocated).toBeLessThan(predicted.allocated);
      // The prediction (128×8 float32) is an Activation while held.
      expect(predicted.byCategory.Activation.allocated - disposed.byCategory.Activation.allocated).toBe(128 * 8 * 4);
      // Adam's state (first and second moments of every weight, and its two beta powers) is Optstate.
      for (const row of r.rows.slice(1, 5)) {
        expect(row.byCategory.Optstate.allocated, row.when).toBeGreaterThanOrEqual(2 * r.trainable);
        expect(row.byCategory.Optstate.allocated, row.when).toBeLessThanOrEqual(2 * r.trainable + 64);
      }
      // The gradients variableGrads returns are Gradient, one of each weight's size, until disposed;
      // backward's temporaries are Temp (back in the pool by then).
      const [gradients, applied, gradientsDisposed] = r.rows.slice(7);
      expect(gradients.byCategory.Gradient.allocated).toBe(r.trainable);
      expect(gradients.byCategory.Temp.reserved).toBeGreaterThan(0);
      expect(applied.byCategory.Gradient.allocated).toBe(r.trainable);
      expect(gradientsDisposed.byCategory.Gradient?.allocated ?? 0).toBe(0);
      expect(applied.byCategory.Parameter.allocated).toBe(r.trainable);
      expect(r.restored).toBe(true);
      // Misuse is one MemscopeError line naming what to do.
      expect(r.refusals).toEqual([
        "MemscopeError no-webgpu-backend: attachTfjsWebGPU: TFJS has no initialised webgpu backend: await tf.setBackend('webgpu') first",
        'MemscopeError bad-argument: attachOnnxRuntime: options.ort must be the onnxruntime-web module (with InferenceSession.create)',
        'MemscopeError bad-option: startCapture: maxEntries must be a positive integer or null, got -1',
      ]);
    } finally {
      await page.close();
    }
  });
});
