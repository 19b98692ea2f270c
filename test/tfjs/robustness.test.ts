import { describe, it, expect, beforeAll, vi } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import type { MemoryEventSink, StorageBatchSink, TensorRef } from '../../src/core/events.js';
import { MemscopeError } from '../../src/core/errors.js';
import { tfjsAdapter } from '../../src/tfjs/index.js';
import { activeInstallation } from '../../src/tfjs/adapter.js';
import { PATCHED_ENGINE_METHODS } from '../../src/tfjs/engine-types.js';
import { useBackend } from './support/backends.js';

/** A sink of the fast form that ignores its storage events, with `events` beside them. */
function batchSink(events: MemoryEventSink = {}): StorageBatchSink {
  return { ...events, onStorageAlloc() {}, onStorageFree() {}, onStorageBatch() {} };
}

beforeAll(async () => {
  await useBackend('cpu');
});

const engineProto = () => Object.getPrototypeOf(tf.engine()) as Record<string, unknown>;
const variableProto = () => {
  const v = tf.variable(tf.zeros([1]));
  const proto = Object.getPrototypeOf(v) as Record<string, unknown>;
  v.dispose();
  return proto;
};

/** Every function memscope may replace, captured before it is installed. */
function captureOriginals() {
  const ep = engineProto();
  const vp = variableProto();
  return {
    engine: PATCHED_ENGINE_METHODS.map((m) => [m, ep[m]] as const),
    assign: vp['assign'],
    vp,
  };
}

function expectRestored(orig: ReturnType<typeof captureOriginals>): void {
  expect(activeInstallation()).toBeNull();
  const ep = engineProto();
  for (const [m, f] of orig.engine) expect(ep[m], `engine.${m}`).toBe(f);
  expect(orig.vp['assign']).toBe(orig.assign);
}

/** A layer whose call throws `err` (a custom layer, as users write them). */
class ThrowingLayer extends tfl.layers.Layer {
  static className = 'ThrowingLayer';
  constructor(private readonly err: unknown) {
    super({ name: 'thrower' });
  }
  override call(): tf.Tensor {
    throw this.err;
  }
  override computeOutputShape(s: tfl.Shape | tfl.Shape[]): tfl.Shape | tfl.Shape[] {
    return s;
  }
}

describe('user exceptions propagate unchanged and every patch is restored', () => {
  it('from a layer call inside predict, from tidy, from gradients and from minimize', () => {
    const orig = captureOriginals();
    const boom = new Error('user boom');
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 2, inputShape: [3] }), new ThrowingLayer(boom)] });
    const opt = tf.train.adam(0.01);
    const events: string[] = [];
    const session = tfjsAdapter.attach({
      onModuleEnter: (m) => events.push(`enter ${m.path}`),
      onModuleExit: (m) => events.push(`exit ${m.path}`),
    });
    session.module(model, 'net');
    session.optimizer(opt);
    const x = tf.ones([1, 3]);

    let caught: unknown;
    try {
      model.predict(x);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(boom); // the very same object
    // The throwing layer still gets its Exit, and the root frame is closed.
    expect(events).toEqual(['enter net', 'enter net.dense_Dense1', 'exit net.dense_Dense1', 'enter net.thrower', 'exit net.thrower', 'exit net']);

    const notAnError = { code: 42 };
    expect(() => tf.tidy(() => { tf.ones([2]); throw notAnError; })).toThrow();
    try { tf.tidy(() => { throw notAnError; }); } catch (e) { expect(e).toBe(notAnError); }
    try { tf.grads(() => { throw boom; })([x]); } catch (e) { expect(e).toBe(boom); }
    const w = tf.variable(tf.ones([3]));
    try { opt.minimize(() => { throw boom; }, false, [w]); } catch (e) { expect(e).toBe(boom); }
    expect(activeInstallation()!.internalErrors).toBe(0);
    expect(activeInstallation()!.ctx.phase).toBe('none');
    expect(activeInstallation()!.ctx.module).toBeNull();

    session.detach();
    expectRestored(orig);
    // Per-instance wraps are gone: the layer and optimizer use their class methods again.
    for (const layer of model.layers) expect(Object.prototype.hasOwnProperty.call(layer, 'call'), layer.name).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(model, 'call')).toBe(false);
    expect(Object.prototype.hasOwnProperty.call(opt, 'applyGradients')).toBe(false);
    w.dispose();
    x.dispose();
  });

  it('a session detached inside a failing user function still restores everything', () => {
    const orig = captureOriginals();
    const err = new RangeError('bad');
    const run = () => {
      const s = tfjsAdapter.attach({ onStorageAlloc() {} });
      try {
        tf.tidy(() => {
          tf.square(tf.ones([4]));
          throw err;
        });
      } finally {
        s.detach();
      }
    };
    expect(run).toThrow(err);
    expectRestored(orig);
  });
});

