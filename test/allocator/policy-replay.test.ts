// Replaying a snapshot's trace through allocator policies: the built-in native and cudaMallocAsync
// models, the example bump policy, and user modules that misbehave. The fixture's program and
// PyTorch's own figures for it are worked out in test/allocator/make_policy_fixture.py.
import { describe, expect, it } from 'vitest';
import { loadAllocatorPolicy } from '../../src/allocator/policy-module-node.js';
import { BUILTIN_POLICIES, recordedFigures, replayThroughAllocator } from '../../src/allocator/policy-replay.js';
import { readReplaySnapshot } from '../../src/allocator/read-snapshot-node.js';
import { replaySnapshot } from '../../src/allocator/replay.js';
import { MemscopeError } from '../../src/core/errors.js';
import { fixture, repoRoot } from '../support/fixtures.js';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const MiB = 2 ** 20;
const snap = () => readReplaySnapshot(fixture('torch/policy_small.pickle'));

describe('what PyTorch did (from the trace)', () => {
  it('the hand-made trace is what the caching model produces for that program (every address and segment event)', () => {
    const d = replaySnapshot(snap()).devices[0];
    expect([d.allocAddresses.rate, d.segmentEvents.rate, d.finalSegments.rate, d.finalBlocks.rate]).toEqual([1, 1, 1, 1]);
    expect([d.allocAddresses.total, d.segmentEvents.total]).toEqual([4, 3]);
    expect(d.verdict).toBe('complete');
  });

  it('peaks at 50 MiB reserved (S0 20 + S1 30) when c is allocated, with 44 MiB live: 12% fragmentation', () => {
    const r = recordedFigures(snap(), 0);
    expect(r).toEqual({ peakReservedBytes: 50 * MiB, peakReservedAt: 4, peakLiveBytes: 44 * MiB, fragmentationAtPeak: 1 - 44 / 50, ooms: 0 });
  });
});

describe('replay through the native caching allocator', () => {
  it('reserves S0 then S1 (50 MiB at event 4, live 8+6+30 MiB), reuses a’s block for d and ends with S0 after empty_cache', () => {
    const r = replayThroughAllocator(snap(), BUILTIN_POLICIES.native);
    expect(r.policy).toBe('native');
    expect(r.reservedSource).toBe('allocator');
    expect(r.peakReservedBytes).toBe(50 * MiB);
    expect(r.peakReservedAt).toBe(4);
    expect(r.fragmentationAtPeak).toBeCloseTo(1 - 44 / 50, 12);
    expect(r.peakLiveBytes).toBe(44 * MiB);
    expect(r.endReservedBytes).toBe(20 * MiB);
    expect([r.allocs, r.frees, r.emptyCacheCalls]).toEqual([4, 2, 1]);
    expect(r.oom).toBeNull();
    expect(r.pytorch.peakReservedBytes).toBe(r.peakReservedBytes);
  });

  it('on a 40 MiB device runs out at c (event 4): 20 MiB held by live a and b, 30 MiB more needed', () => {
    const r = replayThroughAllocator(snap(), BUILTIN_POLICIES.native, { capacity: 40 * MiB });
    expect(r.oom?.traceIndex).toBe(4);
    expect(r.oom?.requestedBytes).toBe(30 * MiB);
    expect(r.oom?.message).toContain('CUDA out of memory. Tried to allocate 30.00 MiB');
  });
});

describe('replay through the cudaMallocAsync model', () => {
  it('grows by 8, 6, 30 MiB chunks (44 MiB, no fragmentation), serves d from a’s freed chunk, and empty_cache trims c’s chunk', () => {
    const r = replayThroughAllocator(snap(), BUILTIN_POLICIES.cudaMallocAsync);
    expect(r.peakReservedBytes).toBe(44 * MiB);
    expect(r.peakReservedAt).toBe(4);
    expect(r.fragmentationAtPeak).toBe(0);
    expect(r.endReservedBytes).toBe(14 * MiB);
  });
});

