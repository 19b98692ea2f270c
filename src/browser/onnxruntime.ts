/**
 * ONNX Runtime Web on memscope/webgpu's device recording. ORT's WebGPU execution provider makes
 * its own GPUDevice (through `GPUAdapter.requestDevice`, which memscope/webgpu records) and
 * allocates through it from inside its wasm module, so memscope attributes by time:
 * - `InferenceSession.create`: what the session uploads while it is created is its weights
 *   (category Parameter, operator `session.create <model>`);
 * - each `session.run`: one operator (`run #N`) whose buffers are Activation, with the run's peak
 *   (the highest allocated bytes on the device during the run, above what it held before), the
 *   bytes of its feeds and of its fetches;
 * - outputs kept on the GPU (`preferredOutputLocation: 'gpu-buffer'`) are the program's to
 *   `dispose()`: their buffers are tagged Output and listed by `undisposedOutputs()` until then.
 *
 * Attribution is by time: an overlapping `run` of another session (or other WebGPU work on the
 * page meanwhile) is attributed to whichever started last.
 */
import { MemscopeError } from '../core/errors.js';
import type { WebGPUMemory } from '../webgpu/memory.js';

export const ONNXRUNTIME_WEB = 'onnxruntime-web';

/** What memscope reads of an ORT tensor (onnxruntime-web's `Tensor`). */
export interface OrtTensorLike {
  dims?: readonly number[];
  type?: string;
  location?: string;
  size?: number;
  gpuBuffer?: object;
  dispose?: () => void;
}

type SessionLike = { run: (...args: unknown[]) => Promise<Record<string, OrtTensorLike>> } & Record<string, unknown>;

interface OrtLike {
  InferenceSession: { create: (...args: unknown[]) => Promise<SessionLike> } & Record<string, unknown>;
}

export interface OnnxRuntimeOptions {
  /** The page's `onnxruntime-web` module (`import * as ort from 'onnxruntime-web/webgpu'`). */
  ort: object;
  /** memscope/webgpu's recording (`installWebGPU()`), installed before the first session. */
  memory: WebGPUMemory;
}

/** One `session.run`, as memscope saw it. */
export interface OrtRunRecord {
  /** 1, 2, … over every session. */
  readonly index: number;
  readonly session: string;
  /** Bytes of the feeds (as the program passed them: CPU data is uploaded during the run). */
  readonly feedBytes: number;
  /** Bytes of the fetches, wherever they are. */
  readonly fetchBytes: number;
  /** Fetches left on the GPU for the program to dispose(). */
  readonly gpuFetches: number;
  /** Allocated bytes on the device when the run started. */
  readonly startAllocated: number;
  /** Highest allocated bytes during the run, above `startAllocated`. */
  readonly peakAdded: number;
  /** Allocated bytes after the run, above `startAllocated` (outputs, caches ORT keeps). */
  readonly retained: number;
  /** Milliseconds. */
  readonly durationMs: number;
}

/** One session's creation. */
export interface OrtSessionRecord {
  readonly name: string;
  /** Bytes of the device's resources created while the session was created: its weights. */
  readonly weightBytes: number;
  readonly durationMs: number;
}

/** A GPU-resident output not yet disposed. */
export interface OrtUndisposedOutput {
  readonly run: number;
  readonly name: string;
  readonly bytes: number;
  readonly dims: readonly number[];
}

export interface OnnxRuntimeAttribution {
  sessions(): OrtSessionRecord[];
  runs(): OrtRunRecord[];
  undisposedOutputs(): OrtUndisposedOutput[];
  /** Restores `InferenceSession.create` and every wrapped session's `run`. */
  detach(): void;
}

const BYTES_PER_ELEMENT: Record<string, number> = {
  float32: 4, int32: 4, uint32: 4, float16: 2, int16: 2, uint16: 2, int8: 1, uint8: 1, bool: 1, int64: 8, uint64: 8, float64: 8, int4: 0.5, uint4: 0.5,
};

/** Bytes of a tensor's data from its type and size (or dims), wherever the data is. */
/**
 * Calls `disposed` when the tensor's own `dispose()` runs, then disposes it. The wrapper is an own
 * property of this tensor, removed on the call: other tensors and the Tensor prototype stay as they
 * are.
 */
export function onDispose(t: OrtTensorLike, disposed: () => void): void {
  const dispose = t.dispose;
  if (typeof dispose !== 'function') return;
  t.dispose = function (this: OrtTensorLike) {
    disposed();
    delete (t as { dispose?: unknown }).dispose;
    return dispose.call(this);
  };
}

export function tensorBytes(t: OrtTensorLike | undefined): number {
  if (t == null || typeof t !== 'object') return 0;
  const count = typeof t.size === 'number' ? t.size : Array.isArray(t.dims) ? t.dims.reduce((a, b) => a * b, 1) : 0;
  return Math.ceil(count * (BYTES_PER_ELEMENT[t.type ?? ''] ?? 0));
}