describe('isolation', () => {
  it('a sink that throws never reaches the program, and other sinks keep receiving events', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const good: number[] = [];
    const bad: MemoryEventSink = {
      onStorageAlloc() { throw new Error('sink bug'); },
      onKernelStart() { throw new Error('sink bug'); },
      onModuleEnter() { throw new Error('sink bug'); },
    };
    const s1 = tfjsAdapter.attach(bad);
    const s2 = tfjsAdapter.attach({ onStorageAlloc: (s) => good.push(s.bytes) });
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 2, inputShape: [3] })] });
    s1.module(model);
    const y = tf.tidy(() => model.predict(tf.ones([2, 3])) as tf.Tensor);
    expect(y.shape).toEqual([2, 2]);
    expect(good).toContain(2 * 2 * 4);
    expect(warn).toHaveBeenCalledTimes(1); // logged once per sink
    expect(activeInstallation()!.internalErrors).toBe(0);
    s1.detach();
    s2.detach();
    y.dispose();
    warn.mockRestore();
  });

  it('a failure inside memscope’s own hook falls back to TFJS and the program runs on', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const s = tfjsAdapter.attach({ onStorageAlloc() {} });
    const inst = activeInstallation()!;
    const broken = () => { throw new Error('memscope bug'); };
    const { identity, attribution } = inst;
    const saved = { onTrack: identity.onTrack, onScopeStart: attribution.onScopeStart, afterScopeEnd: attribution.afterScopeEnd };
    Object.assign(identity, { onTrack: broken });
    Object.assign(attribution, { onScopeStart: broken, afterScopeEnd: broken });
    const r = tf.tidy(() => tf.add(tf.ones([3]), tf.ones([3])));
    expect(Array.from(r.dataSync())).toEqual([2, 2, 2]);
    expect(inst.internalErrors).toBeGreaterThan(0);
    Object.assign(identity, { onTrack: saved.onTrack });
    Object.assign(attribution, { onScopeStart: saved.onScopeStart, afterScopeEnd: saved.afterScopeEnd });
    s.detach();
    r.dispose();
    warn.mockRestore();
  });

  it('bad arguments get a MemscopeError naming what was wrong', () => {
    const s = tfjsAdapter.attach({});
    expect(() => s.module({})).toThrow(MemscopeError);
    expect(() => s.optimizer(42)).toThrow(/tf.Optimizer/);
    expect(() => s.tensor([1, 2])).toThrow(/tf.Tensor/);
    s.detach();
    expect(() => s.tensor(tf.scalar(1))).toThrow(/detached/);
    s.detach(); // idempotent
  });
});

describe('another library patching on top of memscope', () => {
  it('is left in place at detach; memscope’s wrapper beneath becomes a pass-through', () => {
    const proto = engineProto();
    const original = proto['trackTensor'];
    const seen: number[] = [];
    const s = tfjsAdapter.attach({ onStorageAlloc: (st) => seen.push(st.bytes) });
    const ours = proto['trackTensor'] as (this: unknown, ...a: unknown[]) => unknown;
    let theirs = 0;
    proto['trackTensor'] = function (this: unknown, ...a: unknown[]) {
      theirs++;
      return ours.apply(this, a);
    };
    const mine = proto['trackTensor'];
    s.detach();
    expect(proto['trackTensor']).toBe(mine); // their patch survives
    const t = tf.ones([5]);
    expect(theirs).toBe(1);
    expect(seen).toEqual([]); // memscope no longer reports
    expect(Array.from(t.dataSync())).toEqual([1, 1, 1, 1, 1]);
    t.dispose();
    proto['trackTensor'] = original; // their own uninstall
  });
});

describe('nested and overlapping sessions share one installation', () => {
  for (const order of ['first-attached detaches first', 'last-attached detaches first'] as const) {
    it(order, () => {
      const orig = captureOriginals();
      const a: number[] = [];
      const b: number[] = [];
      const sa = tfjsAdapter.attach({ onStorageAlloc: (s) => a.push(s.id) });
      const installed = activeInstallation();
      tf.tidy(() => tf.ones([1]));
      const sb = tfjsAdapter.attach({ onStorageAlloc: (s) => b.push(s.id) });
      expect(activeInstallation()).toBe(installed);
      tf.tidy(() => tf.ones([2]));
      const [first, second] = order === 'first-attached detaches first' ? [sa, sb] : [sb, sa];
      first.detach();
      expect(activeInstallation()).toBe(installed); // still installed for the other session
      tf.tidy(() => tf.ones([3]));
      second.detach();
      expectRestored(orig);
      tf.tidy(() => tf.ones([4]));
      // a saw 1 and 2 (and 3 if it was still attached); b saw 2 (and 3 if still attached); both saw the shared storage of step 2 as one object.
      expect(a.length).toBe(order === 'first-attached detaches first' ? 2 : 3);
      expect(b.length).toBe(order === 'first-attached detaches first' ? 2 : 1);
      expect(a[1]).toBe(b[0]);
    });
  }
});

