import { describe, it, expect, beforeAll } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import type { EventContext, MemoryEventSink, ModuleRef, StorageRef, TensorRef } from '../../src/core/events.js';
import { annotate, tfjsAdapter } from '../../src/tfjs/index.js';
import { activeInstallation } from '../../src/tfjs/adapter.js';
import { useBackend } from './support/backends.js';

beforeAll(async () => {
  await useBackend('cpu');
});

const paths = (m: ModuleRef): string[] => [m.path, ...m.children.flatMap(paths)];
const bytesOf = (ts: readonly TensorRef[]) => ts.reduce((n, t) => n + t.storage.bytes, 0);

/** Records module-related events as short lines. */
function moduleLog(): { log: string[]; sink: MemoryEventSink } {
  const log: string[] = [];
  return {
    log,
    sink: {
      onModuleEnter: (m, _i, c) => log.push(`enter ${m.path} [${c.phase}]`),
      onModuleExit: (m, _o, c) => log.push(`exit ${m.path} [${c.phase}]`),
      onBackwardModuleEnter: (m, c) => log.push(`bw-enter ${m.path} [${c.phase}]`),
      onBackwardModuleExit: (m, c) => log.push(`bw-exit ${m.path} [${c.phase}]`),
      onGradientStart: (xs, c) => log.push(`grad-start ${xs.length} [${c.phase}]`),
      onGradientEnd: (p, c) => log.push(`grad-end ${p.filter((x) => x.grad !== null).length} [${c.phase}]`),
      onOptimizerStepStart: (o, c) => log.push(`step-start ${o.className} step=${c.step} [${c.phase}]`),
      onOptimizerStepEnd: (o, c) => log.push(`step-end ${o.className} step=${c.step} [${c.phase}]`),
    },
  };
}

function nestedSequential() {
  const inner = tfl.sequential({
    name: 'encoder',
    layers: [tfl.layers.dense({ units: 4, inputShape: [3], name: 'fc1' }), tfl.layers.dense({ units: 4, name: 'fc2' })],
  });
  return tfl.sequential({ name: 'model', layers: [inner, tfl.layers.batchNormalization({ name: 'bn' }), tfl.layers.dense({ units: 2, name: 'head' })] });
}

