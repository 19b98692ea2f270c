// Blocks freed by the program but still used by another stream: PyTorch's C++ writes their state as
// `active_pending_free` (torch/csrc/cuda/memory_snapshot.cpp); only torch.cuda.memory's docstring
// says `active_awaiting_free`. Both must read as the one known pending state: active, not allocated.
import { describe, it, expect, vi } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KNOWN_BLOCK_STATES, readSnapshot, stateCode } from '../../src/torch/index.js';
import { fragmentation, snapshotMemoryStats, snapshotTotals } from '../../src/torch/snapshot-analysis.js';
import { blockFlameStacks, renderSnapshotFlameGraph } from '../../src/torch/snapshot-flamegraph.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { BLOCK_STATE_COLORS, UNKNOWN_STATE_COLOR } from '../../src/viewer/app/segments.js';
import { DeviceMemory } from '../../src/allocator/api.js';
import { encodeSnapshot } from '../../src/allocator/snapshot-node.js';

vi.setConfig({ testTimeout: 60_000 });

const MiB = 1 << 20;
const KiB = 1 << 10;
const repoRoot = path.resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(path.join(tmpdir(), 'memscope-pending-'));

// A large segment [allocated 4 MiB | pending 6 MiB | inactive 10 MiB] whose trace ends with the
// pending block's free_requested (no free_completed yet), and a small-pool segment whose pending
// block uses the docstring's spelling.
const PENDING_SNAPSHOT = `
import pickle, sys
MiB = 1 << 20
f = lambda name, line: [{'name': name, 'filename': '/home/u/train.py', 'line': line}]
big, small = 1 << 30, 2 << 30
snap = {'segments': [
  {'device': 0, 'address': big, 'total_size': 20 * MiB, 'allocated_size': 4 * MiB, 'active_size': 10 * MiB,
   'requested_size': 3 * MiB, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False,
   'blocks': [
     {'address': big, 'size': 4 * MiB, 'requested_size': 3 * MiB, 'state': 'active_allocated', 'frames': f('forward', 10)},
     {'address': big + 4 * MiB, 'size': 6 * MiB, 'requested_size': 5 * MiB, 'state': 'active_pending_free', 'frames': f('side_stream', 20)},
     {'address': big + 10 * MiB, 'size': 10 * MiB, 'requested_size': 0, 'state': 'inactive', 'frames': []}]},
  {'device': 0, 'address': small, 'total_size': 2 * MiB, 'allocated_size': 0, 'active_size': 512 << 10,
   'requested_size': 0, 'stream': 7, 'segment_type': 'small', 'segment_pool_id': (0, 0), 'is_expandable': False,
   'blocks': [
     {'address': small, 'size': 512 << 10, 'requested_size': 500 << 10, 'state': 'active_awaiting_free', 'frames': f('docstring_name', 30)},
     {'address': small + (512 << 10), 'size': 1536 << 10, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}],
  'device_traces': [[
    {'action': 'segment_alloc', 'addr': big, 'size': 20 * MiB, 'stream': 0, 'time_us': 100, 'frames': []},
    {'action': 'alloc', 'addr': big, 'size': 4 * MiB, 'stream': 0, 'time_us': 110, 'frames': f('forward', 10)},
    {'action': 'alloc', 'addr': big + 4 * MiB, 'size': 6 * MiB, 'stream': 0, 'time_us': 120, 'frames': f('side_stream', 20)},
    {'action': 'free_requested', 'addr': big + 4 * MiB, 'size': 6 * MiB, 'stream': 0, 'time_us': 130, 'frames': f('side_stream', 21)}]],
  'allocator_settings': {}, 'external_annotations': []}
sys.stdout.buffer.write(pickle.dumps(snap, protocol=4))`;

const bytes = new Uint8Array(execFileSync('python3', ['-c', PENDING_SNAPSHOT]));
const file = path.join(tmp, 'pending.pickle');
writeFileSync(file, bytes);
const snapshot = readSnapshot(bytes);
const PENDING = KNOWN_BLOCK_STATES.indexOf('active_pending_free');

