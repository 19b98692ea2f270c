// The allocator interface of DeviceMemory: PyTorch's CUDAPluggableAllocator, change_current_allocator,
// get_allocator_backend, the deprecated names and listDevices (torch/cuda/memory.py,
// torch/csrc/cuda/CUDAPluggableAllocator.cpp).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeviceMemory, DEPRECATION_WARNINGS } from '../../src/allocator/api.js';
import { CUDAPluggableAllocator } from '../../src/allocator/allocator-interface.js';
import { MemscopeError } from '../../src/core/errors.js';
import { listTfjsDevices } from '../../src/tfjs/device-memory.js';
import type { TfEngine } from '../../src/tfjs/engine-types.js';

const MiB = 2 ** 20;

function recording(): { calls: unknown[][]; allocator: CUDAPluggableAllocator } {
  const calls: unknown[][] = [];
  let next = 0x10000;
  const allocator = new CUDAPluggableAllocator(
    (size, device, stream) => {
      calls.push(['alloc', size, device, stream]);
      const a = next;
      next += Math.max(size, 1);
      return a;
    },
    (address, size, device, stream) => {
      calls.push(['free', address, size, device, stream]);
    },
  );
  return { calls, allocator };
}

function thrown(f: () => unknown): MemscopeError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(MemscopeError);
    return e as MemscopeError;
  }
  throw new Error('expected a MemscopeError');
}

describe('CUDAPluggableAllocator receives the calls PyTorch makes', () => {
  it('alloc(size, device, stream) with the unrounded size; free gets the size, device and stream of its allocation', () => {
    const mem = new DeviceMemory({ deviceCount: 2 });
    const { calls, allocator } = recording();
    mem.changeCurrentAllocator(allocator);
    const a = mem.cachingAllocatorAlloc(1000, 'cuda:1', 7);
    const b = mem.cachingAllocatorAlloc(3 * MiB + 1, 0, 0);
    const c = mem.cachingAllocatorAlloc(512, undefined, 3);
    mem.cachingAllocatorDelete(b);
    mem.cachingAllocatorDelete(a);
    mem.cachingAllocatorDelete(c);
    expect(calls).toEqual([
      ['alloc', 1000, 1, 7],
      ['alloc', 3 * MiB + 1, 0, 0],
      ['alloc', 512, 0, 3],
      ['free', b, 3 * MiB + 1, 0, 0],
      ['free', a, 1000, 1, 7],
      ['free', c, 512, 0, 3],
    ]);
  });

  it('the rounding to 512 B is the native allocator’s own: the same 1000-byte request holds 1024 bytes there', () => {
    const mem = new DeviceMemory();
    mem.cachingAllocatorAlloc(1000);
    expect(mem.memoryAllocated()).toBe(1024);
    expect(mem.getCurrentAllocator().name).toBe('native');
  });

  it('a pointer it did not allocate: "Trying to free a pointer not allocated here"; statistics it does not implement fail as in PyTorch', () => {
    const mem = new DeviceMemory();
    mem.changeCurrentAllocator(recording().allocator);
    expect(thrown(() => mem.cachingAllocatorDelete(0x99)).message).toContain('Trying to free a pointer not allocated here');
    const stats = thrown(() => mem.memoryStats());
    expect(stats.message).toBe('CUDAPluggableAllocator does not yet support getDeviceStats. If you need it, please file an issue describing your use case.');
    expect(thrown(() => mem.snapshot()).message).toContain('CUDAPluggableAllocator does not yet support snapshot.');
    expect(thrown(() => mem.recordMemoryHistory()).message).toContain('CUDAPluggableAllocator does not yet support recordHistory.');
    // cudaMemGetInfo still answers: without stats, the allocator holds what it handed out.
    mem.cachingAllocatorAlloc(3000);
    expect(mem.memGetInfo()).toEqual([80 * 2 ** 30 - 3000, 80 * 2 ** 30]);
    expect(mem.listDevices()[0]).toMatchObject({ allocator: 'pluggable', allocatedBytes: 3000, reservedBytes: null });
  });

  it('optional stats hooks answer memory_stats, memory_reserved and listDevices', () => {
    const mem = new DeviceMemory({ capacity: 64 * MiB });
    const allocator = new CUDAPluggableAllocator(() => 0x1000, () => {}, {
      name: 'arena',
      memoryStats: () => ({ 'allocated_bytes.all.current': 5, 'reserved_bytes.all.current': 4 * MiB, 'reserved_bytes.all.peak': 8 * MiB }),
    });
    mem.changeCurrentAllocator(allocator);
    mem.cachingAllocatorAlloc(5);
    expect(mem.memoryReserved()).toBe(4 * MiB);
    expect(mem.maxMemoryReserved()).toBe(8 * MiB);
    expect(mem.memGetInfo()).toEqual([60 * MiB, 64 * MiB]);
    expect(mem.listDevices()).toEqual([
      { device: 'cuda:0', index: 0, allocator: 'arena', backend: 'native', initialized: true, allocatedBytes: 5, reservedBytes: 4 * MiB, capacityBytes: 64 * MiB },
    ]);
  });

  it('a snapshot hook answers snapshot() and memorySnapshot()', () => {
    const mem = new DeviceMemory();
    const shown = { segments: [], device_traces: [[]], allocator_settings: {}, external_annotations: [] } as never;
    mem.changeCurrentAllocator(new CUDAPluggableAllocator(() => 0x1000, () => {}, { snapshot: () => shown }));
    expect(mem.snapshot()).toBe(shown);
    expect(mem.memorySnapshot()).toEqual([]);
  });

  it('an allocator returning a bad address or no memory gets a clear error', () => {
    const mem = new DeviceMemory();
    let answer: unknown = -4;
    mem.changeCurrentAllocator(new CUDAPluggableAllocator(() => answer as number, () => {}));
    expect(thrown(() => mem.cachingAllocatorAlloc(64)).message).toBe('the pluggable allocator returned -4 for 64 bytes on device 0: not a non-negative integer address');
    answer = null;
    expect(thrown(() => mem.cachingAllocatorAlloc(64)).code).toBe('oom');
    answer = 0x4000;
    mem.cachingAllocatorAlloc(64);
    expect(thrown(() => mem.cachingAllocatorAlloc(64)).message).toBe('the pluggable allocator returned 0x4000 for 64 bytes on device 0, an address already allocated');
  });
});

