// `memscope replay FILE --allocator POLICY` on the hand-made snapshot of make_policy_fixture.py.
import { resolve } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fixture, repoRoot } from '../support/fixtures.js';
import { runReplay } from '../support/replay-cli.js';

const FILE = fixture('torch/policy_small.pickle');
const MiB = 2 ** 20;

const run = runReplay;

afterEach(() => vi.restoreAllMocks());

describe('memscope replay --allocator', () => {
  it('cudaMallocAsync beside PyTorch: 44 MiB against 50 MiB peak reserved, 0% against 12% fragmentation', async () => {
    const text = await run(FILE, '--allocator', 'cudaMallocAsync');
    expect(text).toContain('through the cudaMallocAsync allocator (unlimited capacity)');
    expect(text).toMatch(/peak reserved\s+│\s+44\.00 MiB │\s+50\.00 MiB/);
    expect(text).toMatch(/fragmentation at peak\s+│\s+0\.0% │\s+12\.0%/);
    expect(text).toContain('peak reserved vs PyTorch: -6.00 MiB (-12.0%)');
  });

  it('a user module with --capacity and --json: the bump policy runs out at event 4', async () => {
    const r = JSON.parse(await run(FILE, '--allocator', resolve(repoRoot, 'examples/bump-policy.mjs'), '--capacity', '40MiB', '--json'));
    expect(r).toMatchObject({ policy: 'bump', capacity: 40 * MiB, peakReservedBytes: 14 * MiB, oom: { traceIndex: 4, requestedBytes: 30 * MiB } });
    expect(r.pytorch).toMatchObject({ peakReservedBytes: 50 * MiB, ooms: 0 });
  });

  it('--alloc-conf sets the native policy’s settings: max_split_size_mb:21 keeps c’s 30 MiB segment unsplit, same peak', async () => {
    const r = JSON.parse(await run(FILE, '--allocator', 'native', '--alloc-conf', 'max_split_size_mb:21', '--json'));
    expect(r).toMatchObject({ policy: 'native', peakReservedBytes: 50 * MiB, endReservedBytes: 20 * MiB });
  });

  it('a device without a trace is refused', async () => {
    await expect(run(FILE, '--allocator', 'native', '--device', '3')).rejects.toThrow(`${FILE}: device 3 has no trace to replay`);
  });
});

describe('backend:cudaMallocAsync in --alloc-conf names an allocator, not native settings', () => {
  it('the what-if replay refuses it and points at --allocator', async () => {
    await expect(run(FILE, '--alloc-conf', 'backend:cudaMallocAsync')).rejects.toThrow(
      '--alloc-conf backend:cudaMallocAsync: the what-if replay runs the native caching allocator; replay through the cudaMallocAsync model with --allocator cudaMallocAsync',
    );
  });

  it('with --allocator native it is refused too', async () => {
    await expect(run(FILE, '--allocator', 'native', '--alloc-conf', 'backend:cudaMallocAsync')).rejects.toThrow('use --allocator cudaMallocAsync');
  });
});
