/**
 * Drives a ProfileRecorder with hand-built events, the way the TFJS adapter
 * would, so the pipeline can be tested on exact event sequences (including
 * ones TFJS cannot produce on the cpu backend, like storages with no tensor).
 */
import type { ModuleRef, OptimizerRef, StorageRef, TensorRef } from '../../src/core/events.js';
import { ProfileRecorder } from '../../src/analysis/recorder.js';

export interface FakeTensor extends TensorRef {
  storage: StorageRef;
}

export class FakeStream {
  private storageIds = 100;
  private tensorIds = 1000;
  private t = 0;
  readonly recorder: ProfileRecorder;

  constructor(config = { recordShapes: true, profileMemory: true, withStack: true }) {
    // A clock that advances 1 µs per reading, so timeline buckets are distinct.
    this.recorder = new ProfileRecorder(config, { clock: () => (this.t += 1000) });
  }

  /** A tensor that existed before recording started (no alloc event). */
  preexisting(shape: number[], bytesPerElement = 4): FakeTensor {
    return this.makeTensor(this.makeStorage(shape, bytesPerElement));
  }

  makeStorage(shape: number[], bytesPerElement = 4): StorageRef {
    const n = shape.reduce((a, b) => a * b, 1);
    return { id: this.storageIds++, device: 'cpu', bytes: n * bytesPerElement, dtype: 'float32', shape };
  }

  makeTensor(storage: StorageRef, variableName?: string): FakeTensor {
    return { id: this.tensorIds++, storage, dtype: 'float32', shape: storage.shape, ...(variableName ? { variableName, trainable: true } : {}) };
  }

  /** A tensor created outside any kernel (tf.tensor / tf.ones): alloc + create. */
  create(shape: number[]): FakeTensor {
    const s = this.makeStorage(shape);
    this.recorder.onStorageAlloc(s);
    const t = this.makeTensor(s);
    this.recorder.onTensorCreate(t);
    return t;
  }

  /** A kernel reading `inputs` and writing new storages of the given shapes; `temps` are allocated and freed inside. */
  kernel(name: string, inputs: FakeTensor[], outputShapes: number[][], temps: number[][] = []): FakeTensor[] {
    this.recorder.onKernelStart({ name, inputs, outputs: [], composite: false });
    for (const shape of temps) {
      const s = this.makeStorage(shape);
      this.recorder.onStorageAlloc(s);
      const t = this.makeTensor(s);
      this.recorder.onTensorCreate(t);
      this.recorder.onTensorDispose(t);
      this.recorder.onStorageFree(s);
    }
    const outputs = outputShapes.map((shape) => {
      const s = this.makeStorage(shape);
      this.recorder.onStorageAlloc(s);
      const t = this.makeTensor(s);
      this.recorder.onTensorCreate(t);
      return t;
    });
    this.recorder.onKernelEnd({ name, inputs, outputs, composite: false });
    return outputs;
  }

  /** A kernel whose output is a new handle on its input's storage (Reshape). */
  view(name: string, input: FakeTensor): FakeTensor {
    this.recorder.onKernelStart({ name, inputs: [input], outputs: [], composite: false });
    const out = this.makeTensor(input.storage);
    this.recorder.onTensorCreate(out);
    this.recorder.onKernelEnd({ name, inputs: [input], outputs: [out], composite: false });
    return out;
  }

  dispose(t: FakeTensor, freeStorage = true): void {
    this.recorder.onTensorDispose(t);
    if (freeStorage) this.recorder.onStorageFree(t.storage);
  }

  scope<T>(name: string, kind: 'tidy' | 'annotation' | 'backward', fn: () => T): T {
    this.recorder.onScopeStart(name, kind);
    const out = fn();
    this.recorder.onScopeEnd(name, kind);
    return out;
  }

  /** `variable.assign(value)`: the variable takes `value`'s storage; its old storage is freed. */
  assign(variable: FakeTensor, value: FakeTensor): void {
    const previous = variable.storage;
    this.recorder.onStorageFree(previous);
    variable.storage = value.storage;
    this.recorder.onVariableAssign(variable, previous);
  }

  module(path: string, params: () => TensorRef[]): ModuleRef {
    return { id: this.tensorIds++, path, className: 'Fake', parent: null, children: [], parameters: params, buffers: () => [] };
  }

  optimizer(state: () => TensorRef[]): OptimizerRef {
    return { id: this.tensorIds++, className: 'FakeSGD', stateVariables: state };
  }
}
