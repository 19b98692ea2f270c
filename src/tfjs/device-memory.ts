import type { DeviceMemoryReading } from '../core/adapter.js';
import type { TfEngine } from './engine-types.js';

/**
 * What a TFJS backend really holds, as the backend itself reports it:
 * - webgl: `backend.memory().numBytesInGPUAllocated` — bytes of every texture
 *   the texture manager has created and not deleted, in use or pooled free
 *   (the pool is webgl's caching allocator).
 * - webgpu: `backend.memory().numBytesAllocatedInGPU` — bytes of every GPU
 *   buffer the buffer manager holds, in use or pooled free.
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
      return {
        reservedBytes: figure,
        source: device === 'webgl' ? 'webgl texture manager (textures in use + pooled free)' : 'webgpu buffer manager (buffers in use + pooled free)',
      };
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
