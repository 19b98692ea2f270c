import { describe, expect, it } from 'vitest';
import { readSnapshotFile } from '../../src/allocator/read-snapshot-node.js';
import { parseSnapshot, reconstructStartState, replaySnapshot, whatIf } from '../../src/allocator/replay.js';
import { parseAllocatorConf } from '../../src/allocator/settings.js';
import { MemscopeError } from '../../src/core/errors.js';
import { fixture } from '../support/fixtures.js';

const cache = new Map<string, unknown>();
/** Read through memscope's own pickle reader (src/torch/pickle/reader.ts). */
function load(name: string): any {
  if (!cache.has(name)) cache.set(name, readSnapshotFile(fixture(`torch/${name}`)));
  return structuredClone(cache.get(name));
}

describe('replay fidelity on real PyTorch snapshots', () => {
  it.each([
    // file, allocs, segment events in the trace, end-state segments, end-state blocks
    ['transformer_forward_trace.pickle', 2058, 289, 516, 1276],
    ['transformer_fullstep_trace.pickle', 6770, 1212, 1010, 1525],
    ['newest_format_trace.pickle', 1721, 0, 216, 455],
  ])('%s: every address, segment event and end-state block matches PyTorch', (file, allocs, segEvents, segments, blocks) => {
    const report = replaySnapshot(load(file));
    expect(report.devices).toHaveLength(1);
    const d = report.devices[0];
    expect(d.startStateProblems).toEqual([]);
    expect(d.mismatches).toEqual([]);
    expect(d.allocAddresses).toEqual({ matched: allocs, total: allocs, rate: 1 });
    expect(d.segmentEvents).toEqual({ matched: segEvents, total: segEvents, rate: 1, model: segEvents });
    expect(d.finalSegments).toEqual({ matched: segments, total: segments, rate: 1 });
    expect(d.finalBlocks).toEqual({ matched: blocks, total: blocks, rate: 1 });
  }, 30_000);

  it('fullstep: the trace opens with 430 segment_frees that the model reproduces from its own release rule', () => {
    const raw = load('transformer_fullstep_trace.pickle');
    const trace = raw.device_traces[0];
    expect(trace.slice(0, 431).map((e: any) => e.action).join(',')).toBe([...Array(430).fill('segment_free'), 'segment_alloc'].join(','));
    const start = reconstructStartState(parseSnapshot(raw), 0);
    expect(start.layout).toHaveLength(658);
    expect(replaySnapshot(raw).devices[0].segmentEvents.rate).toBe(1);
  }, 30_000);

  it('the comparison can fail: under other settings the same trace no longer matches', () => {
    const raw = load('newest_format_trace.pickle');
    raw.allocator_settings.max_split_size = 40 * 1024 * 1024;
    const d = replaySnapshot(raw).devices[0];
    expect(d.allocAddresses.matched).toBe(1163);
    expect(d.segmentEvents).toMatchObject({ matched: 0, total: 0 + 54, model: 54 });
    expect(d.mismatches[0]).toMatchObject({ traceIndex: 822, kind: 'address' });
    const raw2 = load('newest_format_trace.pickle');
    for (const k of Object.keys(raw2.allocator_settings.roundup_power2_divisions)) raw2.allocator_settings.roundup_power2_divisions[k] = 4;
    const d2 = replaySnapshot(raw2).devices[0];
    expect(d2.allocAddresses.matched).toBe(1708);
    expect(d2.finalBlocks.rate).toBeLessThan(1);
  }, 30_000);

  it('an inconsistent trace (an allocation recorded twice) is reported as incomplete and replayed from the event after it', () => {
    const raw = load('newest_format_trace.pickle');
    const trace = raw.device_traces[0];
    const i = trace.findIndex((e: any) => e.action === 'alloc');
    expect(i).toBe(0);
    trace.splice(i + 1, 0, { ...trace[i] });
    const d = replaySnapshot(raw).devices[0];
    expect(d.startStateProblems[0]).toMatch(/^trace\[0\] alloc at 0xb03000000: no such live block after it$/);
    expect(d.verdict).toBe('incomplete');
    expect(d.replayedFrom).toBe(1);
    expect(d.incomplete).toMatchObject({ fromEvent: 1, allocations: [{ address: 0xb03000000 }] });
    // From event 1 on, the trace is the real one and replays exactly.
    expect(d.allocAddresses).toEqual({ matched: 1721, total: 1721, rate: 1 });
    expect(d.finalBlocks.rate).toBe(1);
  }, 30_000);

  it('a complete real trace gets the verdict complete', () => {
    const d = replaySnapshot(load('transformer_forward_trace.pickle')).devices[0];
    expect(d).toMatchObject({ verdict: 'complete', incomplete: null, replayedFrom: 0, ooms: [], oomAnswer: null });
  }, 30_000);

  it('state-only snapshot: the one free_completed in its trace puts one more live block at the start', () => {
    const raw = load('state_only_259seg.pickle');
    const snap = parseSnapshot(raw);
    const endLive = snap.segments.flatMap((s) => s.blocks).filter((b) => b.state !== 'inactive').length;
    const start = reconstructStartState(snap, 0);
    expect(start.layout.reduce((n, s) => n + s.blocks.filter((b) => b.allocated).length, 0)).toBe(endLive + 1);
    expect(replaySnapshot(raw).devices[0].finalBlocks.rate).toBe(1);
  });

  it('rejects malformed snapshots with the path of the bad field', () => {
    expect(() => parseSnapshot({ segments: [{ address: 'x', blocks: [] }] })).toThrow(MemscopeError);
    expect(() => parseSnapshot({ segments: [{ address: 'x', blocks: [] }] })).toThrow(/segments\[0\]\.address: expected an integer/);
    expect(() => parseSnapshot({ segments: [], device_traces: [[{ action: 7, addr: 1, size: 1 }]] })).toThrow(/device_traces\[0\]\[0\]\.action: expected a string, found 7/);
    expect(() => parseSnapshot([])).toThrow(/expected a dict/);
  });
});

describe('what-if', () => {
  it('expandable segments cut the fragmentation of the forward pass; a small device runs out of memory at a named event', () => {
    const raw = load('transformer_forward_trace.pickle');
    const snap = parseSnapshot(raw);
    const recorded = whatIf(raw, snap.settings, null);
    const expandable = whatIf(raw, parseAllocatorConf('expandable_segments:True'), null);
    expect(recorded.oom).toBeNull();
    expect(expandable.peakReservedBytes).toBeLessThan(recorded.peakReservedBytes);
    expect(expandable.fragmentationAtPeak).toBeLessThan(recorded.fragmentationAtPeak);
    const small = whatIf(raw, snap.settings, 2 * 1024 ** 3);
    expect(small.oom).not.toBeNull();
    expect(small.oom!.message).toMatch(/^CUDA out of memory\. Tried to allocate .* GPU 0 has a total capacity of 2\.00 GiB/);
    expect(small.peakReservedBytes).toBeLessThanOrEqual(2 * 1024 ** 3);
  }, 30_000);
});
