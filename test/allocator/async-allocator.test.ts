// The cudaMallocAsync backend model (c10/cuda/CUDAMallocAsyncAllocator.cpp): what PyTorch does
// around the driver's pool, and memscope's model of the pool itself (docs/ALLOCATOR.md).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeviceMemory } from '../../src/allocator/api.js';
import { CudaMallocAsyncAllocator } from '../../src/allocator/async-allocator.js';
import { MemscopeError } from '../../src/core/errors.js';

const MiB = 2 ** 20;

function asyncMemory(capacity?: number): DeviceMemory {
  return new DeviceMemory({ settings: 'backend:cudaMallocAsync', capacity });
}

describe('memory_stats under backend:cudaMallocAsync', () => {
  it('has every native key; only allocated/active/reserved bytes of the "all" pool (current, peak) are non-zero', () => {
    const mem = asyncMemory();
    const a = mem.cachingAllocatorAlloc(1000);
    mem.cachingAllocatorAlloc(3 * MiB, 0, 1);
    mem.cachingAllocatorDelete(a);
    const stats = mem.memoryStats();
    expect(Object.keys(stats)).toEqual(Object.keys(new DeviceMemory().memoryStats()));
    const nonZero = Object.fromEntries(Object.entries(stats).filter(([, v]) => v !== 0));
    // 1000 B takes a 2 MiB chunk; 3 MiB on stream 1 does not fit its rest and maps a 4 MiB chunk.
    expect(nonZero).toEqual({
      'active_bytes.all.current': 3 * MiB,
      'active_bytes.all.peak': 3 * MiB + 1000,
      'allocated_bytes.all.current': 3 * MiB,
      'allocated_bytes.all.peak': 3 * MiB + 1000,
      'reserved_bytes.all.current': 6 * MiB,
      'reserved_bytes.all.peak': 6 * MiB,
    });
    expect(mem.memoryStatsAsNestedDict().reserved_bytes.all.current).toBe(6 * MiB);
  });

  it('empty_cache trims the pool to what is in use (cudaMemPoolTrimTo 0); peaks stay until reset', () => {
    const mem = asyncMemory();
    const a = mem.cachingAllocatorAlloc(1000);
    const b = mem.cachingAllocatorAlloc(3 * MiB);
    mem.cachingAllocatorDelete(a);
    mem.emptyCache();
    expect(mem.memoryReserved()).toBe(4 * MiB);
    mem.cachingAllocatorDelete(b);
    mem.emptyCache();
    expect([mem.memoryReserved(), mem.maxMemoryReserved()]).toEqual([0, 6 * MiB]);
    mem.resetPeakMemoryStats();
    expect(mem.maxMemoryReserved()).toBe(0);
  });

  it('snapshot and history are refused with PyTorch’s messages', () => {
    const mem = asyncMemory();
    expect(() => mem.snapshot()).toThrow('Calling snapshot with backend:cudaMallocAsync is not meaningful.');
    expect(() => mem.recordMemoryHistory()).toThrow('cudaMallocAsync does not yet support recordHistory.');
  });

  describe('resetAccumulatedMemoryStats', () => {
    afterEach(() => vi.restoreAllMocks());
    it('changes nothing and warns once', () => {
      const spy = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
      const mem = asyncMemory();
      mem.resetAccumulatedMemoryStats();
      mem.resetAccumulatedMemoryStats();
      expect(spy.mock.calls).toEqual([['For backend:cudaMallocAsync, resetAccumulatedStats has no effect.', 'UserWarning']]);
    });
  });
});

describe('the pool', () => {
  it('reuses freed memory of the same stream first, then any stream’s (best fit within each)', () => {
    const pool = new CudaMallocAsyncAllocator();
    const s0 = pool.alloc(8 * MiB, 0, 0)!;
    const s1 = pool.alloc(4 * MiB, 0, 1)!;
    pool.free(s0, 8 * MiB, 0, 0);
    pool.free(s1, 4 * MiB, 0, 1);
    // 2 MiB fits both; stream 0's own 8 MiB range wins over stream 1's tighter 4 MiB one.
    expect(pool.alloc(2 * MiB, 0, 0)).toBe(s0);
    // stream 2 has nothing of its own: the best fit over every stream is stream 1's 4 MiB range.
    expect(pool.alloc(3 * MiB, 0, 2)).toBe(s1);
    expect(pool.reservedBytes(0)).toBe(12 * MiB);
  });

  it('merges a freed range with free neighbours in its chunk, so a chunk can serve one request as big as itself again', () => {
    const pool = new CudaMallocAsyncAllocator();
    const big = pool.alloc(6 * MiB, 0, 0)!;
    pool.free(big, 6 * MiB, 0, 0);
    const parts = [pool.alloc(2 * MiB, 0, 0)!, pool.alloc(2 * MiB, 0, 0)!, pool.alloc(2 * MiB, 0, 0)!];
    expect(parts).toEqual([big, big + 2 * MiB, big + 4 * MiB]);
    pool.free(parts[0], 2 * MiB, 0, 0);
    pool.free(parts[2], 2 * MiB, 0, 0);
    pool.free(parts[1], 2 * MiB, 0, 0);
    expect(pool.alloc(6 * MiB, 0, 0)).toBe(big);
    expect(pool.deviceCalls(0)).toBe(1);
  });

  it('out of memory: trims wholly free chunks before failing, then fails with PyTorch’s message', () => {
    const mem = asyncMemory(10 * MiB);
    const a = mem.cachingAllocatorAlloc(6 * MiB);
    mem.cachingAllocatorDelete(a);
    mem.cachingAllocatorAlloc(8 * MiB); // 6 MiB cached + 8 MiB > 10 MiB: the free chunk is released first
    expect(mem.memoryReserved()).toBe(8 * MiB);
    let error: unknown;
    try {
      mem.cachingAllocatorAlloc(4 * MiB);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MemscopeError);
    expect((error as MemscopeError).code).toBe('oom');
    expect((error as MemscopeError).message).toBe(
      'Allocation on device 0 would exceed allowed memory. (out of memory)\n' +
        'Currently allocated     : 8.00 MiB\n' +
        'Requested               : 4.00 MiB\n' +
        'Device limit            : 10.00 MiB\n' +
        'Free (according to CUDA): 2.00 MiB\n' +
        'PyTorch limit (set by user-supplied memory fraction)\n' +
        '                        : 17179869184.00 GiB',
    );
  });

  it('a memory fraction limits requested bytes, PyTorch’s own check before cudaMallocAsync', () => {
    const mem = asyncMemory(100 * MiB);
    mem.setPerProcessMemoryFraction(0.25);
    mem.cachingAllocatorAlloc(20 * MiB);
    expect(() => mem.cachingAllocatorAlloc(6 * MiB)).toThrow('PyTorch limit (set by user-supplied memory fraction)\n                        : 25.00 MiB');
  });

  it('freeing an unknown pointer is refused', () => {
    const pool = new CudaMallocAsyncAllocator();
    expect(() => pool.free(0x1234, 8, 0, 0)).toThrow('ptr not found in ptr_info');
  });
});

describe('the TFJS binding', () => {
  it('refuses backend:cudaMallocAsync rather than modelling the native allocator under that name', async () => {
    const { AllocatorBinding } = await import('../../src/allocator/binding.js');
    expect(() => new AllocatorBinding({ settings: 'backend:cudaMallocAsync' })).toThrow('AllocatorBinding models the native caching allocator');
  });
});
