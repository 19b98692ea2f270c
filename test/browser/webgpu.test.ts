// memscope on the real TFJS webgpu backend in headless Chromium. There is no
// GPU here: Chromium offers SwiftShader's Vulkan as a fallback WebGPU adapter
// when launched with --enable-unsafe-webgpu, and `navigator.gpu` exists only
// in a secure context (openSecurePage). Each test runs in a fresh page, so
// each starts from an empty engine and an empty buffer pool.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium, openPageWithScript } from '../support/browser.js';


const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgpu';
import { tfjsAdapter } from './src/tfjs/index.ts';
import { attachWithOracle } from './test/browser/pages/adapter-oracle.ts';
import { memTrackerStep } from './test/browser/pages/mem-tracker-step.ts';

async function useWebgpu() {
  if (!(await tf.setBackend('webgpu'))) throw new Error('webgpu backend failed to initialise');
}

// The storage invariant at every kernel boundary through a training step
// (pages/adapter-oracle.ts), then webgpu's own checks.
globalThis.runAdapter = async () => {
  const oracle = await attachWithOracle(useWebgpu);
  const { engine, infos, session: s, frees, check } = oracle;
  const adapterInfo = engine.backend.adapterInfo;
  const { loss, xs, ys } = await oracle.trainStep();
  check('after trainOnBatch');
  // memscope's live bytes against the backend's own in-use figure: small
  // tensors computed on the CPU (the backend's CPU hand-off) keep their values
  // in JS memory, the rest sit in GPU buffers of exactly their float32/int32
  // size. The loss read above submitted the queue, so no uniform or staging
  // buffer is still counted in use.
  let cpuResident = 0;
  for (const [dataId, info] of infos) if (engine.backend.tensorMap.get(dataId).resource == null) cpuResident += info.bytes;
  const afterStep = {
    memscopeLive: [...s.liveStorages()].reduce((n, st) => n + st.bytes, 0),
    gpuInUse: engine.backend.memory().numBytesInGPU,
    cpuResident,
  };

  // A tensor on the GPU (above the backend's CPU hand-off size) disposed while
  // its read is pending. Unlike webgl, webgpu does not defer the release: the
  // read has already submitted its copy to a staging buffer, so the backend
  // frees the buffer and the engine drops the dataId at dispose, and memscope
  // frees the storage then. TFJS 4.22 then rejects the read (the backend
  // caches the values under a dataId nobody knows any more); memscope's
  // bookkeeping must survive that.
  const t = tf.square(tf.tidy(() => tf.add(tf.ones([2048]), 1)));
  const onGpu = engine.backend.tensorMap.get(t.dataId).resource != null;
  const storage = s.tensor(t).storage;
  const reading = t.data();
  t.dispose();
  const freedAtDispose = frees.includes(storage.id);
  const inEngineAtDispose = infos.has(t.dataId);
  const readError = await reading.then(() => null, (err) => String(err));
  check('after read');
  const u = tf.square(tf.tidy(() => tf.add(tf.ones([2048]), 1)));
  const readValue = (await u.data())[0];
  u.dispose();
  check('after a read that completes');

  tf.dispose([xs, ys]);
  check('after dispose');
  return {
    ...oracle.finish(), adapter: { vendor: adapterInfo.vendor, architecture: adapterInfo.architecture },
    loss, afterStep, onGpu, freedAtDispose, inEngineAtDispose, readError, readValue,
  };
};

// MemTracker categories for one trainOnBatch of a small Dense model.
globalThis.runMemTracker = async () => {
  await useWebgpu();
  return memTrackerStep('webgpu');
};

