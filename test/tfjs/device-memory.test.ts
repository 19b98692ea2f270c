import { describe, it, expect } from 'vitest';
import { readDeviceMemory } from '../../src/tfjs/index.js';
import type { TfEngine } from '../../src/tfjs/engine-types.js';

// Real webgl is covered in test/browser/tfjs-adapter-webgl.test.ts and real
// wasm in devices-wasm.test.ts. Headless Chromium here has no WebGPU, so the
// webgpu figure is pinned against the shape of tfjs-backend-webgpu's
// `memory()` (backend_webgpu.js: numBytesInGPU = buffers in use,
// numBytesAllocatedInGPU = in use + pooled free).
const engineWith = (registry: Record<string, unknown>) => ({ registry }) as unknown as TfEngine;

describe('readDeviceMemory', () => {
  it('webgpu: the buffer manager total (in use + pooled), not just what tensors use', () => {
    const e = engineWith({ webgpu: { memory: () => ({ numBytesInGPU: 100, numBytesAllocatedInGPU: 160, unreliable: false }) } });
    expect(readDeviceMemory(e, 'webgpu')).toEqual({ reservedBytes: 160, source: 'webgpu buffer manager (buffers in use + pooled free)' });
  });

  it('webgl: the texture manager total', () => {
    const e = engineWith({ webgl: { memory: () => ({ numBytesInGPU: 10, numBytesInGPUAllocated: 64, numBytesInGPUFree: 54 }) } });
    expect(readDeviceMemory(e, 'webgl')?.reservedBytes).toBe(64);
  });

  it('cpu, unknown devices and backends that cannot tell: null, never a throw', () => {
    const e = engineWith({
      cpu: { memory: () => ({ unreliable: true }) },
      webgl: { memory: () => { throw new Error('context lost'); } },
      wasm: {},
    });
    expect(readDeviceMemory(e, 'cpu')).toBeNull();
    expect(readDeviceMemory(e, 'nope')).toBeNull();
    expect(readDeviceMemory(e, 'webgl')).toBeNull();
    expect(readDeviceMemory(e, 'wasm')).toBeNull();
  });
});