describe('changeCurrentAllocator', () => {
  it('swaps an unused allocator; after the first allocation fails with PyTorch’s error', () => {
    const mem = new DeviceMemory();
    mem.cachingAllocatorAlloc(4096);
    const e = thrown(() => mem.changeCurrentAllocator(recording().allocator));
    expect(e.code).toBe('allocator-initialized');
    expect(e.message).toBe("Can't swap an already initialized allocator");
    expect(mem.getCurrentAllocator().name).toBe('native');
  });

  it('setting a memory fraction initializes the allocator too (PyTorch lazily initializes CUDA there)', () => {
    const mem = new DeviceMemory();
    mem.setPerProcessMemoryFraction(0.5);
    expect(() => mem.changeCurrentAllocator(recording().allocator)).toThrow("Can't swap an already initialized allocator");
  });

  it('a CUDAPluggableAllocator is initialized when made, so it cannot be replaced even before it allocates', () => {
    const mem = new DeviceMemory();
    const first = recording().allocator;
    mem.changeCurrentAllocator(first);
    expect(mem.getCurrentAllocator()).toBe(first);
    expect(() => mem.changeCurrentAllocator(recording().allocator)).toThrow("Can't swap an already initialized allocator");
  });

  it('rejects an object without alloc and free', () => {
    const mem = new DeviceMemory();
    expect(thrown(() => mem.changeCurrentAllocator({ name: 'x' } as never)).code).toBe('bad-argument');
  });

  it('DeviceMemory takes an allocator object from the start', () => {
    const { calls, allocator } = recording();
    const mem = new DeviceMemory({ allocator });
    mem.cachingAllocatorAlloc(10, 0, 2);
    expect(calls).toEqual([['alloc', 10, 0, 2]]);
  });
});

