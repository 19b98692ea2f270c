import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/allocator/api.js';
import { readSnapshotFile } from '../../src/allocator/read-snapshot-node.js';
import { dumpSnapshot, saveMemoryUsage, saveSegmentUsage } from '../../src/allocator/snapshot-node.js';
import { renderMemorySummary } from '../../src/torch/memory-summary.js';
import { MemscopeError } from '../../src/core/errors.js';
import { humanBytes } from '../../src/core/units.js';
import { fixture } from '../support/fixtures.js';

const MiB = 1024 * 1024;

/** A known sequence: small and large allocations, a free that leaves a split hole, an oversize block. */
function knownSequence(): DeviceMemory {
  const m = new DeviceMemory({ settings: 'max_split_size_mb:64', capacity: 16 * 1024 * MiB });
  const a = m.cachingAllocatorAlloc(1000);
  const b = m.cachingAllocatorAlloc(300 * 1024);
  const c = m.cachingAllocatorAlloc(3 * MiB);
  const d = m.cachingAllocatorAlloc(5 * MiB);
  const e = m.cachingAllocatorAlloc(100 * MiB);
  m.cachingAllocatorDelete(c);
  m.cachingAllocatorDelete(b);
  m.cachingAllocatorDelete(e);
  m.cachingAllocatorAlloc(2 * MiB);
  void a;
  void d;
  return m;
}

describe('memoryStats', () => {
  it('has every key family of torch.cuda.memory_stats, sorted', () => {
    const keys = Object.keys(knownSequence().memoryStats());
    const families = ['active', 'active_bytes', 'allocated_bytes', 'allocation', 'inactive_split', 'inactive_split_bytes', 'requested_bytes', 'reserved_bytes', 'segment'];
    const expected: string[] = ['max_split_size', 'num_alloc_retries', 'num_device_alloc', 'num_device_free', 'num_ooms', 'num_sync_all_streams'];
    for (const f of families) for (const p of ['all', 'large_pool', 'small_pool']) for (const c of ['allocated', 'current', 'freed', 'peak']) expected.push(`${f}.${p}.${c}`);
    for (const f of ['oversize_allocations', 'oversize_segments']) for (const c of ['allocated', 'current', 'freed', 'peak']) expected.push(`${f}.${c}`);
    expect(keys).toEqual([...expected].sort());
  });

  it('reports the figures of the known sequence, and resets peaks and totals', () => {
    const m = knownSequence();
    const s = m.memoryStats();
    // The 2 MiB request took the 3 MiB hole whole: splitting would leave only 1 MiB.
    expect(s['allocated_bytes.all.current']).toBe(1024 + 5 * MiB + 3 * MiB);
    expect(s['reserved_bytes.all.current']).toBe(2 * MiB + 20 * MiB + 100 * MiB);
    expect(s['max_split_size']).toBe(64 * MiB);
    expect(s['oversize_segments.current']).toBe(1);
    expect(s['oversize_allocations.peak']).toBe(1);
    expect(m.memoryAllocated()).toBe(s['allocated_bytes.all.current']);
    expect(m.maxMemoryAllocated()).toBe(1024 + 300 * 1024 + 8 * MiB + 100 * MiB);
    expect(m.memoryReserved('cuda:0')).toBe(122 * MiB);
    m.resetPeakMemoryStats();
    expect(m.maxMemoryAllocated()).toBe(m.memoryAllocated());
    m.resetAccumulatedMemoryStats();
    expect(m.memoryStats()['allocation.all.allocated']).toBe(0);
    expect(m.memoryStats()['allocation.all.current']).toBe(3);
    expect(m.memoryStatsAsNestedDict().segment.large_pool.current).toBe(2);
    m.emptyCache();
    expect(m.memoryReserved()).toBe(22 * MiB);
    expect(m.memGetInfo()).toEqual([16 * 1024 * MiB - 22 * MiB, 16 * 1024 * MiB]);
  });

  it('rejects unknown devices', () => {
    expect(() => new DeviceMemory().memoryStats('cuda:3')).toThrow(/device cuda:3 does not exist/);
    expect(() => new DeviceMemory().memoryStats('tpu')).toThrow(MemscopeError);
  });
});

