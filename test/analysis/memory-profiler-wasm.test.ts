// The memory profiler on the wasm backend: storages live on device 'wasm', and
// the timeline is per device, as PyTorch's is per CUDA device.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, expect, it } from 'vitest';
import { CATEGORY_ORDER } from '../../src/analysis/memory-profile.js';
import { profile } from '../../src/tfjs/profile.js';
import { useBackend } from '../tfjs/support/backends.js';

beforeAll(async () => {
  await useBackend('wasm');
});

it('profiles a fit on wasm: one device, parameters and Adam state to the byte', async () => {
  const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 8, inputShape: [4], activation: 'relu' }), tfl.layers.dense({ units: 2 })] });
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  const xs = tf.randomUniform([8, 4]);
  const ys = tf.randomUniform([8, 2]);
  const result = await profile(
    { recordShapes: true, profileMemory: true, withStack: true, models: [model] },
    () => model.fit(xs, ys, { epochs: 1, batchSize: 4, verbose: 0 }),
  );
  const timeline = result.memoryTimeline();
  expect(timeline.devices()).toEqual(['wasm']);
  expect(() => timeline.toHtml('cpu')).toThrow(/no memory events on device "cpu"/);
  const { sizes } = timeline.coalesce('wasm');
  const last = sizes[sizes.length - 1]!;
  const bytes = (c: (typeof CATEGORY_ORDER)[number]) => last[CATEGORY_ORDER.indexOf(c) + 1];
  const weights = 4 * 8 + 8 + 8 * 2 + 2; // 58 floats
  expect(bytes('PARAMETER')).toBe(weights * 4);
  // Adam: m and v per weight, plus accBeta1 and accBeta2 scalars.
  expect(bytes('OPTIMIZER_STATE')).toBe(2 * weights * 4 + 2 * 4);
  expect(bytes('INPUT')).toBe((32 + 16) * 4);
  expect(result.recording.peakAllocatedBytes.get('wasm')).toBeGreaterThan(0);
});