describe('layers as modules', () => {
  it('nested Sequential: fully qualified paths, forward order, parameters and buffers read live', () => {
    const model = nestedSequential();
    const { log, sink } = moduleLog();
    const s = tfjsAdapter.attach(sink);
    const root = s.module(model);
    expect(paths(root)).toEqual(['model', 'model.encoder', 'model.encoder.fc1', 'model.encoder.fc2', 'model.bn', 'model.head']);
    expect(root.children.map((c) => c.className)).toEqual(['Sequential', 'BatchNormalization', 'Dense']);
    expect(s.module(model)).toBe(root); // idempotent

    const y = tf.tidy(() => model.predict(tf.ones([5, 3])) as tf.Tensor);
    y.dispose();
    expect(log).toMatchInlineSnapshot(`
      [
        "enter model [forward]",
        "enter model.encoder [forward]",
        "enter model.encoder.fc1 [forward]",
        "exit model.encoder.fc1 [forward]",
        "enter model.encoder.fc2 [forward]",
        "exit model.encoder.fc2 [forward]",
        "exit model.encoder [forward]",
        "enter model.bn [forward]",
        "exit model.bn [forward]",
        "enter model.head [forward]",
        "exit model.head [forward]",
        "exit model [forward]",
      ]
    `);
    const [encoder, bn, head] = root.children as [ModuleRef, ModuleRef, ModuleRef];
    expect(encoder.parameters()).toEqual([]); // a container's weights are its children's
    expect(bytesOf(encoder.children[0]!.parameters())).toBe((3 * 4 + 4) * 4);
    expect(bytesOf(bn.parameters())).toBe(2 * 4 * 4); // gamma, beta
    expect(bytesOf(bn.buffers())).toBe(2 * 4 * 4); // moving mean, moving variance
    expect(bytesOf(head.parameters())).toBe((4 * 2 + 2) * 4);
    // The sum over modules is every trainable weight of the model, once.
    const all = paths(root).length;
    const walk = (m: ModuleRef): TensorRef[] => [...m.parameters(), ...m.children.flatMap(walk)];
    expect(all).toBe(6);
    expect(bytesOf(walk(root))).toBe(model.trainableWeights.reduce((n, w) => n + w.read().size * 4, 0));
    s.detach();
  });

  it('a model instrumented on its own first becomes a child when its parent is instrumented', () => {
    const model = nestedSequential();
    const s = tfjsAdapter.attach({});
    const encoder = s.module(model.layers[0]);
    expect(paths(encoder)).toEqual(['encoder', 'encoder.fc1', 'encoder.fc2']);
    const root = s.module(model);
    expect(root.children[0]).toBe(encoder);
    expect(encoder.parent).toBe(root);
    expect(paths(root)).toEqual(['model', 'model.encoder', 'model.encoder.fc1', 'model.encoder.fc2', 'model.bn', 'model.head']);
    s.detach();
  });

  it('layers added after instrumentation join when module() is called again', () => {
    const model = tfl.sequential({ name: 'grow', layers: [tfl.layers.dense({ units: 3, inputShape: [2], name: 'first' })] });
    const s = tfjsAdapter.attach({});
    const root = s.module(model);
    model.add(tfl.layers.dense({ units: 1, name: 'second' }));
    expect(paths(root)).toEqual(['grow', 'grow.first']);
    expect(s.module(model)).toBe(root);
    expect(paths(root)).toEqual(['grow', 'grow.first', 'grow.second']);
    s.detach();
  });

  it('functional model with a nested Sequential: paths and an implicit root frame for predict', () => {
    const input = tfl.input({ shape: [3], name: 'x' });
    const a = tfl.layers.dense({ units: 4, name: 'left' }).apply(input) as tfl.SymbolicTensor;
    const b = tfl.layers.dense({ units: 4, name: 'right' }).apply(input) as tfl.SymbolicTensor;
    const merged = tfl.layers.concatenate({ name: 'cat' }).apply([a, b]) as tfl.SymbolicTensor;
    const tower = tfl.sequential({ name: 'tower', layers: [tfl.layers.dense({ units: 3, inputShape: [8], name: 't1' })] });
    const out = tower.apply(merged) as tfl.SymbolicTensor;
    const model = tfl.model({ inputs: input, outputs: out, name: 'func' });
    const { log, sink } = moduleLog();
    const s = tfjsAdapter.attach(sink);
    const root = s.module(model, 'net');
    expect(paths(root)).toEqual(['net', 'net.left', 'net.right', 'net.cat', 'net.tower', 'net.tower.t1']);
    tf.tidy(() => model.predict(tf.ones([2, 3])));
    expect(log).toMatchInlineSnapshot(`
      [
        "enter net [forward]",
        "enter net.right [forward]",
        "exit net.right [forward]",
        "enter net.left [forward]",
        "exit net.left [forward]",
        "enter net.cat [forward]",
        "exit net.cat [forward]",
        "enter net.tower [forward]",
        "enter net.tower.t1 [forward]",
        "exit net.tower.t1 [forward]",
        "exit net.tower [forward]",
        "exit net [forward]",
      ]
    `);
    // Calling the root model directly runs its own call: same frames, explicit.
    log.length = 0;
    tf.tidy(() => model.apply(tf.ones([2, 3])) as tf.Tensor);
    expect(log[0]).toBe('enter net [forward]');
    expect(log.at(-1)).toBe('exit net [forward]');
    expect(log).toHaveLength(12);
    s.detach();
  });

  it('3-layer MLP trained with trainOnBatch: forward, backward enter/exit order, optimizer step', async () => {
    const model = tfl.sequential({
      name: 'mlp',
      layers: [
        tfl.layers.dense({ units: 8, inputShape: [4], activation: 'relu', name: 'l1' }),
        tfl.layers.dense({ units: 8, activation: 'relu', name: 'l2' }),
        tfl.layers.dense({ units: 2, name: 'l3' }),
      ],
    });
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const { log, sink } = moduleLog();
    const s = tfjsAdapter.attach(sink);
    s.module(model);
    s.optimizer(model.optimizer);
    const x = tf.ones([3, 4]);
    const y = tf.zeros([3, 2]);
    await model.trainOnBatch(x, y);
    expect(log).toMatchInlineSnapshot(`
      [
        "grad-start 6 [none]",
        "enter mlp [forward]",
        "enter mlp.l1 [forward]",
        "exit mlp.l1 [forward]",
        "enter mlp.l2 [forward]",
        "exit mlp.l2 [forward]",
        "enter mlp.l3 [forward]",
        "exit mlp.l3 [forward]",
        "exit mlp [forward]",
        "bw-enter mlp [backward]",
        "bw-enter mlp.l3 [backward]",
        "bw-exit mlp.l3 [backward]",
        "bw-enter mlp.l2 [backward]",
        "bw-exit mlp.l2 [backward]",
        "bw-enter mlp.l1 [backward]",
        "bw-exit mlp.l1 [backward]",
        "bw-exit mlp [backward]",
        "grad-end 6 [none]",
        "step-start Adam step=0 [optimizer]",
        "step-end Adam step=1 [optimizer]",
      ]
    `);
    x.dispose();
    y.dispose();
    s.detach();
  });

  it('backward order through a functional model with branches and a nested Sequential (fit)', async () => {
    const input = tfl.input({ shape: [3], name: 'x' });
    const a = tfl.layers.dense({ units: 4, name: 'left' }).apply(input) as tfl.SymbolicTensor;
    const b = tfl.layers.dense({ units: 4, name: 'right' }).apply(input) as tfl.SymbolicTensor;
    const merged = tfl.layers.concatenate({ name: 'cat' }).apply([a, b]) as tfl.SymbolicTensor;
    const tower = tfl.sequential({ name: 'tower', layers: [tfl.layers.dense({ units: 3, inputShape: [8], name: 't1' }), tfl.layers.dense({ units: 1, name: 't2' })] });
    const model = tfl.model({ inputs: input, outputs: tower.apply(merged) as tfl.SymbolicTensor, name: 'func' });
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const { log, sink } = moduleLog();
    const s = tfjsAdapter.attach(sink);
    s.module(model);
    s.optimizer(model.optimizer);
    const x = tf.ones([4, 3]);
    const y = tf.zeros([4, 1]);
    await model.fit(x, y, { epochs: 1, batchSize: 4, verbose: 0 });
    expect(log.filter((l) => l.startsWith('bw-'))).toMatchInlineSnapshot(`
      [
        "bw-enter func [backward]",
        "bw-enter func.tower [backward]",
        "bw-enter func.tower.t2 [backward]",
        "bw-exit func.tower.t2 [backward]",
        "bw-enter func.tower.t1 [backward]",
        "bw-exit func.tower.t1 [backward]",
        "bw-exit func.tower [backward]",
        "bw-enter func.cat [backward]",
        "bw-exit func.cat [backward]",
        "bw-enter func.left [backward]",
        "bw-exit func.left [backward]",
        "bw-enter func.right [backward]",
        "bw-exit func.right [backward]",
        "bw-exit func [backward]",
      ]
    `);
    expect(log.filter((l) => l.startsWith('step-'))).toEqual(['step-start SGD step=0 [optimizer]', 'step-end SGD step=1 [optimizer]']);
    tf.dispose([x, y]);
    s.detach();
  });

  it('backward attribution: kernels in backward run with ctx.module set to the layer that recorded them', async () => {
    const model = tfl.sequential({ name: 'm', layers: [tfl.layers.dense({ units: 3, inputShape: [2], name: 'a' }), tfl.layers.dense({ units: 1, name: 'b' })] });
    const seen = new Map<string, Set<string>>();
    const s = tfjsAdapter.attach({
      onKernelStart: (k, c: EventContext) => {
        const key = `${c.phase}:${c.module?.path ?? '-'}`;
        if (!seen.has(key)) seen.set(key, new Set());
        seen.get(key)!.add(k.name);
      },
    });
    s.module(model);
    const opt = tf.train.sgd(0.1);
    s.optimizer(opt);
    const x = tf.ones([4, 2]);
    opt.minimize(() => tf.mean(tf.square(model.apply(x) as tf.Tensor)) as tf.Scalar);
    expect([...seen.keys()].sort()).toEqual([
      'backward:-', // the loss's own gradient, outside the model
      'backward:m.a',
      'backward:m.b',
      'forward:-',
      'forward:m.a',
      'forward:m.b',
      'optimizer:-',
    ]);
    expect([...seen.get('backward:m.a')!]).toContain('BatchMatMul'); // MatMul's gradient
    x.dispose();
    s.detach();
  });
});

