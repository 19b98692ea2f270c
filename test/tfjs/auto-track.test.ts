// Model discovery by prototype wrapping (createModelTracking): which calls register an optimizer,
// and that restore() puts back every prototype it wrapped.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-core/dist/register_all_gradients';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { createModelTracking } from '../../src/tfjs/auto-track.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

const optimizerClasses = [tf.SGDOptimizer, tf.MomentumOptimizer, tf.AdamOptimizer, tf.AdamaxOptimizer, tf.RMSPropOptimizer, tf.AdagradOptimizer, tf.AdadeltaOptimizer];

describe('createModelTracking on tfjs-core', () => {
  it('an optimizer used only through applyGradients is registered once, its first step through the instance wrapper; restore puts every prototype back', () => {
    const before = optimizerClasses.map((c) => c.prototype.applyGradients);
    const registered: object[] = [];
    const steps: string[] = [];
    const tracking = createModelTracking(
      {
        module: () => undefined,
        // As the adapter session does: an instance wrapper around the method found on the optimizer.
        optimizer: (opt) => {
          registered.push(opt);
          const o = opt as { applyGradients: (g: unknown) => void };
          const previous = o.applyGradients;
          o.applyGradients = function (this: unknown, g: unknown) {
            steps.push('step');
            return previous.call(this, g);
          };
        },
      },
      (err) => {
        throw err;
      },
    );
    tracking.watch(tf, 'core');
    expect(optimizerClasses.filter((c, i) => c.prototype.applyGradients === before[i])).toEqual([]);
    const w = tf.variable(tf.ones([4]));
    for (const optimizer of [tf.train.adam(0.1), tf.train.momentum(0.1, 0.9), tf.train.sgd(0.1)] as tf.Optimizer[]) {
      for (let i = 0; i < 3; i++) {
        const { grads } = tf.variableGrads(() => tf.sum(tf.square(w)) as tf.Scalar);
        optimizer.applyGradients(grads);
        tf.dispose(grads);
      }
    }
    expect(registered).toHaveLength(3);
    // Every step, the first of each optimizer's included, ran through the session's wrapper, once.
    expect(steps).toHaveLength(9);
    tracking.restore();
    expect(optimizerClasses.map((c) => c.prototype.applyGradients)).toEqual(before);
    w.dispose();
  });

  it('two trackings stopped in the order they started put back every prototype; the first, once stopped, hears nothing', async () => {
    const protos = [tfl.LayersModel.prototype, tfl.Sequential.prototype, tf.Optimizer.prototype, tf.AdamOptimizer.prototype] as unknown as Record<string, unknown>[];
    const snapshot = () => protos.map((p) => Object.getOwnPropertyDescriptors(p));
    const before = snapshot();
    const heard = { a: 0, b: 0 };
    const tracking = (who: 'a' | 'b') =>
      createModelTracking(
        { module: () => heard[who]++, optimizer: () => undefined },
        (err) => {
          throw err;
        },
      );
    const a = tracking('a');
    const b = tracking('b');
    for (const t of [a, b]) {
      t.watch(tf, 'core');
      t.watch(tfl, 'layers');
    }
    const model = tfl.sequential({ layers: [tfl.layers.dense({ inputShape: [2], units: 1 })] });
    const x = tf.ones([1, 2]);
    tf.dispose(model.predict(x) as tf.Tensor);
    expect(heard).toEqual({ a: 1, b: 1 });
    a.restore();
    const other = tfl.sequential({ layers: [tfl.layers.dense({ inputShape: [2], units: 1 })] });
    tf.dispose(other.predict(x) as tf.Tensor);
    expect(heard).toEqual({ a: 1, b: 2 });
    b.restore();
    expect(snapshot()).toEqual(before);
    x.dispose();
  });
});
