import { describe, it, expect, beforeAll, vi } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readSnapshot, type MemorySnapshot } from '../../src/torch/index.js';
import {
  compareSnapshots,
  fragmentation,
  largestAllocations,
  snapshotMemoryStats,
  snapshotTimeline,
  snapshotTotals,
  totalsByFrame,
  traceActionCounts,
  traceLines,
} from '../../src/torch/snapshot-analysis.js';
import { blockFlameStacks, compareFlameStacks, renderSnapshotFlameGraph } from '../../src/torch/snapshot-flamegraph.js';
import { devicePeak } from '../../src/torch/memory-trace.js';
import { renderFlameGraph } from '../../src/render/flamegraph-svg.js';
import { formatFragmentation, formatSnapshotSummary } from '../../src/torch/text-reports.js';
import { renderMemoryPlotHtml } from '../../src/torch/memory-plot-html.js';
import { readMemoryTimeline } from '../../src/torch/memory-timeline.js';
import { fixture } from '../support/fixtures.js';

// Real-file tests: generous limits, the test machine is shared and sometimes saturated.
vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

const repoRoot = path.resolve(import.meta.dirname, '../..');
const SNAPSHOTS = [
  'small_3seg',
  'state_only_259seg',
  'older_no_settings_6633blocks',
  'newest_format_trace',
  'transformer_forward_trace',
  'transformer_fullstep_trace',
] as const;
const snapshotPath = (name: string): string => fixture(`torch/${name}.pickle`);
const tmp = mkdtempSync(path.join(tmpdir(), 'memscope-cmd-'));

/**
 * Facts computed by CPython's pickle module straight from the files — the segments' own
 * fields, block sums, trace action counts, _memory_viz.py segsum's internal/external free,
 * and the allocated peak over the trace (replayed forward from the state the trace leads to).
 */
interface Facts {
  segments: number;
  blocks: number;
  total_size: number;
  allocated_size: number;
  active_size: number;
  requested_size: number;
  allocated_blocks: number;
  largest: number;
  actions: Record<string, number>;
  seg_allocated: number;
  free_internal: number;
  free_external: number;
  trace_peak: number | null;
}

const FACTS_SCRIPT = `
import pickle, json, sys, collections
out = {}
for path in sys.argv[1:]:
    d = pickle.load(open(path, 'rb'))
    segs = d['segments']
    blocks = [b for s in segs for b in s['blocks']]
    live = [b for b in blocks if b['state'] == 'active_allocated']
    actions = collections.Counter(e['action'] for t in d.get('device_traces', []) for e in t)
    seg_alloc = fi = fe = 0
    for s in segs:
        for b in s['blocks']:
            if b['state'] == 'active_allocated':
                req = b.get('requested_size', b['size'])
                seg_alloc += req; fi += b['size'] - req
            else:
                fe += b['size']
    peak = None
    trace = [e for t in d.get('device_traces', []) for e in t]
    if any(e['action'] == 'alloc' for e in trace):
        end = sum(b['size'] for b in live)
        net = sum(e['size'] for e in trace if e['action'] == 'alloc') - sum(e['size'] for e in trace if e['action'] == 'free_requested')
        cur = peak = end - net
        for e in trace:
            if e['action'] == 'alloc': cur += e['size']
            elif e['action'] == 'free_requested': cur -= e['size']
            peak = max(peak, cur)
    out[path.split('/')[-1][:-7]] = dict(
        segments=len(segs), blocks=len(blocks),
        total_size=sum(s['total_size'] for s in segs), allocated_size=sum(s['allocated_size'] for s in segs),
        active_size=sum(s['active_size'] for s in segs), requested_size=sum(s['requested_size'] for s in segs),
        allocated_blocks=len(live), largest=max((b['size'] for b in live), default=0), actions=actions,
        seg_allocated=seg_alloc, free_internal=fi, free_external=fe, trace_peak=peak)
print(json.dumps(out))
`;

const snapshots = new Map<string, MemorySnapshot>();
let facts: Record<string, Facts>;

beforeAll(() => {
  facts = JSON.parse(execFileSync('python3', ['-c', FACTS_SCRIPT, ...SNAPSHOTS.map(snapshotPath)], { maxBuffer: 1 << 26 }).toString()) as Record<string, Facts>;
  for (const name of SNAPSHOTS) snapshots.set(name, readSnapshot(new Uint8Array(readFileSync(snapshotPath(name)))));
}, 120_000);

