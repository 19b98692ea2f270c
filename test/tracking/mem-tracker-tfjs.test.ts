// MemTracker on real TensorFlow.js models (cpu backend): the categories and
// module states must add up to what the models really hold.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import type { MemTrackerSnapshot, ModuleMemStats } from '../../src/tracking/mem-types.js';
import { createDemoRun } from '../../src/tfjs/demo-model.js';
import { MemTracker, tfjsAdapter } from '../../src/tfjs/index.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** Bytes of a set of layer weights as TFJS holds them (float32: 4 B per element). */
function bytesOf(weights: readonly tfl.LayerVariable[]): number {
  return weights.reduce((sum, w) => sum + w.read().size * 4, 0);
}

/** Adam's state after its first step: m and v per trainable weight, plus accBeta1 and accBeta2 (4 B each). */
function adamStateBytes(model: tfl.LayersModel): number {
  return 2 * bytesOf(model.trainableWeights) + 2 * 4;
}

function stats(tracker: MemTracker): Map<string, ModuleMemStats> {
  return new Map(tracker.moduleStats().map((s) => [s.modFqn, s]));
}

/** Every module's local peak, and every snapshot any module took, is within the global peak. */
function expectPeakCoversModules(tracker: MemTracker): void {
  const peak = tracker.snapshot('peak').cpu!.Total;
  for (const s of tracker.moduleStats()) {
    for (const bytes of Object.values(s.localPeak)) expect(bytes).toBeLessThanOrEqual(peak);
    for (const list of Object.values(s.snapshots) as MemTrackerSnapshot[][]) {
      for (const snap of list) expect(snap.cpu?.Total ?? 0).toBeLessThanOrEqual(peak);
    }
  }
}

function mlp(name: string): tfl.Sequential {
  const model = tfl.sequential({ name });
  model.add(tfl.layers.dense({ name: `${name}_fc1`, units: 16, inputShape: [8], activation: 'relu' }));
  model.add(tfl.layers.batchNormalization({ name: `${name}_bn` }));
  model.add(tfl.layers.dense({ name: `${name}_fc2`, units: 4 }));
  return model;
}

/** The checks every training run must pass, after its first optimizer step. */
function expectTrainingCategories(tracker: MemTracker, model: tfl.LayersModel, rootName: string, other = 0): void {
  const trainable = bytesOf(model.trainableWeights);
  const nonTrainable = bytesOf(model.nonTrainableWeights);
  expect(trainable).toBeGreaterThan(0);
  expect(nonTrainable).toBeGreaterThan(0);
  const now = tracker.snapshot('current').cpu!;
  expect(now.Parameter).toBe(trainable);
  expect(now.Buffer).toBe(nonTrainable);
  expect(now.Optstate).toBe(adamStateBytes(model));
  expect(now.Gradient).toBe(0);
  expect(now.Other).toBe(other);
  const root = stats(tracker).get(rootName)!;
  expect(root.parameterMem).toBe(trainable);
  expect(root.bufferMem).toBe(nonTrainable);
  const postBackward = root.snapshots['Post-Backward']!;
  expect(postBackward.length).toBeGreaterThanOrEqual(1);
  for (const snap of postBackward) expect(snap.cpu!.Gradient).toBe(trainable);
  expectPeakCoversModules(tracker);
}