describe('optimizers', () => {
  function mlpWithBatchNorm() {
    const model = tfl.sequential({
      name: 'net',
      layers: [
        tfl.layers.dense({ units: 6, inputShape: [4], name: 'd1' }),
        tfl.layers.batchNormalization({ name: 'bn' }),
        tfl.layers.dense({ units: 2, name: 'd2' }),
      ],
    });
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    return model;
  }
  const trainableBytes = (m: tfl.LayersModel) => m.trainableWeights.reduce((n, w) => n + w.read().size * 4, 0);

  for (const how of ['fit', 'trainOnBatch', 'minimize'] as const) {
    it(`Adam with ${how}: step events, ctx.step, phase, and its state variables`, async () => {
      const model = mlpWithBatchNorm();
      const opt = model.optimizer as tf.AdamOptimizer;
      const steps: string[] = [];
      const allocInStep: number[] = [];
      const s = tfjsAdapter.attach({
        onOptimizerStepStart: (o, c) => steps.push(`start ${c.step} ${c.phase}`),
        onOptimizerStepEnd: (o, c) => steps.push(`end ${c.step} ${c.phase}`),
        onStorageAlloc: (st, c) => {
          if (c.phase === 'optimizer') allocInStep.push(st.bytes);
        },
      });
      s.module(model);
      const optRef = s.optimizer(opt);
      expect(s.optimizer(opt)).toBe(optRef);
      expect(optRef.className).toBe('Adam');
      // accBeta1 and accBeta2 exist from the constructor; the moments are made on the first step.
      expect(optRef.stateVariables().map((t) => t.shape)).toEqual([[], []]);
      const x = tf.randomNormal([8, 4], 0, 1, 'float32', 1);
      const y = tf.randomNormal([8, 2], 0, 1, 'float32', 2);
      if (how === 'fit') await model.fit(x, y, { epochs: 2, batchSize: 8, verbose: 0 });
      else if (how === 'trainOnBatch') {
        await model.trainOnBatch(x, y);
        await model.trainOnBatch(x, y);
      } else {
        for (let i = 0; i < 2; i++) {
          opt.minimize(() => tf.losses.meanSquaredError(y, model.apply(x, { training: true }) as tf.Tensor) as tf.Scalar);
        }
      }
      expect(steps).toEqual(['start 0 optimizer', 'end 1 optimizer', 'start 1 optimizer', 'end 2 optimizer']);
      expect(activeInstallation()!.ctx.step).toBe(2);
      // Adam's m and v for every trainable weight, plus accBeta1 and accBeta2.
      const state = optRef.stateVariables();
      expect(state.reduce((n, t) => n + t.storage.bytes, 0)).toBe(2 * trainableBytes(model) + 2 * 4);
      expect(state.every((t) => typeof t.variableName === 'string')).toBe(true);
      expect(allocInStep.length).toBeGreaterThan(0);
      x.dispose();
      y.dispose();
      s.detach();
    });
  }

  it('state of other optimizers is found generically (own properties)', () => {
    const w = tf.variable(tf.ones([5]));
    const s = tfjsAdapter.attach({});
    const cases: Array<[tf.Optimizer, number]> = [
      [tf.train.sgd(0.1), 4], // the learning-rate scalar it keeps
      [tf.train.momentum(0.1, 0.9), 5 * 4 + 2 * 4], // accumulator + lr and momentum scalars
      [tf.train.rmsprop(0.1), 2 * 5 * 4], // accumulatedMeanSquares + accumulatedMoments
      [tf.train.adagrad(0.1), 5 * 4],
      [tf.train.adadelta(0.1), 2 * 5 * 4],
      [tf.train.adamax(0.1), 2 * 5 * 4 + 2 * 4], // moments + iteration + accBeta1
    ];
    for (const [opt, bytes] of cases) {
      const ref = s.optimizer(opt);
      opt.minimize(() => tf.sum(tf.square(w)) as tf.Scalar, false, [w]);
      expect(ref.stateVariables().reduce((n, t) => n + t.storage.bytes, 0), ref.className).toBe(bytes);
    }
    s.detach();
    w.dispose();
  });
});

