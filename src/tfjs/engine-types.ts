/**
 * The slice of TensorFlow.js internals memscope touches, typed structurally.
 *
 * memscope never imports TFJS classes to test identity: the user's copy of
 * tfjs-core may be a different module instance from memscope's (bundlers,
 * nested node_modules), while the engine is one global (`globalThis._tfengine`).
 * Everything here is duck-typed against tfjs-core 4.x `dist/engine.js`.
 */

/** A TFJS dataId: an opaque object the backend keys its data on. */
export type DataId = object;

export interface TfTensor {
  readonly id: number;
  dataId: DataId;
  readonly shape: number[];
  readonly dtype: string;
  readonly size: number;
  readonly isDisposed?: boolean;
  /** Present on variables only. */
  readonly name?: string;
  readonly trainable?: boolean;
  assign?: (value: TfTensor) => void;
}

export interface TfBackend {
  readSync?(dataId: DataId): unknown;
  memory?(): Record<string, unknown>;
  numDataIds?(): number;
}

export interface TfTensorInfoEntry {
  backend: TfBackend;
  dtype: string;
  shape: number[];
  bytes: number;
}

export interface TfTapeNode {
  id: number;
  kernelName: string;
  gradient?: (dys: unknown[]) => unknown;
}

export interface TfScopeInfo {
  name: string;
  id: number;
}

export interface TfEngineState {
  numDataBuffers: number;
  numBytes: number;
  numTensors: number;
  tensorInfo: { has(k: DataId): boolean; get(k: DataId): TfTensorInfoEntry | undefined };
  registeredVariables: Record<string, TfTensor>;
  activeTape: TfTapeNode[] | null;
  activeScope: TfScopeInfo | null;
  scopeStack: TfScopeInfo[];
}

export interface TfKernelParams {
  kernelName?: string;
  inputs: Record<string, TfTensor | null | undefined>;
  forwardFunc?: unknown;
}

/** Engine instance methods memscope patches (on the prototype). */
export interface TfEngine {
  state: TfEngineState;
  registry: Record<string, TfBackend>;
  backendName: string | null;
  /** The current backend instance (the `backend` getter's field, read without its side effects). */
  backendInstance?: TfBackend | null;
  readonly backend: TfBackend;
  trackTensor(a: TfTensor, backend?: TfBackend | null): void;
  incRef(a: TfTensor, backend?: TfBackend | null): void;
  disposeTensor(a: TfTensor): void;
  removeDataId(dataId: DataId, backend: TfBackend): void;
  moveData(backend: TfBackend, dataId: DataId): void;
  runKernelFunc(params: TfKernelParams): TfTensor | TfTensor[];
  addTapeNode(kernelName: string, inputs: unknown, outputs: unknown, gradientsFunc: unknown, saved: unknown, attrs: unknown): void;
  gradients(f: () => TfTensor, xs: TfTensor[], dy?: TfTensor, allowNoGradients?: boolean): { value: TfTensor; grads: Array<TfTensor | undefined | null> };
  startScope(name?: string | null): void;
  endScope(result?: unknown): void;
}

/** The names of the engine prototype methods memscope replaces. */
export const PATCHED_ENGINE_METHODS = [
  'trackTensor',
  'disposeTensor',
  'removeDataId',
  'moveData',
  'runKernelFunc',
  'addTapeNode',
  'gradients',
  'startScope',
  'endScope',
  'incRef',
] as const;
export type PatchedEngineMethod = (typeof PATCHED_ENGINE_METHODS)[number];

/** tfjs-core's `getGlobalNamespace()` is `globalThis` in every runtime it supports. */
export function globalEngine(): TfEngine | null {
  const e = (globalThis as { _tfengine?: TfEngine })._tfengine;
  return e != null && typeof e === 'object' && typeof e.trackTensor === 'function' ? e : null;
}

export function isTensorLike(x: unknown): x is TfTensor {
  return (
    x != null &&
    typeof x === 'object' &&
    typeof (x as TfTensor).id === 'number' &&
    (x as TfTensor).dataId != null &&
    Array.isArray((x as TfTensor).shape) &&
    typeof (x as TfTensor).dtype === 'string'
  );
}

export function isVariableLike(x: unknown): x is TfTensor & { name: string; assign: (v: TfTensor) => void } {
  return isTensorLike(x) && typeof (x as TfTensor).assign === 'function' && typeof (x as TfTensor).name === 'string';
}
