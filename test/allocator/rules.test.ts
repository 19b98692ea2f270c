import { describe, expect, it } from 'vitest';
import { CachingAllocatorModel, type TraceEntry } from '../../src/allocator/caching-allocator.js';
import { SimulatedDevice } from '../../src/allocator/device.js';
import { parseAllocatorConf } from '../../src/allocator/settings.js';
import { roundSize, segmentSizeFor } from '../../src/allocator/sizes.js';
import { divisionsFor } from '../../src/allocator/settings.js';
import { snapshotSegments } from '../../src/allocator/snapshot.js';
import { MemscopeError } from '../../src/core/errors.js';

const KiB = 1024;
const MiB = 1024 * 1024;

function model(conf = '', capacity = 80 * 1024 * MiB): { m: CachingAllocatorModel; events: TraceEntry[] } {
  const events: TraceEntry[] = [];
  const m = new CachingAllocatorModel({
    settings: parseAllocatorConf(conf),
    backend: new SimulatedDevice(capacity, 0x10000000),
    onTrace: (e) => events.push(e),
    now: () => 0,
  });
  return { m, events };
}

/** Segment events as compact strings, e.g. 'segment_alloc 20971520'. */
function segmentEvents(events: TraceEntry[]): string[] {
  return events.filter((e) => e.action.startsWith('segment')).map((e) => `${e.action} ${e.size}`);
}

function layout(m: CachingAllocatorModel): string[] {
  return snapshotSegments(m).map(
    (s) => `${s.segment_type}@${(s.address - 0x10000000) / KiB}K[${s.blocks.map((b) => `${b.size / KiB}K:${b.state[0] === 'a' ? 'A' : '-'}`).join(' ')}]`,
  );
}

describe('rounding', () => {
  it('rounds to 512 bytes with a 512-byte minimum', () => {
    expect([0, 1, 511, 512, 513, 1024, 1025].map((s) => roundSize(s))).toEqual([512, 512, 512, 512, 1024, 1024, 1536]);
  });

  it('rounds to power-of-two divisions where roundup_power2_divisions says so', () => {
    const s = parseAllocatorConf('roundup_power2_divisions:4');
    const r = (n: number): number => roundSize(n, (x) => divisionsFor(s, x));
    expect(r(1200 * MiB)).toBe(1280 * MiB); // 1024 MiB + 256 MiB steps
    expect(r(1024 * MiB)).toBe(1024 * MiB); // powers of two stay
    expect(r(5 * MiB + 1)).toBe(6 * MiB); // 4 MiB + 1 MiB steps
    expect(r(1537)).toBe(2048); // not above 512·4 bytes: plain 512-byte rounding
    expect(r(2049)).toBe(2560); // above it: 2048 + 512-byte steps
  });

  it('parses the list form per 1 MiB..32 GiB interval, ">" filling from the last named one', () => {
    const s = parseAllocatorConf('roundup_power2_divisions:[2:1,64:2,>:8]');
    // index 0 (<2 MiB) is filled by the first entry, index 1 (2 MiB) = 1, 64 MiB index 6 = 2 then overwritten by ">" from 6 on.
    expect(s.roundupPower2Divisions).toEqual([1, 1, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]);
    expect(roundSize(100 * MiB, (x) => divisionsFor(s, x))).toBe(104 * MiB); // 64 MiB + 8 MiB steps
    expect(roundSize(3 * MiB + 1, (x) => divisionsFor(s, x))).toBe(3 * MiB + 512); // 0 divisions: plain rounding
  });
});

describe('pool choice and segment sizes', () => {
  it('uses 2 MiB small segments up to 1 MiB, 20 MiB below 10 MiB, else the size rounded to 2 MiB', () => {
    expect(segmentSizeFor(512)).toBe(2 * MiB);
    expect(segmentSizeFor(1 * MiB)).toBe(2 * MiB);
    expect(segmentSizeFor(1 * MiB + 512)).toBe(20 * MiB);
    expect(segmentSizeFor(10 * MiB - 512)).toBe(20 * MiB);
    expect(segmentSizeFor(10 * MiB)).toBe(10 * MiB);
    expect(segmentSizeFor(11 * MiB + 512)).toBe(12 * MiB);
  });

  it('places ≤1 MiB requests in the small pool and larger ones in the large pool', () => {
    const { m, events } = model();
    m.malloc(1 * MiB);
    m.malloc(1 * MiB + 1);
    expect(segmentEvents(events)).toEqual([`segment_alloc ${2 * MiB}`, `segment_alloc ${20 * MiB}`]);
    expect(layout(m)).toEqual(['small@0K[1024K:A 1024K:-]', `large@${2048}K[1024.5K:A 19455.5K:-]`]);
    expect(m.stats.reserved_bytes.map((s) => s.current)).toEqual([22 * MiB, 2 * MiB, 20 * MiB]);
  });
});