describe('getAllocatorBackend', () => {
  it("'native' by default and for backend:native; 'cudaMallocAsync' picks the cudaMallocAsync model", () => {
    expect(new DeviceMemory().getAllocatorBackend()).toBe('native');
    expect(new DeviceMemory({ settings: 'backend:native' }).getAllocatorBackend()).toBe('native');
    const mem = new DeviceMemory({ settings: 'backend:cudaMallocAsync' });
    expect(mem.getAllocatorBackend()).toBe('cudaMallocAsync');
    expect(mem.getCurrentAllocator().name).toBe('cudaMallocAsync');
  });
});

describe('deprecated names', () => {
  afterEach(() => vi.restoreAllMocks());

  it.each([
    ['memoryCached', 'memoryReserved'],
    ['maxMemoryCached', 'maxMemoryReserved'],
  ] as const)('%s returns %s and warns once per process with PyTorch’s FutureWarning', (old, current) => {
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const mem = new DeviceMemory();
    mem.cachingAllocatorAlloc(3 * MiB);
    expect(mem[old]()).toBe(mem[current]());
    expect(mem[old]()).toBe(20 * MiB);
    expect(spy.mock.calls).toEqual([[DEPRECATION_WARNINGS[old], 'FutureWarning']]);
  });

  it.each(['resetMaxMemoryAllocated', 'resetMaxMemoryCached'] as const)('%s resets every peak and warns once', (old) => {
    const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const mem = new DeviceMemory();
    const a = mem.cachingAllocatorAlloc(3 * MiB);
    mem.cachingAllocatorDelete(a);
    mem.emptyCache();
    expect(mem.maxMemoryReserved()).toBe(20 * MiB);
    mem[old]();
    mem[old]();
    expect([mem.maxMemoryReserved(), mem.maxMemoryAllocated()]).toEqual([0, 0]);
    expect(spy.mock.calls).toEqual([[DEPRECATION_WARNINGS[old], 'FutureWarning']]);
  });

  it('uses PyTorch’s texts', () => {
    expect(DEPRECATION_WARNINGS.memoryCached).toBe('`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`');
    expect(DEPRECATION_WARNINGS.resetMaxMemoryCached).toBe(
      'torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, which resets /all/ peak memory stats.',
    );
  });
});

describe('listDevices', () => {
  it('every device with its allocator, backend and what it holds', () => {
    const mem = new DeviceMemory({ deviceCount: 2, capacity: 16 * 2 ** 30 });
    mem.cachingAllocatorAlloc(1000, 1);
    expect(mem.listDevices()).toEqual([
      { device: 'cuda:0', index: 0, allocator: 'native', backend: 'native', initialized: true, allocatedBytes: 0, reservedBytes: 0, capacityBytes: 16 * 2 ** 30 },
      { device: 'cuda:1', index: 1, allocator: 'native', backend: 'native', initialized: true, allocatedBytes: 1024, reservedBytes: 2 * MiB, capacityBytes: 16 * 2 ** 30 },
    ]);
  });

  it('for TFJS: every registered backend, the current one, and what each holds by its own count', () => {
    const engine = {
      backendName: 'webgl',
      registry: {
        webgl: { memory: () => ({ numBytesInGPUAllocated: 4096 }) },
        cpu: {},
        wasm: { wasm: { HEAPU8: { byteLength: 16 * MiB } } },
      },
    } as unknown as TfEngine;
    expect(listTfjsDevices(engine)).toEqual([
      { backend: 'cpu', active: false, reservedBytes: null, source: null },
      { backend: 'wasm', active: false, reservedBytes: 16 * MiB, source: 'wasm heap (linear memory size)' },
      { backend: 'webgl', active: true, reservedBytes: 4096, source: 'webgl texture manager (textures in use + pooled free)' },
    ]);
  });
});
