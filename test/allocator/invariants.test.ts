import { describe, expect, it } from 'vitest';
import { CachingAllocatorModel } from '../../src/allocator/caching-allocator.js';
import { SimulatedDevice } from '../../src/allocator/device.js';
import { parseAllocatorConf } from '../../src/allocator/settings.js';
import { snapshotSegments } from '../../src/allocator/snapshot.js';
import { MemscopeError } from '../../src/core/errors.js';
import { mulberry32 } from '../support/prng.js';

/** Recomputes the current stats from the block layout and compares. */
function checkAgainstLayout(m: CachingAllocatorModel, expandable: boolean): void {
  const segs = snapshotSegments(m);
  const pools = { all: [] as typeof segs, small_pool: segs.filter((s) => s.segment_type === 'small'), large_pool: segs.filter((s) => s.segment_type === 'large') };
  pools.all = segs;
  const idx = { all: 0, small_pool: 1, large_pool: 2 } as const;
  for (const [name, list] of Object.entries(pools) as [keyof typeof idx, typeof segs][]) {
    const i = idx[name];
    const blocks = list.flatMap((s) => s.blocks.map((b) => ({ ...b, split: s.blocks.length > 1 })));
    const allocated = blocks.filter((b) => b.state === 'active_allocated');
    const active = blocks.filter((b) => b.state !== 'inactive');
    const inactiveSplit = blocks.filter((b) => b.state === 'inactive' && b.split);
    expect(m.stats.allocated_bytes[i].current, `allocated_bytes.${name}`).toBe(allocated.reduce((n, b) => n + b.size, 0));
    expect(m.stats.allocation[i].current, `allocation.${name}`).toBe(allocated.length);
    expect(m.stats.active[i].current, `active.${name}`).toBe(active.length);
    expect(m.stats.active_bytes[i].current, `active_bytes.${name}`).toBe(active.reduce((n, b) => n + b.size, 0));
    expect(m.stats.requested_bytes[i].current, `requested_bytes.${name}`).toBe(active.reduce((n, b) => n + b.requested_size, 0));
    expect(m.stats.reserved_bytes[i].current, `reserved_bytes.${name}`).toBe(list.reduce((n, s) => n + s.total_size, 0));
    if (!expandable) {
      expect(m.stats.segment[i].current, `segment.${name}`).toBe(list.length);
      expect(m.stats.inactive_split[i].current, `inactive_split.${name}`).toBe(inactiveSplit.length);
      expect(m.stats.inactive_split_bytes[i].current, `inactive_split_bytes.${name}`).toBe(inactiveSplit.reduce((n, b) => n + b.size, 0));
    }
    for (const s of list) {
      // Blocks tile their segment, and no two free blocks are adjacent (they would have merged).
      let at = s.address;
      s.blocks.forEach((b, k) => {
        expect(b.address).toBe(at);
        at += b.size;
        if (k > 0 && b.state === 'inactive') expect(s.blocks[k - 1].state).not.toBe('inactive');
      });
      expect(at).toBe(s.address + s.total_size);
    }
  }
  expect(m.deviceBytesInUse).toBe(m.reservedBytes);
}

const CONFS = ['', 'max_split_size_mb:48', 'roundup_power2_divisions:4', 'expandable_segments:True', 'garbage_collection_threshold:0.5'];

describe('stats always agree with the block layout', () => {
  it.each(CONFS.map((c, i) => [c, 1000 + i] as const))('under %j (seed %i): random allocs, frees, empty_cache and OOMs', (conf, seed) => {
    const rand = mulberry32(seed);
    const capacity = 512 * 1024 * 1024;
    const m = new CachingAllocatorModel({ settings: parseAllocatorConf(conf), backend: new SimulatedDevice(capacity) });
    if (conf.startsWith('garbage')) m.setMemoryFraction(0.8);
    const live: number[] = [];
    let ooms = 0;
    for (let step = 0; step < 3000; step++) {
      const r = rand();
      if (r < 0.5 || live.length === 0) {
        // Mixed sizes: small, mid-large and big requests, two streams.
        const kind = rand();
        const size = kind < 0.5 ? Math.floor(rand() * 1024 * 1024) : kind < 0.9 ? Math.floor(rand() * 30 * 1024 * 1024) : Math.floor(rand() * 120 * 1024 * 1024);
        try {
          live.push(m.malloc(size, rand() < 0.8 ? 0 : 1));
        } catch (err) {
          if (!(err instanceof MemscopeError) || err.code !== 'oom') throw err;
          ooms++;
        }
      } else if (r < 0.97) {
        const i = Math.floor(rand() * live.length);
        m.free(live.splice(i, 1)[0]);
      } else {
        m.emptyCache();
      }
      if (step % 100 === 0) checkAgainstLayout(m, conf.startsWith('expandable'));
    }
    checkAgainstLayout(m, conf.startsWith('expandable'));
    expect(m.stats.num_ooms).toBe(ooms);
    expect(ooms, "the OOM path was exercised").toBeGreaterThan(0);
    for (const p of live) m.free(p);
    m.emptyCache();
    checkAgainstLayout(m, conf.startsWith('expandable'));
    expect(m.allocatedBytes).toBe(0);
    expect(m.reservedBytes).toBe(0);
  });
});
