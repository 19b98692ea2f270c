/**
 * PyTorch's test/profiler/test_memory_profiler.py ported to TensorFlow.js
 * (cpu backend), case by case, with inline expected outputs in PyTorch's text
 * formats. Where TFJS semantics force a different expectation the test pins
 * the TFJS truth and a comment says why. The list of ported / not ported
 * cases is in docs/MEMORY_PROFILER.md.
 *
 * TFJS facts that shape the expectations:
 * - Kernels never write their inputs; `Variable.assign` is the only mutation.
 *   An assign shows as `Variable.assign  T0(v0*), T0#1(v0) -> T0#1(v1)`: the
 *   variable's old storage is freed and the storage it now holds gets a new
 *   version (T0#1 is logical tensor 0's second storage).
 * - `tf.ones`/`tf.tensor` make tensors outside any kernel: `[memory] -> T0(v0)`.
 * - While a gradient tape records, every kernel clones the tensors backprop
 *   will need (nested `Identity` kernels, PyTorch's `aten::detach`).
 * - Backprop runs each gradient closure in its own tidy: those closures are the
 *   data-flow nodes of backward, named after the kernels they ran.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { formatCategories, formatDataFlow } from '../../src/analysis/format.js';
import { CATEGORY_ORDER, MemoryProfile, type Category, type TensorKey } from '../../src/analysis/memory-profile.js';
import { MemoryProfileTimeline } from '../../src/analysis/timeline.js';
import { MemoryProfileTimeline as FileMemoryProfileTimeline } from '../../src/analysis/timeline-node.js';
import { annotate } from '../../src/tfjs/annotate.js';
import { profile, type ProfileOptions } from '../../src/tfjs/profile.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

const ALL = { recordShapes: true, profileMemory: true, withStack: true } as const;

function record<T>(fn: () => T, extra: Omit<ProfileOptions, keyof typeof ALL> = {}) {
  return profile({ ...ALL, ...extra }, fn);
}

/** A layer with one scalar weight that scales its input (PyTorch test's ScaleLayer). */
class ScaleLayer extends tfl.layers.Layer {
  static className = 'ScaleLayer';
  private scale: tfl.LayerVariable | null = null;
  override build(): void {
    this.scale = this.addWeight('scale', [], 'float32', tfl.initializers.ones());
    this.built = true;
  }
  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    const x = Array.isArray(inputs) ? inputs[0]! : inputs;
    return tf.mul(x, this.scale!.read());
  }
  override computeOutputShape(shape: tfl.Shape | tfl.Shape[]): tfl.Shape | tfl.Shape[] {
    return shape;
  }
}

/**
 * A variable that alone holds its storage. `tf.variable(init)` shares
 * `init`'s storage; with `init` disposed, an assign frees the old storage.
 */
function ownedVariable(shape: number[]): tf.Variable {
  const init = tf.ones(shape);
  const v = tf.variable(init);
  init.dispose();
  return v;
}

/** Categories of every version of the storage a tensor was last seen on (PyTorch's `_lookup_tensor_categories`). */
function categoriesOf(p: MemoryProfile, t: tf.Tensor): (Category | null)[] {
  const key = p.keyOfTensor(t.id);
  if (!key) throw new Error(`tensor ${t.id} was never seen by the profile`);
  const { keys, categories } = p.categorySnapshot();
  return keys.flatMap(([k], i) => (k === key ? [categories[i]!] : []));
}

type GradientContext = 'gradient' | 'module' | 'optimizer';

/** PyTorch's `gradient_detected`: some event of kind `ctx` names `grad` as a gradient (of `param`, when it names one). */
function gradientDetected(p: MemoryProfile, ctx: GradientContext, grad: tf.Tensor, param?: tf.Variable): boolean {
  const gradKey = p.keyOfTensor(grad.id);
  const paramKey = param ? p.keyOfTensor(param.id) : null;
  for (const e of p.opTree.dfs()) {
    if (e.kind !== ctx) continue;
    for (const pair of p.extractGradients(e)) {
      if (pair.grad !== gradKey) continue;
      if (!param) return true;
      // A variable's storage changes on every update: compare logical ids.
      if (pair.param !== null) {
        expect(pair.param.id).toBe(paramKey!.id);
        return true;
      }
    }
  }
  return false;
}

/** PyTorch's `assertOnlyGradients`: nothing but `grads` is ever named a gradient. */
function expectOnlyGradients(p: MemoryProfile, grads: readonly tf.Tensor[]): void {
  const allowed = new Set<TensorKey | null>(grads.map((g) => p.keyOfTensor(g.id)));
  for (const e of p.opTree.dfs()) {
    for (const { grad } of p.extractGradients(e)) {
      expect(allowed.has(grad), `tensor wrongly marked as gradient: ${e.name}: ${grad}`).toBe(true);
    }
  }
}

describe('TestMemoryProfiler', () => {
  it('config check: memoryProfile() needs all three flags and says which are missing', () => {
    const none = profile({}, () => undefined);
    expect(() => none.memoryProfile()).toThrow(MemscopeError);
    expect(() => none.memoryProfile()).toThrow(/^recordShapes=true, profileMemory=true, withStack=true required for memory profiling\.$/);

    const noMemory = profile({ recordShapes: true, withStack: true }, () => undefined);
    expect(() => noMemory.memoryProfile()).toThrow(/^profileMemory=true required for memory profiling\.$/);

    const all = profile(ALL, () => undefined);
    expect(all.memoryProfile()).toBeInstanceOf(MemoryProfile);
  });

  it('rejects a model that is not a layer before running fn', () => {
    let ran = false;
    expect(() => record(() => (ran = true), { models: [{ not: 'a layer' }] })).toThrow(
      expect.objectContaining({ name: 'MemscopeError', code: 'not-a-layer' }),
    );
    expect(ran).toBe(false);
    // The adapter was detached: a new profile works.
    expect(record(() => 1).value).toBe(1);
  });

  it('profiles async functions and returns their value; a throwing fn detaches and rethrows', async () => {
    const result = await record(async () => {
      await Promise.resolve();
      return tf.tidy(() => tf.sum(tf.ones([3]))).dataSync()[0];
    });
    expect(result.value).toBe(3);
    expect(result.memoryProfile().dataFlowGraph.flowNodes.length).toBeGreaterThan(0);
    expect(() => record(() => { throw new Error('user error'); })).toThrow('user error');
    await expect(record(async () => { throw new Error('async user error'); })).rejects.toThrow('async user error');
  });
});