describe.each(SNAPSHOTS)('analyses of %s', (name) => {
  it('totals agree with the segments’ own allocated_size / active_size / total_size / requested_size', () => {
    const s = snapshots.get(name)!;
    const f = facts[name]!;
    const t = snapshotTotals(s).all;
    expect([t.segments, t.blocks]).toEqual([f.segments, f.blocks]);
    expect(t.reserved).toBe(f.total_size);
    expect(t.allocated).toBe(f.allocated_size);
    expect(t.active).toBe(f.active_size);
    expect(t.requested).toBe(f.requested_size);
    // …and recomputed from the blocks they agree too.
    expect(t.allocatedFromBlocks).toBe(f.allocated_size);
    expect(t.activeFromBlocks).toBe(f.active_size);
    expect(t.allocations).toBe(f.allocated_blocks);
    const pools = snapshotTotals(s);
    expect(pools.large.reserved + pools.small.reserved).toBe(f.total_size);
  });

  it('memory_summary figures: current values from the state, peaks from the trace', () => {
    const s = snapshots.get(name)!;
    const f = facts[name]!;
    const { stats } = snapshotMemoryStats(s, 0);
    expect(stats['allocated_bytes.all.current']).toBe(f.allocated_size);
    expect(stats['reserved_bytes.all.current']).toBe(f.total_size);
    expect(stats['segment.all.current']).toBe(f.segments);
    expect(stats['allocation.all.current']).toBe(f.allocated_blocks);
    expect(stats['allocated_bytes.large_pool.current']! + stats['allocated_bytes.small_pool.current']!).toBe(f.allocated_size);
    expect(stats['allocated_bytes.all.peak']).toBe(f.trace_peak ?? f.allocated_size);
    expect(stats['allocation.all.allocated']).toBe(f.actions['alloc'] ?? 0);
    expect(stats['segment.all.allocated']).toBe(f.actions['segment_alloc'] ?? 0);
    const text = formatSnapshotSummary(s);
    expect(text).toContain('PyTorch CUDA memory summary, device ID 0');
    expect(text).toContain(`${f.segments.toLocaleString('en-US')} segments`);
  });

  it('trace action counts match the file', () => {
    const s = snapshots.get(name)!;
    const counts = traceActionCounts(s).reduce<Record<string, number>>((acc, c) => {
      for (const [k, v] of Object.entries(c.counts)) acc[k] = (acc[k] ?? 0) + v;
      return acc;
    }, {});
    expect(counts).toEqual(facts[name]!.actions);
  });

  it('stats: internal and external free as _memory_viz.py segsum computes them, adding up to reserved', () => {
    const s = snapshots.get(name)!;
    const f = facts[name]!;
    const r = fragmentation(s);
    expect(r.totalAllocated).toBe(f.seg_allocated);
    expect(r.freeInternal).toBe(f.free_internal);
    expect(r.freeExternal).toBe(f.free_external);
    expect(r.totalAllocated + r.freeInternal + r.freeExternal).toBe(r.totalReserved);
    expect(formatFragmentation(s)).toMatch(/external fragmentation \(external \/ reserved\)/);
  });

  it('largest allocations and totals by allocating frame account for all live memory', () => {
    const s = snapshots.get(name)!;
    const f = facts[name]!;
    const largest = largestAllocations(s, 5);
    expect(largest[0]?.size ?? 0).toBe(f.largest);
    for (let i = 1; i < largest.length; i++) expect(largest[i]!.size).toBeLessThanOrEqual(largest[i - 1]!.size);
    const byFrame = totalsByFrame(s);
    expect(byFrame.reduce((a, r) => a + r.bytes, 0)).toBe(f.allocated_size);
    expect(byFrame.reduce((a, r) => a + r.blocks, 0)).toBe(f.allocated_blocks);
    // The n largest are the first n of a stable sort by size, then address, for a short list
    // (kept while scanning) and a long one (sorted).
    const allocatedState = s.stateNames.indexOf('active_allocated');
    const sorted = Array.from({ length: s.blocks.count }, (_, i) => i)
      .filter((i) => s.blocks.state[i] === allocatedState)
      .sort((x, y) => s.blocks.size[y]! - s.blocks.size[x]! || s.blocks.address[x]! - s.blocks.address[y]!);
    for (const n of [1, 7, 64, 65, 1000]) expect(largestAllocations(s, n).map((a) => a.block)).toEqual(sorted.slice(0, n));
  });

  it('flame-graph stacks weigh exactly the reserved bytes (requested + <gaps>)', () => {
    const s = snapshots.get(name)!;
    for (const bySegment of [true, false]) {
      const total = blockFlameStacks(s, bySegment).reduce((a, st) => a + st.weight, 0);
      expect(total).toBe(facts[name]!.total_size);
    }
  });
});