describe('repeated tracking sessions', () => {
  it('leave tensors and dataIds with one memscope property at most, and a new session ignores an old one’s', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 3, inputShape: [4] })] });
    const x = tf.ones([2, 4]);
    const weight = model.trainableWeights[0]!.read();
    const allocs: number[] = [];
    for (let round = 0; round < 12; round++) {
      // Every other session wants every tensor's ref (refs then ride on the tensors).
      const everyTensor = round % 2 === 1 ? { onTensorCreate: () => {} } : {};
      const session = tfjsAdapter.attach({ onStorageAlloc: (s) => allocs.push(s.id), ...everyTensor });
      session.module(model);
      const xRef = session.tensor(x);
      // The input, met for the first time since tracking restarted, is adopted again (a new storage id).
      expect(xRef.storage.id).toBe(allocs[allocs.length - 1]);
      tf.tidy(() => model.predict(x));
      session.detach();
    }
    // One symbol-keyed property per kind of object, not one per session: objects
    // growing a property per session fall into V8's slow dictionary mode.
    expect(Object.getOwnPropertySymbols(x)).toHaveLength(1);
    expect(Object.getOwnPropertySymbols(x.dataId)).toHaveLength(1);
    expect(Object.getOwnPropertySymbols(weight).length).toBeLessThanOrEqual(1);
    x.dispose();
    model.dispose();
  });

  it('a sink that does not want every tensor leaves the tensors it meets without memscope properties', () => {
    // A property on some tensors only would split TFJS's tensors into more hidden classes than
    // V8's inline caches keep apart (TFJS's own tensor reads went megamorphic under MemTracker).
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 3, inputShape: [4] })] });
    const x = tf.ones([2, 4]);
    const session = tfjsAdapter.attach({ onStorageAlloc: () => {}, onModuleEnter: () => {}, onModuleExit: () => {} });
    session.module(model);
    const xRef = session.tensor(x);
    const y = tf.tidy(() => model.predict(x) as tf.Tensor);
    // The ref is still one per tensor.
    expect(session.tensor(x)).toBe(xRef);
    expect(Object.getOwnPropertySymbols(x)).toHaveLength(0);
    expect(Object.getOwnPropertySymbols(y)).toHaveLength(0);
    session.detach();
    tf.dispose([x, y]);
    model.dispose();
  });
});

describe('TensorRef identity', () => {
  it('is kept while any subscribed sink may key on refs; when every sink is a StorageBatchSink, only variables keep theirs', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 3, inputShape: [4] })] });
    const x = tf.ones([2, 4]);
    const weight = model.getWeights()[0]!;
    const inputs: TensorRef[] = []; // the dense layer's input, once per call
    const optOut = tfjsAdapter.attach(batchSink({ onModuleEnter: (m, ins) => void (m.parent !== null && inputs.push(...ins)) }));
    let keyed: { detach(): void } | null = null;
    try {
      optOut.module(model);
      // The layer called on x itself (a model's predict would hand it a new tensor each time).
      const run = () => tf.dispose(tf.tidy(() => model.layers[0]!.apply(x) as tf.Tensor));
      run();
      run();
      // The same tensor and storage, described by two ref objects: nothing kept a ref per call.
      expect(inputs).toHaveLength(2);
      expect(inputs[0]).not.toBe(inputs[1]);
      expect([inputs[1]!.id, inputs[1]!.storage]).toEqual([inputs[0]!.id, inputs[0]!.storage]);
      expect(optOut.tensor(weight)).toBe(optOut.tensor(weight));
      // A plain sink may key on refs: refs are stable again, for every sink.
      keyed = tfjsAdapter.attach({ onStorageAlloc: () => {} });
      inputs.length = 0;
      run();
      run();
      expect(inputs).toHaveLength(2);
      expect(inputs[0]).toBe(inputs[1]);
    } finally {
      keyed?.detach();
      optOut.detach();
      x.dispose();
      model.dispose();
    }
  });
});
