// The page program both MemTracker browser tests run (webgl, webgpu): one
// trainOnBatch of an MLP with BatchNorm and Adam under MemTracker, on whatever
// backend the page has already selected. Bundled into the page by esbuild.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { MemTracker } from '../../../src/tfjs/mem-tracker.js';

export async function memTrackerStep(device: string) {
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
  const bytes = (ws: readonly { read(): tf.Tensor }[]) => ws.reduce((s, w) => s + w.read().size * 4, 0);
  const stats = tracker.moduleStats();
  const rootStats = stats.find((s) => s.modFqn === 'net')!;
  return {
    backend: tf.getBackend(),
    loss,
    trainable: bytes(model.trainableWeights),
    nonTrainable: bytes(model.nonTrainableWeights),
    current: tracker.snapshot('current'),
    peak: tracker.snapshot('peak'),
    modules: stats.map((s) => s.modFqn).sort(),
    postBackwardGradient: (rootStats.snapshots['Post-Backward'] ?? []).map((s) => s[device]?.Gradient),
    localPeaks: stats.map((s) => s.localPeak[device] ?? 0),
    table: tracker.formatSnapshot('current', { tabulate: true }),
  };
}