describe('TestIdentifyGradients', () => {
  it('extract gradients low level (tf.variableGrads)', () => {
    const x = tf.ones([1]);
    const w0 = tf.variable(tf.ones([1]));
    const w1 = tf.variable(tf.ones([1]));
    // PyTorch checks a cold start (no `.grad` yet) and a warm one. TFJS
    // variables hold no gradient, so both runs must look the same.
    for (let run = 0; run < 2; run++) {
      const result = record(() =>
        tf.variableGrads(() => tf.sum(tf.mul(tf.mul(tf.broadcastTo(x, [4]), w0), w1)), [w0, w1]),
      );
      const p = result.memoryProfile();
      const g0 = result.value.grads[w0.name]!;
      const g1 = result.value.grads[w1.name]!;
      expect(gradientDetected(p, 'gradient', g0, w0)).toBe(true);
      expect(gradientDetected(p, 'gradient', g1, w1)).toBe(true);
      expectOnlyGradients(p, [g0, g1]);
      tf.dispose([result.value.value, g0, g1]);
    }
  });

  it('extract gradients from a layers model', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 1, inputShape: [2] }), new ScaleLayer({})] });
    model.build([null, 2]);
    const weights = model.trainableWeights.map((w) => w.read() as tf.Variable);
    expect(weights).toHaveLength(3);
    const x = tf.ones([2, 2]);

    // Forward + backward: the gradient computation names every gradient. Layer
    // calls cannot: TFJS keeps no `.grad` on a variable, and the gradients do
    // not exist yet when the layers run (PyTorch's cold start).
    const fwdBwd = record(() => tf.variableGrads(() => tf.sum(model.apply(x) as tf.Tensor), weights), { models: [model] });
    const p1 = fwdBwd.memoryProfile();
    const grads = weights.map((w) => fwdBwd.value.grads[w.name]!);
    weights.forEach((w, i) => {
      expect(gradientDetected(p1, 'gradient', grads[i]!, w)).toBe(true);
      expect(gradientDetected(p1, 'module', grads[i]!, w)).toBe(false);
    });
    expectOnlyGradients(p1, grads);

    // A forward pass while those gradients are alive: layer calls carry them,
    // as PyTorch's Python tracer carries `.grad` (PyTorch's warm start). The
    // gradients must have been computed in the same profile: a new profile
    // cannot know which live tensors are a variable's gradient.
    const both = record(
      () => {
        const out = tf.variableGrads(() => tf.sum(model.apply(x) as tf.Tensor), weights);
        tf.dispose(model.apply(x) as tf.Tensor);
        return out;
      },
      { models: [model] },
    );
    const p2 = both.memoryProfile();
    const grads2 = weights.map((w) => both.value.grads[w.name]!);
    weights.forEach((w, i) => {
      expect(gradientDetected(p2, 'module', grads2[i]!, w)).toBe(true);
      expect(gradientDetected(p2, 'gradient', grads2[i]!, w)).toBe(true);
    });
    expectOnlyGradients(p2, grads2);

    // Forward only, gradients from an earlier profile: nothing is a gradient
    // (PyTorch would still see `.grad` through the Python tracer).
    const fwd = record(() => tf.dispose(model.apply(x) as tf.Tensor), { models: [model] });
    const p3 = fwd.memoryProfile();
    for (const e of p3.opTree.dfs()) expect(p3.extractGradients(e)).toEqual([]);
    tf.dispose([...grads, ...grads2, fwdBwd.value.value, both.value.value]);
  });

  it('extract gradients from an optimizer (momentum SGD)', () => {
    const x = tf.ones([1]);
    const w0 = tf.variable(tf.ones([1]));
    const w1 = tf.variable(tf.ones([1]));
    const optimizer = tf.train.momentum(0.1, 0.9);
    const loss = () => tf.sum(tf.mul(tf.mul(tf.broadcastTo(x, [4]), w0), w1)) as tf.Scalar;
    // `minimize` computes the gradients, applies them and disposes them; ask
    // for them back so the test can name them (`returnCost` is not enough).
    const step = () => {
      const { value, grads } = tf.variableGrads(loss, [w0, w1]);
      optimizer.applyGradients(grads as Parameters<typeof optimizer.applyGradients>[0]);
      value.dispose();
      return grads;
    };
    for (let run = 0; run < 2; run++) {
      const result = record(step, { optimizers: [optimizer] });
      const p = result.memoryProfile();
      const g0 = result.value[w0.name]!;
      const g1 = result.value[w1.name]!;
      // The optimizer step names parameter and gradient; so does the gradient computation.
      expect(gradientDetected(p, 'optimizer', g0, w0)).toBe(true);
      expect(gradientDetected(p, 'optimizer', g1, w1)).toBe(true);
      expect(gradientDetected(p, 'gradient', g0, w0)).toBe(true);
      expect(gradientDetected(p, 'gradient', g1, w1)).toBe(true);
      expectOnlyGradients(p, [g0, g1]);
      // Momentum's accumulators are optimizer state, never parameters.
      const state = [...p.opTree.dfs()].flatMap((e) => (e.kind === 'optimizer' ? e.state : []));
      expect(state.length).toBeGreaterThan(0);
      for (const t of state) expect(p.categories.get(p.keyOf(t)!, 0)).toBe('OPTIMIZER_STATE');
      tf.dispose([g0, g1]);
    }
  });

  it('extract gradients from a layers model and an optimizer together', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 1, inputShape: [2] }), new ScaleLayer({})] });
    model.build([null, 2]);
    const optimizer = tf.train.momentum(0.1, 0.9);
    const kernel = model.layers[0]!.getWeights()[0] as tf.Variable;
    const weights = model.trainableWeights.map((w) => w.read() as tf.Variable);
    const result = record(
      () => {
        const { value, grads } = tf.variableGrads(() => tf.sum(model.apply(tf.ones([2, 2])) as tf.Tensor), weights);
        optimizer.applyGradients(grads as Parameters<typeof optimizer.applyGradients>[0]);
        value.dispose();
        return grads;
      },
      { models: [model], optimizers: [optimizer] },
    );
    const p = result.memoryProfile();
    expect(gradientDetected(p, 'optimizer', result.value[kernel.name]!, kernel)).toBe(true);
    tf.dispose(Object.values(result.value));
  });
});