describe('splitting and merging', () => {
  it('splits a large block only when more than 1 MiB would remain', () => {
    const { m } = model();
    const a = m.malloc(19 * MiB); // own 20 MiB segment (≥10 MiB → round to 2 MiB): 1 MiB left → not split
    expect(m.blockSize(a)).toBe(20 * MiB);
    const b = m.malloc(5 * MiB); // 20 MiB segment: 15 MiB left → split
    expect(m.blockSize(b)).toBe(5 * MiB);
    const c = m.malloc(14 * MiB); // best fit: the 15 MiB remainder; 1 MiB left → not split, takes all 15 MiB
    expect(c).toBe(b + 5 * MiB);
    expect(m.blockSize(c)).toBe(15 * MiB);
    expect(m.allocatedBytes).toBe(40 * MiB);
  });

  it('splits a small block whenever at least 512 bytes remain', () => {
    const { m } = model();
    const a = m.malloc(1 * MiB); // 2 MiB small segment: 1 MiB left → split
    const b = m.malloc(1 * MiB - 512); // from that remainder: 512 left → split
    const c = m.malloc(1); // exactly the last 512 bytes
    expect([b, c]).toEqual([a + 1 * MiB, a + 2 * MiB - 512]);
    expect(layout(m)).toEqual(['small@0K[1024K:A 1023.5K:A 0.5K:A]']);
  });

  it('merges a freed block with free neighbours on both sides', () => {
    const { m } = model();
    const a = m.malloc(2 * MiB);
    const b = m.malloc(3 * MiB);
    const c = m.malloc(4 * MiB);
    m.free(a);
    m.free(c);
    expect(layout(m)).toEqual(['large@0K[2048K:- 3072K:A 15360K:-]']);
    expect(m.stats.inactive_split[0].current).toBe(2);
    m.free(b);
    expect(layout(m)).toEqual(['large@0K[20480K:-]']);
    expect(m.stats.inactive_split[0].current).toBe(0);
    expect(m.stats.inactive_split_bytes[0].current).toBe(0);
  });

  it('best fit: smallest sufficient block, ties to the lowest address, allocation at its low end', () => {
    const { m } = model();
    // Two 20 MiB segments each leaving a 16 MiB hole at the same size; one 18 MiB hole.
    const x = m.malloc(4 * MiB);
    const y = m.malloc(16 * MiB); // fills segment 1 (16 MiB remainder, 0 left)
    const z = m.malloc(4 * MiB); // segment 2
    const w = m.malloc(16 * MiB);
    const v = m.malloc(2 * MiB); // segment 3, leaves 18 MiB
    m.free(w);
    m.free(y);
    expect([x, y, z, w, v].every((p) => typeof p === 'number')).toBe(true);
    const got = m.malloc(15 * MiB);
    expect(got).toBe(y); // equal 16 MiB holes: the lower address (segment 1), from its start
    expect(m.malloc(15 * MiB)).toBe(w); // next tie-holder, before the bigger 18 MiB hole
  });
});

describe('max_split_size (oversize blocks)', () => {
  it('never splits oversize blocks, keeps small requests off them, and over-serves by < 20 MiB', () => {
    const { m, events } = model('max_split_size_mb:40');
    const big = m.malloc(50 * MiB);
    expect(m.stats.oversize_allocations.current).toBe(1);
    expect(m.stats.oversize_segments.current).toBe(1);
    m.free(big);
    expect(m.stats.oversize_allocations.current).toBe(0);
    const small = m.malloc(30 * MiB); // < max_split: may not use the cached 50 MiB block
    expect(small).not.toBe(big);
    const again = m.malloc(45 * MiB); // ≥ max_split and 50 < 45 + 20: reuses it whole
    expect(again).toBe(big);
    expect(m.blockSize(again)).toBe(50 * MiB);
    m.free(again);
    const far = m.malloc(64 * MiB);
    expect(far).not.toBe(big);
    m.free(far);
    const huge = m.malloc(42 * MiB); // 64 ≥ 42 + 20 and 50 < 62: takes the 50 MiB block
    expect(huge).toBe(big);
    expect(segmentEvents(events)).toEqual([`segment_alloc ${50 * MiB}`, `segment_alloc ${30 * MiB}`, `segment_alloc ${64 * MiB}`]);
  });

  it('rejects values of 20 MB or less, like PyTorch', () => {
    expect(() => parseAllocatorConf('max_split_size_mb:20')).toThrow(/max_split_size_mb too small, must be > 20/);
  });
});

