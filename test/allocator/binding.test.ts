import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { AllocatorBinding } from '../../src/allocator/binding.js';
import { tfjsAdapter, MemoryTracker } from '../../src/tfjs/index.js';
import { useBackend } from '../tfjs/support/backends.js';

const MiB = 1024 * 1024;

beforeAll(async () => {
  await useBackend('cpu');
});

describe('AllocatorBinding on the real TFJS adapter (cpu)', () => {
  it('models each TFJS storage as a PyTorch CUDA allocation: rounding, pools, caching after dispose', () => {
    const binding = new AllocatorBinding();
    const session = binding.attach(tfjsAdapter);
    try {
      const small = tf.zeros([250]); // 1000 bytes → a 1024-byte block in a 2 MiB small segment
      const large = tf.zeros([1024 * 1024]); // 4 MiB → a 20 MiB large segment
      expect(binding.allocatedBytes('cpu')).toBe(1024 + 4 * MiB);
      expect(binding.reservedBytes('cpu')).toBe(22 * MiB);
      expect(binding.segments('cpu').map((s) => [s.segment_type, s.total_size])).toEqual([
        ['small', 2 * MiB],
        ['large', 20 * MiB],
      ]);
      small.dispose();
      large.dispose();
      expect(binding.allocatedBytes('cpu')).toBe(0);
      expect(binding.reservedBytes('cpu')).toBe(22 * MiB); // cached, like PyTorch
      expect(binding.fragmentation('cpu')).toBe(1);
      binding.model('cpu').emptyCache();
      expect(binding.reservedBytes('cpu')).toBe(0);
    } finally {
      session.detach();
    }
  });

  it('answers "would this fit in a budget": a modelled OOM is counted, never thrown into the program', () => {
    const binding = new AllocatorBinding({ capacity: 64 * MiB });
    const session = binding.attach(tfjsAdapter);
    const kept: tf.Tensor[] = [];
    try {
      for (let i = 0; i < 5; i++) kept.push(tf.zeros([4 * MiB])); // 16 MiB each: the fifth does not fit in 64 MiB
      expect(kept).toHaveLength(5);
      expect(binding.numOoms('cpu')).toBe(1);
      expect(binding.lastOom).toMatch(/^cpu: CUDA out of memory\. Tried to allocate 16\.00 MiB\. GPU 0 has a total capacity of 64\.00 MiB/);
      expect(binding.numAllocRetries('cpu')).toBe(1);
      expect(binding.reservedBytes('cpu')).toBe(64 * MiB);
    } finally {
      for (const t of kept) t.dispose();
      session.detach();
    }
    expect(binding.untrackedFrees).toBe(1); // the storage the model refused
  });

  it('gives the operator tracker reserved bytes on cpu', async () => {
    const binding = new AllocatorBinding();
    const bindingSession = binding.attach(tfjsAdapter);
    try {
      const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 64, inputShape: [32] }), tfl.layers.dense({ units: 8 })] });
      const tracker = new MemoryTracker({ device: 'cpu', reservedSource: binding });
      tracker.startMonitor(model);
      const seen: number[] = [];
      try {
        tf.tidy(() => model.predict(tf.ones([16, 32])));
        seen.push(binding.reservedBytes('cpu'));
      } finally {
        tracker.stop();
      }
      const stats = tracker.stats();
      expect(stats.reservedSource).toBe('caching allocator model (ReservedMemorySource)');
      expect(stats.numOoms).toBe(0);
      expect(stats.records.length).toBeGreaterThan(0);
      // Reserved comes from the model: whole 2 MiB small segments (every storage here is ≤ 1 MiB).
      for (const r of stats.records) expect(r.reserved % (2 * MiB)).toBe(0);
      expect(stats.records.at(-1)!.reserved).toBe(seen[0]);
      model.dispose();
    } finally {
      bindingSession.detach();
    }
  });
});