describe('TestDataFlow', () => {
  it('data flow graph with annotations', () => {
    // PyTorch zeroes x and y in place inside two record_function scopes; the
    // TFJS equivalent of an in-place write is assigning a variable.
    const x = ownedVariable([1]);
    const y = ownedVariable([1]);
    const result = record(() =>
      annotate('Namespaced::Annotation', () =>
        annotate('My Annotation', () => {
          x.assign(tf.zerosLike(x));
          y.assign(tf.zerosLike(y));
          return { x0: tf.onesLike(x), y0: tf.zerosLike(y) };
        }),
      ),
    );
    const p = result.memoryProfile();
    // Annotations are not data-flow nodes: only what they contain is.
    expect(
      formatDataFlow(p, [
        ['x', p.keyOfTensor(x.id)],
        ['y', p.keyOfTensor(y.id)],
        ['x0', p.keyOfTensor(result.value.x0.id)],
        ['y0', p.keyOfTensor(result.value.y0.id)],
      ]),
    ).toMatchInlineSnapshot(`
      "x:       T0#1
      y:       T1#1
      x0:      T2
      y0:      T3

      ZerosLike                 T0(v0)           ->  T0#1(v0)
      Variable.assign           T0(v0*), T0#1(v0)  ->  T0#1(v1)
      ZerosLike                 T1(v0)           ->  T1#1(v0)
      Variable.assign           T1(v0*), T1#1(v0)  ->  T1#1(v1)
      OnesLike                  T0#1(v1)         ->  T2(v0)
      ZerosLike                 T1#1(v1)         ->  T3(v0)"
    `);
    tf.dispose([result.value.x0, result.value.y0]);
  });

  it('data flow graph with non-op allocations', () => {
    const x = tf.ones([1]);
    // The scalar 2 becomes a tensor outside any kernel (PyTorch: the Python
    // argument parser makes it), and tidy frees it outside any kernel too.
    // PyTorch never sees the product as a tensor (`aten::mul ... ->`); the
    // TFJS adapter reports kernel outputs, so it is T2, freed by the tidy.
    const p = record(() => tf.tidy(() => void tf.mul(x, 2))).memoryProfile();
    expect(formatDataFlow(p, [['x', p.keyOfTensor(x.id)]])).toMatchInlineSnapshot(`
      "x:       T1

      [memory]                                   ->  T0(v0)
      Multiply                  T0(v0), T1(v0)   ->  T2(v0)
      [memory]                  T0(v0*)          ->
      [memory]                  T2(v0*)          ->"
    `);
  });

  it('data flow graph simple', () => {
    const x = tf.ones([25]);
    const y = tf.variable(tf.ones([25]));
    const f0 = () => {
      const z = tf.mul(x, y);
      return { z: tf.reshape(z, z.shape) }; // PyTorch: z.view_as(z)
    };
    const result = record(f0);
    const p = result.memoryProfile();
    // Reshape returns a new handle on z's storage: it reads z and writes nothing.
    expect(
      formatDataFlow(p, [
        ['x', p.keyOfTensor(x.id)],
        ['y', p.keyOfTensor(y.id)],
        ['z', p.keyOfTensor(result.value.z.id)],
      ]),
    ).toMatchInlineSnapshot(`
      "x:       T0
      y:       T1
      z:       T2

      Multiply                  T0(v0), T1(v0)   ->  T2(v0)
      Reshape                   T2(v0)           ->"
    `);
  });

  it('data flow graph "in place": Variable.assign', () => {
    // PyTorch: x.mul_(y) -> `aten::mul_  T0(v0), T1(v0) -> T0(v1)`. TFJS
    // computes x*y into a new storage, then x takes that storage and frees
    // its old one; the new storage gets version 1.
    const x = ownedVariable([25]);
    const y = ownedVariable([25]);
    const p = record(() => tf.tidy(() => void x.assign(tf.mul(x, y)))).memoryProfile();
    expect(formatDataFlow(p, [['x', p.keyOfTensor(x.id)], ['y', p.keyOfTensor(y.id)]])).toMatchInlineSnapshot(`
      "x:       T0#1
      y:       T1

      Multiply                  T0(v0), T1(v0)   ->  T0#1(v0)
      Variable.assign           T0(v0*), T0#1(v0)  ->  T0#1(v1)"
    `);
  });

  it('data flow graph simple backward', () => {
    const x = tf.ones([1]);
    const w = tf.variable(tf.ones([1]));
    const result = record(() => tf.variableGrads(() => tf.sum(tf.sin(tf.mul(x, w))), [w]));
    const p = result.memoryProfile();
    const grad = result.value.grads[w.name]!;
    expect(
      formatDataFlow(p, [
        ['x', p.keyOfTensor(x.id)],
        ['w', p.keyOfTensor(w.id)],
        ['w.grad', p.keyOfTensor(grad.id)],
      ]),
    ).toMatchInlineSnapshot(`
      "x:       T0
      w:       T1
      w.grad:  T10

      Multiply                  T0(v0), T1(v0)   ->  T2(v0)
      Sin                       T2(v0)           ->  T3(v0)
      Sum                       T3(v0)           ->  T4(v0)
      [memory]                                   ->  T5(v0)
      Backward[Reshape]         T5(v0)           ->
      [memory]                                   ->  T6(v0)
      Backward[Multiply]        T5(v0), T6(v0)   ->  T7(v0)
      Backward[Cast,Cos,Multiply] T2(v0), T7(v0)   ->  T9(v0)
      Backward[Cast,Multiply]   T0(v0), T9(v0)   ->  T10(v0)
      [memory]                  T2(v0*)          ->
      [memory]                  T3(v0*)          ->
      [memory]                  T5(v0*)          ->
      [memory]                  T6(v0*)          ->
      [memory]                  T7(v0*)          ->
      [memory]                  T9(v0*)          ->"
    `);
    tf.dispose([grad, result.value.value]);
  });

  it('data flow graph complicated', () => {
    const f = () => {
      const x = tf.ones([25]);
      const y = tf.add(tf.mul(x, 2), 2);
      const z = tf.sin(y);
      return { x, y, z };
    };
    const result = record(f);
    const p = result.memoryProfile();
    expect(
      formatDataFlow(p, [
        ['x', p.keyOfTensor(result.value.x.id)],
        ['y', p.keyOfTensor(result.value.y.id)],
        ['z', p.keyOfTensor(result.value.z.id)],
      ]),
    ).toMatchInlineSnapshot(`
      "x:       T0
      y:       T4
      z:       T5

      [memory]                                   ->  T0(v0)
      [memory]                                   ->  T1(v0)
      Multiply                  T0(v0), T1(v0)   ->  T2(v0)
      [memory]                  T1(v0*)          ->
      [memory]                                   ->  T3(v0)
      Add                       T2(v0), T3(v0)   ->  T4(v0)
      [memory]                  T3(v0*)          ->
      Sin                       T4(v0)           ->  T5(v0)"
    `);
    // PyTorch's aten::mul node has one intermediate (T2); TFJS's Multiply
    // allocates only its output, so no node here has intermediates: every
    // storage outlives the node that made it.
    expect(p.dataFlowGraph.flowNodes.flatMap((n) => n.intermediates)).toEqual([]);
    tf.dispose(Object.values(result.value));
  });

  it('intermediates: tensors allocated and freed inside one composite kernel are TEMPORARY', () => {
    const x = tf.ones([4, 3]);
    // logSoftmax is a customGrad op: a composite kernel whose inner kernels'
    // outputs are freed before it returns.
    const p = record(() => tf.tidy(() => void tf.logSoftmax(x))).memoryProfile();
    const node = p.dataFlowGraph.flowNodes.find((n) => n.intermediates.length > 0);
    expect(node?.event.name).toMatchInlineSnapshot(`"logSoftmax__op"`);
    expect(node!.intermediates.map((k) => p.categories.get(k, 0))).toEqual(node!.intermediates.map(() => 'TEMPORARY'));
  });
});