describe('memory fraction, OOM and retries', () => {
  it('frees cached segments and retries, then raises an OOM that says what was asked, allocated, reserved and free', () => {
    const { m, events } = model('', 100 * MiB);
    m.setMemoryFraction(0.5);
    const a = m.malloc(30 * MiB);
    m.free(a);
    const b = m.malloc(40 * MiB); // 30 cached + 40 > 50 allowed → release the cached segment, retry
    expect(m.stats.num_alloc_retries).toBe(1);
    expect(segmentEvents(events)).toEqual([`segment_alloc ${30 * MiB}`, `segment_free ${30 * MiB}`, `segment_alloc ${40 * MiB}`]);
    const before = JSON.stringify(m.stats);
    let error: unknown;
    try {
      m.malloc(20 * MiB);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MemscopeError);
    expect((error as MemscopeError).code).toBe('oom');
    expect((error as MemscopeError).message).toBe(
      'CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which 60.00 MiB is free. ' +
        'Including non-PyTorch memory, this process has 40.00 MiB memory in use. 50.00 MiB allowed; Of the allocated memory 40.00 MiB ' +
        'is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try ' +
        'setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation. (memscope model: default settings)',
    );
    const after = JSON.parse(JSON.stringify(m.stats));
    expect(after.num_ooms).toBe(1);
    expect(after.num_alloc_retries).toBe(2);
    // Nothing else moved.
    expect({ ...after, num_ooms: 0, num_alloc_retries: 0, num_sync_all_streams: 0 }).toEqual({
      ...JSON.parse(before),
      num_ooms: 0,
      num_alloc_retries: 0,
      num_sync_all_streams: 0,
    });
    expect(events.at(-1)).toMatchObject({ action: 'oom', size: 20 * MiB, device_free: 60 * MiB });
    m.free(b);
  });

  it('checks the fraction argument', () => {
    const { m } = model();
    expect(() => m.setMemoryFraction(1.5)).toThrow('Invalid fraction value: 1.5. Allowed range: 0~1');
  });
});

describe('garbage_collection_threshold', () => {
  it('reclaims old unsplit cached blocks once reserved memory passes the threshold of the allowed memory', () => {
    const { m, events } = model('garbage_collection_threshold:0.5', 100 * MiB);
    m.setMemoryFraction(1);
    const a = m.malloc(30 * MiB);
    const b = m.malloc(30 * MiB);
    m.free(a);
    m.free(b);
    m.malloc(40 * MiB); // no cached fit; 60 MiB reserved > 50 MiB threshold → GC frees both (age ≥ average)
    expect(segmentEvents(events)).toEqual([
      `segment_alloc ${30 * MiB}`,
      `segment_alloc ${30 * MiB}`,
      `segment_free ${30 * MiB}`,
      `segment_free ${30 * MiB}`,
      `segment_alloc ${40 * MiB}`,
    ]);
    expect(m.reservedBytes).toBe(40 * MiB);
    expect(m.stats.num_alloc_retries).toBe(0);
  });

  it('does nothing without a memory fraction (as in PyTorch)', () => {
    const { m } = model('garbage_collection_threshold:0.5', 100 * MiB);
    m.free(m.malloc(30 * MiB));
    m.malloc(40 * MiB);
    expect(m.reservedBytes).toBe(70 * MiB);
  });
});