describe('frames and flame graphs on real stacks', () => {
  it('charges allocations to the user’s line, or to the ATen op on C++-only stacks', () => {
    const full = totalsByFrame(snapshots.get('transformer_fullstep_trace')!);
    const frames = full.map((r) => r.frame);
    expect(frames).toContain('optimizers.py:82:step');
    expect(frames).toContain('aten::bmm (C++ stack)');
    // Windows paths reduce to the base name too.
    const newest = largestAllocations(snapshots.get('newest_format_trace')!, 1, 3)[0]!;
    expect(newest.size).toBe(312.5 * 1024 * 1024);
    expect(newest.frames).toEqual(['_backends.py:291:einsum', 'einops.py:939:einsum', 'model.py:39:forward']);
  });

  it('segments and memory SVGs are well-formed XML containing the frames and sizes', () => {
    const s = snapshots.get('transformer_fullstep_trace')!;
    const memory = renderSnapshotFlameGraph(s, 'memory');
    const segments = renderSnapshotFlameGraph(snapshots.get('transformer_forward_trace')!, 'segments');
    const file = path.join(tmp, 'memory.svg');
    writeFileSync(file, memory);
    writeFileSync(path.join(tmp, 'segments.svg'), segments);
    const parsed = execFileSync('python3', ['-c', 'import sys, xml.dom.minidom as m\nfor f in sys.argv[1:]: print(len(m.parse(f).getElementsByTagName("g")))', file, path.join(tmp, 'segments.svg')])
      .toString()
      .trim()
      .split('\n')
      .map(Number);
    expect(parsed[0]).toBeGreaterThan(20);
    expect(parsed[1]).toBeGreaterThan(20);
    expect(memory).toContain('<title>optimizers.py:82:step (12.69 GiB, 22.30%)</title>');
    expect(memory).toContain('all (56.91 GiB)');
    expect(segments).toMatch(/<title>seg_\d+ @0x[0-9a-f]+ \(100\.00 MiB, large\)/);
  });

  it('escapes hostile frame names in the SVG', () => {
    const svg = renderFlameGraph([{ frames: ['<script>alert("x")</script>', "a&b'c"], weight: 10 }], { title: 'T <&>' });
    expect(svg).not.toContain('<script>');
    expect(svg).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(svg).toContain('a&amp;b&#39;c');
    expect(svg).toContain('<title>T &lt;&amp;&gt;</title>');
  });
});