describe('tensors, storages and variables', () => {
  it('tensors sharing a dataId share one StorageRef; bytes are counted once', () => {
    const allocs: StorageRef[] = [];
    const frees: StorageRef[] = [];
    const s = tfjsAdapter.attach({ onStorageAlloc: (st) => allocs.push(st), onStorageFree: (st) => frees.push(st) });
    const a = tf.ones([2, 3]);
    const r = tf.reshape(a, [6]);
    const c = tf.clone(r);
    expect(allocs).toHaveLength(1);
    expect(s.tensor(r).storage).toBe(s.tensor(a).storage);
    expect(s.tensor(c).storage).toBe(allocs[0]);
    expect(allocs[0]!.bytes).toBe(24);
    a.dispose();
    r.dispose();
    expect(frees).toHaveLength(0);
    c.dispose();
    expect(frees).toEqual(allocs);
    s.detach();
  });

  it('dtypes: bool 1 B, int32 4 B, complex64 8 B per element, string = encoded bytes', () => {
    const s = tfjsAdapter.attach({});
    const b = tf.tensor1d([true, false, true], 'bool');
    const i = tf.tensor1d([1, 2], 'int32');
    const c = tf.complex([1, 2, 3], [4, 5, 6]);
    const str = tf.tensor1d(['ab', 'cdé']);
    expect(s.tensor(b).storage.bytes).toBe(3);
    expect(s.tensor(i).storage.bytes).toBe(8);
    expect(s.tensor(c).storage.bytes).toBe(24);
    expect(s.tensor(str).storage.bytes).toBe(2 + 4); // 'é' is two UTF-8 bytes
    tf.dispose([b, i, c, str]);
    s.detach();
  });

  it('assign swaps the storage but the variable keeps its identity', () => {
    const log: string[] = [];
    const s = tfjsAdapter.attach({
      onTensorCreate: (t) => t.variableName !== undefined && log.push(`create ${t.variableName}`),
      onTensorDispose: (t) => t.variableName !== undefined && log.push(`dispose ${t.variableName}`),
      onVariableAssign: (v, prev) => log.push(`assign ${v.variableName} ${prev.id}->${v.storage.id}`),
    });
    const v = tf.variable(tf.zeros([4]), true, 'w');
    const ref = s.tensor(v);
    const before = ref.storage;
    const next = tf.ones([4]);
    v.assign(next);
    expect(s.tensor(v)).toBe(ref);
    expect(ref.id).toBe(v.id);
    expect(ref.storage).toBe(s.tensor(next).storage);
    expect(ref.storage).not.toBe(before);
    expect(ref.trainable).toBe(true);
    expect(log).toEqual(['create w', `assign w ${before.id}->${ref.storage.id}`]);
    v.dispose();
    next.dispose();
    expect(log.at(-1)).toBe('dispose w');
    s.detach();
  });

  it('storages made before install: registered variables are known, others are adopted when first met', () => {
    const init = tf.ones([3]);
    const v = tf.variable(init, true, 'early_var');
    init.dispose(); // the variable now holds the dataId alone
    const t = tf.ones([1237]);
    const allocs: StorageRef[] = [];
    const s = tfjsAdapter.attach({ onStorageAlloc: (st) => allocs.push(st) });
    const known = [...s.liveStorages()];
    expect(known.map((k) => k.bytes)).toContain(12);
    expect(known.map((k) => k.bytes)).not.toContain(1237 * 4);
    const ref = s.tensor(t); // adopted now, announced to sinks
    expect(allocs).toEqual([ref.storage]);
    expect(ref.storage.adopted).toBe(true);
    const vStorage = s.tensor(v).storage;
    v.dispose();
    t.dispose();
    expect([...s.liveStorages()]).not.toContain(vStorage);
    expect([...s.liveStorages()]).not.toContain(ref.storage);
    s.detach();
  });
});