function modelName(arg: unknown): string {
  if (typeof arg === 'string') return arg.split(/[\\/]/).pop() || arg;
  if (arg instanceof ArrayBuffer || ArrayBuffer.isView(arg)) return `model (${(arg as ArrayBufferLike).byteLength} bytes)`;
  return 'model';
}

/**
 * Wraps the page's ONNX Runtime Web so that sessions created from now on are attributed on
 * memscope's WebGPU device. Sessions on other execution providers (wasm) run unchanged and
 * allocate nothing on the GPU.
 */
export function attachOnnxRuntime(options: OnnxRuntimeOptions): OnnxRuntimeAttribution {
  const ort = options.ort as OrtLike;
  const memory = options.memory;
  const IS = ort?.InferenceSession;
  if (IS == null || typeof IS.create !== 'function') throw new MemscopeError('bad-argument', 'attachOnnxRuntime: options.ort must be the onnxruntime-web module (with InferenceSession.create)');
  const sessions: OrtSessionRecord[] = [];
  const runs: OrtRunRecord[] = [];
  const outputs = new Map<OrtTensorLike, OrtUndisposedOutput>();
  const restores: Array<() => void> = [];
  let nextRun = 1;
  let detached = false;

  /** Allocated bytes of every device (ORT's device is one of them; others are idle meanwhile). */
  const allocatedNow = (): number => memory.devices().reduce((s, d) => s + d.allocatedBytes, 0);
  const reservedNow = (): number => memory.devices().reduce((s, d) => s + d.reservedBytes, 0);

  const originalCreate = IS.create;
  const ownCreate = Object.prototype.hasOwnProperty.call(IS, 'create');
  const create = async function (this: unknown, ...args: unknown[]): Promise<SessionLike> {
    const name = modelName(args[0]);
    const started = performance.now();
    const reservedBefore = reservedNow();
    const end = memory.beginAttribution({ framework: ONNXRUNTIME_WEB, category: 'Parameter', operator: `session.create ${name}` });
    let session: SessionLike;
    try {
      session = await (Reflect.apply(originalCreate, this, args) as Promise<SessionLike>);
    } finally {
      end();
    }
    sessions.push({ name, weightBytes: reservedNow() - reservedBefore, durationMs: performance.now() - started });
    wrapRun(session, name);
    return session;
  };

  const wrapRun = (session: SessionLike, name: string): void => {
    const originalRun = session.run;
    if (typeof originalRun !== 'function') return;
    const ownRun = Object.prototype.hasOwnProperty.call(session, 'run');
    const run = async function (this: unknown, ...args: unknown[]): Promise<Record<string, OrtTensorLike>> {
      const index = nextRun++;
      const feeds = (args[0] ?? {}) as Record<string, OrtTensorLike>;
      const startAllocated = allocatedNow();
      let peak = startAllocated;
      const unsubscribe = memory.subscribe(() => {
        const a = allocatedNow();
        if (a > peak) peak = a;
      });
      const started = performance.now();
      const end = memory.beginAttribution({ framework: ONNXRUNTIME_WEB, category: 'Activation', operator: `run #${index}`, step: `run #${index}` });
      let result: Record<string, OrtTensorLike>;
      try {
        result = await (Reflect.apply(originalRun, this, args) as Promise<Record<string, OrtTensorLike>>);
      } finally {
        end();
        unsubscribe();
      }
      let gpuFetches = 0;
      let fetchBytes = 0;
      for (const [outName, t] of Object.entries(result)) {
        fetchBytes += tensorBytes(t);
        if (t?.location === 'gpu-buffer') {
          gpuFetches++;
          trackOutput(t, { run: index, name: outName, bytes: tensorBytes(t), dims: [...(t.dims ?? [])] });
        }
      }
      runs.push({
        index,
        session: name,
        feedBytes: Object.values(feeds).reduce((s, t) => s + tensorBytes(t), 0),
        fetchBytes,
        gpuFetches,
        startAllocated,
        peakAdded: Math.max(0, peak - startAllocated),
        retained: allocatedNow() - startAllocated,
        durationMs: performance.now() - started,
      });
      return result;
    };
    session.run = run;
    restores.push(() => {
      if (session.run !== run) return;
      if (ownRun) session.run = originalRun;
      else delete (session as { run?: unknown }).run;
    });
  };

  const trackOutput = (t: OrtTensorLike, record: OrtUndisposedOutput): void => {
    if (t.gpuBuffer != null && typeof t.gpuBuffer === 'object') memory.tag(t.gpuBuffer, { category: 'Output', operator: `run #${record.run} ${record.name}` });
    outputs.set(t, record);
    onDispose(t, () => outputs.delete(t));
  };

  IS.create = create;
  return {
    sessions: () => [...sessions],
    runs: () => [...runs],
    undisposedOutputs: () => [...outputs.values()],
    detach() {
      if (detached) return;
      detached = true;
      if (IS.create === create) {
        if (ownCreate) IS.create = originalCreate;
        else delete (IS as { create?: unknown }).create;
      }
      for (const r of restores.reverse()) r();
    },
  };
}