describe('TestMemoryProfilerE2E', () => {
  /** PyTorch's `_run_and_check_parameters_and_gradients`. */
  function expectParametersAndGradients(p: MemoryProfile, model: tfl.LayersModel, expectGradients: boolean): void {
    for (const w of model.trainableWeights) {
      const cats = categoriesOf(p, w.read());
      expect(cats.length).toBeGreaterThan(0);
      expect(new Set(cats), w.name).toEqual(new Set(['PARAMETER']));
    }
    // TFJS keeps no `.grad`: check every gradient the profile saw instead.
    let grads = 0;
    for (const e of p.opTree.dfs()) {
      for (const { grad } of p.extractGradients(e)) {
        grads++;
        const { keys, categories } = p.categorySnapshot();
        const cats = keys.flatMap(([k], i) => (k === grad ? [categories[i]] : []));
        expect(new Set(cats)).toEqual(new Set(['GRADIENT']));
      }
    }
    if (expectGradients) expect(grads).toBeGreaterThanOrEqual(model.trainableWeights.length);
    else expect(grads).toBe(0);
    expect(p.timeline.length).toBeGreaterThan(0); // relies on the timeline's internal checks
  }

  it('parameters and gradients over fit steps', async () => {
    const model = tfl.sequential({
      layers: [tfl.layers.dense({ units: 2, inputShape: [2] }), new ScaleLayer({}), tfl.layers.dense({ units: 1 }), new ScaleLayer({})],
    });
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const xs = tf.ones([2, 2]);
    const ys = tf.randomUniform([2, 1]);
    const fwdOnly = () => tf.dispose(model.predict(xs) as tf.Tensor);
    const fit = () => model.fit(xs, ys, { epochs: 1, batchSize: 2, verbose: 0 });

    expectParametersAndGradients(record(fwdOnly, { models: [model] }).memoryProfile(), model, false);
    // First step and a later step look alike: TFJS has no `.grad` to find early.
    expectParametersAndGradients((await record(fit, { models: [model] })).memoryProfile(), model, true);
    expectParametersAndGradients((await record(fit, { models: [model] })).memoryProfile(), model, true);
    // Several steps in one profile: each update is a new version of the same logical tensor.
    const p = (await record(() => model.fit(xs, ys, { epochs: 3, batchSize: 2, verbose: 0 }), { models: [model] })).memoryProfile();
    expectParametersAndGradients(p, model, true);
    expectParametersAndGradients(record(fwdOnly, { models: [model] }).memoryProfile(), model, false);
  });

  /** PyTorch's test_inputs_fwd / test_inputs_fwd_lazy body: inputs made before and during the profile. */
  function profileForwardInputs(forward: (x: tf.Tensor) => unknown, models: unknown[]) {
    const inputs = [tf.ones([2, 2]), tf.ones([2, 2])];
    const p = record(
      () => {
        for (const x of inputs) tf.dispose(forward(x) as tf.Tensor);
        for (let i = 0; i < 2; i++) {
          const x = tf.ones([2, 2]);
          inputs.push(x);
          tf.dispose(forward(x) as tf.Tensor);
        }
      },
      { models },
    ).memoryProfile();
    return { p, inputs };
  }

  it('inputs in forward only', () => {
    // Upstream PyTorch expects INPUT here: the layer events name the
    // parameters, and what feeds them without depending on a gradient is an
    // input. (The reference copy of this test expects no categories, which
    // contradicts its own test_categories_e2e_simple_module_fwd, where a
    // forward-only input is INPUT; upstream pytorch/pytorch agrees with INPUT.)
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 2, inputShape: [2] }), tfl.layers.dense({ units: 1 })] });
    const { p, inputs } = profileForwardInputs((x) => model.apply(x), [model]);
    for (const x of inputs) {
      const cats = categoriesOf(p, x);
      expect(cats.length).toBeGreaterThan(0);
      expect(cats).toEqual(cats.map(() => 'INPUT'));
    }
    expect(p.categorySnapshot().categories).toContain('INPUT');
  });

  it('inputs in forward only, lazily built layers', () => {
    // PyTorch's Python tracer caches a LazyLinear's (absent) parameters at
    // its first call, so it cannot name them and expects no categories. The
    // TFJS recorder reads a layer's weights again when its call returns, so
    // lazily built weights are parameters and the inputs are INPUT as above.
    const d1 = tfl.layers.dense({ units: 2 });
    const d2 = tfl.layers.dense({ units: 1 });
    expect(d1.trainableWeights).toHaveLength(0);
    const { p, inputs } = profileForwardInputs((x) => d2.apply(d1.apply(x)), [d1, d2]);
    const weights = [...d1.trainableWeights, ...d2.trainableWeights];
    expect(weights).toHaveLength(4);
    for (const x of inputs) {
      const cats = categoriesOf(p, x);
      expect(cats.length).toBeGreaterThan(0);
      expect(cats).toEqual(cats.map(() => 'INPUT'));
    }
    for (const w of weights) expect(new Set(categoriesOf(p, w.read()))).toEqual(new Set(['PARAMETER']));
  });

  it('inputs in forward + backward are INPUT', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 2, inputShape: [2] }), tfl.layers.dense({ units: 1 })] });
    const optimizer = tf.train.sgd(0.1);
    const pairs = [0, 1].map(() => [tf.ones([2, 2]), tf.randomUniform([2, 1])] as const);
    const step = (x: tf.Tensor, targets: tf.Tensor) =>
      optimizer.minimize(() => tf.losses.meanSquaredError(targets, model.apply(x) as tf.Tensor) as tf.Scalar);
    const p = record(
      () => {
        for (const [x, targets] of pairs) step(x, targets);
        for (let i = 0; i < 2; i++) {
          const pair = [tf.ones([2, 2]), tf.randomUniform([2, 1])] as const;
          pairs.push(pair);
          step(...pair);
        }
      },
      { models: [model], optimizers: [optimizer] },
    ).memoryProfile();
    for (const [x, targets] of pairs) {
      for (const t of [x, targets]) {
        const cats = categoriesOf(p, t);
        expect(cats.length).toBeGreaterThan(0);
        expect(cats.every((c) => c === 'INPUT')).toBe(true);
      }
    }
  });

  it('lazily built layers: weights made inside the profile are parameters', () => {
    // Every TFJS layer builds its weights on first call, like PyTorch's LazyLinear.
    const d1 = tfl.layers.dense({ units: 2 });
    const d2 = tfl.layers.dense({ units: 2 });
    const d3 = tfl.layers.dense({ units: 1 });
    const input = tfl.input({ shape: [2] });
    const model = tfl.model({ inputs: input, outputs: d3.apply(tfl.layers.reLU().apply(d2.apply(tfl.layers.reLU().apply(d1.apply(input))))) as tfl.SymbolicTensor });
    const lazy = tfl.layers.dense({ units: 2 });
    expect(lazy.trainableWeights).toHaveLength(0);
    const optimizer = tf.train.sgd(0.1);
    const p = record(
      () =>
        optimizer.minimize(() => {
          const y = model.apply(lazy.apply(tf.ones([2, 2])) as tf.Tensor) as tf.Tensor;
          return tf.losses.meanSquaredError(tf.randomUniform([2, 1]), y) as tf.Scalar;
        }),
      { models: [model, lazy], optimizers: [optimizer] },
    ).memoryProfile();
    expect(lazy.trainableWeights).toHaveLength(2);
    for (const w of [...lazy.trainableWeights, ...model.trainableWeights]) {
      expect(new Set(categoriesOf(p, w.read())), w.name).toEqual(new Set(['PARAMETER']));
    }
  });

  it('manual optimizer step: parameters found from the data flow alone', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 2, inputShape: [2] }), tfl.layers.dense({ units: 1 })] });
    model.build([null, 2]);
    const weights = model.trainableWeights.map((w) => w.read() as tf.Variable);
    // No layer or optimizer events (withStack still on, but nothing
    // instrumented): parameters must come from `setParametersUsingDataFlow`.
    const p = record(() => {
      const { value, grads } = tf.variableGrads(
        () => tf.losses.meanSquaredError(tf.randomUniform([2, 1]), model.apply(tf.ones([2, 2])) as tf.Tensor) as tf.Scalar,
        weights,
      );
      tf.tidy(() => {
        for (const w of weights) w.assign(tf.sub(w, tf.mul(grads[w.name]!, 0.1)));
      });
      tf.dispose([value, ...Object.values(grads)]);
    }).memoryProfile();
    for (const w of weights) expect(new Set(categoriesOf(p, w)), w.name).toEqual(new Set(['PARAMETER']));
    expect(p.categorySnapshot().categories).toContain('GRADIENT');
  });

  it('categories e2e: simple forward (nothing is over-labelled)', () => {
    const w0 = tf.variable(tf.ones([1]));
    const w1 = tf.variable(tf.ones([1]));
    const p = record(() =>
      tf.tidy(() => {
        const x = tf.ones([2, 2]);
        tf.concat([tf.mul(x, w0), tf.mul(x, w1)], 1);
      }),
    ).memoryProfile();
    expect(formatCategories(p)).toMatchInlineSnapshot(`
      "Multiply                                 1 (???), 2 (???)                              -> 3 (???)
      Multiply                                 1 (???), 4 (???)                              -> 5 (???)
      Concat                                   3 (???), 5 (???)                              -> 6 (???)"
    `);
  });

  it('categories e2e: simple module forward (Dense)', () => {
    const dense = tfl.layers.dense({ units: 4, useBias: true });
    dense.build([null, 2]);
    const p = record(() => tf.tidy(() => void dense.apply(tf.ones([2, 2]))), { models: [dense] }).memoryProfile();
    expect(formatCategories(p)).toMatchInlineSnapshot(`
      "Reshape                                  1 (INPUT)                                     -> 1 (INPUT)
      Reshape                                  2 (PARAMETER)                                 -> 2 (PARAMETER)
      fusedMatMul__op                          1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      _FusedMatMul                             1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      Reshape                                  4 (ACTIVATION)                                -> 4 (ACTIVATION)"
    `);
  });

  it('categories e2e: simple module forward + backward, with marked regions', () => {
    const dense = tfl.layers.dense({ units: 1, useBias: true });
    dense.build([null, 2]);
    const weights = dense.trainableWeights.map((w) => w.read() as tf.Variable);
    // TFJS runs forward inside the gradient computation; the backward region
    // gets its own header (`-- backward --`), as PyTorch's mark_region("Backward").
    const result = record(
      () => tf.variableGrads(() => annotate('Forward & loss', () => tf.sum(dense.apply(tf.ones([2, 2])) as tf.Tensor)) as tf.Scalar, weights),
      { models: [dense] },
    );
    expect(formatCategories(result.memoryProfile())).toMatchInlineSnapshot(`
      "
      -- Forward & loss ---------------------------------------------------------------------------------------
      Reshape                                  1 (INPUT)                                     -> 1 (INPUT)
      Identity                                 1 (INPUT)                                     -> 1 (INPUT)
      Reshape                                  2 (PARAMETER)                                 -> 2 (PARAMETER)
      Identity                                 2 (PARAMETER)                                 -> 2 (PARAMETER)
      fusedMatMul__op                          1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      _FusedMatMul                             1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      Identity                                 1 (INPUT)                                     -> 1 (INPUT)
      Identity                                 2 (PARAMETER)                                 -> 2 (PARAMETER)
      Identity                                 4 (ACTIVATION)                                -> 4 (ACTIVATION)
      Identity                                 3 (PARAMETER)                                 -> 3 (PARAMETER)
      Reshape                                  4 (ACTIVATION)                                -> 4 (ACTIVATION)
      Sum                                      4 (ACTIVATION)                                -> 5 (ACTIVATION)
      Identity                                 4 (ACTIVATION)                                -> 4 (ACTIVATION)

      -- backward ---------------------------------------------------------------------------------------------
      Reshape                                  6 (AUTOGRAD_DETAIL)                           -> 6 (AUTOGRAD_DETAIL)
      Multiply                                 6 (AUTOGRAD_DETAIL), 7 (AUTOGRAD_DETAIL)      -> 8 (AUTOGRAD_DETAIL)
      Reshape                                  8 (AUTOGRAD_DETAIL)                           -> 8 (AUTOGRAD_DETAIL)
      BatchMatMul                              8 (AUTOGRAD_DETAIL), 2 (PARAMETER)            -> 9 (AUTOGRAD_DETAIL)
      BatchMatMul                              1 (INPUT), 8 (AUTOGRAD_DETAIL)                -> 10 (GRADIENT)
      Sum                                      8 (AUTOGRAD_DETAIL)                           -> 11 (GRADIENT)
      Reshape                                  11 (GRADIENT)                                 -> 11 (GRADIENT)
      Reshape                                  10 (GRADIENT)                                 -> 10 (GRADIENT)"
    `);
    tf.dispose([result.value.value, ...Object.values(result.value.grads)]);
  });

  it('categories e2e: simple module forward + backward + optimizer step (upstream test_categories_e2e_simple_module_fwd_bwd_step)', () => {
    const dense = tfl.layers.dense({ units: 1, useBias: true, kernelInitializer: 'ones' });
    dense.build([null, 2]);
    const optimizer = tf.train.momentum(0.1, 0.9);
    const weights = dense.trainableWeights.map((w) => w.read() as tf.Variable);
    const step = () => {
      const { value, grads } = tf.variableGrads(
        () => annotate('Forward & loss', () => tf.sum(dense.apply(tf.ones([2, 2])) as tf.Tensor)) as tf.Scalar,
        weights,
      );
      annotate('Optimizer', () => optimizer.applyGradients(grads as Parameters<typeof optimizer.applyGradients>[0]));
      tf.dispose([value, ...Object.values(grads)]);
    };
    step(); // momentum's accumulators exist from the first step on
    const p = record(step, { models: [dense], optimizers: [optimizer] }).memoryProfile();
    // The update: momentum's accumulator and the weight each get a new
    // storage, which the assign makes the variable's (PyTorch: add_ in place).
    const text = formatCategories(p);
    expect(text.slice(text.indexOf('-- Optimizer'))).toMatchInlineSnapshot(`
      "-- Optimizer --------------------------------------------------------------------------------------------
      Multiply                                 12 (OPTIMIZER_STATE), 13 (OPTIMIZER_STATE)    -> 14 (???)
      Add                                      14 (???), 10 (GRADIENT)                       -> 15 (OPTIMIZER_STATE)
      Multiply                                 16 (OPTIMIZER_STATE), 15 (OPTIMIZER_STATE)    -> 17 (???)
      Add                                      17 (???), 2 (PARAMETER)                       -> 18 (PARAMETER)
      Variable.assign                          15 (OPTIMIZER_STATE)                          -> 15 (OPTIMIZER_STATE)
      Variable.assign                          18 (PARAMETER)                                -> 18 (PARAMETER)
      Multiply                                 12 (OPTIMIZER_STATE), 19 (OPTIMIZER_STATE)    -> 20 (???)
      Add                                      20 (???), 11 (GRADIENT)                       -> 21 (OPTIMIZER_STATE)
      Multiply                                 16 (OPTIMIZER_STATE), 21 (OPTIMIZER_STATE)    -> 22 (???)
      Add                                      22 (???), 3 (PARAMETER)                       -> 23 (PARAMETER)
      Variable.assign                          21 (OPTIMIZER_STATE)                          -> 21 (OPTIMIZER_STATE)
      Variable.assign                          23 (PARAMETER)                                -> 23 (PARAMETER)"
    `);
  });

  it('categories e2e: sequential forward', () => {
    const model = tfl.sequential({
      layers: [
        tfl.layers.dense({ units: 4, useBias: true, inputShape: [2] }),
        tfl.layers.reLU(),
        tfl.layers.dense({ units: 4, useBias: false }),
        tfl.layers.softmax({ axis: 1 }),
      ],
    });
    const p = record(() => tf.dispose(model.apply(tf.ones([2, 2])) as tf.Tensor), { models: [model] }).memoryProfile();
    expect(formatCategories(p)).toMatchInlineSnapshot(`
      "Reshape                                  1 (INPUT)                                     -> 1 (INPUT)
      Reshape                                  2 (PARAMETER)                                 -> 2 (PARAMETER)
      fusedMatMul__op                          1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      _FusedMatMul                             1 (INPUT), 2 (PARAMETER), 3 (PARAMETER)       -> 4 (ACTIVATION)
      Reshape                                  4 (ACTIVATION)                                -> 4 (ACTIVATION)
      Relu                                     4 (ACTIVATION)                                -> 5 (ACTIVATION)
      Reshape                                  5 (ACTIVATION)                                -> 5 (ACTIVATION)
      Reshape                                  6 (PARAMETER)                                 -> 6 (PARAMETER)
      fusedMatMul__op                          5 (ACTIVATION), 6 (PARAMETER)                 -> 7 (ACTIVATION)
      _FusedMatMul                             5 (ACTIVATION), 6 (PARAMETER)                 -> 7 (ACTIVATION)
      Reshape                                  7 (ACTIVATION)                                -> 7 (ACTIVATION)
      Softmax                                  7 (ACTIVATION)                                -> 8 (ACTIVATION)"
    `);
  });

  it('memory timeline of storages whose tensors are seen only when freed', () => {
    // PyTorch sees `x` freed only on CUDA; on CPU its free is invisible and
    // the test expects just the last four entries. TFJS is PyTorch's CPU case:
    // the adapter cannot report a storage made before it was installed that
    // no one touches again. `y` and `z` are seen as tensors (the adapter
    // reports their creation), so they have tensor keys; storages no tensor
    // is ever seen on get an explicit unknown key (see pipeline.test.ts).
    let x: tf.Tensor | null = tf.ones([1024]);
    const p = record(() => {
      x!.dispose();
      x = null;
      tf.zeros([64]).dispose(); // torch.empty((64,)) with a float32 element: 256 B
      const z = tf.zeros([256]);
      tf.reshape(z, [256]).dispose(); // show z to the profiler
      z.dispose();
    }).memoryProfile();
    expect(p.timeline.map(([, action, , bytes]) => [action, bytes])).toEqual([
      ['CREATE', 256],
      ['DESTROY', 256],
      ['CREATE', 1024],
      ['DESTROY', 1024],
    ]);
  });
});