describe('memorySummary', () => {
  it('lays out the known sequence exactly like torch.cuda.memory_summary', () => {
    expect(knownSequence().memorySummary()).toMatchInlineSnapshot(`
      "|===========================================================================|
      |                  PyTorch CUDA memory summary, device ID 0                 |
      |---------------------------------------------------------------------------|
      |            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
      |===========================================================================|
      |        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
      |---------------------------------------------------------------------------|
      | Allocated memory      |   8193 KiB | 110893 KiB | 113965 KiB | 105772 KiB |
      |       from large pool |   8192 KiB | 110592 KiB | 113664 KiB | 105472 KiB |
      |       from small pool |      1 KiB |    301 KiB |    301 KiB |    300 KiB |
      |---------------------------------------------------------------------------|
      | Active memory         |   8193 KiB | 110893 KiB | 113965 KiB | 105772 KiB |
      |       from large pool |   8192 KiB | 110592 KiB | 113664 KiB | 105472 KiB |
      |       from small pool |      1 KiB |    301 KiB |    301 KiB |    300 KiB |
      |---------------------------------------------------------------------------|
      | Requested memory      |   7168 KiB | 110892 KiB | 112940 KiB | 105772 KiB |
      |       from large pool |   7168 KiB | 110592 KiB | 112640 KiB | 105472 KiB |
      |       from small pool |      0 KiB |    300 KiB |    300 KiB |    300 KiB |
      |---------------------------------------------------------------------------|
      | GPU reserved memory   | 124928 KiB | 124928 KiB | 124928 KiB |      0 B   |
      |       from large pool | 122880 KiB | 122880 KiB | 122880 KiB |      0 B   |
      |       from small pool |   2048 KiB |   2048 KiB |   2048 KiB |      0 B   |
      |---------------------------------------------------------------------------|
      | Non-releasable memory |  14335 KiB |  19155 KiB |  22827 KiB |   8492 KiB |
      |       from large pool |  12288 KiB |  17408 KiB |  20480 KiB |   8192 KiB |
      |       from small pool |   2047 KiB |   2047 KiB |   2347 KiB |    300 KiB |
      |---------------------------------------------------------------------------|
      | Allocations           |       3    |       5    |       6    |       3    |
      |       from large pool |       2    |       3    |       4    |       2    |
      |       from small pool |       1    |       2    |       2    |       1    |
      |---------------------------------------------------------------------------|
      | Active allocs         |       3    |       5    |       6    |       3    |
      |       from large pool |       2    |       3    |       4    |       2    |
      |       from small pool |       1    |       2    |       2    |       1    |
      |---------------------------------------------------------------------------|
      | GPU reserved segments |       3    |       3    |       3    |       0    |
      |       from large pool |       2    |       2    |       2    |       0    |
      |       from small pool |       1    |       1    |       1    |       0    |
      |---------------------------------------------------------------------------|
      | Non-releasable allocs |       2    |       3    |       3    |       1    |
      |       from large pool |       1    |       2    |       2    |       1    |
      |       from small pool |       1    |       1    |       1    |       0    |
      |---------------------------------------------------------------------------|
      | Oversize allocations  |       0    |       1    |       1    |       1    |
      |---------------------------------------------------------------------------|
      | Oversize GPU segments |       1    |       1    |       1    |       0    |
      |===========================================================================|
      "
    `);
  });

  it("is what PyTorch's own memory_summary code prints for the same stats, at every unit scale", () => {
    // PyTorch's function is run from the spec file on stats whose values span B..PiB and 1..10^9 counts.
    const keys = Object.keys(knownSequence().memoryStats());
    let seed = 7;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const samples: Record<string, number>[] = [];
    for (let k = 0; k < 12; k++) {
      const stats: Record<string, number> = {};
      for (const key of keys) stats[key] = Math.floor(next() * 10 ** (1 + ((k + key.length) % 16)));
      samples.push(stats);
    }
    const dir = mkdtempSync(join(tmpdir(), 'memscope-alloc-'));
    const statsPath = join(dir, 'stats.json');
    writeFileSync(statsPath, JSON.stringify(samples));
    const script = String.raw`
import json, sys, typing
code = open(sys.argv[1], encoding="utf8").read()
# The spec file follows the function's return with a translated comment; cut at the return.
code = code[:code.rindex('return "|"')] + 'return "|" + "|\\n|".join(lines).format(**fmt_dict) + "|\\n"\n'
out = []
for stats in json.load(open(sys.argv[2])):
    ns = {"Union": typing.Union, "Device": object, "_get_device_index": lambda d, optional=False: 0, "memory_stats": lambda device=None, s=stats: s}
    exec(code, ns)
    out.append([ns["memory_summary"](0, False), ns["memory_summary"](0, True)])
sys.stdout.write(json.dumps(out))
`;
    const expected: [string, string][] = JSON.parse(
      execFileSync('python3', ['-c', script, fixture('reference/torch_cuda_memory_summary.txt'), statsPath], { encoding: 'utf8' }),
    );
    expect(expected).toHaveLength(samples.length);
    samples.forEach((stats, i) => {
      expect(renderMemorySummary(stats, 0, false)).toBe(expected[i][0]);
      expect(renderMemorySummary(stats, 0, true)).toBe(expected[i][1]);
    });
    const all = expected.map((e) => e[0]).join('');
    for (const unit of [' B   |', ' KiB |', ' MiB |', ' GiB |', ' TiB |', ' K  |', ' M  |']) expect(all).toContain(unit);
  });

  it('abbreviated: only the all-pools rows', () => {
    const lines = knownSequence().memorySummary(0, true).split('\n');
    expect(lines).toHaveLength(30); // 29 rows and the final newline
    expect(lines.at(-1)).toBe('');
    expect(lines.some((l) => l.includes('from large pool'))).toBe(false);
  });
});

