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

  it('keeps its books over more allocations than its ring of recent storages holds', () => {
    // MemRecorder keeps the last 4,096 storage ids in a ring and moves older live ones (here the
    // inputs, made before tracking, and whatever else outlives a ring) to a second table: the
    // categories must come out the same after many rounds of that.
    const run = createDemoRun({ inputs: 5, hidden: 7, outputs: 3, batchSize: 3 });
    const tracker = new MemTracker();
    tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
    const backend = tf.backend() as unknown as { dataIdNextNumber: number };
    const firstDataId = backend.dataIdNextNumber;
    let held: tf.Tensor | undefined;
    const live = tracker.track(() => {
      held = tf.ones([4, 4]); // made in no phase: an Activation, as PyTorch's MemTracker counts it
      run.train(40);
      const before = tracker.snapshot('current').wasm!;
      // Both outlived many rings: freeing them must still find their entries.
      held.dispose();
      run.ys.dispose();
      return { before, after: tracker.snapshot('current').wasm! };
    });
    expect(backend.dataIdNextNumber - firstDataId).toBeGreaterThan(3 * 4096);
    expect(live.before.Activation - live.after.Activation).toBe(64);
    expect(live.before.Other - live.after.Other).toBe(round8(3 * 3 * 4));
    const now = tracker.snapshot('current').wasm!;
    const trainable = wasmBytes(run.model.trainableWeights);
    expect(now.Parameter).toBe(trainable);
    expect(now.Buffer).toBe(wasmBytes(run.model.nonTrainableWeights));
    expect(now.Optstate).toBe(2 * trainable + 2 * 8);
    expect(now.Gradient).toBe(0);
    expect(now.Other).toBe(round8(3 * 5 * 4));
    const root = tracker.moduleStats().find((s) => s.modFqn === 'demo')!;
    expect(root.snapshots['Post-Backward']!.map((s) => s.wasm!.Gradient)).toEqual(Array(40).fill(trainable));
    run.dispose();
  });
});
