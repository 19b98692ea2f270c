/**
 * transformers.js (`@huggingface/transformers`) on memscope/webgpu's device recording. A pipeline
 * holds a model whose `sessions` are ONNX Runtime Web sessions (its own copy of ORT, which makes
 * its own GPUDevice); memscope reaches them through the objects the page passes in, duck-typed,
 * and attributes by time as for ONNX Runtime Web (onnxruntime.ts):
 * - `load(name, loading)`: what the device gains while a pipeline or model loads is its weights
 *   (category Parameter, operator `load <name>`);
 * - each `generate()` call is one generation and each session run inside it one step
 *   (`generate #G step S`, also a step in the snapshot), its buffers Activation; the step records
 *   the bytes of the `past_key_values.*` it was fed (the KV cache, which grows a position per
 *   token) and of the `present.*` it returned, its peak and what the device kept after it;
 * - `present.*` outputs left on the GPU are the KV cache (category `KV cache`); other GPU outputs
 *   are Output. transformers.js disposes each cache tensor when the next step replaces it and the
 *   last one when generation ends, unless the program asked to keep it
 *   (`return_dict_in_generate`, or its own `past_key_values`): `undisposedOutputs()` lists what
 *   is still on the GPU for the program to `dispose()`.
 */
import { MemscopeError } from '../core/errors.js';
import type { WebGPUMemory } from '../webgpu/memory.js';
import { onDispose, tensorBytes, type OrtTensorLike } from './onnxruntime.js';

export const TRANSFORMERS_JS = 'transformers.js';

/** The category of the KV cache's GPU tensors. */
export const KV_CACHE = 'KV cache';

type RunLike = (...args: unknown[]) => Promise<Record<string, OrtTensorLike>>;
type SessionLike = { run?: RunLike } & Record<string, unknown>;
type ModelLike = { sessions?: Record<string, SessionLike>; generate?: (...args: unknown[]) => Promise<unknown> } & Record<string, unknown>;

export interface TransformersOptions {
  /** memscope/webgpu's recording (`installWebGPU()`), installed before the first model loads. */
  memory: WebGPUMemory;
}

/** One model loaded through `load()` (or added with `track()`). */
export interface TjsModelRecord {
  readonly name: string;
  /** Its ONNX sessions by transformers.js's name ('model', 'decoder_model_merged', …). */
  readonly sessions: readonly string[];
  /** Bytes the device gained while it loaded: its weights (0 for a model on the wasm device, or added with `track`). */
  readonly weightBytes: number;
  readonly durationMs: number;
}

/** One session run inside a generation: one generated token. */
export interface TjsStepRecord {
  /** 1, 2, … over every generation. */
  readonly generation: number;
  /** 1, 2, … within its generation. */
  readonly step: number;
  readonly model: string;
  readonly session: string;
  /** Past sequence length the step was fed (0 for the prompt's step). */
  readonly pastLength: number;
  /** Bytes of the `past_key_values.*` feeds: the KV cache the step read, wherever it is. */
  readonly pastBytes: number;
  /** Bytes of the `present.*` fetches: the KV cache the step wrote. */
  readonly presentBytes: number;
  /** Bytes of the other feeds (token ids, attention mask, …). */
  readonly inputBytes: number;
  /** Allocated bytes on the device when the step started. */
  readonly startAllocated: number;
  /** Highest allocated bytes during the step, above `startAllocated`. */
  readonly peakAdded: number;
  /** Allocated bytes after the step, above `startAllocated`. */
  readonly retained: number;
  readonly durationMs: number;
}

/** One `generate()` call. */
export interface TjsGenerationRecord {
  readonly index: number;
  readonly model: string;
  readonly steps: number;
  /** Allocated bytes on the device before and after the call, and its peak above the start. */
  readonly startAllocated: number;
  readonly endAllocated: number;
  readonly peakAdded: number;
  readonly durationMs: number;
}

/** A GPU-resident output not yet disposed. */
export interface TjsUndisposedOutput {
  readonly generation: number;
  readonly step: number;
  readonly name: string;
  readonly bytes: number;
  readonly dims: readonly number[];
}

