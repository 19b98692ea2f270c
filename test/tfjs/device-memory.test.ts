import { describe, it, expect } from 'vitest';
import { readDeviceMemory } from '../../src/tfjs/index.js';
import type { TfEngine } from '../../src/tfjs/engine-types.js';

// Real webgl is covered in test/browser/tfjs-adapter-webgl.test.ts, real
// webgpu in test/browser/webgpu.test.ts and real wasm in devices-wasm.test.ts.
// Here the figures are pinned against the shape of the backends' `memory()`
// (backend_webgpu.js: numBytesInGPU = buffers in use, numBytesAllocatedInGPU =
// in use + pooled free; its texture manager is outside memory()).
const engineWith = (registry: Record<string, unknown>) => ({ registry }) as unknown as TfEngine;

describe('readDeviceMemory', () => {
  it('webgpu: the buffer manager total (in use + pooled), not just what tensors use', () => {
    const e = engineWith({ webgpu: { memory: () => ({ numBytesInGPU: 100, numBytesAllocatedInGPU: 160, unreliable: false }) } });
    expect(readDeviceMemory(e, 'webgpu')).toEqual({ reservedBytes: 160, source: 'webgpu buffer manager (buffers in use + pooled free)' });
  });

  it('webgpu: adds the texture pool (fromPixels) that memory() leaves out, sized by texture format', () => {
    const texture = (width: number, height: number, format = 'rgba8unorm') => ({ width, height, depthOrArrayLayers: 1, format });
    const memory = () => ({ numBytesInGPU: 100, numBytesAllocatedInGPU: 160, unreliable: false });
    // numBytesAllocated as TFJS counts it (16 B a texel); memscope sizes the textures: 4 B a texel.
    const textureManager = {
      numBytesAllocated: (17 * 13 + 2 * 2) * 16,
      usedTextures: new Map([['17_13', [texture(17, 13)]]]),
      freeTextures: new Map([['2_2', [texture(2, 2)]], ['1_1', []]]),
    };
    expect(readDeviceMemory(engineWith({ webgpu: { memory, textureManager } }), 'webgpu')).toEqual({
      reservedBytes: 160 + (17 * 13 + 2 * 2) * 4,
      source: 'webgpu buffer and texture managers (in use + pooled free)',
    });
    const unknownFormat = { usedTextures: new Map([['k', [texture(4, 4, 'r8unorm')]]]), freeTextures: new Map() };
    expect(readDeviceMemory(engineWith({ webgpu: { memory, textureManager: unknownFormat } }), 'webgpu')).toEqual({
      reservedBytes: 160,
      source: 'webgpu buffer manager (buffers in use + pooled free)',
    });
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