describe('scopes, annotations, gradients, devices', () => {
  it('tidy scopes, annotations (sync and async) and gradient pairs', async () => {
    const log: string[] = [];
    const s = tfjsAdapter.attach({
      onScopeStart: (n, k) => log.push(`start ${k}:${n}`),
      onScopeEnd: (n, k) => log.push(`end ${k}:${n}`),
      onGradientEnd: (pairs) => log.push(`grads ${pairs.map((p) => `${p.x.shape}->${p.grad?.shape}`).join(',')}`),
    });
    annotate('step', () => tf.tidy('outer', () => tf.ones([1])));
    await annotate('async-region', async () => {
      await Promise.resolve();
      log.push('inside');
    });
    const x = tf.ones([2]);
    tf.tidy(() => tf.grads((a: tf.Tensor) => tf.sum(tf.square(a)))([x]));
    expect(log).toMatchInlineSnapshot(`
      [
        "start annotation:step",
        "start tidy:outer",
        "end tidy:outer",
        "end annotation:step",
        "start annotation:async-region",
        "inside",
        "end annotation:async-region",
        "start tidy:unnamed scope",
        "start tidy:unnamed scope",
        "start tidy:forward",
        "start op:square",
        "end op:square",
        "start op:sum",
        "end op:sum",
        "end tidy:forward",
        "start tidy:backward",
        "start op:reshape",
        "end op:reshape",
        "start op:mul",
        "end op:mul",
        "start tidy:unnamed scope",
        "end tidy:unnamed scope",
        "start tidy:unnamed scope",
        "start op:cast",
        "end op:cast",
        "start op:mul",
        "end op:mul",
        "start op:mul",
        "end op:mul",
        "end tidy:unnamed scope",
        "end tidy:backward",
        "grads 2->2",
        "end tidy:unnamed scope",
        "end tidy:unnamed scope",
      ]
    `);
    const err = new Error('x');
    await expect(annotate('fails', async () => { throw err; })).rejects.toBe(err);
    expect(log.slice(-2)).toEqual(['start annotation:fails', 'end annotation:fails']);
    x.dispose();
    s.detach();
    // Without a session annotate is a plain call.
    expect(annotate('none', () => 5)).toBe(5);
  });

  it('kernel events: inputs, outputs, composite customGrad kernels with nested kernels; seq increases by one per event', () => {
    const log: string[] = [];
    let lastSeq = -1;
    let seqOk = true;
    const s = tfjsAdapter.attach({
      onKernelStart: (k, c) => {
        seqOk &&= c.seq === lastSeq + 1 || lastSeq === -1;
        lastSeq = c.seq;
        log.push(`start ${k.name}${k.composite ? ' (composite)' : ''} in=[${k.inputs.map((t) => t.shape.join('x')).join(',')}] kernel=${c.kernel}`);
      },
      onKernelEnd: (k, c) => {
        seqOk &&= c.seq === lastSeq + 1;
        lastSeq = c.seq;
        log.push(`end ${k.name} out=[${k.outputs.map((t) => t.shape.join('x')).join(',')}]`);
      },
    });
    const a = tf.ones([2, 3]);
    const b = tf.ones([3, 4]);
    const c = tf.matMul(a, b);
    expect(s.tensor(c).storage.bytes).toBe(2 * 4 * 4);
    const double = tf.customGrad(((x: tf.Tensor) => ({ value: tf.mul(x, 2), gradFunc: (dy: tf.Tensor) => tf.mul(dy, 2) })) as unknown as Parameters<typeof tf.customGrad>[0]) as unknown as (x: tf.Tensor) => tf.Tensor;
    const d = double(a);
    // Used inside an op, a composite kernel is named after the op.
    const loss = tf.losses.softmaxCrossEntropy(tf.oneHot(tf.tensor1d([0, 1], 'int32'), 3), tf.ones([2, 3]));
    expect(log.filter((l) => l.includes('composite'))).toEqual(['start customGrad (composite) in=[2x3] kernel=customGrad', 'start softmaxCrossEntropy__op (composite) in=[2x3,2x3] kernel=softmaxCrossEntropy__op']);
    log.splice(6);
    loss.dispose();
    expect(log).toMatchInlineSnapshot(`
      [
        "start BatchMatMul in=[2x3,3x4] kernel=BatchMatMul",
        "end BatchMatMul out=[2x4]",
        "start customGrad (composite) in=[2x3] kernel=customGrad",
        "start Multiply in=[2x3,] kernel=Multiply",
        "end Multiply out=[2x3]",
        "end customGrad out=[2x3]",
      ]
    `);
    expect(seqOk).toBe(true);
    tf.dispose([a, b, c, d]);
    s.detach();
  });

  it('current device and device memory on cpu', () => {
    const s = tfjsAdapter.attach({});
    expect(s.currentDevice()).toBe('cpu');
    expect(s.deviceMemory('cpu')).toBeNull();
    expect(s.deviceMemory('nonexistent')).toBeNull();
    s.detach();
  });
});