// deviceMemory('webgpu') against the buffer manager's own counters: a
// disposed GPU tensor's buffer goes back to the pool, so in-use bytes drop
// while reserved bytes stay; fromPixels fills the texture pool, which the
// backend's memory() leaves out and memscope adds.
globalThis.runDeviceMemory = async () => {
  await useWebgpu();
  const backend = tf.engine().backend;
  const s = tfjsAdapter.attach({});
  const inUse = () => backend.memory().numBytesInGPU;
  const read = () => s.deviceMemory('webgpu');
  const empty = read();
  // 4099 float32 elements: above the CPU hand-off size, and a buffer size no
  // other buffer in this page shares.
  const a = tf.randomNormal([4099]);
  const b = tf.add(a, 1);
  await b.data();
  const withB = { reserved: read().reservedBytes, inUse: inUse() };
  b.dispose();
  const afterDispose = { reserved: read().reservedBytes, inUse: inUse() };
  // The same size again comes from the pool: nothing new is created.
  const c = tf.mul(a, 2);
  await c.data();
  const reused = { reserved: read().reservedBytes, inUse: inUse() };
  const canvas = document.createElement('canvas');
  canvas.width = 17;
  canvas.height = 13;
  canvas.getContext('2d').fillRect(0, 0, 17, 13);
  const beforePixels = { reserved: read().reservedBytes, buffers: backend.memory().numBytesAllocatedInGPU };
  const pixels = tf.browser.fromPixels(canvas, 3);
  await pixels.data();
  const afterPixels = { reserved: read().reservedBytes, buffers: backend.memory().numBytesAllocatedInGPU, source: read().source };
  s.detach();
  return { empty, withB, afterDispose, reused, beforePixels, afterPixels };
};
`;

describe('memscope on the webgpu backend in headless Chromium', () => {
  let browser: Browser;
  let script: string;
  beforeAll(async () => {
    script = await bundlePageScript(ENTRY, 'webgpu-page.ts');
    browser = await launchChromium({ webgpu: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function runInPage(fn: 'runAdapter' | 'runMemTracker' | 'runDeviceMemory'): Promise<any> {
    const { page, errors: pageErrors } = await openPageWithScript(browser, script, { secure: true });
    try {
      const r = await page.evaluate((name) => (globalThis as unknown as Record<string, () => Promise<unknown>>)[name]!(), fn);
      expect(pageErrors).toEqual([]);
      return r;
    } finally {
      await page.close();
    }
  }

  it('storage invariant at every kernel boundary, immediate release on dispose, backward order and restore', async () => {
    const r = await runInPage('runAdapter');
    expect(r.backend).toBe('webgpu');
    expect(r.adapter.architecture).toBe('swiftshader');
    expect(Number.isFinite(r.loss)).toBe(true);
    expect(r.mismatches).toEqual([]);
    expect(r.checks).toBeGreaterThan(100);
    expect(r.devices).toEqual(['webgpu']);
    expect(r.log).toEqual(['bw-enter mlp', 'bw-enter mlp.l3', 'bw-exit mlp.l3', 'bw-enter mlp.l2', 'bw-exit mlp.l2', 'bw-enter mlp.l1', 'bw-exit mlp.l1', 'bw-exit mlp']);
    expect(r.afterStep.memscopeLive).toBe(r.afterStep.gpuInUse + r.afterStep.cpuResident);
    expect(r.afterStep.gpuInUse).toBeGreaterThan(r.afterStep.cpuResident);
    expect(r.onGpu).toBe(true);
    expect(r.inEngineAtDispose).toBe(false);
    expect(r.freedAtDispose).toBe(true);
    expect(r.readError).toMatch(/TypeError/);
    expect(r.readValue).toBe(4);
    expect(r.finalMemscope).toBe(r.finalEngine);
    expect(r.finalCount).toBe(r.engineCount);
    expect(r.restored).toBe(true);
  });

  it('MemTracker categories for one trainOnBatch of a Dense/BatchNorm/Dense model', async () => {
    const r = await runInPage('runMemTracker');
    expect(r.backend).toBe('webgpu');
    expect(Number.isFinite(r.loss)).toBe(true);
    expect(Object.keys(r.current)).toEqual(['webgpu']);
    const now = r.current.webgpu;
    // fc1 8×16+16, bn 4×16 (gamma, beta trainable; moving mean/variance not), fc2 16×4+4.
    expect(r.trainable).toBe((8 * 16 + 16 + 2 * 16 + 16 * 4 + 4) * 4);
    expect(now.Parameter).toBe(r.trainable);
    expect(now.Buffer).toBe(r.nonTrainable);
    expect(r.nonTrainable).toBe(2 * 16 * 4);
    // Adam: two moments per trainable weight, plus its two float32 scalars (accBeta1, accBeta2).
    expect(now.Optstate).toBe(2 * r.trainable + 8);
    expect(now.Gradient).toBe(0);
    expect(now.Other).toBe((6 * 8 + 6 * 4) * 4);
    expect(r.postBackwardGradient).toEqual([r.trainable]);
    expect(r.modules).toEqual(['net', 'net.bn', 'net.fc1', 'net.fc2']);
    for (const p of r.localPeaks) expect(p).toBeLessThanOrEqual(r.peak.webgpu.Total);
    expect(r.peak.webgpu.Total).toBeGreaterThan(now.Total);
    expect(r.table).toContain('│ webgpu ');
  });

  it("deviceMemory('webgpu') is the buffer pool (in use + pooled free) plus fromPixels' texture pool", async () => {
    const r = await runInPage('runDeviceMemory');
    const tensorBytes = 4099 * 4;
    expect(r.empty).toEqual({ reservedBytes: 0, source: 'webgpu buffer and texture managers (in use + pooled free)' });
    // a (uploaded for the add) and b on the GPU, plus the pooled staging buffer of the read and the uniforms.
    expect(r.withB.inUse).toBe(2 * tensorBytes);
    expect(r.withB.reserved).toBeGreaterThanOrEqual(3 * tensorBytes);
    // b's buffer goes back to the pool: no longer in use, still reserved.
    expect(r.afterDispose.inUse).toBe(tensorBytes);
    expect(r.afterDispose.reserved).toBe(r.withB.reserved);
    // c takes b's pooled buffer and the read its pooled staging buffer.
    expect(r.reused.inUse).toBe(2 * tensorBytes);
    expect(r.reused.reserved).toBe(r.withB.reserved);
    // fromPixels: a 17×13 rgba8unorm texture (4 B a texel, though TFJS's
    // texture manager counts 16) outside memory(), beside the int32 output buffer.
    const textureBytes = 17 * 13 * 4;
    expect(r.afterPixels.reserved - r.afterPixels.buffers - (r.beforePixels.reserved - r.beforePixels.buffers)).toBe(textureBytes);
    expect(r.afterPixels.buffers - r.beforePixels.buffers).toBeGreaterThanOrEqual(17 * 13 * 3 * 4);
    expect(r.afterPixels.source).toBe('webgpu buffer and texture managers (in use + pooled free)');
  });
});
