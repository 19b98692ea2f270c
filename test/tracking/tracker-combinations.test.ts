// Trackers on real TFJS models in the situations that once went wrong: two
// trackers attached together, a tracker attached after another, and a layer
// that throws during fit (TFJS then leaks the tape's saved clones).
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { MemTracker, MemoryTracker } from '../../src/tfjs/index.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** Bytes of float32 weights as TFJS holds them. */
function bytesOf(weights: readonly tfl.LayerVariable[]): number {
  return weights.reduce((sum, w) => sum + w.read().size * 4, 0);
}

function cnn(): tfl.Sequential {
  return tfl.sequential({
    layers: [
      tfl.layers.conv2d({ inputShape: [8, 8, 1], filters: 4, kernelSize: 3, activation: 'relu' }),
      tfl.layers.batchNormalization(),
      tfl.layers.flatten(),
      tfl.layers.dense({ units: 2 }),
    ],
  });
}

function bnDense(): tfl.Sequential {
  return tfl.sequential({ layers: [tfl.layers.batchNormalization({ inputShape: [4] }), tfl.layers.dense({ units: 2 })] });
}

describe('MemTracker and MemoryTracker attached together', () => {
  for (const [name, build, inShape, outUnits] of [
    ['conv+BN CNN', cnn, [8, 8, 1], 2],
    ['BN+Dense', bnDense, [4], 2],
  ] as const) {
    it(`${name}: every weight is Parameter from the first step, as with MemTracker alone`, async () => {
      const model = build();
      model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
      const xs = tf.randomNormal([8, ...inShape]);
      const ys = tf.randomNormal([8, outUnits]);
      const memTracker = new MemTracker();
      memTracker.trackExternal(model);
      const opTracker = new MemoryTracker();
      memTracker.start();
      opTracker.startMonitor(model);
      try {
        await model.trainOnBatch(xs, ys);
        const now = memTracker.snapshot('current').cpu!;
        expect(now.Parameter).toBe(bytesOf(model.trainableWeights));
        expect(now.Buffer).toBe(bytesOf(model.nonTrainableWeights));
        // Adam: m and v per trainable weight, and two 4-byte beta powers.
        expect(now.Optstate).toBe(2 * bytesOf(model.trainableWeights) + 8);
      } finally {
        opTracker.stop();
        memTracker.stop();
        tf.dispose([xs, ys]);
      }
    });
  }
});

describe('MemoryTracker started after another tracker', () => {
  it('numbers its steps from 0, as when alone', async () => {
    const model = bnDense();
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([8, 4]);
    const ys = tf.randomNormal([8, 2]);
    const alone = new MemoryTracker();
    alone.startMonitor(model);
    await model.trainOnBatch(xs, ys);
    alone.stop();

    const first = new MemTracker();
    first.trackExternal(model);
    first.start();
    try {
      await model.trainOnBatch(xs, ys); // a step before the MemoryTracker starts
      const second = new MemoryTracker();
      second.startMonitor(model);
      await model.trainOnBatch(xs, ys);
      await model.trainOnBatch(xs, ys);
      second.stop();
      expect(alone.records[0].step).toBe(0);
      expect(second.records[0].step).toBe(0);
      expect(second.markers.map((m) => m.step)).toEqual([0, 0, 1, 1]);
      expect(second.records[second.records.length - 1].step).toBe(1);
    } finally {
      first.stop();
      tf.dispose([xs, ys]);
    }
  });
});

/** Passes its input through; throws while `ThrowingLayer.armed` is set. */
class ThrowingLayer extends tfl.layers.Layer {
  static armed = false;
  static className = 'ThrowingLayer';
  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    if (ThrowingLayer.armed) throw new Error('planted failure in call');
    return Array.isArray(inputs) ? inputs[0] : inputs;
  }
}

describe('a layer that throws during fit', () => {
  it('the weights\' old storages, kept alive by the clones TFJS leaks, are not Parameter after assign', async () => {
    const model = tfl.sequential({
      layers: [tfl.layers.dense({ inputShape: [4], units: 4, activation: 'relu' }), new ThrowingLayer({}), tfl.layers.dense({ units: 3 })],
    });
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([8, 4]);
    const ys = tf.randomNormal([8, 3]);
    const tracker = new MemTracker();
    tracker.trackExternal(model);
    const weights = bytesOf(model.trainableWeights); // (4×4 + 4 + 4×3 + 3) × 4 B
    expect(weights).toBe(140);
    await tracker.track(async () => {
      await model.fit(xs, ys, { epochs: 1, verbose: 0 });
      ThrowingLayer.armed = true;
      await expect(model.fit(xs, ys, { epochs: 1, verbose: 0 })).rejects.toThrow('planted failure in call');
      ThrowingLayer.armed = false;
      await model.fit(xs, ys, { epochs: 2, verbose: 0 });
      expect(tracker.snapshot('current').cpu!.Parameter).toBe(weights);
    });
    tf.dispose([xs, ys]);
  });
});

describe('MemTracker with no model registered', () => {
  it('warns once, naming trackExternal; not when a model is registered', async () => {
    const model = bnDense();
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([8, 4]);
    const ys = tf.randomNormal([8, 2]);
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const forgot = new MemTracker();
      await forgot.track(() => model.trainOnBatch(xs, ys));
      expect(forgot.snapshot('current').cpu!.Parameter).toBe(0);
      forgot.formatModulewiseSnapshots();
      forgot.snapshot('peak');
      expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([expect.stringMatching(/^memscope: MemTracker has no model registered.*trackExternal\(model\)/)]);

      warn.mockClear();
      const registered = new MemTracker();
      registered.trackExternal(model);
      await registered.track(() => model.trainOnBatch(xs, ys));
      expect(registered.snapshot('current').cpu!.Parameter).toBe(bytesOf(model.trainableWeights));
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      tf.dispose([xs, ys]);
    }
  });
});