describe('active_pending_free blocks (snapshot written by CPython)', () => {
  it('is a known state, and the docstring spelling reads as the same state', () => {
    expect(KNOWN_BLOCK_STATES).toEqual(['active_allocated', 'active_pending_free', 'inactive']);
    expect(snapshot.stateNames).toEqual(['active_allocated', 'active_pending_free', 'inactive']);
    expect(Array.from(snapshot.blocks.state)).toEqual([0, PENDING, 2, PENDING, 2]);
    expect(stateCode(snapshot, 'active_awaiting_free')).toBe(PENDING);
  });

  it('counts as active but not allocated in the totals and memory_stats', () => {
    const all = snapshotTotals(snapshot).all;
    expect([all.allocated, all.active, all.reserved]).toEqual([4 * MiB, 10 * MiB + 512 * KiB, 22 * MiB]);
    expect([all.allocatedFromBlocks, all.activeFromBlocks, all.requestedFromBlocks]).toEqual([4 * MiB, 10 * MiB + 512 * KiB, 3 * MiB]);
    expect([all.allocations, all.activeBlocks, all.inactiveBytes]).toEqual([1, 3, 10 * MiB + 1536 * KiB]);
    const stats = snapshotMemoryStats(snapshot, 0).stats;
    expect(stats['allocated_bytes.all.current']).toBe(4 * MiB);
    expect(stats['active_bytes.all.current']).toBe(10 * MiB + 512 * KiB);
    expect(stats['active_bytes.small_pool.current']).toBe(512 * KiB);
    expect(stats['allocation.all.current']).toBe(1);
    expect(stats['active.all.current']).toBe(3);
  });

  it('memscope summary and stats print the same figures', () => {
    const tsx = path.join(repoRoot, 'node_modules/.bin/tsx');
    const cli = (...args: string[]) => spawnSync(tsx, [path.join(repoRoot, 'src/cli/main.ts'), ...args], { encoding: 'utf8', cwd: tmp });
    const summary = cli('summary', file, '--json');
    expect(summary.status).toBe(0);
    const js = JSON.parse(summary.stdout) as { totals: { all: { allocated: number; active: number; activeBlocks: number; allocations: number } } };
    expect(js.totals.all).toMatchObject({ allocated: 4 * MiB, active: 10 * MiB + 512 * KiB, activeBlocks: 3, allocations: 1 });
    const text = cli('summary', file);
    expect(text.stdout).toContain('reserved 22.00 MiB, allocated 4.00 MiB, active 10.50 MiB, requested 3.00 MiB');
    expect(text.stdout).toMatch(/\| Active memory +\| +10752 KiB \|/);
    expect(text.stdout).toMatch(/\| Allocated memory +\| +4096 KiB \|/);
    // stats follows _memory_viz.py segsum: only active_allocated blocks are allocations, so a
    // pending block is free memory the allocator cannot hand out yet.
    const stats = cli('stats', file, '--json');
    expect(stats.status).toBe(0);
    const fr = JSON.parse(stats.stdout) as ReturnType<typeof fragmentation>;
    expect([fr.totalAllocated, fr.freeInternal, fr.freeExternal]).toEqual([3 * MiB, MiB, 18 * MiB]);
  }, 120_000);

  it('segments flame graph and the HTML report colour pending blocks as pending', () => {
    const stacks = blockFlameStacks(snapshot, false);
    expect(stacks.filter((s) => s.frames.includes('active_pending_free')).reduce((a, s) => a + s.weight, 0)).toBe(6 * MiB + 512 * KiB);
    const svg = renderSnapshotFlameGraph(snapshot, 'segments');
    const pendingRects = [...svg.matchAll(/<g[^>]*>\s*<title>active_pending_free[^<]*<\/title>\s*<rect[^>]*fill="([^"]+)"/g)].map((m) => m[1]);
    expect(pendingRects.length).toBeGreaterThan(0);
    expect(new Set(pendingRects)).toEqual(new Set(['rgb(240,190,90)']));

    const report = snapshotToReport(snapshot, file, DEFAULT_CAPS);
    const colours = report.segments.flatMap((seg) => seg.blocks.state.map((s) => BLOCK_STATE_COLORS[report.blockStates[s]!] ?? UNKNOWN_STATE_COLOR));
    expect(colours).toEqual(['#4e79a7', '#f28e2b', '#d9d9d9', '#f28e2b', '#d9d9d9']);
    // The trace counts a block allocated until free_completed, so the final state it must reach
    // includes pending blocks; leaving them out made the trace "not add up".
    expect(report.notices.filter((n) => n.includes('does not add up'))).toEqual([]);
    // The header's final state is `memscope summary`'s: a pending free is active, no longer allocated.
    expect(report.source.detail).toContain('4.00 MiB allocated of 22.00 MiB reserved');
  });
});

describe("the allocator model's pending free, through a pickle", () => {
  it('a block freed while another stream uses it reads back as active_pending_free', () => {
    const memory = new DeviceMemory();
    memory.recordMemoryHistory();
    const model = memory.allocator(0);
    const kept = memory.cachingAllocatorAlloc(3 * MiB);
    const pending = memory.cachingAllocatorAlloc(5 * MiB);
    model.requestFree(pending);
    const written = memory.snapshot();
    const pickled = encodeSnapshot(written, 'model.pickle');
    expect(pickled).toBeInstanceOf(Uint8Array);
    const read = readSnapshot(pickled as Uint8Array);

    const stateOf = (address: number) => read.stateNames[read.blocks.state[Array.from(read.blocks.address).indexOf(address)]!];
    expect(stateOf(kept)).toBe('active_allocated');
    expect(stateOf(pending)).toBe('active_pending_free');
    expect(read.stateNames).toEqual([...KNOWN_BLOCK_STATES]);
    const totals = snapshotTotals(read).all;
    expect(totals.allocated).toBe(memory.memoryAllocated());
    expect(totals.allocatedFromBlocks).toBe(memory.memoryAllocated());
    expect(totals.active).toBe(memory.memoryStats()['active_bytes.all.current']);
    expect(totals.active - totals.allocated).toBe(5 * MiB);
    const trace = read.traces.find((t) => t.count > 0)!;
    const actions = Array.from(trace.action, (a) => read.actionNames[a]);
    expect(actions.filter((a) => a === 'free_requested')).toHaveLength(1);
    expect(actions).not.toContain('free_completed');

    model.completeFree(pending);
    const after = readSnapshot(encodeSnapshot(memory.snapshot(), 'model.pickle') as Uint8Array);
    expect(snapshotTotals(after).all.active).toBe(snapshotTotals(after).all.allocated);
  });
});
