// MemTracker on the wasm backend in Node: the same categories as on cpu, with
// every storage rounded up to the wasm heap's 8-byte allocation granularity.
import * as tf from '@tensorflow/tfjs-core';
import type * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { useDemoBackend } from '../../src/tfjs/demo-backend-node.js';
import { createDemoRun } from '../../src/tfjs/demo-model.js';
import { MemTracker } from '../../src/tfjs/index.js';

beforeAll(async () => {
  await useDemoBackend('wasm');
});

const round8 = (bytes: number) => Math.ceil(bytes / 8) * 8;
const wasmBytes = (weights: readonly tfl.LayerVariable[]) => weights.reduce((s, w) => s + round8(w.read().size * 4), 0);

describe('MemTracker on the wasm backend', () => {
  it('tracks a training step of the demo model on the wasm device, 8-byte rounded', () => {
    expect(tf.getBackend()).toBe('wasm');
    // Odd sizes so rounding shows: a 3-float bias is 12 B in TFJS and 16 B on the wasm heap.
    const run = createDemoRun({ inputs: 5, hidden: 7, outputs: 3, batchSize: 3 });
    const tracker = new MemTracker();
    tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
    tracker.track(() => run.train(2));
    const snap = tracker.snapshot('current');
    expect(Object.keys(snap)).toEqual(['wasm']);
    const now = snap.wasm!;
    const trainable = wasmBytes(run.model.trainableWeights);
    expect(trainable).toBeGreaterThan(run.model.trainableWeights.reduce((s, w) => s + w.read().size * 4, 0));
    expect(now.Parameter).toBe(trainable);
    expect(now.Buffer).toBe(wasmBytes(run.model.nonTrainableWeights));
    // m and v per weight, and accBeta1/accBeta2: 4-byte scalars that take 8 B each.
    expect(now.Optstate).toBe(2 * trainable + 2 * 8);
    expect(now.Gradient).toBe(0);
    expect(now.Other).toBe(round8(3 * 5 * 4) + round8(3 * 3 * 4));
    const root = tracker.moduleStats().find((s) => s.modFqn === 'demo')!;
    expect(root.snapshots['Post-Backward']!.map((s) => s.wasm!.Gradient)).toEqual([trainable, trainable]);
    expect(tracker.snapshot('peak').wasm!.Total).toBeGreaterThanOrEqual(Math.max(...Object.values(root.localPeak)));
    run.dispose();
  });
});