describe('history and snapshots', () => {
  function allocateInNamedFunction(m: DeviceMemory): number {
    return m.cachingAllocatorAlloc(4096);
  }

  it('records JS frames on allocations and frees in a bounded ring', () => {
    const m = new DeviceMemory();
    m.recordMemoryHistory({ enabled: 'all', context: 'all', stacks: 'js', maxEntries: 4 });
    const ptrs = [1, 2, 3].map(() => allocateInNamedFunction(m));
    m.cachingAllocatorDelete(ptrs[0]);
    const trace = m.snapshot().device_traces[0];
    // 1 segment_alloc + 3 alloc + free_requested + free_completed = 6 entries; the ring keeps the last 4.
    expect(trace.map((e) => e.action)).toEqual(['alloc', 'alloc', 'free_requested', 'free_completed']);
    expect(trace[0].frames![0]).toMatchObject({ name: 'allocateInNamedFunction' });
    expect(trace[0].frames![0].filename).toMatch(/api\.test\.ts$/);
    expect(trace[2].frames![0].name).not.toBe('allocateInNamedFunction'); // context 'all': the free's own stack
    const block = m.snapshot().segments[0].blocks.find((b) => b.address === ptrs[1])!;
    expect(block.state).toBe('active_allocated');
    expect(block.frames[0].name).toBe('allocateInNamedFunction');
  });

  it("context 'alloc' gives free entries the allocation's stack; enabled null stops recording", () => {
    const m = new DeviceMemory();
    m.recordMemoryHistory({ enabled: 'all', context: 'alloc' });
    const p = allocateInNamedFunction(m);
    m.cachingAllocatorDelete(p);
    const trace = m.snapshot().device_traces[0];
    expect(trace.map((e) => `${e.action}:${e.frames?.[0]?.name ?? '-'}`)).toEqual([
      'segment_alloc:allocateInNamedFunction',
      'alloc:allocateInNamedFunction',
      'free_requested:allocateInNamedFunction',
      'free_completed:allocateInNamedFunction',
    ]);
    m.recordMemoryHistory({ enabled: null });
    allocateInNamedFunction(m);
    expect(m.snapshot().device_traces[0]).toEqual([]);
    expect(() => m.recordMemoryHistory({ enabled: 'sometimes' as never })).toThrow(/enabled must be null, 'state' or 'all'/);
  });

  it('snapshot() follows PyTorch schema: sorted segments with sizes summed from their blocks', () => {
    const snap = knownSequence().snapshot();
    expect(Object.keys(snap)).toEqual(['segments', 'device_traces', 'allocator_settings', 'external_annotations']);
    expect(snap.allocator_settings!.max_split_size).toBe(64 * MiB);
    expect(snap.allocator_settings!.PYTORCH_CUDA_ALLOC_CONF).toBe('max_split_size_mb:64');
    expect(snap.segments.map((s) => [s.segment_type, s.total_size / MiB, s.allocated_size, s.blocks.map((b) => b.state)])).toEqual([
      ['small', 2, 1024, ['active_allocated', 'inactive']],
      ['large', 20, 8 * MiB, ['active_allocated', 'active_allocated', 'inactive']],
      ['large', 100, 0, ['inactive']],
    ]);
    const addrs = snap.segments.map((s) => s.address);
    expect([...addrs].sort((a, b) => a - b)).toEqual(addrs);
  });

  it('dumpSnapshot writes a pickle that Python and memscope both read back to the same object', () => {
    const m = knownSequence();
    m.recordMemoryHistory({ enabled: 'all', context: 'all' });
    allocateInNamedFunction(m);
    const dir = mkdtempSync(join(tmpdir(), 'memscope-alloc-'));
    const path = join(dir, 'snap.pickle');
    dumpSnapshot(m, path);
    const viaPython = JSON.parse(
      execFileSync('python3', ['-c', 'import pickle,json,sys; print(json.dumps(pickle.load(open(sys.argv[1],"rb"))))', path], { encoding: 'utf8' }),
    );
    expect(JSON.parse(JSON.stringify(readSnapshotFile(path)))).toEqual(viaPython);
    // What was written is the snapshot: taking the next one shows the same segments, and its
    // trace has the dumped trace plus the 'snapshot' entry the dump recorded (size = active bytes).
    const next = JSON.parse(JSON.stringify(m.snapshot()));
    expect(viaPython.segments).toEqual(next.segments);
    expect(viaPython.allocator_settings).toEqual(next.allocator_settings);
    expect(next.device_traces[0].slice(0, -1)).toEqual(viaPython.device_traces[0]);
    expect(next.device_traces[0].at(-1)).toMatchObject({ action: 'snapshot', size: m.memoryStats()['active_bytes.all.current'] });
    expect(viaPython.device_traces[0].map((e: { action: string }) => e.action)).toEqual(['alloc']);
    // Python sees the PyTorch types: a tuple pool id and a float threshold.
    const types = execFileSync(
      'python3',
      ['-c', 'import pickle,sys; s=pickle.load(open(sys.argv[1],"rb")); print(type(s["segments"][0]["segment_pool_id"]).__name__, type(s["allocator_settings"]["garbage_collection_threshold"]).__name__)', path],
      { encoding: 'utf8' },
    );
    expect(types.trim()).toBe('tuple float');
    // Only opcodes that MemoryViz.js (pytorch.org/memory_viz) decodes.
    const ops = execFileSync(
      'python3',
      ['-c', 'import pickletools,sys; print(" ".join(sorted({op.name for op, _, _ in pickletools.genops(open(sys.argv[1],"rb").read())})))', path],
      { encoding: 'utf8' },
    ).trim().split(' ');
    const memoryViz = 'PROTO FRAME MARK STOP EMPTY_DICT EMPTY_LIST TUPLE2 SETITEMS APPEND APPENDS BININT BININT1 BININT2 LONG1 BINFLOAT NEWFALSE NEWTRUE SHORT_BINUNICODE BINUNICODE MEMOIZE BINGET LONG_BINGET'.split(' ');
    expect(ops.filter((op) => !memoryViz.includes(op))).toEqual([]);
    expect(ops).toContain('LONG1'); // 47-bit addresses
    const jsonPath = join(dir, 'snap.json');
    dumpSnapshot(m, jsonPath);
    const json = JSON.parse(readFileSync(jsonPath, 'utf8'));
    expect(json.segments).toEqual(viaPython.segments);
    expect(json.device_traces[0].map((e: { action: string }) => e.action)).toEqual(['alloc', 'snapshot', 'snapshot']);
  });

  it('saveSegmentUsage / saveMemoryUsage draw _memory_viz segments and memory: requested bytes by stack, the rest as <gaps>', () => {
    const m = new DeviceMemory();
    m.recordMemoryHistory({ enabled: 'state', context: 'state' });
    function holdThreeMiB(): number {
      return m.cachingAllocatorAlloc(3 * MiB);
    }
    holdThreeMiB();
    const dir = mkdtempSync(join(tmpdir(), 'memscope-alloc-'));
    saveSegmentUsage(m, join(dir, 'segments.svg'));
    saveMemoryUsage(m, join(dir, 'memory.svg'));
    const seg = readFileSync(join(dir, 'segments.svg'), 'utf8');
    const mem = readFileSync(join(dir, 'memory.svg'), 'utf8');
    const [segment] = m.snapshot().segments;
    const reserved = segment.total_size;
    expect(seg).toMatch(/^<\?xml[\s\S]*<svg[\s\S]*<\/svg>\n$/);
    expect(seg).toContain(`seg_0 @0x${segment.address.toString(16)}`);
    // Both views weigh every reserved byte: the root spans the segment's total_size.
    for (const svg of [seg, mem]) {
      expect(svg).toContain(`<title>all (${humanBytes(reserved)}) (${humanBytes(reserved)}, 100.00%)</title>`);
      expect(svg).toMatch(/<title>api\.test\.ts:\d+:holdThreeMiB \(3\.00 MiB, /);
      // The rest of the segment is one inactive block, drawn as <gaps> as _memory_viz.py writes it.
      expect(svg).toContain(`<title>&lt;gaps&gt; (${humanBytes(reserved - 3 * MiB)}, `);
    }
    expect(mem).not.toContain('seg_0');
  });
});