describe('compare and trace', () => {
  it('compare: a snapshot against itself changes nothing; against another it explains the allocated difference', () => {
    const a = snapshots.get('transformer_forward_trace')!;
    const b = snapshots.get('transformer_fullstep_trace')!;
    expect(compareSnapshots(a, a).changes).toEqual([]);
    const cmp = compareSnapshots(a, b);
    expect(cmp.allocatedBefore).toBe(facts['transformer_forward_trace']!.allocated_size);
    expect(cmp.allocatedAfter).toBe(facts['transformer_fullstep_trace']!.allocated_size);
    expect(cmp.changes.reduce((s, c) => s + c.delta, 0)).toBe(cmp.allocatedAfter - cmp.allocatedBefore);
    expect(cmp.changes.map((c) => c.frame)).toContain('optimizers.py:82:step');
  });

  it('compare flame graph: segments only before / only after, weighing their reserved bytes', () => {
    const a = snapshots.get('small_3seg')!;
    const b = snapshots.get('state_only_259seg')!;
    const stacks = compareFlameStacks(a, b);
    const weight = (root: string) => stacks.filter((st) => st.frames[0] === root).reduce((s, st) => s + st.weight, 0);
    expect(weight('only_before')).toBe(facts['small_3seg']!.total_size);
    expect(weight('only_after')).toBe(facts['state_only_259seg']!.total_size);
    expect(compareFlameStacks(a, a)).toEqual([]);
  });

  it('trace lines name allocations and end at the net change', () => {
    const s = snapshots.get('transformer_forward_trace')!;
    const lines = traceLines(s);
    expect(lines[0]).toBe('Device 0 ---------------- 4657 entries');
    expect(lines.length).toBe(4657 + 2);
    expect(lines.filter((l) => l.includes('= cudaMalloc(')).length).toBe(289);
    expect(lines.filter((l) => l.startsWith('del ')).length).toBe(1155);
    expect(lines[1]).toMatch(/^a = (cudaMalloc\(0x[0-9a-f]+, [\d.]+ [KMG]?i?B\)|\S+\[\d+:[\d.]+ [KMG]?i?B\])$/);
  });

  it('snapshot timeline ends at the snapshot’s state and peaks where the replay says', () => {
    const s = snapshots.get('transformer_fullstep_trace')!;
    const d = snapshotTimeline(s).devices[0]!;
    expect(d.allocated[d.count - 1]).toBe(facts['transformer_fullstep_trace']!.allocated_size);
    expect(d.reserved![d.count - 1]).toBe(facts['transformer_fullstep_trace']!.total_size);
    // The timeline moves allocated on free_completed (active memory), so its peak is at least
    // the free_requested-based peak of memory_stats.
    expect(devicePeak(d).peakAllocated).toBeGreaterThanOrEqual(facts['transformer_fullstep_trace']!.trace_peak!);
  });
});

describe('a two-GPU snapshot (made with CPython)', () => {
  const TWO_GPUS = `
import pickle, sys

def seg(dev, addr, blocks):
    total = sum(b['size'] for b in blocks)
    alloc = sum(b['size'] for b in blocks if b['state'] == 'active_allocated')
    return {'device': dev, 'address': addr, 'total_size': total, 'allocated_size': alloc, 'active_size': alloc,
            'requested_size': sum(b['requested_size'] for b in blocks if b['state'] == 'active_allocated'),
            'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'blocks': blocks}
f = lambda name, line: [{'name': name, 'filename': '/home/u/train.py', 'line': line}]
snap = {'segments': [
    seg(0, 1 << 30, [{'address': 1 << 30, 'size': 4 << 20, 'requested_size': 3 << 20, 'state': 'active_allocated', 'frames': f('forward', 10)},
                     {'address': (1 << 30) + (4 << 20), 'size': 16 << 20, 'requested_size': 0, 'state': 'inactive', 'frames': []}]),
    seg(1, 2 << 30, [{'address': 2 << 30, 'size': 20 << 20, 'requested_size': 20 << 20, 'state': 'active_allocated', 'frames': f('backward', 20)}])],
  'device_traces': [[], [
    {'action': 'segment_alloc', 'addr': 2 << 30, 'size': 20 << 20, 'stream': 0, 'time_us': 100, 'frames': []},
    {'action': 'alloc', 'addr': 2 << 30, 'size': 20 << 20, 'stream': 0, 'time_us': 110, 'frames': f('backward', 20)}]],
  'allocator_settings': {}, 'external_annotations': []}
sys.stdout.buffer.write(pickle.dumps(snap, protocol=4))`;

  it('largest allocations: equal size and address on two devices keep block order, as a stable sort does', () => {
    const s = readSnapshot(
      new Uint8Array(
        execFileSync('python3', [
          '-c',
          `${TWO_GPUS.replace('sys.stdout.buffer.write(pickle.dumps(snap, protocol=4))', '')}
same = {'address': 3 << 30, 'size': 8 << 20, 'requested_size': 8 << 20, 'state': 'active_allocated', 'frames': []}
snap['segments'] = [seg(1, 3 << 30, [dict(same)]), seg(0, 3 << 30, [dict(same)])] + snap['segments']
sys.stdout.buffer.write(pickle.dumps(snap, protocol=4))`,
        ]),
      ),
    );
    expect(largestAllocations(s, 3).map((a) => [a.block, a.device, a.size >> 20])).toEqual([
      [4, 1, 20],
      [0, 1, 8],
      [1, 0, 8],
    ]);
  });

  it('keeps devices apart in totals, memory_summary, flame graphs and timelines', () => {
    const s = readSnapshot(new Uint8Array(execFileSync('python3', ['-c', TWO_GPUS])));
    expect(snapshotTotals(s, 0).all.reserved).toBe(20 << 20);
    expect(snapshotTotals(s, 1).all.allocatedFromBlocks).toBe(20 << 20);
    expect(snapshotMemoryStats(s, 0).traceEvents).toBe(0);
    const d1 = snapshotMemoryStats(s, 1);
    expect(d1.traceEvents).toBe(2);
    expect(d1.stats['reserved_bytes.all.allocated']).toBe(20 << 20);
    const text = formatSnapshotSummary(s);
    expect(text).toContain('device ID 0');
    expect(text).toContain('device ID 1');
    const stacks = blockFlameStacks(s, false);
    expect(stacks.map((x) => x.frames.slice(0, 3).join(';'))).toEqual([
      'device_0;stream_0;active_allocated',
      'device_0;stream_0;active_allocated',
      'device_0;stream_0;inactive',
      'device_1;stream_0;active_allocated',
    ]);
    expect(blockFlameStacks(s, false, 1).reduce((a, x) => a + x.weight, 0)).toBe(20 << 20);
    const timeline = snapshotTimeline(s);
    expect(timeline.devices.map((d) => d.device)).toEqual(['cuda:1']);
    expect(Array.from(timeline.devices[0]!.allocated)).toEqual([0, 20 << 20]);
    expect(totalsByFrame(s, 0)).toEqual([{ frame: 'train.py:10:forward', blocks: 1, bytes: 4 << 20, requested: 3 << 20 }]);

  });
});

