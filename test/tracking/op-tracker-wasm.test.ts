// MemoryTracker on the wasm backend: reserved is the wasm heap, allocated is
// rounded to wasm's 8-byte malloc granularity.
import { beforeAll, describe, expect, it } from 'vitest';
import { useDemoBackend } from '../../src/tfjs/demo-backend-node.js';
import { createDemoRun } from '../../src/tfjs/demo-model.js';
import { MemoryTracker } from '../../src/tfjs/memory-tracker.js';

beforeAll(async () => {
  await useDemoBackend('wasm');
});

describe('MemoryTracker on wasm', () => {
  it('records the wasm heap as reserved, never below allocated, with one marker pair per step', () => {
    const run = createDemoRun();
    const tracker = new MemoryTracker();
    try {
      tracker.track(run.model, () => run.train(2), { optimizer: run.optimizer });
    } finally {
      run.dispose();
    }
    const stats = tracker.stats();
    expect(stats.device).toBe('wasm');
    expect(stats.reservedSource).toMatch(/wasm heap/);
    expect(stats.records.length).toBeGreaterThan(100);
    for (const r of stats.records) {
      expect(r.reserved).toBeGreaterThanOrEqual(r.allocated);
      // The heap is whole 64 KiB wasm pages.
      expect(r.reserved % 65536).toBe(0);
      expect(r.allocated % 8).toBe(0);
      expect(r.active).toBe(r.allocated);
    }
    expect(tracker.markers.map((m) => `${m.name}@${m.step}`)).toEqual(['fw_start@0', 'fw_bw_boundary@0', 'fw_start@1', 'fw_bw_boundary@1']);
    // Per-operator totals add up to the whole change over the session.
    const summary = tracker.summary(1000);
    const total = summary.top.reduce((acc, r) => acc + r.totalBytes, 0);
    expect(total).toBe(stats.records.at(-1)!.allocated - stats.baseline.allocated);
    expect(summary.top.some((r) => r.operator === 'demo.bn.forward.FusedBatchNorm')).toBe(true);
  });
});