describe('MemTracker on TFJS models (cpu)', () => {
  it('Sequential Dense→BatchNorm→Dense with Adam, trainOnBatch', async () => {
    const model = mlp('net');
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([6, 8], 0, 1, 'float32', 1);
    const ys = tf.randomNormal([6, 4], 0, 1, 'float32', 2);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs, ys); // the compiled optimizer comes with the model
    await tracker.track(() => model.trainOnBatch(xs, ys));
    expectTrainingCategories(tracker, model, 'net', (6 * 8 + 6 * 4) * 4);
    expect([...stats(tracker).keys()].sort()).toEqual(['net', 'net.net_bn', 'net.net_fc1', 'net.net_fc2']);
    // BatchNorm's moving statistics are replaced by assign in forward; they stay Buffer.
    const bn = stats(tracker).get('net.net_bn')!;
    expect(bn.parameterMem).toBe(2 * 16 * 4);
    expect(bn.bufferMem).toBe(2 * 16 * 4);
    expect(bn.inputMem).toBe(6 * 16 * 4);
    expect(bn.outputMem).toBe(6 * 16 * 4);
  });

  it('fit over several batches: one call per batch, each Post-Backward holding every gradient', async () => {
    const model = mlp('fitnet');
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([12, 8], 0, 1, 'float32', 3);
    const ys = tf.randomNormal([12, 4], 0, 1, 'float32', 4);
    const tracker = new MemTracker();
    tracker.trackExternal(model, [xs, ys]);
    const history = await tracker.track(() => model.fit(xs, ys, { batchSize: 4, epochs: 1, shuffle: false, verbose: 0 }));
    expect(history.history['loss']).toHaveLength(1);
    expectTrainingCategories(tracker, model, 'fitnet', (12 * 8 + 12 * 4) * 4);
    const root = stats(tracker).get('fitnet')!;
    expect(root.snapshots['Pre-Forward']).toHaveLength(3);
    expect(root.snapshots['Post-Backward']).toHaveLength(3);
    // The moments exist from the first step on: the third step starts with all of them.
    expect(root.snapshots['Pre-Forward']![2]!.cpu!.Optstate).toBe(adamStateBytes(model));
  });

  it('a manual optimizer.minimize loop (the demo model), with displays pinned', () => {
    const run = createDemoRun({ inputs: 4, hidden: 8, outputs: 2, batchSize: 2 });
    const tracker = new MemTracker();
    tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
    tracker.track(() => run.train(1));
    expectTrainingCategories(tracker, run.model, 'demo', (2 * 4 + 2 * 2) * 4);
    // Parameter: 4×8+8 + 8+8 + 8×2+2 floats; Buffer: 8+8; Optstate: 2 × Parameter + accBeta1/2; Other: xs, ys.
    expect(tracker.formatSnapshot('current')).toMatchInlineSnapshot(`
      "Device: cpu
      	Parameter: 296 B
      	Buffer: 64 B
      	Gradient: 0 B
      	Activation: 0 B
      	Temp: 0 B
      	Optstate: 600 B
      	Other: 48 B
      	Total: 1008 B"
    `);
    // One step's module-wise story: weights at Pre-Forward, activations growing through
    // forward, backward temporaries, and the gradients handed out at the root's Post-Backward.
    // Buffer stays at the moving statistics' 64 B: the storages BatchNorm's update replaces in
    // forward live on until the step's tidy ends, held by forward's tensors, as Activation.
    expect(tracker.formatModulewiseSnapshots({ depth: 1, tabulate: true })).toMatchInlineSnapshot(`
      "Module:  demo
      ┌───────────────────┬────────┬───────────┬────────┬──────────┬────────────┬────────┬──────────┬───────┬────────┐
      │ State & Call      │ Device │ Parameter │ Buffer │ Gradient │ Activation │   Temp │ Optstate │ Other │  Total │
      ├───────────────────┼────────┼───────────┼────────┼──────────┼────────────┼────────┼──────────┼───────┼────────┤
      │ Pre-Forward # 1   │ cpu    │     296 B │   64 B │      0 B │        0 B │    0 B │      8 B │  48 B │  416 B │
      │ Peak-Forward # 1  │ cpu    │     296 B │   64 B │      0 B │      664 B │    0 B │      8 B │  48 B │ 1080 B │
      │ Post-Forward # 1  │ cpu    │     296 B │   64 B │      0 B │      664 B │    0 B │      8 B │  48 B │ 1080 B │
      │ Pre-Backward # 1  │ cpu    │     296 B │   64 B │      0 B │      692 B │   60 B │      8 B │  48 B │ 1168 B │
      │ Peak-Backward # 1 │ cpu    │     296 B │   64 B │      0 B │      692 B │ 1196 B │      8 B │  48 B │ 2304 B │
      │ Post-Backward # 1 │ cpu    │     296 B │   64 B │    296 B │        4 B │    0 B │      8 B │  48 B │  716 B │
      └───────────────────┴────────┴───────────┴────────┴──────────┴────────────┴────────┴──────────┴───────┴────────┘"
    `);
    run.dispose();
  });

  it('a nested model: Sequential inside Sequential, named from the root', () => {
    const inner = tfl.sequential({ name: 'inner' });
    inner.add(tfl.layers.dense({ name: 'inner_fc', units: 6, inputShape: [5], activation: 'relu' }));
    inner.add(tfl.layers.batchNormalization({ name: 'inner_bn' }));
    const outer = tfl.sequential({ name: 'outer' });
    outer.add(inner);
    outer.add(tfl.layers.dense({ name: 'outer_fc', units: 3 }));
    const optimizer = tf.train.adam(0.01);
    const xs = tf.randomNormal([4, 5], 0, 1, 'float32', 5);
    const tracker = new MemTracker();
    tracker.trackExternal(outer, optimizer);
    tracker.track(() => {
      optimizer.minimize(() => tf.mean(tf.square(outer.apply(xs, { training: true }) as tf.Tensor)) as tf.Scalar);
    });
    expectTrainingCategories(tracker, outer, 'outer');
    const s = stats(tracker);
    expect([...s.keys()].sort()).toEqual(['outer', 'outer.inner', 'outer.inner.inner_bn', 'outer.inner.inner_fc', 'outer.outer_fc']);
    expect(s.get('outer.inner')!.parameterMem).toBe(bytesOf(inner.trainableWeights));
    expect(s.get('outer.inner')!.bufferMem).toBe(bytesOf(inner.nonTrainableWeights));
    expect(s.get('outer.inner.inner_bn')!.depth).toBe(3);
    // Backward visits the nested model's layers inside the nested model's own backward.
    expect(s.get('outer.inner')!.snapshots['Pre-Backward']).toHaveLength(1);
    expect(s.get('outer.inner.inner_fc')!.snapshots['Post-Backward']).toHaveLength(1);
    // Depth limits and natural order in the display.
    expect(tracker.formatModulewiseSnapshots({ depth: 2 }).match(/^Module: .*$/gm)).toEqual([
      'Module:  outer',
      'Module:  outer.inner',
      'Module:  outer.outer_fc',
    ]);
    expect(tracker.formatModulewiseSnapshots({ depth: 3 }).match(/^Module: .*$/gm)).toHaveLength(5);
  });

  it('a functional model with two branches, trained with fit', async () => {
    const input = tfl.input({ shape: [6], name: 'x' });
    const a = tfl.layers.dense({ name: 'branch_a', units: 5 }).apply(input) as tfl.SymbolicTensor;
    const b = tfl.layers.dense({ name: 'branch_b', units: 3, activation: 'tanh' }).apply(input) as tfl.SymbolicTensor;
    const joined = tfl.layers.concatenate({ name: 'join' }).apply([a, b]) as tfl.SymbolicTensor;
    const normed = tfl.layers.batchNormalization({ name: 'norm' }).apply(joined) as tfl.SymbolicTensor;
    const out = tfl.layers.dense({ name: 'head', units: 2 }).apply(normed) as tfl.SymbolicTensor;
    const model = tfl.model({ name: 'func', inputs: input, outputs: out });
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([4, 6], 0, 1, 'float32', 6);
    const ys = tf.randomNormal([4, 2], 0, 1, 'float32', 7);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs, ys);
    await tracker.track(() => model.fit(xs, ys, { batchSize: 4, epochs: 1, verbose: 0 }));
    expectTrainingCategories(tracker, model, 'func', (4 * 6 + 4 * 2) * 4);
    const s = stats(tracker);
    expect([...s.keys()].sort()).toEqual(['func', 'func.branch_a', 'func.branch_b', 'func.head', 'func.join', 'func.norm']);
    expect(s.get('func.join')!.inputMem).toBe(4 * (5 + 3) * 4);
    expect(s.get('func.join')!.outputMem).toBe(4 * 8 * 4);
  });

  it('a view of a tensor made before tracking counts it (Activation); a view of a variable alive before does not', () => {
    const before = tf.ones([8]); // 32 B, unknown until met
    const weight = tf.variable(tf.ones([16])); // 64 B, a registered variable: known from the start
    const tracker = new MemTracker();
    const views = tracker.track(() => [tf.reshape(before, [2, 4]), tf.reshape(weight, [4, 4])]);
    expect(views.map((v) => v.dataId)).toEqual([before.dataId, weight.dataId]);
    // Nothing was allocated while tracking; meeting `before` through its view adopts it.
    expect(tracker.snapshot('current')['cpu']).toMatchObject({ Activation: 32, Total: 32 });
    tf.dispose([...views, before, weight]);
  });

  it('to a sink of the fast form, a storage is announced once: when made while tracking, or when first met if made before', () => {
    const before = tf.ones([8]);
    const allocs: number[] = [];
    const frees: number[] = [];
    const session = tfjsAdapter.attach({
      onStorageAlloc: (s) => allocs.push(s.id),
      onStorageFree: (s) => frees.push(s.id),
      onStorageBatch: (batch: Float64Array, length: number) => {
        for (let at = 0; at < length; at += 2) (batch[at + 1]! >= 0 ? allocs : frees).push(batch[at]!);
      },
    });
    try {
      const made = tf.zeros([4]);
      const views = [tf.reshape(made, [2, 2]), tf.clone(made), tf.reshape(before, [2, 4]), tf.clone(before)];
      // One ref each: the adapter remembers no ref for a batch sink, so asking again would meet `before` again.
      const madeRef = session.tensor(made);
      const beforeRef = session.tensor(before);
      const madeId = madeRef.storage.id;
      const beforeId = beforeRef.storage.id;
      expect([madeRef.storage.adopted, beforeRef.storage.adopted]).toEqual([false, true]);
      expect(allocs.filter((id) => id === madeId)).toHaveLength(1);
      // The first meeting adopts it: the views and the ref met later find it kept.
      expect(allocs.filter((id) => id === beforeId)).toHaveLength(1);
      tf.dispose([...views, made, before]);
      expect(frees).toEqual([madeId, beforeId]);
    } finally {
      session.detach();
    }
  });

  it('storage events reach the tracker as they happen: a snapshot between two ops counts both', () => {
    const tracker = new MemTracker();
    using _tracking = tracker.start();
    const first = tf.zeros([4]); // 16 B
    const a = tf.ones([100]); // 400 B
    expect(tracker.snapshot('current').cpu).toMatchObject({ Activation: 416, Total: 416 });
    a.dispose();
    expect(tracker.snapshot('current').cpu).toMatchObject({ Activation: 16, Total: 16 });
    expect(tracker.snapshot('peak').cpu).toMatchObject({ Activation: 416, Total: 416 });
    // Made before a phase change, an allocation keeps the phase it was made in.
    const b = tf.ones([10]); // 40 B, Activation
    const optimizer = tf.train.sgd(0.1);
    const w = tf.variable(tf.ones([2]));
    tracker.trackExternal(optimizer);
    optimizer.applyGradients({ [w.name]: tf.ones([2]) });
    // Optstate is SGD's learning-rate scalar `c` (4 B, classified when the tracker learnt the
    // optimizer); `b`, made before the step began, stays Activation.
    expect(tracker.snapshot('current').cpu!.Optstate).toBe(4);
    tf.dispose([first, b, w]);
  });

  it('a storage announced when met and then freed is gone: events apply in the order they came', () => {
    const before = tf.ones([8]); // 32 B, made before tracking
    const tracker = new MemTracker();
    using _tracking = tracker.start();
    const first = tf.zeros([4]); // 16 B
    const view = tf.reshape(before, [2, 4]); // meets `before`: announced
    tf.dispose([view, before]); // freed as the storage adopted when met
    expect(tracker.snapshot('current').cpu).toMatchObject({ Activation: 16, Total: 16 });
    first.dispose();
  });

  it('weights built lazily by the first tracked call are Parameter, not Activation', () => {
    // A bare layer as the tracked module: apply() builds its weights on first use.
    const layer = tfl.layers.dense({ name: 'lazy_fc', units: 5 });
    const x = tf.ones([2, 3]);
    const tracker = new MemTracker();
    tracker.trackExternal(layer, x);
    tracker.track(() => {
      (layer.apply(x) as tf.Tensor).dispose();
    });
    expect(bytesOf(layer.trainableWeights)).toBe((3 * 5 + 5) * 4);
    expect(tracker.snapshot().cpu).toMatchObject({ Parameter: (3 * 5 + 5) * 4, Activation: 0, Other: 2 * 3 * 4 });
    expect(stats(tracker).get('lazy_fc')!.parameterMem).toBe((3 * 5 + 5) * 4);
    x.dispose();
  });

  it('nested trackers each keep their own books, and the outer one keeps tracking after the inner stops', () => {
    const run = createDemoRun({ inputs: 4, hidden: 8, outputs: 2, batchSize: 2 });
    const outer = new MemTracker();
    const inner = new MemTracker();
    outer.trackExternal(run.model, run.optimizer, run.xs, run.ys);
    inner.trackExternal(run.model, run.optimizer);
    {
      using _outer = outer.start();
      run.train(1);
      inner.track(() => run.train(1));
      run.train(1);
    }
    const root = (t: MemTracker) => stats(t).get('demo')!;
    expect(root(outer).snapshots['Post-Backward']).toHaveLength(3);
    expect(root(inner).snapshots['Post-Backward']).toHaveLength(1);
    // Both see the same weights and optimizer state; only the outer was given the data.
    expect(inner.snapshot().cpu).toMatchObject({ Parameter: bytesOf(run.model.trainableWeights), Optstate: adamStateBytes(run.model), Other: 0 });
    expect(outer.snapshot().cpu).toMatchObject({ Parameter: bytesOf(run.model.trainableWeights), Optstate: adamStateBytes(run.model), Other: 48 });
    expect(outer.tracking || inner.tracking).toBe(false);
    run.dispose();
  });

  it('module tables of memory that rounds to 0 in the unit keep their columns and say so, not "No memory tracked."', async () => {
    const model = tfl.sequential({ name: 'tiny', layers: [tfl.layers.dense({ inputShape: [3], units: 2 })] });
    model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
    const xs = tf.ones([4, 3]);
    const ys = tf.ones([4, 2]);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs, ys);
    await tracker.track(() => model.fit(xs, ys, { epochs: 1, verbose: 0 }));
    const table = tracker.formatModulewiseSnapshots({ units: 'GiB', tabulate: true });
    expect(table).not.toContain('No memory tracked.');
    expect(table).toContain('State & Call');
    expect(table).toContain('(every total rounds to 0.00 GiB)');
    tf.dispose([xs, ys]);
  });

  it('rejects bad units, types and external objects with MemscopeError', () => {
    const tracker = new MemTracker();
    expect(() => tracker.displaySnapshot('current', { units: 'kb' as never })).toThrow(MemscopeError);
    expect(() => tracker.displayModulewiseSnapshots({ units: 'TiB' as never })).toThrow(/unknown unit "TiB"/);
    expect(() => tracker.snapshot('all' as never)).toThrow(MemscopeError);
    tracker.trackExternal(new Map());
    expect(() => tracker.start()).toThrow(/argument 0 is a Map, which is not a tfjs model, optimizer or tensor/);
    expect(tracker.tracking).toBe(false);
    // Inside a plain object or a list, the error names where.
    expect(() => tracker.trackExternal({ foo: 1 })).toThrow(/^trackExternal: argument 0 \(\.foo\) is number 1; expected a model/);
    expect(() => tracker.trackExternal(tf.scalar(1), [{ inputs: ['x'] }])).toThrow(/^trackExternal: argument 1 \(\[0\]\.inputs\[0\]\) is /);
  });

  it("propagates the user's exception unchanged, stops, and restores every patch", () => {
    const model = mlp('boom');
    const optimizer = tf.train.adam(0.01);
    const xs = tf.randomNormal([2, 8]);
    const engine = tf.engine() as unknown as Record<string, unknown>;
    const engineProto = Object.getPrototypeOf(engine) as Record<string, unknown>;
    // Descriptors, not values: reading the engine's getters would initialise backends.
    const patchable = (o: Record<string, unknown>) =>
      new Map(Object.entries(Object.getOwnPropertyDescriptors(o)).map(([k, d]) => [k, d.value ?? d.get]));
    const engineBefore = patchable(engineProto);
    const ownBefore = patchable(engine);
    const callBefore = model.layers.map((l) => l.call);
    const applyGradientsBefore = optimizer.applyGradients;

    const tracker = new MemTracker();
    tracker.trackExternal(model, optimizer);
    const userError = new RangeError('user code failed mid-backward');
    let caught: unknown;
    try {
      tracker.track(() => {
        optimizer.minimize(() => {
          const y = model.apply(xs, { training: true }) as tf.Tensor;
          if (y.size > 0) throw userError;
          return tf.sum(y) as tf.Scalar;
        });
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBe(userError);
    expect(tracker.tracking).toBe(false);
    expect(patchable(engineProto)).toEqual(engineBefore);
    expect(patchable(engine)).toEqual(ownBefore);
    expect(model.layers.map((l) => l.call)).toEqual(callBefore);
    expect(optimizer.applyGradients).toBe(applyGradientsBefore);
    // The forward that ran before the error was recorded.
    expect(stats(tracker).get('boom')!.snapshots['Pre-Forward']).toHaveLength(1);
  });

  it('a model compiled, or compiled again, while tracking: its new optimizer is tracked, its state Optstate; compile is restored at stop', async () => {
    const model = mlp('late');
    model.compile({ optimizer: tf.train.sgd(0.01), loss: 'meanSquaredError' });
    const compileBefore = Object.prototype.hasOwnProperty.call(model, 'compile');
    const xs = tf.randomNormal([6, 8], 0, 1, 'float32', 3);
    const ys = tf.randomNormal([6, 4], 0, 1, 'float32', 4);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs, ys);
    await tracker.track(async () => {
      await model.fit(xs, ys, { batchSize: 6, epochs: 1, verbose: 0 });
      // Fine-tuning: the same model, a new optimizer.
      model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
      await model.fit(xs, ys, { batchSize: 6, epochs: 1, verbose: 0 });
    });
    const now = tracker.snapshot('current').cpu!;
    // Adam's m, v and two scalars, and SGD's learning-rate scalar (4 B), still alive.
    expect(now.Optstate).toBe(adamStateBytes(model) + 4);
    expect(now.Activation).toBe(0);
    expect(Object.prototype.hasOwnProperty.call(model, 'compile')).toBe(compileBefore);
    tf.dispose([xs, ys]);
  });

  it('a tensor made before start() and read by a kernel is counted once met, with or without another tracker attached', () => {
    const big = tf.zeros([1000]); // 4000 B
    const withOnly = (extra: boolean): number => {
      const tracker = new MemTracker();
      const other = extra ? tfjsAdapter.attach({ onKernelStart: () => {} }) : null;
      try {
        const out = tracker.track(() => tf.add(big, 1));
        const total = tracker.snapshot('current').cpu!.Total;
        out.dispose();
        return total;
      } finally {
        other?.detach();
      }
    };
    expect(withOnly(false)).toBe(8000);
    expect(withOnly(true)).toBe(8000);
    big.dispose();
  });

  it('a variable made before start() and never given to trackExternal stays uncounted when an optimizer step assigns it', () => {
    const x = tf.randomNormal([8, 10]);
    const w = tf.variable(tf.zeros([10, 20]), true, 'bare_w'); // 800 B
    const optimizer = tf.train.sgd(0.1);
    const tracker = new MemTracker();
    tracker.trackExternal(optimizer);
    tracker.track(() => {
      for (let i = 0; i < 2; i++) optimizer.minimize(() => tf.sum(tf.matMul(x, w)) as tf.Scalar);
    });
    // PyTorch updates such a weight in place and never counts it: its new storage is not optimizer state.
    expect(tracker.snapshot('current').cpu!.Optstate).toBe(4);
    tf.dispose([x, w]);
    optimizer.dispose();
  });

  it('restarted after tf.disposeVariables(), or new, a tracker does not count the disposed weights and optimizer state', async () => {
    const model = mlp('gone');
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomNormal([6, 8], 0, 1, 'float32', 5);
    const ys = tf.randomNormal([6, 4], 0, 1, 'float32', 6);
    const tracker = new MemTracker();
    tracker.trackExternal(model, xs, ys);
    await tracker.track(() => model.fit(xs, ys, { batchSize: 6, epochs: 1, verbose: 0 }));
    expect(tracker.snapshot('current').cpu!.Parameter).toBeGreaterThan(0);
    tf.disposeVariables();
    const inputs = (6 * 8 + 6 * 4) * 4;
    tracker.start();
    tracker.stop();
    expect(tracker.snapshot('current').cpu).toMatchObject({ Parameter: 0, Buffer: 0, Optstate: 0, Other: inputs, Total: inputs });
    const fresh = new MemTracker();
    fresh.trackExternal(model);
    fresh.start();
    fresh.stop();
    expect(fresh.snapshot('current').cpu?.Total ?? 0).toBe(0);
    tf.dispose([xs, ys]);
  });
});