describe('replay through the example bump policy (examples/bump-policy.mjs)', () => {
  it('never reuses: reserved is 8+6+30+7 = 51 MiB, reached at d (event 7) with 43 MiB live', async () => {
    const factory = await loadAllocatorPolicy(resolve(repoRoot, 'examples/bump-policy.mjs'));
    const r = replayThroughAllocator(snap(), factory);
    expect(r.policy).toBe('bump');
    expect(r.peakReservedBytes).toBe(51 * MiB);
    expect(r.peakReservedAt).toBe(7);
    expect(r.fragmentationAtPeak).toBeCloseTo(1 - 43 / 51, 12);
    expect(r.endReservedBytes).toBe(51 * MiB);
  });

  it('is the policy docs/ALLOCATOR.md shows (the file without its header comment)', () => {
    const file = readFileSync(resolve(repoRoot, 'examples/bump-policy.mjs'), 'utf8');
    const doc = readFileSync(resolve(repoRoot, 'docs/ALLOCATOR.md'), 'utf8');
    const shown = /is a complete policy[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(shown).toBe(file.replace(/^(\/\/.*\n)+/, ''));
    expect(shown!.split('\n').length).toBeLessThanOrEqual(26);
  });

  it('returns null past its capacity: with 40 MiB it runs out at c (8+6+30 = 44 MiB)', async () => {
    const factory = await loadAllocatorPolicy(resolve(repoRoot, 'examples/bump-policy.mjs'));
    const r = replayThroughAllocator(snap(), factory, { capacity: 40 * MiB });
    expect(r.oom).toEqual({ traceIndex: 4, requestedBytes: 30 * MiB, message: 'bump returned no memory for 31457280 bytes' });
  });
});

describe('a policy without reservedBytes is measured by the span of its live allocations', () => {
  it('a policy placing a, b, c, d at fixed spots: span from the lowest to the highest live byte', () => {
    const spots = [0, 8 * MiB, 100 * MiB, 0];
    let n = 0;
    const r = replayThroughAllocator(snap(), () => ({ alloc: () => spots[n++], free() {} }));
    expect(r.policy).toBe('policy');
    expect(r.reservedSource).toBe('address span');
    // after c: 0 .. 130 MiB live; d reuses a's spot; after c's free the span is 0 .. 14 MiB.
    expect(r.peakReservedBytes).toBe(130 * MiB);
    expect(r.endReservedBytes).toBe(14 * MiB);
  });
});

describe('a misbehaving policy gets one error naming the event', () => {
  async function failure(name: string): Promise<MemscopeError> {
    const factory = await loadAllocatorPolicy(fixture(`policies/${name}`));
    try {
      replayThroughAllocator(snap(), factory);
    } catch (e) {
      expect(e).toBeInstanceOf(MemscopeError);
      return e as MemscopeError;
    }
    throw new Error('the replay did not fail');
  }

  it('a throw: device, trace index, action, size, stream and the first line of its message', async () => {
    const e = await failure('throws.mjs');
    expect(e.code).toBe('policy-error');
    expect(e.message).toBe('thrower: device 0, trace event 4 (alloc, 31457280 bytes, stream 0): alloc threw: no room for this one');
  });

  it('an address overlapping a live allocation', async () => {
    const e = await failure('overlap.mjs');
    expect(e.message).toBe(
      'same-address: device 0, trace event 2 (alloc, 6291456 bytes, stream 0): alloc returned 0x2000000, overlapping the live allocation 0x2000000..0x2800000',
    );
  });

  it('a non-integer address', async () => {
    const e = await failure('fractional.mjs');
    expect(e.message).toBe('policy: device 0, trace event 2 (alloc, 6291456 bytes, stream 0): alloc returned 1.5, not a non-negative integer address');
  });

  it('a negative address, from an inline policy', () => {
    expect(() => replayThroughAllocator(snap(), () => ({ name: 'neg', alloc: () => -512, free() {} }))).toThrow(
      'neg: device 0, trace event 1 (alloc, 8388608 bytes, stream 0): alloc returned -512, not a non-negative integer address',
    );
  });

  it('a module that exports no allocator, or a path that does not exist', async () => {
    await expect(loadAllocatorPolicy(fixture('README.md'))).rejects.toThrow(/failed to load/);
    await expect(loadAllocatorPolicy('./no-such-policy.mjs')).rejects.toThrow('--allocator ./no-such-policy.mjs: not native, cudaMallocAsync, or an existing .mjs/.js file');
  });
});