describe('expandable_segments', () => {
  it('maps 20 MiB pages into one growing segment and packs allocations contiguously', () => {
    const { m, events } = model('expandable_segments:True', 1024 * MiB);
    const a = m.malloc(5 * MiB);
    const b = m.malloc(5 * MiB);
    const c = m.malloc(30 * MiB); // 10 MiB left mapped + 20 more MiB mapped, contiguous
    expect(b).toBe(a + 5 * MiB);
    expect(c).toBe(b + 5 * MiB);
    expect(segmentEvents(events)).toEqual([`segment_map ${20 * MiB}`, `segment_map ${20 * MiB}`]);
    expect(m.reservedBytes).toBe(40 * MiB);
    expect(snapshotSegments(m).map((s) => [s.is_expandable, s.total_size, s.blocks.map((x) => x.size / MiB)])).toEqual([[true, 40 * MiB, [5, 5, 30]]]);
    m.free(c);
    m.emptyCache(); // unmaps the whole free pages at the end: 40 MiB mapped → 20 MiB
    expect(segmentEvents(events).at(-1)).toBe(`segment_unmap ${20 * MiB}`);
    expect(m.reservedBytes).toBe(20 * MiB);
    expect(m.stats.inactive_split[0].current).toBe(0);
  });

  it('a segment with no page left mapped gives its address range back: the next one is a fresh reservation', () => {
    const { m, events } = model('expandable_segments:True', 1024 * MiB);
    const a = m.malloc(5 * MiB);
    m.free(a);
    m.emptyCache();
    expect(segmentEvents(events)).toEqual([`segment_map ${20 * MiB}`, `segment_unmap ${20 * MiB}`]);
    expect(m.segments()).toEqual([]);
    // PyTorch's release_expandable_segment: the old range is gone, so the next map reserves a new one.
    const b = m.malloc(5 * MiB);
    expect(b).not.toBe(a);
    expect(b).toBeGreaterThan(a);
  });

  it('a live block keeps its pages mapped: only whole free pages around it are unmapped', () => {
    const { m, events } = model('expandable_segments:True', 1024 * MiB);
    const a = m.malloc(30 * MiB); // 2 pages mapped, 10 MiB free after a
    const b = m.malloc(25 * MiB); // 10 MiB free + 1 more page: b spans pages 1 and 2
    m.free(a);
    m.emptyCache(); // page 0 is wholly free; page 1 holds 10 MiB of a's old space and b
    expect(segmentEvents(events)).toEqual([`segment_map ${40 * MiB}`, `segment_map ${20 * MiB}`, `segment_unmap ${20 * MiB}`]);
    expect(snapshotSegments(m).map((s) => [s.address - a, s.total_size / MiB, s.blocks.map((x) => [x.size / MiB, x.state])])).toEqual([
      [20 * MiB, 40, [[10, 'inactive'], [25, 'active_allocated'], [5, 'inactive']]],
    ]);
    expect(b).toBe(a + 30 * MiB);
  });
});

describe('emptyCache', () => {
  it('releases only wholly free segments, large pool first', () => {
    const { m, events } = model();
    const l1 = m.malloc(12 * MiB); // its own 12 MiB segment
    const s1 = m.malloc(1000); // small segment (stays: s1 lives)
    const s2 = m.malloc(1 * MiB); // same small segment
    const s3 = m.malloc(1 * MiB + 512); // large pool: a 20 MiB segment...
    const l2 = m.malloc(4 * MiB); // ...shared with l2
    m.free(l1);
    m.free(s3);
    m.free(s2);
    events.length = 0;
    m.emptyCache();
    // l1's 12 MiB segment is wholly free; s3 shared its 20 MiB segment with l2 (still live): kept; small segment holds s1.
    expect(segmentEvents(events)).toEqual([`segment_free ${12 * MiB}`]);
    m.free(l2);
    m.free(s1);
    events.length = 0;
    m.emptyCache();
    expect(segmentEvents(events)).toEqual([`segment_free ${20 * MiB}`, `segment_free ${2 * MiB}`]);
    expect(m.reservedBytes).toBe(0);
    expect(m.stats.num_sync_all_streams).toBe(2);
  });
});

describe('bad frees', () => {
  it('reports unknown pointers and double frees without touching the stats', () => {
    const { m } = model();
    const a = m.malloc(4096);
    m.malloc(8192);
    m.free(a);
    const before = JSON.stringify(m.stats);
    expect(() => m.free(a)).toThrow(/already free \(double free\)/);
    expect(() => m.free(0xdead)).toThrow(/0xdead on device 0: invalid device pointer/);
    expect(() => m.free(-1)).toThrow(/address must be a non-negative integer/);
    expect(JSON.stringify(m.stats)).toBe(before);
  });
});