describe('plot HTML', () => {
  it('stacks export_memory_timeline categories and stays self-contained and escaped', () => {
    const trace = readMemoryTimeline([
      [1000, 2000, 3000],
      [
        [0, 100, 0, 0, 0, 0, 0, 0, 0],
        [0, 100, 50, 0, 0, 300, 0, 0, 0],
        [0, 100, 50, 0, 0, 0, 20, 0, 0],
      ],
    ]);
    const html = renderMemoryPlotHtml(trace, 'Timeline <of> "x"');
    expect(html).toContain('<title>Timeline &lt;of&gt; &quot;x&quot;</title>');
    for (const c of ['parameter (stacked)', 'optimizer_state (stacked)', 'activation (stacked)', 'gradient (stacked)']) expect(html).toContain(c);
    expect(html).not.toContain('temporary (stacked)'); // all-zero categories are left out
    expect(html).toContain('450 B peak allocated');
    expect(html).not.toMatch(/<script|<link|src=/);
  });
});

describe('the CLI', () => {
  const tsx = path.join(repoRoot, 'node_modules/.bin/tsx');
  const cli = (...args: string[]) => spawnSync(tsx, [path.join(repoRoot, 'src/cli/main.ts'), ...args], { encoding: 'utf8', cwd: tmp, maxBuffer: 1 << 26 });

  it('summary --json on a snapshot and on both traces gives the key figures', () => {
    const snap = cli('summary', snapshotPath('small_3seg'), '--json');
    expect(snap.status).toBe(0);
    const js = JSON.parse(snap.stdout) as { kind: string; totals: { all: { reserved: number; allocated: number } } };
    expect(js.kind).toBe('snapshot');
    expect(js.totals.all.reserved).toBe(facts['small_3seg']!.total_size);
    expect(js.totals.all.allocated).toBe(facts['small_3seg']!.allocated_size);
    const tr = cli('summary', fixture('traces/kineto_modern_memory.json.gz'), '--json', '--top', '3');
    expect(tr.status).toBe(0);
    const jt = JSON.parse(tr.stdout) as { memoryEvents: number; devices: { device: string; peakAllocated: number; peakReserved: number | null; operators: { name: string }[] }[] };
    expect(jt.memoryEvents).toBe(28_010);
    const cuda = jt.devices.find((d) => d.device === 'cuda:1')!;
    expect([cuda.peakAllocated, cuda.peakReserved]).toEqual([6_629_508_096, 12_782_141_440]);
    expect(cuda.operators.map((o) => o.name)).toEqual(['aten::mul', 'aten::add', 'aten::mm']);
    const text = cli('summary', fixture('traces/kineto_2021_resnet50.json.gz'), '--top', '2');
    expect(text.status).toBe(0);
    expect(text.stdout).toContain('cuda:0 (Tesla V100-DGXS-32GB)');
    expect(text.stdout).toContain('2.60 GiB');
    expect(text.stdout).toContain('aten::threshold_backward');
    expect(text.stdout).not.toContain('\x1b['); // no colour when stdout is not a terminal
  }, 120_000);

  it('segments, memory and plot write their files', () => {
    expect(cli('segments', snapshotPath('small_3seg'), '-o', 'seg.svg').status).toBe(0);
    expect(readFileSync(path.join(tmp, 'seg.svg'), 'utf8')).toContain('active_allocated');
    expect(cli('memory', snapshotPath('state_only_259seg'), '-o', 'mem.svg').status).toBe(0);
    expect(readFileSync(path.join(tmp, 'mem.svg'), 'utf8')).toContain('cache_utils_V2.py:225:update_new');
    const cmp = cli('compare', snapshotPath('small_3seg'), snapshotPath('state_only_259seg'), '-o', 'cmp.svg', '--top', '3');
    expect(cmp.status).toBe(0);
    expect(cmp.stdout).toContain('cache_utils_V2.py:225:update_new');
    expect(readFileSync(path.join(tmp, 'cmp.svg'), 'utf8')).toContain('<title>only_after (15.96 GiB');
    const plot = cli('plot', fixture('traces/kineto_2021_resnet50.json.gz'), '-o', 'plot.html');
    expect(plot.status).toBe(0);
    const html = readFileSync(path.join(tmp, 'plot.html'), 'utf8');
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/);
    expect(html).toContain('2.60 GiB peak allocated');
  }, 120_000);

  it('bad inputs fail with one clear line', () => {
    writeFileSync(path.join(tmp, 'package.json'), '{"name": "x"}');
    const notTrace = cli('summary', 'package.json');
    expect(notTrace.status).not.toBe(0);
    expect(notTrace.stderr.trim()).toBe('memscope: package.json: at character 13: not a Chrome trace: no "traceEvents" array (top-level keys: "name")');
    writeFileSync(path.join(tmp, 'garbage.json.gz'), Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5]));
    const gz = cli('summary', 'garbage.json.gz');
    expect(gz.stderr).toMatch(/^memscope: garbage\.json\.gz: corrupt or truncated gzip data/);
    expect(gz.stderr.trim().split('\n')).toHaveLength(1);
    const wrongKind = cli('stats', fixture('traces/kineto_2021_resnet50.json.gz'));
    expect(wrongKind.stderr).toMatch(/kineto_2021_resnet50\.json\.gz: not a PyTorch memory snapshot: looks like a Kineto trace \(JSON\); `memscope stats` needs a torch\.cuda\.memory\._dump_snapshot pickle/);
    const noTrace = cli('plot', snapshotPath('small_3seg'));
    expect(noTrace.stderr).toMatch(/nothing to plot: the snapshot has no trace/);
    const badTop = cli('summary', snapshotPath('small_3seg'), '--top', 'many');
    expect(badTop.stderr).toMatch(/--top must be a non-negative integer, got "many"/);
  }, 120_000);

  it('each PyTorch-file verb, loaded alone (src/cli/main.ts), is that verb; usage errors still exit 2', async () => {
    for (const verb of ['summary', 'stats', 'trace', 'segments', 'memory', 'compare', 'plot']) {
      // Fourteen synchronous CLI runs in one stretch can hold the test process past vitest's 60 s
      // reply limit for its progress messages on a loaded machine: let replies in between verbs.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const help = cli(verb, '--help');
      expect({ verb, status: help.status, usage: help.stdout.split('\n')[0]!.split(' ').slice(0, 3).join(' ') }).toEqual({ verb, status: 0, usage: `Usage: memscope ${verb}` });
      const missing = cli(verb);
      expect({ verb, status: missing.status, error: missing.stderr.split('\n')[0] }).toEqual({ verb, status: 2, error: expect.stringMatching(new RegExp(`^memscope: missing required argument .* \\(see memscope ${verb} --help\\)$`)) });
    }
    expect(cli('--help').stdout).toMatch(/summary \[options\] <file>[\s\S]*plot \[options\] <file>/);
    expect(cli('no-such-verb').status).toBe(2);
  }, 180_000);
});

