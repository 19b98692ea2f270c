// The capture's categories against MemTracker's on the same real TFJS program:
// both watch one adapter; at the end, the bytes each puts in the ownership
// categories (and the module-wise local peaks) must agree.
import { describe, it, expect } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { MemTracker, tfjsAdapter } from '../../src/tfjs/index.js';
import { CaptureRecorder } from '../../src/capture/recorder.js';
import { CaptureWriter } from '../../src/capture/writer.js';
import { parseCapture } from '../../src/capture/reader.js';

describe('capture categories agree with MemTracker', () => {
  it('Parameter, Buffer, Optstate and Gradient bytes after Adam training steps', async () => {
    await tf.setBackend('cpu');
    const model = tfl.sequential({
      name: 'mlp',
      layers: [
        tfl.layers.dense({ units: 32, inputShape: [16], activation: 'relu', name: 'hidden' }),
        tfl.layers.batchNormalization({ name: 'norm' }),
        tfl.layers.dense({ units: 1, name: 'out' }),
      ],
    });
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([32, 16]);
    const ys = tf.randomNormal([32, 1]);

    let text = '';
    const writer = new CaptureWriter({ write: (c) => (text += c) }, { created: 'test', argv: ['in-process'], backend: 'cpu', stacks: false, maxEntries: null });
    const recorder = new CaptureRecorder(writer);
    const session = tfjsAdapter.attach(recorder);
    recorder.adoptExisting(session.liveStorages());
    session.module(model, 'mlp');
    session.optimizer(model.optimizer);

    const tracker = new MemTracker();
    tracker.trackExternal(model);
    await tracker.track(async () => {
      for (let i = 0; i < 3; i++) await model.trainOnBatch(xs, ys);
    });
    recorder.finish({ exitCode: 0, error: null });
    session.detach();

    const capture = parseCapture(text);
    const live: Record<string, number> = {};
    for (const a of capture.allocs) if (a.freeT === null) live[a.category] = (live[a.category] ?? 0) + a.bytes;
    const tracked = tracker.snapshot('current').cpu;
    const trainable = (16 * 32 + 32 + 32 + 32 + 32 + 1) * 4;
    expect(live.Parameter).toBe(trainable);
    for (const cat of ['Parameter', 'Buffer', 'Optstate', 'Gradient'] as const) {
      expect([cat, live[cat] ?? 0]).toEqual([cat, tracked[cat]]);
    }
    expect(capture.steps).toHaveLength(3);
    tf.dispose([xs, ys]);
  });
});
