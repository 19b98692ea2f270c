import type { DeviceMemoryReading } from '../core/adapter.js';
import type { TfEngine } from './engine-types.js';

/**
 * What a TFJS backend really holds, as the backend itself reports it:
 * - webgl: `backend.memory().numBytesInGPUAllocated` — bytes of every texture
 *   the texture manager has created and not deleted, in use or pooled free
 *   (the pool is webgl's caching allocator).
 * - webgpu: `backend.memory().numBytesAllocatedInGPU` — bytes of every GPU
 *   buffer the buffer manager holds, in use or pooled free (tensor buffers,
 *   and the uniform and read-back staging buffers it pools beside them) —
 *   plus the textures the texture manager holds, in use or pooled free: the
 *   pool `tf.browser.fromPixels` fills, which `memory()` leaves out (checked
 *   on the real backend in test/browser/webgpu.test.ts).
 * - wasm: `backend.wasm.HEAPU8.byteLength` — the size of the wasm linear
 *   memory, which only grows; tensors are malloc'd inside it.
 * - cpu (and anything else): null — TypedArrays live on the JS heap and the
 *   backend keeps no pool of its own.
 */
export function readDeviceMemory(engine: TfEngine, device: string): DeviceMemoryReading | null {
  const backend = engine.registry[device] as
    | (Record<string, unknown> & { memory?: () => Record<string, unknown> })
    | undefined;
  if (backend == null) return null;
  try {
    if (device === 'webgl' || device === 'webgpu') {
      const m = typeof backend.memory === 'function' ? backend.memory() : null;
      const figure = device === 'webgl' ? m?.['numBytesInGPUAllocated'] : m?.['numBytesAllocatedInGPU'];
      if (typeof figure !== 'number') return null;
      if (device === 'webgl') return { reservedBytes: figure, source: 'webgl texture manager (textures in use + pooled free)' };
      const textures = webgpuTextureBytes(backend['textureManager']);
      if (textures === null) return { reservedBytes: figure, source: 'webgpu buffer manager (buffers in use + pooled free)' };
      return { reservedBytes: figure + textures, source: 'webgpu buffer and texture managers (in use + pooled free)' };
    }
    if (device === 'wasm') {
      const heap = (backend['wasm'] as { HEAPU8?: { byteLength: number } } | undefined)?.HEAPU8;
      if (heap == null) return null;
      return { reservedBytes: heap.byteLength, source: 'wasm heap (linear memory size)' };
    }
  } catch {
    return null;
  }
  return null;
}

/** Bytes per texel of the texture formats a webgpu backend may pool. */
const TEXEL_BYTES: Readonly<Record<string, number>> = { rgba8unorm: 4, bgra8unorm: 4, rgba16float: 8, rgba32float: 16 };

type TexturePool = Map<unknown, { width: number; height: number; depthOrArrayLayers?: number; format: string }[]>;

/**
 * The textures tfjs-backend-webgpu's texture manager holds (in use + pooled
 * free), sized from the GPUTextures themselves. Its own `numBytesAllocated`
 * counts an rgba8unorm texel as 16 B (texture_manager.js,
 * `getBytesPerElement`), four times the format's size, so it is not used.
 * null when the manager is absent or holds a format not in TEXEL_BYTES.
 */
function webgpuTextureBytes(manager: unknown): number | null {
  const m = manager as { usedTextures?: unknown; freeTextures?: unknown } | undefined;
  if (!(m?.usedTextures instanceof Map) || !(m.freeTextures instanceof Map)) return null;
  let bytes = 0;
  for (const pool of [m.usedTextures, m.freeTextures] as TexturePool[]) {
    for (const textures of pool.values()) {
      for (const t of textures) {
        const texel = TEXEL_BYTES[t.format];
        if (texel === undefined) return null;
        bytes += t.width * t.height * (t.depthOrArrayLayers ?? 1) * texel;
      }
    }
  }
  return bytes;
}

/** One TFJS backend in listTfjsDevices(). */
export interface TfjsDeviceListing {
  backend: string;
  /** Whether it is the engine's current backend. */
  active: boolean;
  /** What the backend holds (readDeviceMemory), or null where it keeps no pool of its own. */
  reservedBytes: number | null;
  source: string | null;
}

/**
 * memscope's list_gpu_processes for a TFJS program: every backend registered
 * with the engine, which one is current, and what each holds by its own count.
 */
export function listTfjsDevices(engine: TfEngine): TfjsDeviceListing[] {
  return Object.keys(engine.registry)
    .sort()
    .map((backend) => {
      const reading = readDeviceMemory(engine, backend);
      return { backend, active: engine.backendName === backend, reservedBytes: reading?.reservedBytes ?? null, source: reading?.source ?? null };
    });
}
