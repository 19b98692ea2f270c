// Replay of a real training-step trace through the allocator interface (reads ../shared, so it
// belongs to the corpus run): the native policy behind the interface reserves what the what-if
// replay of the caching model does, and the cudaMallocAsync model's peak is the figure
// docs/ALLOCATOR.md quotes for this file.
import { describe, expect, it } from 'vitest';
import { BUILTIN_POLICIES, replayThroughAllocator } from '../../src/allocator/policy-replay.js';
import { readReplaySnapshot } from '../../src/allocator/read-snapshot-node.js';
import { whatIf } from '../../src/allocator/replay.js';
import { sharedFile } from '../support/fixtures.js';

const FILE = sharedFile('fixtures/torch-snapshots/corpus/Wedsonlin+assignment2-systems__medium_128_training_memory_snapshot.pickle');

describe('allocator policies on medium_128_training (19,136 trace events)', () => {
  const snap = readReplaySnapshot(FILE);

  it('native through the interface reserves exactly what the caching-model what-if replay reserves', () => {
    const viaInterface = replayThroughAllocator(snap, BUILTIN_POLICIES.native);
    const direct = whatIf(snap, snap.settings, null, 0);
    expect(viaInterface.peakReservedBytes).toBe(direct.peakReservedBytes);
    expect(viaInterface.oom).toBeNull();
  }, 60_000);

  it('cudaMallocAsync peaks at 8,426,356,736 bytes (7.85 GiB) at event 19122, against PyTorch’s 7,235,174,400', () => {
    const r = replayThroughAllocator(snap, BUILTIN_POLICIES.cudaMallocAsync);
    expect(r.peakReservedBytes).toBe(8_426_356_736);
    expect(r.peakReservedAt).toBe(19122);
    expect(r.peakLiveBytes).toBe(7_013_335_044);
    expect(r.pytorch.peakReservedBytes).toBe(7_235_174_400);
    expect(r.peakReservedBytes).toBeGreaterThanOrEqual(r.peakLiveBytes);
  }, 60_000);
});
