// MemTracker across tf.setBackend: TFJS moves a tensor's data to the backend that reads it, and
// the moved storage keeps its category — a weight stays Parameter, a tensor given to
// trackExternal stays Other — on the device it moved to. Its own file: it switches backends.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { afterAll, describe, expect, it } from 'vitest';
import { MemTracker } from '../../src/tfjs/index.js';
import { useBackend } from '../tfjs/support/backends.js';

afterAll(async () => {
  await useBackend('cpu');
});

const round8 = (bytes: number) => Math.ceil(bytes / 8) * 8;

describe('MemTracker when tf.setBackend moves the data', () => {
  it('weights and external tensors moved from cpu to wasm keep Parameter and Other', async () => {
    await useBackend('cpu');
    const model = tfl.sequential({ name: 'moved', layers: [tfl.layers.dense({ inputShape: [5], units: 3 })] });
    const xs = tf.ones([4, 5]);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs);
    tracker.start();
    try {
      tf.dispose(model.predict(xs) as tf.Tensor);
      await useBackend('wasm');
      // Reading the weights and xs on wasm moves their data there.
      tf.dispose(model.predict(xs) as tf.Tensor);
    } finally {
      tracker.stop();
    }
    const wasm = tracker.snapshot('current').wasm!;
    // Weights: a 5×3 kernel and a 3-float bias; xs: 4×5 floats — each rounded to the wasm heap's 8 bytes.
    expect(wasm).toMatchObject({ Parameter: round8(15 * 4) + round8(3 * 4), Other: round8(20 * 4), Activation: 0 });
    expect(tracker.snapshot('current').cpu?.Total ?? 0).toBe(0);
    xs.dispose();
    model.dispose();
  });
});
