import { describe, it, expect } from 'vitest';
import { snapshotMemoryStats, traceActionCounts } from '../../src/torch/snapshot-analysis.js';
import { readSnapshot } from '../../src/torch/index.js';
import { pythonPickle } from './python.js';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fixture } from '../support/fixtures.js';

// snapshotMemoryStats replays a device's trace in one pass tuned for a fresh process
// (snapshot-analysis.ts, `replayTrace`). Here it meets every action, sizes on both sides of the
// pool boundaries, and sizes no pickler writes (0, negative), against the definitions written out
// event by event: a family's peak is current − (sum of its deltas) + (highest prefix of them, 0
// included); Tot Alloc / Tot Freed add up the positive / negative deltas.

const ACTIONS = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap', 'oom', 'snapshot'];
const SIZES = [512, 1 << 20, (1 << 20) + 512, 2 << 20, 3 * 2 ** 30, 0, -512];
const FAMILIES = ['allocation', 'allocated_bytes', 'active', 'active_bytes', 'segment', 'reserved_bytes', 'requested_bytes'];

/**
 * The deltas one event makes, as [family, pool, delta] (pool: the event's own; the "all" row moves
 * with it). A trace's alloc and free sizes are the requested sizes (CUDACachingAllocator.cpp's
 * record_trace calls), so requested bytes move exactly as the trace's allocated bytes.
 */
function deltas(action: string, size: number): [string, string, number][] {
  const block = size <= 1 << 20 ? 'small_pool' : 'large_pool';
  const segment = size === 2 << 20 ? 'small_pool' : 'large_pool';
  switch (action) {
    case 'alloc':
      return [['allocation', block, 1], ['allocated_bytes', block, size], ['active', block, 1], ['active_bytes', block, size], ['requested_bytes', block, size]];
    case 'free_requested':
      return [['allocation', block, -1], ['allocated_bytes', block, -size], ['requested_bytes', block, -size]];
    case 'free_completed':
      return [['active', block, -1], ['active_bytes', block, -size]];
    case 'segment_alloc':
      return [['segment', segment, 1], ['reserved_bytes', segment, size]];
    case 'segment_free':
      return [['segment', segment, -1], ['reserved_bytes', segment, -size]];
    case 'segment_map':
      return [['reserved_bytes', 'large_pool', size]];
    case 'segment_unmap':
      return [['reserved_bytes', 'large_pool', -size]];
    default:
      return [];
  }
}

describe('memory_stats from a trace', () => {
  it('peaks and totals of every family and pool follow their definitions, event by event', () => {
    let seed = 7;
    const next = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
      return (seed >>> 8) % n;
    };
    // Allocations more often than the rest, so that peaks build up and fall again.
    const events = Array.from({ length: 3000 }, () => {
      const r = next(20);
      return { action: ACTIONS[r < 6 ? 0 : r - 6 < ACTIONS.length ? r - 6 : 0]!, size: SIZES[next(SIZES.length)]! };
    });
    const bytes = pythonPickle(
      `{'segments': [], 'device_traces': [[{'action': a, 'addr': 4096 * i, 'size': s, 'stream': 0, 'time_us': i, 'frames': []} for i, (a, s) in enumerate(events)]]}`,
      4,
      `events = ${JSON.stringify(events.map((e) => [e.action, e.size]))}`,
    );
    const snapshot = readSnapshot(bytes);
    const { stats, traceEvents } = snapshotMemoryStats(snapshot, 0);
    expect(traceEvents).toBe(events.length);

    const expected: Record<string, number> = {};
    for (const family of FAMILIES) {
      for (const pool of ['all', 'large_pool', 'small_pool']) {
        let sum = 0;
        let highest = 0;
        let allocated = 0;
        let freed = 0;
        for (const e of events) {
          for (const [f, p, v] of deltas(e.action, e.size)) {
            if (f !== family || (pool !== 'all' && p !== pool)) continue;
            sum += v;
            highest = Math.max(highest, sum);
            if (v > 0) allocated += v;
            else freed -= v;
          }
        }
        // Nothing is live at the end (no segments), so current is 0 and the peak is highest − sum.
        expected[`${family}.${pool}.peak`] = highest - sum;
        expected[`${family}.${pool}.allocated`] = allocated;
        expected[`${family}.${pool}.freed`] = freed;
      }
    }
    const got = Object.fromEntries(Object.keys(expected).map((k) => [k, stats[k]]));
    expect(got).toEqual(expected);
    expect(stats['num_ooms']).toBe(events.filter((e) => e.action === 'oom').length);
    // Every action and size case occurred, or the comparison above proves less than it says.
    for (const a of ACTIONS) expect(events.some((e) => e.action === a)).toBe(true);
    for (const s of SIZES) expect(events.some((e) => e.size === s && e.action === 'alloc')).toBe(true);

    // The action counts come from the same pass, in order of first appearance.
    const counts = new Map<string, number>();
    for (const e of events) counts.set(e.action, (counts.get(e.action) ?? 0) + 1);
    const [byAction] = traceActionCounts(snapshot);
    expect(byAction).toEqual({ device: 0, counts: Object.fromEntries(counts) });
    expect(Object.keys(byAction!.counts)).toEqual([...counts.keys()]);
  });

  it('a real training step: Requested memory is what CPython replays from the trace and the blocks\u2019 requested sizes', () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const want = JSON.parse(
      execFileSync('python3', [
        '-c',
        `import pickle, sys, json
d = pickle.load(open(sys.argv[1], 'rb'))
cur = sum(b['requested_size'] for s in d['segments'] for b in s['blocks'] if b['state'] == 'active_allocated')
t = d['device_traces'][0]
alloc = sum(e['size'] for e in t if e['action'] == 'alloc')
freed = sum(e['size'] for e in t if e['action'] == 'free_requested')
x = peak = cur - alloc + freed
for e in t:
    if e['action'] == 'alloc': x += e['size']; peak = max(peak, x)
    elif e['action'] == 'free_requested': x -= e['size']
print(json.dumps([cur, peak, alloc, freed]))`,
        file,
      ], { encoding: 'utf8' }),
    ) as number[];
    const { stats } = snapshotMemoryStats(readSnapshot(readFileSync(file)), 0);
    expect(['current', 'peak', 'allocated', 'freed'].map((k) => stats[`requested_bytes.all.${k}`])).toEqual(want);
    // The trace moves it: the peak is above the current value.
    expect(want[1]).toBeGreaterThan(want[0]!);
  });
});
