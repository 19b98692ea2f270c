/**
 * TensorFlow.js's webgpu backend on memscope/webgpu's device recording. The backend pools GPU
 * buffers (tfjs-backend-webgpu `BufferManager`): a disposed tensor's buffer goes back to a free
 * list keyed by size and usage and is handed out again to the next tensor of that size, never
 * destroyed until the backend is disposed. To the device that buffer is still there; to the
 * program it is free. memscope shows the pool as PyTorch shows its caching allocator: a pooled
 * buffer is reserved, not allocated (`markPooled`), and allocated again when the pool hands it out
 * (`markInUse`). The texture manager (the pool `tf.browser.fromPixels` fills) is treated alike.
 *
 * Categories are PyTorch MemTracker's, by the rules memscope's TFJS adapter applies to storages
 * (src/core/mem-categories.ts), read from the adapter attached here: a buffer the pool hands out
 * takes the category of the phase it is made in (Activation in forward or outside training, Temp
 * in backward, Optstate in an optimizer step); the buffers of the gradients a gradient
 * computation returns for variables become Gradient; the buffers of the engine's registered
 * variables are Parameter (trainable), Optstate (the state of an optimizer the program registers,
 * `optimizer()`) or Buffer (other non-trainable variables), re-tagged after each optimizer step
 * and at each `step()`; uniform and staging buffers are Other.
 */
import { MemscopeError } from '../core/errors.js';
import type { Attribution } from '../webgpu/device-record.js';
import type { WebGPUMemory } from '../webgpu/memory.js';
import type { AdapterSession } from '../core/adapter.js';
import type { EventContext, GradientPair, OptimizerRef, TensorRef } from '../core/events.js';
import { MEM_REF_TYPES, categoryOfAllocation, categoryOfGradient, categoryOfReplacedStorage, type CategoryIndex, type MemRefType } from '../core/mem-categories.js';
import { activeInstallation, tfjsAdapter } from '../tfjs/adapter.js';
import { TfjsTensorRef } from '../tfjs/refs.js';

export const TFJS_WEBGPU = 'tfjs-webgpu';

/** GPUBufferUsage flags (WebGPU spec), spelled out so the module loads without WebGPU. */
const MAP_READ = 0x0001;
const MAP_WRITE = 0x0002;
const UNIFORM = 0x0040;

interface PoolManager {
  [method: string]: unknown;
}

interface TfjsWebGPUBackend {
  device: object;
  bufferManager: PoolManager & { freeBuffers: Map<unknown, unknown> };
  textureManager?: PoolManager & { freeTextures: Map<unknown, unknown> };
  tensorMap: { get(dataId: object): { resource?: unknown } | undefined };
  memory(): { numBytesInGPU: number; numBytesAllocatedInGPU: number };
}

interface TfLike {
  engine(): { backendName?: string; registry: Record<string, unknown>; state: { registeredVariables: Record<string, { dataId: object; trainable: boolean; isDisposed?: boolean }> } };
}

export interface TfjsWebGPUOptions {
  /** The page's TFJS (`@tensorflow/tfjs` or tfjs-core): its engine holds the webgpu backend. */
  tf: object;
  /** memscope/webgpu's recording (`installWebGPU()`), installed before the backend made its device. */
  memory: WebGPUMemory;
  /** Optimizers whose state counts as Optstate (`optimizer()` adds more; `model.compile`'s is `model.optimizer`). */
  optimizers?: readonly object[];
}

/** The attribution of TFJS's webgpu backend; `detach()` restores the backend's methods. */
export interface TfjsWebGPUAttribution {
  /** The backend's GPUDevice name in memscope ('webgpu:N'). */
  readonly device: string;
  /** Re-tags the buffers of the engine's variables (Parameter/Optstate/Buffer); `step()` and each optimizer step call it. */
  refreshCategories(): void;
  /** Registers an optimizer (a tf.Optimizer): its state variables' buffers are Optstate. */
  optimizer(optimizer: object): void;
  /** Ends a step in the recording (memory.step) after refreshing categories. */
  step(name: string | number): void;
  /** The backend's own counts, for comparison: bytes of buffers in use and of every buffer it holds. */
  backendFigures(): { inUse: number; held: number };
  detach(): void;
}