describe('the built bin (dist/cli/memscope.cjs, bundled by scripts/build-cli.mjs)', () => {
  const bin = path.join(repoRoot, 'dist/cli/memscope.cjs');
  const cacheDir = mkdtempSync(path.join(tmpdir(), 'memscope-bin-cache-'));
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: tmp, maxBuffer: 1 << 26, env: { ...process.env, MEMSCOPE_COMPILE_CACHE: cacheDir } });
  const fromSource = (...args: string[]) =>
    spawnSync(path.join(repoRoot, 'node_modules/.bin/tsx'), [path.join(repoRoot, 'src/cli/main.ts'), ...args], { encoding: 'utf8', cwd: tmp, maxBuffer: 1 << 26 });

  it('is the package bin, and answers as the source CLI does, bundled verbs and the rest alike', () => {
    expect(existsSync(bin), 'run `npm run build` first').toBe(true);
    expect(JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).bin).toEqual({ memscope: 'dist/cli/memscope.cjs' });
      for (const args of [
      ['summary', snapshotPath('newest_format_trace'), '--json'],
      ['stats', snapshotPath('small_3seg'), '--json'],
      ['summary', fixture('traces/kineto_modern_memory.json.gz'), '--json', '--top', '3'],
      ['trace', snapshotPath('small_3seg')],
    ]) {
      const built = run(...args);
      expect({ args, status: built.status, stderr: built.stderr }).toEqual({ args, status: 0, stderr: '' });
      expect(built.stdout).toBe(fromSource(...args).stdout);
    }
    // Bad input inside a bundled verb and inside one loaded from dist/ (replay): one line, exit 1,
    // so MemscopeError is one class on both sides.
    writeFileSync(path.join(tmp, 'garbage.json.gz'), Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5]));
    for (const args of [['summary', 'garbage.json.gz'], ['replay', 'garbage.json.gz']]) {
      const bad = run(...args);
      expect({ args, status: bad.status, lines: bad.stderr.trim().split('\n').length }).toEqual({ args, status: 1, lines: 1 });
      expect(bad.stderr).toMatch(/^memscope: garbage\.json\.gz: /);
    }
    expect(run('demo', '--help').stdout).toMatch(/^Usage: memscope demo/);
    expect(run('no-such-verb').status).toBe(2);
  }, 180_000);

  it('runs its bundle through a compile cache per verb: written by the first run, used by the next, never changing an answer', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-bin-cache-'));
    const reported = (env: Record<string, string>, ...args: string[]) =>
      spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd: tmp, maxBuffer: 1 << 26, env: { ...process.env, MEMSCOPE_COMPILE_CACHE_REPORT: '1', ...env } });
    const args = ['summary', snapshotPath('small_3seg'), '--json'];
    const expected = fromSource(...args).stdout;
    const runs = [1, 2, 3].map(() => reported({ MEMSCOPE_COMPILE_CACHE: dir }, ...args));
    expect(runs.map((r) => [r.status, r.stderr, r.stdout === expected])).toEqual([
      [0, 'memscope: compile cache miss\n', true],
      [0, 'memscope: compile cache hit\n', true],
      [0, 'memscope: compile cache hit\n', true],
    ]);
    expect(reported({ MEMSCOPE_COMPILE_CACHE: dir }, 'stats', snapshotPath('small_3seg')).stderr).toMatch(/^memscope: compile cache miss\n/);
    // Verbs outside the bundle run from dist/ as ES modules: no code cache is read or written for them.
    expect(reported({ MEMSCOPE_COMPILE_CACHE: dir }, 'demo', '--help').stderr).toBe('');
    expect(readdirSync(dir).map((n) => n.split('.')[3]).sort()).toEqual(['stats', 'summary']);
    // Off: nothing read or written, the same answer.
    const off = reported({ MEMSCOPE_COMPILE_CACHE: 'off' }, ...args);
    expect([off.status, off.stderr, off.stdout === expected]).toEqual([0, 'memscope: compile cache off\n', true]);
  }, 120_000);
});
