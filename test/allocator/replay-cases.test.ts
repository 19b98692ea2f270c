// Replay on hand-made snapshots (test/allocator/make_replay_fixtures.py writes them; each trace is
// what PyTorch's allocator records for the program described there): expandable segments, several
// devices, a recorded OOM, and traces that cannot account for their end state.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readSnapshotFile } from '../../src/allocator/read-snapshot-node.js';
import { expandableAlternative, parseSnapshot, reconstructStartState, replaySnapshot, whatIf } from '../../src/allocator/replay.js';
import { parseAllocatorConf } from '../../src/allocator/settings.js';
import { fixture } from '../support/fixtures.js';
import { runReplay } from '../support/replay-cli.js';

const MiB = 2 ** 20;
const B = 0x7f0000000000;

function load(name: string): any {
  return readSnapshotFile(fixture(`torch/${name}`));
}

const full = { matched: expect.any(Number), rate: 1 };

const cli = runReplay;

afterEach(() => vi.restoreAllMocks());

describe('expandable segments', () => {
  it('segment_map / segment_unmap replay at 100%: 20 MiB pages, growth into the free tail, empty_cache unmapping only whole free pages', () => {
    const d = replaySnapshot(load('replay_expandable.pickle')).devices[0];
    expect(d.startStateProblems).toEqual([]);
    expect(d.mismatches).toEqual([]);
    expect(d.allocAddresses).toEqual({ matched: 3, total: 3, rate: 1 });
    expect(d.segmentEvents).toEqual({ matched: 3, total: 3, rate: 1, model: 3 });
    expect(d.finalSegments).toEqual({ matched: 1, total: 1, rate: 1 });
    expect(d.finalBlocks).toEqual({ matched: 4, total: 4, rate: 1 });
    expect(d.verdict).toBe('complete');
  });

  it('one segment_unmap across two mapped ranges (all of one, a page of the other) replays at 100%', () => {
    const d = replaySnapshot(load('replay_expandable_cut.pickle')).devices[0];
    expect(d.mismatches).toEqual([]);
    expect(d.segmentEvents).toEqual({ matched: 3, total: 3, rate: 1, model: 3 });
    expect(d.finalBlocks).toEqual({ matched: 3, total: 3, rate: 1 });
    expect(d.verdict).toBe('complete');
  });

  it('the comparison can fail: the same trace without expandable_segments does not match', () => {
    const raw = load('replay_expandable.pickle');
    raw.allocator_settings.expandable_segments = false;
    const d = replaySnapshot(raw).devices[0];
    expect(d.segmentEvents.rate).toBeLessThan(1);
    expect(d.finalBlocks.rate).toBeLessThan(1);
  });

  it('a ring that kept only the last events: the mapped pages and live blocks at its start come from the end state', () => {
    const raw = load('replay_expandable_ring.pickle');
    const start = reconstructStartState(parseSnapshot(raw), 0);
    expect(start.layout).toEqual([]);
    expect(start.expandable).toHaveLength(1);
    const es = start.expandable[0];
    expect(es).toMatchObject({ base: B, pageSize: 20 * MiB, isSmall: false });
    expect(es.ranges.map((r) => [r.address, r.totalSize])).toEqual([[B, 60 * MiB]]);
    expect(es.ranges[0].blocks.map((b) => [b.address - B, b.size, b.allocated])).toEqual([
      [0, 30 * MiB, true],
      [30 * MiB, 20 * MiB, true],
      [50 * MiB, 10 * MiB, false],
    ]);
    const d = replaySnapshot(raw).devices[0];
    expect(d).toMatchObject({ allocAddresses: full, segmentEvents: { ...full, total: 1, model: 1 }, finalSegments: full, finalBlocks: full, verdict: 'complete' });
  });
});

describe('several devices in one file', () => {
  it('replays every traced device and names the one without a trace', () => {
    const r = replaySnapshot(load('replay_devices_oom.pickle'));
    expect(r.devices.map((d) => d.device)).toEqual([0, 2]);
    expect(r.untracedDevices).toEqual([1]);
    for (const d of r.devices) {
      expect(d.mismatches).toEqual([]);
      expect(d).toMatchObject({ allocAddresses: full, segmentEvents: full, finalSegments: full, finalBlocks: full, verdict: 'complete' });
    }
    expect(r.devices[1]).toMatchObject({ allocs: 2, finalBlocks: { total: 3 } });
  });
});