export interface TransformersAttribution {
  /**
   * Awaits `loading` (a `pipeline(...)` or `from_pretrained(...)` promise, or a function that
   * starts one) with what the device gains meanwhile attributed as the model's weights, then
   * tracks the pipeline or model it returns.
   */
  load<T>(name: string, loading: Promise<T> | (() => Promise<T>)): Promise<T>;
  /** Tracks a pipeline or model loaded before (its weights are not on record). */
  track(pipelineOrModel: object, name?: string): void;
  models(): TjsModelRecord[];
  generations(): TjsGenerationRecord[];
  steps(): TjsStepRecord[];
  undisposedOutputs(): TjsUndisposedOutput[];
  /** Restores every wrapped `generate` and session `run`; dispose wrappers already on tensors stay harmless. */
  detach(): void;
}

const isPast = (name: string): boolean => name.startsWith('past_key_values.');
const isPresent = (name: string): boolean => name.startsWith('present');

/** An object or a function object: transformers.js's pipelines and models are callable. */
const isObjectLike = (v: unknown): v is object => v !== null && (typeof v === 'object' || typeof v === 'function');

/** The model of a pipeline (`pipe.model`), or the object itself when it has sessions. */
function modelOf(obj: object): ModelLike | null {
  const o = obj as { model?: unknown; sessions?: unknown };
  if (isObjectLike(o.sessions)) return o as ModelLike;
  if (isObjectLike(o.model) && isObjectLike((o.model as { sessions?: unknown }).sessions)) return o.model as ModelLike;
  return null;
}

/**
 * Attributes transformers.js pipelines on memscope's WebGPU device. The page passes what
 * transformers.js gives it; memscope imports nothing of it.
 */