describe('real models beyond the PyTorch tests', () => {
  /** Bytes of the end-of-profile timeline by category. */
  function finalBytes(result: { memoryTimeline(): MemoryProfileTimeline }) {
    const { sizes } = result.memoryTimeline().coalesce('cpu');
    for (const row of sizes) for (const v of row) expect(v).toBeGreaterThanOrEqual(0);
    const last = sizes[sizes.length - 1]!;
    return Object.fromEntries(CATEGORY_ORDER.map((c, i) => [c ?? 'Unknown', last[i + 1]!]));
  }

  it('conv + batch norm + dropout with RMSProp: what is left after fit is weights, state, data and BN statistics', async () => {
    const model = tfl.sequential({
      layers: [
        tfl.layers.conv2d({ inputShape: [8, 8, 1], filters: 4, kernelSize: 3, activation: 'relu' }),
        tfl.layers.batchNormalization(),
        tfl.layers.maxPooling2d({ poolSize: 2 }),
        tfl.layers.dropout({ rate: 0.5 }),
        tfl.layers.flatten(),
        tfl.layers.dense({ units: 3, activation: 'softmax' }),
      ],
    });
    model.compile({ optimizer: 'rmsprop', loss: 'categoricalCrossentropy' });
    const xs = tf.randomUniform([4, 8, 8, 1]);
    const ys = tf.oneHot(tf.tensor1d([0, 1, 2, 0], 'int32'), 3);
    const result = await record(() => model.fit(xs, ys, { epochs: 2, batchSize: 2, verbose: 0 }), { models: [model] });
    // Trainable: conv 3·3·1·4 + 4, BN γ β 4 + 4, dense (3·3·4)·3 + 3 = 159 floats.
    // RMSProp keeps two slots per weight. Inputs: 8·8·4 + 3·4 floats. BN's
    // moving mean and variance (8 floats) are buffers: PyTorch has no category for them.
    expect(finalBytes(result)).toEqual({
      PARAMETER: 159 * 4,
      OPTIMIZER_STATE: 2 * 159 * 4,
      INPUT: (256 + 12) * 4,
      TEMPORARY: 0,
      ACTIVATION: 0,
      GRADIENT: 0,
      AUTOGRAD_DETAIL: 0,
      Unknown: 8 * 4,
    });
  });

  it('LSTM with Adagrad', async () => {
    const model = tfl.sequential({
      layers: [tfl.layers.lstm({ units: 4, inputShape: [5, 3], recurrentInitializer: 'glorotUniform' }), tfl.layers.dense({ units: 1 })],
    });
    model.compile({ optimizer: tf.train.adagrad(0.1), loss: 'meanSquaredError' });
    const xs = tf.randomUniform([4, 5, 3]);
    const ys = tf.randomUniform([4, 1]);
    const result = await record(() => model.fit(xs, ys, { epochs: 2, batchSize: 2, verbose: 0 }), { models: [model] });
    // LSTM kernel 3·16, recurrent kernel 4·16, bias 16; dense 4 + 1: 133 floats; one Adagrad accumulator each.
    expect(finalBytes(result)).toEqual({
      PARAMETER: 133 * 4,
      OPTIMIZER_STATE: 133 * 4,
      INPUT: (60 + 4) * 4,
      TEMPORARY: 0,
      ACTIVATION: 0,
      GRADIENT: 0,
      AUTOGRAD_DETAIL: 0,
      Unknown: 0,
    });
    for (const w of model.trainableWeights) expect(new Set(categoriesOf(result.memoryProfile(), w.read())), w.name).toEqual(new Set(['PARAMETER']));
  });
});