/** A pool buffer's category: Other for uniforms and staging, else the phase's (categoryOfAllocation). */
function categoryOfUsage(usage: number): Attribution {
  if (usage & UNIFORM) return { category: 'Other', operator: 'uniforms' };
  if (usage & (MAP_READ | MAP_WRITE)) return { category: 'Other', operator: 'staging' };
  return { category: MEM_REF_TYPES[categoryOfAllocation(activeInstallation()?.ctx.phase ?? 'none')], operator: 'tensor' };
}

/**
 * Attaches to the webgpu backend of the page's TFJS (which must be initialised: after
 * `await tf.setBackend('webgpu')`). Buffers the pool held before attaching are tagged and
 * marked pooled or in use as they are now; `memory` must have recorded their creation (install
 * memscope/webgpu before `setBackend`), else they are not on memscope's device.
 */
export function attachTfjsWebGPU(options: TfjsWebGPUOptions): TfjsWebGPUAttribution {
  const tf = options.tf as TfLike;
  const memory = options.memory;
  if (tf == null || typeof tf.engine !== 'function') throw new MemscopeError('bad-argument', 'attachTfjsWebGPU: options.tf must be the page\'s TFJS (with engine())');
  const engine = tf.engine();
  const backend = engine.registry['webgpu'] as TfjsWebGPUBackend | undefined;
  if (backend == null || backend.bufferManager == null || backend.device == null) {
    throw new MemscopeError('no-webgpu-backend', 'attachTfjsWebGPU: TFJS has no initialised webgpu backend: await tf.setBackend(\'webgpu\') first');
  }
  const device = memory.track(backend.device as Parameters<WebGPUMemory['track']>[0]);
  const restores: Array<() => void> = [];
  const optimizers: OptimizerRef[] = [];
  /** The GPU buffer holding a tensor's data now (undefined while it is on the CPU). */
  const bufferOf = (ref: TensorRef): object | undefined => {
    if (!(ref instanceof TfjsTensorRef)) return undefined;
    const resource = backend.tensorMap.get(ref.tensor.dataId)?.resource;
    return resource != null && typeof resource === 'object' ? resource : undefined;
  };

  const patchPool = (manager: PoolManager, acquire: string, release: string, freeLists: () => Map<unknown, unknown>, attribution: (resource: { usage?: number }) => Attribution): void => {
    const originalAcquire = manager[acquire] as (...a: unknown[]) => object;
    const originalRelease = manager[release] as (...a: unknown[]) => unknown;
    if (typeof originalAcquire !== 'function' || typeof originalRelease !== 'function') return;
    const hadOwn = { acquire: Object.prototype.hasOwnProperty.call(manager, acquire), release: Object.prototype.hasOwnProperty.call(manager, release) };
    const patchedAcquire = function (this: unknown, ...args: unknown[]): object {
      // Only a buffer the pool creates here is new; the same attribution tags it at creation.
      const usage = typeof args[acquire === 'acquireBuffer' ? 1 : 3] === 'number' ? (args[acquire === 'acquireBuffer' ? 1 : 3] as number) : 0;
      const resource = memory.withAttribution({ framework: TFJS_WEBGPU, ...attribution({ usage }) }, () => Reflect.apply(originalAcquire, this, args) as object);
      try {
        memory.markInUse(resource, patchedAcquire);
        memory.tag(resource, { framework: TFJS_WEBGPU, ...attribution(resource as { usage?: number }) });
      } catch {
        // Bookkeeping never reaches the program.
      }
      return resource;
    };
    const patchedRelease = function (this: unknown, ...args: unknown[]): unknown {
      // The manager ignores releases once disposed (its free lists are gone then).
      const pooling = freeLists().size !== 0 && args[1] !== false;
      const result = Reflect.apply(originalRelease, this, args);
      if (pooling && args[0] != null && typeof args[0] === 'object') {
        try {
          memory.markPooled(args[0]);
        } catch {
          // as above
        }
      }
      return result;
    };
    manager[acquire] = patchedAcquire;
    manager[release] = patchedRelease;
    restores.push(() => {
      for (const [name, patched, original, own] of [
        [acquire, patchedAcquire, originalAcquire, hadOwn.acquire],
        [release, patchedRelease, originalRelease, hadOwn.release],
      ] as const) {
        if (manager[name] !== patched) continue;
        if (own) manager[name] = original;
        else delete manager[name];
      }
    });
  };

  const bm = backend.bufferManager;
  patchPool(bm, 'acquireBuffer', 'releaseBuffer', () => bm.freeBuffers, (b) => categoryOfUsage(b.usage ?? 0));
  const tm = backend.textureManager;
  if (tm) patchPool(tm, 'acquireTexture', 'releaseTexture', () => tm.freeTextures, () => ({ category: 'Activation', operator: 'texture' }));

  // What the pools hold now: in use or pooled, tagged by usage.
  const adopt = (lists: unknown, inUse: boolean, attribution: (r: { usage?: number }) => Attribution): void => {
    if (!(lists instanceof Map)) return;
    for (const list of lists.values()) {
      if (!Array.isArray(list)) continue;
      for (const r of list as object[]) {
        memory.tag(r, { framework: TFJS_WEBGPU, ...attribution(r as { usage?: number }) });
        if (inUse) memory.markInUse(r);
        else memory.markPooled(r);
      }
    }
  };
  adopt(bm['usedBuffers'], true, (b) => categoryOfUsage(b.usage ?? 0));
  adopt(bm['freeBuffers'], false, (b) => categoryOfUsage(b.usage ?? 0));
  if (tm) {
    adopt(tm['usedTextures'], true, () => ({ category: 'Activation', operator: 'texture' }));
    adopt(tm['freeTextures'], false, () => ({ category: 'Activation', operator: 'texture' }));
  }

  const refreshCategories = (): void => {
    const state = new Set<string>();
    for (const o of optimizers) for (const t of o.stateVariables()) if (t.variableName !== undefined) state.add(t.variableName);
    const vars = engine.state.registeredVariables;
    const current = new Set<object>();
    for (const name of Object.keys(vars)) {
      const v = vars[name]!;
      if (v.isDisposed) continue;
      const resource = backend.tensorMap.get(v.dataId)?.resource;
      const category = state.has(name) ? 'Optstate' : v.trainable ? 'Parameter' : 'Buffer';
      if (resource != null && typeof resource === 'object') {
        memory.tag(resource, { category, operator: name });
        current.add(resource);
      }
    }
    // A variable's previous buffer that other tensors still hold after an assign is no longer
    // the variable's (categoryOfReplacedStorage): what forward saved, Activation.
    const used = bm['usedBuffers'];
    if (!(used instanceof Map)) return;
    for (const list of used.values()) {
      if (!Array.isArray(list)) continue;
      for (const b of list as object[]) {
        const was = memory.resourceRecord(b)?.attribution.category;
        // Other here is a uniform or staging buffer, never a variable's.
        const index = was === 'Other' ? -1 : MEM_REF_TYPES.indexOf(was as MemRefType);
        const now = current.has(b) || index < 0 ? null : categoryOfReplacedStorage(index as CategoryIndex);
        if (now !== null) memory.tag(b, { category: MEM_REF_TYPES[now], operator: 'replaced variable' });
      }
    }
  };

  // The adapter's session: its phase names what the pool's buffers are made for, its gradient and
  // optimizer events what they hold. Its sink listens to nothing per tensor.
  const session: AdapterSession = tfjsAdapter.attach({
    onGradientEnd(pairs: readonly GradientPair[], _ctx: EventContext) {
      for (const { x, grad } of pairs) {
        const buffer = grad !== null && categoryOfGradient(x) !== null ? bufferOf(grad) : undefined;
        if (buffer) memory.tag(buffer, { category: 'Gradient', operator: `gradient of ${x.variableName}` });
      }
    },
    onOptimizerStepEnd() {
      refreshCategories();
    },
  });
  restores.push(() => session.detach());
  const addOptimizer = (o: object): void => {
    const ref = session.optimizer(o);
    if (!optimizers.includes(ref)) optimizers.push(ref);
  };
  for (const o of options.optimizers ?? []) addOptimizer(o);
  refreshCategories();

  let detached = false;
  return {
    device,
    refreshCategories,
    optimizer(o) {
      addOptimizer(o);
      refreshCategories();
    },
    step(name) {
      refreshCategories();
      memory.step(name);
    },
    backendFigures() {
      const m = backend.memory();
      return { inUse: m.numBytesInGPU, held: m.numBytesAllocatedInGPU };
    },
    detach() {
      if (detached) return;
      detached = true;
      for (const r of restores.reverse()) r();
    },
  };
}