export function attachTransformers(options: TransformersOptions): TransformersAttribution {
  const memory = options.memory;
  if (memory == null || typeof memory.beginAttribution !== 'function') throw new MemscopeError('bad-argument', 'attachTransformers: options.memory must be memscope/webgpu\'s installWebGPU()');
  const models: TjsModelRecord[] = [];
  const generations: TjsGenerationRecord[] = [];
  const steps: TjsStepRecord[] = [];
  const outputs = new Map<OrtTensorLike, TjsUndisposedOutput>();
  const restores: Array<() => void> = [];
  const tracked = new WeakSet<object>();
  let detached = false;
  let nextGeneration = 1;
  /** The generation running now, with its step count; null between generations. */
  let current: { index: number; step: number } | null = null;

  const allocatedNow = (): number => memory.devices().reduce((s, d) => s + d.allocatedBytes, 0);
  const reservedNow = (): number => memory.devices().reduce((s, d) => s + d.reservedBytes, 0);

  /** Runs `fn` while following the device's allocated bytes; returns its result and the peak. */
  const withPeak = async <T>(fn: () => Promise<T>): Promise<{ value: T; start: number; peak: number }> => {
    const start = allocatedNow();
    let peak = start;
    const unsubscribe = memory.subscribe(() => {
      const a = allocatedNow();
      if (a > peak) peak = a;
    });
    try {
      return { value: await fn(), start, peak };
    } finally {
      unsubscribe();
    }
  };

  /** Replaces `obj[key]` with `wrapper`, restored by detach() (own property or prototype's). */
  const replace = (obj: Record<string, unknown>, key: string, wrapper: unknown): void => {
    const original = obj[key];
    const own = Object.prototype.hasOwnProperty.call(obj, key);
    obj[key] = wrapper;
    restores.push(() => {
      if (obj[key] !== wrapper) return;
      if (own) obj[key] = original;
      else delete obj[key];
    });
  };

  const trackOutput = (t: OrtTensorLike, record: TjsUndisposedOutput): void => {
    const category = isPresent(record.name) ? KV_CACHE : 'Output';
    if (t.gpuBuffer != null && typeof t.gpuBuffer === 'object') memory.tag(t.gpuBuffer, { category, operator: `generate #${record.generation} step ${record.step} ${record.name}` });
    outputs.set(t, record);
    onDispose(t, () => outputs.delete(t));
  };

  const wrapSession = (session: SessionLike, sessionName: string, model: string): void => {
    const originalRun = session.run;
    if (typeof originalRun !== 'function') return;
    const run = async function (this: unknown, ...args: unknown[]): Promise<Record<string, OrtTensorLike>> {
      if (current === null) return Reflect.apply(originalRun, this, args) as Promise<Record<string, OrtTensorLike>>;
      const generation = current.index;
      const step = ++current.step;
      const feeds = (args[0] ?? {}) as Record<string, OrtTensorLike>;
      let pastBytes = 0;
      let inputBytes = 0;
      let pastLength = 0;
      for (const [name, t] of Object.entries(feeds)) {
        if (isPast(name)) {
          pastBytes += tensorBytes(t);
          pastLength = Math.max(pastLength, t?.dims?.[2] ?? 0);
        } else inputBytes += tensorBytes(t);
      }
      const label = `generate #${generation} step ${step}`;
      memory.step(label);
      const started = performance.now();
      const end = memory.beginAttribution({ framework: TRANSFORMERS_JS, category: 'Activation', operator: label });
      let measured: { value: Record<string, OrtTensorLike>; start: number; peak: number };
      try {
        measured = await withPeak(() => Reflect.apply(originalRun, this, args) as Promise<Record<string, OrtTensorLike>>);
      } finally {
        end();
      }
      const result = measured.value;
      let presentBytes = 0;
      for (const [name, t] of Object.entries(result)) {
        if (isPresent(name)) presentBytes += tensorBytes(t);
        if (t?.location === 'gpu-buffer') trackOutput(t, { generation, step, name, bytes: tensorBytes(t), dims: [...(t.dims ?? [])] });
      }
      steps.push({
        generation,
        step,
        model,
        session: sessionName,
        pastLength,
        pastBytes,
        presentBytes,
        inputBytes,
        startAllocated: measured.start,
        peakAdded: Math.max(0, measured.peak - measured.start),
        retained: allocatedNow() - measured.start,
        durationMs: performance.now() - started,
      });
      return result;
    };
    replace(session, 'run', run);
  };

  const wrapGenerate = (target: ModelLike, model: string): void => {
    const originalGenerate = target.generate;
    if (typeof originalGenerate !== 'function') return;
    const generate = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      // A generate() inside another (a pipeline calling its model) is the same generation.
      if (current !== null) return Reflect.apply(originalGenerate, this, args);
      const mine = { index: nextGeneration++, step: 0 };
      current = mine;
      const started = performance.now();
      try {
        const { value, start, peak } = await withPeak(() => Reflect.apply(originalGenerate, this, args) as Promise<unknown>);
        generations.push({ index: mine.index, model, steps: mine.step, startAllocated: start, endAllocated: allocatedNow(), peakAdded: Math.max(0, peak - start), durationMs: performance.now() - started });
        return value;
      } finally {
        current = null;
        memory.endStep();
      }
    };
    replace(target, 'generate', generate);
  };

  const track = (pipelineOrModel: object, name = 'model', weightBytes = 0, durationMs = 0): void => {
    if (detached) throw new MemscopeError('bad-argument', 'attachTransformers: track after detach()');
    const model = modelOf(pipelineOrModel);
    if (model === null) throw new MemscopeError('bad-argument', `attachTransformers: ${name} is neither a transformers.js pipeline (with .model) nor a model (with .sessions)`);
    if (tracked.has(model)) return;
    tracked.add(model);
    const sessions = Object.entries(model.sessions ?? {});
    for (const [sessionName, session] of sessions) if (session != null && typeof session === 'object') wrapSession(session, sessionName, name);
    wrapGenerate(model, name);
    models.push({ name, sessions: sessions.map(([n]) => n), weightBytes, durationMs });
  };

  return {
    async load<T>(name: string, loading: Promise<T> | (() => Promise<T>)): Promise<T> {
      const started = performance.now();
      const reservedBefore = reservedNow();
      const end = memory.beginAttribution({ framework: TRANSFORMERS_JS, category: 'Parameter', operator: `load ${name}` });
      let loaded: T;
      try {
        loaded = await (typeof loading === 'function' ? loading() : loading);
      } finally {
        end();
      }
      // A pipeline is callable: a function object with `.model`.
      if (isObjectLike(loaded)) track(loaded, name, reservedNow() - reservedBefore, performance.now() - started);
      return loaded;
    },
    track: (pipelineOrModel, name) => track(pipelineOrModel, name),
    models: () => [...models],
    generations: () => [...generations],
    steps: () => [...steps],
    undisposedOutputs: () => [...outputs.values()],
    detach() {
      if (detached) return;
      detached = true;
      for (const r of restores.reverse()) r();
    },
  };
}