describe('MemoryProfileTimeline', () => {
  async function fitProfile() {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 8, inputShape: [4], activation: 'relu' }), tfl.layers.dense({ units: 1 })] });
    model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
    const xs = tf.randomUniform([16, 4]);
    const ys = tf.randomUniform([16, 1]);
    const result = await record(() => model.fit(xs, ys, { epochs: 2, batchSize: 8, verbose: 0 }), { models: [model] });
    return result.memoryProfile();
  }

  it('accounts every byte: per-category sizes never go negative and the total follows the allocations', async () => {
    const p = await fitProfile();
    const timeline = new MemoryProfileTimeline(p);
    expect(timeline.devices()).toEqual(['cpu']);
    const { times, sizes } = timeline.coalesce('cpu');
    expect(times.length).toBe(sizes.length);
    for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThanOrEqual(times[i - 1]!);
    for (const row of sizes) for (const v of row) expect(v).toBeGreaterThanOrEqual(0);
    // Independent check: final total = storages alive before (PREEXISTING) + Σ allocations − Σ frees.
    const preexisting = p.timeline.filter(([, a]) => a === 'PREEXISTING').reduce((s, [, , , b]) => s + b, 0);
    let allocated = 0;
    for (const e of p.opTree.dfs()) if (e.kind === 'allocation') allocated += e.allocSize;
    const last = sizes[sizes.length - 1]!;
    expect(last.reduce((a, b) => a + b, 0)).toBe(preexisting + allocated);
    // Adam's moments are optimizer state and the weights are parameters, to the byte:
    // 4·8 + 8 + 8·1 + 1 = 49 floats of weights, and m and v for each.
    const column = (c: Category) => last[CATEGORY_ORDER.indexOf(c) + 1]!;
    expect(column('PARAMETER')).toBe(49 * 4);
    expect(column('OPTIMIZER_STATE')).toBeGreaterThanOrEqual(2 * 49 * 4);
    // An update briefly holds one weight twice (new value made, then assigned,
    // then the old storage freed) — never more: Adam's out-of-place arithmetic
    // must not pass for parameters.
    const parameterPeak = Math.max(...sizes.map((row) => row[CATEGORY_ORDER.indexOf('PARAMETER') + 1]!));
    expect(parameterPeak).toBeGreaterThan(49 * 4);
    expect(parameterPeak).toBeLessThanOrEqual(49 * 4 + 32 * 4);
    // Every category of a training step shows up at some time.
    const seen = new Set<string>();
    for (const row of sizes) CATEGORY_ORDER.forEach((c, i) => row[i + 1]! > 0 && seen.add(c ?? 'Unknown'));
    for (const c of ['PARAMETER', 'OPTIMIZER_STATE', 'INPUT', 'ACTIVATION', 'GRADIENT', 'AUTOGRAD_DETAIL', 'TEMPORARY']) expect(seen).toContain(c);
  });

  it('exports JSON, raw JSON and a self-contained HTML page', async () => {
    const p = await fitProfile();
    const dir = mkdtempSync(join(tmpdir(), 'memscope-timeline-'));
    const timeline = new FileMemoryProfileTimeline(p);
    timeline.exportMemoryTimeline(join(dir, 'timeline.json'), 'cpu');
    timeline.exportMemoryTimelineRaw(join(dir, 'raw.json'), 'cpu');
    timeline.exportMemoryTimelineHtml(join(dir, 'timeline.html'), 'cpu', { title: 'fit <2 epochs> & "Adam"' });

    const [times, sizes] = JSON.parse(readFileSync(join(dir, 'timeline.json'), 'utf8')) as [number[], number[][]];
    expect([times, sizes]).toEqual(Object.values(timeline.coalesce('cpu')));
    const raw = JSON.parse(readFileSync(join(dir, 'raw.json'), 'utf8')) as number[][];
    // Raw events sum to the same final total as the coalesced series.
    const rawTotal = raw.reduce((s, [, , bytes]) => s + bytes!, 0);
    expect(rawTotal).toBe(sizes[sizes.length - 1]!.reduce((a, b) => a + b, 0));
    for (const [, action, , category] of raw) {
      expect([1, 2, 3, 4]).toContain(action);
      expect(category).toBeGreaterThanOrEqual(0);
      expect(category).toBeLessThan(CATEGORY_ORDER.length);
    }

    const html = readFileSync(join(dir, 'timeline.html'), 'utf8');
    expect(html).toContain('fit &lt;2 epochs&gt; &amp; &quot;Adam&quot;');
    expect(html).not.toContain('<2 epochs>');
    expect(html).toMatch(/Max memory allocated: [\d.]+ (B|KiB|MiB|GiB)/);
    // PyTorch's colours, one band and one legend entry per category.
    for (const color of ['darkgreen', 'goldenrod', 'black', 'mediumpurple', 'red', 'mediumblue', 'royalblue', 'grey']) {
      expect(html).toContain(`fill="${color}"`);
    }
    for (const label of ['PARAMETER', 'OPTIMIZER_STATE', 'INPUT', 'TEMPORARY', 'ACTIVATION', 'GRADIENT', 'AUTOGRAD_DETAIL', 'Unknown']) {
      expect(html).toContain(`>${label}<`);
    }
    expect(html.match(/<polygon /g)).toHaveLength(8);
    // The axis says the binary unit it plots (PyTorch labels GiB values "GB").
    expect(html).toMatch(/Memory \((B|KiB|MiB|GiB)\)/);
    // Self-contained: no scripts, no external references.
    expect(html).not.toMatch(/<script|<link|src=|href=|url\(/i);
    expect(() => timeline.toHtml('webgl')).toThrow(/no memory events on device "webgl"/);
  });
});