describe('a recorded OOM', () => {
  it('is reproduced under the recorded settings: the same segment_free, then no memory', () => {
    const d = replaySnapshot(load('replay_devices_oom.pickle')).devices[0];
    expect(d.segmentEvents).toEqual({ matched: 3, total: 3, rate: 1, model: 3 });
    expect(d.ooms).toEqual([
      { traceIndex: 7, requestedBytes: 200 * MiB, deviceFreeBytes: 150 * MiB, reproduced: true, allocatedBytes: 100 * MiB, reservedBytes: 100 * MiB },
    ]);
  });

  it('answers whether expandable segments would have avoided it, on the memory PyTorch had (reserved + free)', () => {
    const d = replaySnapshot(load('replay_devices_oom.pickle')).devices[0];
    // 100 MiB live + 200 MiB asked = 300 MiB > 250 MiB whatever the layout: no.
    expect(d.oomAnswer).toEqual({
      traceIndex: 7,
      capacityBytes: 250 * MiB,
      alternative: 'expandable_segments:True',
      recordedOomAt: 7,
      alternativeOomAt: 7,
      avoided: false,
    });
  });

  it('what-if tries the recorded request: it fits on a bigger device and the run goes on', () => {
    const snap = parseSnapshot(load('replay_devices_oom.pickle'));
    const big = whatIf(snap, snap.settings, 300 * MiB, 0);
    expect(big.oom).toBeNull();
    expect(big.recordedOoms).toEqual([{ traceIndex: 7, requestedBytes: 200 * MiB, avoided: true }]);
    const small = whatIf(snap, snap.settings, 250 * MiB, 0);
    expect(small.oom).toMatchObject({ traceIndex: 7, requestedBytes: 200 * MiB });
    expect(small.recordedOoms).toEqual([{ traceIndex: 7, requestedBytes: 200 * MiB, avoided: false }]);
  });

  it('expandableAlternative switches the option in the conf string', () => {
    expect(expandableAlternative(parseAllocatorConf('')).conf).toBe('expandable_segments:True');
    expect(expandableAlternative(parseAllocatorConf('max_split_size_mb:128,expandable_segments:True')).conf).toBe('max_split_size_mb:128,expandable_segments:False');
    expect(expandableAlternative(parseAllocatorConf('expandable_segments:False,max_split_size_mb:128'))).toMatchObject({
      conf: 'max_split_size_mb:128,expandable_segments:True',
      expandableSegments: true,
    });
  });
});

describe('traces that cannot account for the end state', () => {
  it('a live block bigger than the rules give (its shaping events predate the trace): the start state the trace implies', () => {
    const snap = parseSnapshot(load('replay_implied_size.pickle'));
    const start = reconstructStartState(snap, 0);
    expect(start.implied).toEqual([{ address: 0x7f5000000000, requestedSize: 4 * MiB, ruleSize: 4 * MiB, impliedSize: 4.5 * MiB, shownBy: 0 }]);
    const d = replaySnapshot(snap).devices[0];
    expect(d.mismatches).toEqual([]);
    expect(d).toMatchObject({ allocAddresses: { matched: 1, total: 1 }, finalBlocks: { matched: 3, total: 3 } });
    expect(d.verdict).toBe('incomplete');
    expect(d.incomplete).toMatchObject({ fromEvent: 0, allocations: [{ address: 0x7f5000000000, requestedSize: 4 * MiB }] });
    expect(d.incomplete!.reason).toMatch(/^1 allocation live when the trace began held more than the size rules give .* first shown by event 0/);
  });

  it('a block no retained event made, inside a segment the trace allocated: replay starts after that event', () => {
    const d = replaySnapshot(load('replay_contradiction.pickle')).devices[0];
    expect(d).toMatchObject({ verdict: 'incomplete', replayedFrom: 1, allocAddresses: { matched: 1, total: 1 }, finalBlocks: { matched: 3, total: 3 } });
    expect(d.incomplete).toMatchObject({ fromEvent: 1, allocations: [{ address: 0x7f6000000400 }] });
    expect(d.mismatches).toEqual([]);
  });
});

describe('memscope replay (text)', () => {
  it('prints each recorded OOM, the answer for expandable segments, the untraced device; what-if runs on the memory PyTorch had', async () => {
    // The CLI reads JSON snapshots too: the same hand-made file as JSON (oom entries and all).
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'memscope-replay-cases-')), 'devices.json');
    writeFileSync(file, JSON.stringify(load('replay_devices_oom.pickle')));
    const text = await cli(file);
    expect(text).toContain('OOM at event 7: PyTorch could not allocate 200.00 MiB with 150.00 MiB free on the device; the model, at the same point, also runs out (allocated 100.00 MiB, reserved 100.00 MiB)');
    expect(text).toContain(
      'would expandable_segments:True have avoided it? no: on a device of 250.00 MiB (reserved + free at the OOM) the run runs out at event 7 under the recorded settings and runs out at event 7 under expandable_segments:True',
    );
    expect(text).toContain('device 1: no trace events; nothing to replay');
    const whatIfText = await cli(file, '--alloc-conf', 'expandable_segments:True');
    expect(whatIfText).toContain('what-if replay of');
    expect(whatIfText).toContain('capacity 250.00 MiB (reserved + free at the recorded OOM, event 7)');
    expect(whatIfText).toContain('recorded OOM at event 7 (200.00 MiB): recorded settings out of memory, what-if out of memory');
    const bigger = await cli(file, '--capacity', '300MiB');
    expect(bigger).toContain('recorded OOM at event 7 (200.00 MiB): recorded settings fits, what-if fits');
  });

  it('names PyTorch defaults when the recorded PYTORCH_CUDA_ALLOC_CONF is empty, and the conf when set', async () => {
    const text = await cli(fixture('torch/replay_implied_size.pickle'));
    expect(text).toContain('under its recorded settings (PyTorch defaults: PYTORCH_CUDA_ALLOC_CONF was not set)');
    expect(text).not.toContain('("")');
    expect(text).toContain('trace incomplete: 1 allocation live when the trace began');
    expect(text).toContain('0x7f5000000000 (4194304 bytes requested): 4718592 bytes, not 4194304: the alloc at event 0 lands at 0x7f5000480000');
    const expandable = await cli(fixture('torch/replay_expandable.pickle'));
    expect(expandable).toContain('under its recorded settings (PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")');
    expect(expandable).toContain('trace complete');
  });
});
