// The layouts of real PyTorch snapshots, pinned on hand-made files (test/torch/make-layout-pickles.py
// writes them into test/fixtures/torch/): every one opens, on both paths alike, with its warnings.
import { describe, it, expect, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { SnapshotBuilder } from '../../src/torch/snapshot-builder.js';
import { readerOf, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { readSnapshotStream } from '../../src/torch/snapshot-stream.js';
import { blockAt, normaliseSnapshot, readSnapshot, stackFrames, traceEventAt, type MemorySnapshot } from '../../src/torch/index.js';
import { formatFrame, outOfMemoryEvents, traceLines, type OomEvent } from '../../src/torch/snapshot-analysis.js';
import { formatSnapshotSummary, snapshotSummaryJson } from '../../src/torch/text-reports.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { fixture } from '../support/fixtures.js';
import { resolved } from './resolved-snapshot.js';
import { python } from './python.js';

const MB = 1 << 20;
const bytesOf = (name: string): Uint8Array => new Uint8Array(readFileSync(fixture(`torch/${name}.pickle`)));

/** readSnapshotPieces over the bytes, with how many times it read from offset 0 (2: it fell back to the general path). */
function readCountingStarts(bytes: Uint8Array): { snap: MemorySnapshot; starts: number } {
  let starts = 0;
  const snap = readSnapshotPieces((into, offset) => {
    if (offset === 0) starts++;
    return readerOf(bytes)(into, offset);
  }, bytes.length);
  return { snap, starts };
}

/** The model by the fast path (whole and in pieces), checked equal to the general path's. */
function readBothWays(name: string): MemorySnapshot {
  const bytes = bytesOf(name);
  const fast = readSnapshot(bytes);
  const general = normaliseSnapshot(readPickle(bytes));
  expect(resolved(fast)).toEqual(resolved(general));
  expect(resolved(readCountingStarts(bytes).snap)).toEqual(resolved(general));
  return fast;
}

const LAYOUTS = ['long_stack', 'torch20_history', 'oom_entries', 'unknown_lines', 'devices_expandable'];

describe('hand-made layouts of real files', () => {
  for (const name of LAYOUTS) {
    it(`${name}: the fast path gives the general path's model`, () => {
      readBothWays(name);
    });
  }

  it('a frames list longer than twice the frame-list byte cache is read by the fast lanes, not only by the fallback', () => {
    const bytes = bytesOf('long_stack');
    const { snap, starts } = readCountingStarts(bytes);
    expect(starts).toBe(1);
    const trace = snap.traces[0]!;
    expect(trace.count).toBe(2);
    for (let i = 0; i < 2; i++) {
      const frames = stackFrames(snap, trace.stack[i]!);
      expect(frames).toHaveLength(401);
      expect(frames[400]).toEqual({ filename: 'train.py', name: 'f400', line: 401 });
    }
    expect(snap.warnings).toEqual([]);
  });

  it('PyTorch 2.0 blocks: addresses from the segment and the blocks before, requested size and stack from history[0]', () => {
    const s = readBothWays('torch20_history');
    const s0 = 0x7f1000000000;
    const blocks = Array.from({ length: s.blocks.count }, (_, i) => blockAt(s, i));
    expect(blocks.map((b) => [b.segment, b.address, b.size, b.requestedSize, b.state])).toEqual([
      [0, s0, 8 * MB, 8 * MB - 100, 'active_allocated'],
      [0, s0 + 8 * MB, 4 * MB, 4 * MB, 'active_allocated'],
      [0, s0 + 12 * MB, 8 * MB, 8 * MB, 'inactive'],
      [1, 0x7f2000000000, 2 * MB, 2 * MB, 'inactive'],
    ]);
    expect(stackFrames(s, blocks[0]!.stack).map((f) => f.name)).toEqual(['forward', 'main']);
    // the first history entry's stack, not a later one's
    expect(stackFrames(s, blocks[1]!.stack).map((f) => f.name)).toEqual(['init_weights', 'main']);
    expect(blocks[2]!.stack).toBe(0);
    expect(s.format.legacyBlockHistory).toBe(true);
    expect(s.segments.map((g) => [g.poolId, g.isExpandable, g.stack, g.requestedSize])).toEqual([
      [null, false, 0, 12 * MB - 100],
      [null, false, 0, 0],
    ]);
    const trace = s.traces[0]!;
    expect([traceEventAt(s, trace, 0), traceEventAt(s, trace, 1)].map((e) => [e.action, e.timeUs, e.size])).toEqual([
      ['alloc', null, 8 * MB],
      ['snapshot', null, 12 * MB],
    ]);
    expect(s.warnings).toEqual([
      '4 blocks without an address (PyTorch 2.0 layout): each placed where the blocks before it in its segment end',
      'device_traces[0]: 2 of 2 entries without time_us: their times are unknown',
    ]);
  });

  it('PyTorch 2.0 blocks: requested size from history[0].real_size when the block has no requested_size', () => {
    const s = readBothWays('torch20_history');
    // block 0 is written without requested_size; its history says 8 MB - 100
    expect(s.blocks.requestedSize[0]).toBe(8 * MB - 100);
  });

  it('oom entries: addr 0, device_free in the deviceFree column, time and size kept, no warning', () => {
    const s = readBothWays('oom_entries');
    const trace = s.traces[0]!;
    const ooms = [3, 4].map((i) => traceEventAt(s, trace, i));
    expect(ooms.map((e) => [e.action, e.addr, e.size, e.deviceFree, e.timeUs])).toEqual([
      ['oom', 0, 80 * MB, 3 * MB, 103],
      ['oom', 0, 40 * MB, 1 * MB, 104],
    ]);
    expect(trace.addr[3]).toBe(0);
    expect(trace.deviceFree![3]).toBe(3 * MB);
    expect(Number.isNaN(trace.deviceFree![1]!)).toBe(true);
    expect(stackFrames(s, ooms[0]!.stack).map((f) => f.name)).toEqual(['step', 'main']);
    expect(s.warnings).toEqual([]);
  });

  it('a line of 2^64-1 or -1 is an unknown line (-1), shown as ?, with one warning', () => {
    const s = readBothWays('unknown_lines');
    const frames = stackFrames(s, s.blocks.stack[0]!);
    expect(frames.map((f) => [f.name, f.line])).toEqual([
      ['compiled_fn', -1],
      ['negative', -1],
      ['main', 9],
    ]);
    expect(formatFrame(frames[0]!)).toBe('<eval_with_key>.3:?:compiled_fn');
    expect(s.warnings).toEqual(["2 frames with an unknown line number (-1, or 2^64-1 as PyTorch writes CPython's -1): shown as ?"]);
  });

  it('two devices, one with an empty trace; an expandable segment and its map / unmap entries; external annotations', () => {
    const s = readBothWays('devices_expandable');
    expect(s.traces.map((t) => [t.device, t.count])).toEqual([
      [0, 4],
      [1, 0],
    ]);
    expect(s.segments.map((g) => [g.device, g.isExpandable])).toEqual([
      [0, true],
      [1, false],
    ]);
    const t0 = s.traces[0]!;
    expect(Array.from({ length: 4 }, (_, i) => traceEventAt(s, t0, i)).map((e) => [e.action, e.size])).toEqual([
      ['segment_map', 20 * MB],
      ['alloc', 20 * MB],
      ['segment_map', 40 * MB],
      ['segment_unmap', 20 * MB],
    ]);
    expect(s.externalAnnotations).toEqual([
      { stage: 'START', name: 'step', device: 0, timeUs: 1 },
      { stage: 'END', name: 'step', device: 0, timeUs: 5 },
    ]);
    expect(s.warnings).toEqual([]);
  });
});

describe('frames with the keys augment_with_fx_traces adds, on devices numbered past 9', () => {
  // torch.cuda.memory._snapshot(augment_with_fx_traces=True) (torch/_utils.py,
  // _augment_memory_snapshot_stack_traces) adds fx_node_op, fx_node_name, fx_node_target and
  // fx_original_trace to frames of FX-generated code; nodes with more than ten GPUs have cuda:10.
  const bytes = new Uint8Array(
    python(
      [
        'import pickle, sys',
        "gen = {'name': 'forward', 'filename': '/tmp/torchinductor/fx_graph_code_ab.py', 'line': 12, 'fx_node_op': 'call_function', 'fx_node_name': 'linear', 'fx_node_target': 'aten.linear', 'fx_original_trace': 'x = self.fc(x)'}",
        "user = {'name': 'train', 'filename': '/home/u/train.py', 'line': 7}",
        "seg = lambda d, a: {'device': d, 'address': a, 'total_size': 2 << 20, 'allocated_size': 512, 'active_size': 512, 'requested_size': 500, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': [{'address': a, 'size': 512, 'requested_size': 500, 'state': 'active_allocated', 'frames': [gen, user]}, {'address': a + 512, 'size': (2 << 20) - 512, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}",
        "s = {'segments': [seg(d, (d + 1) << 32) for d in (10, 3, 0, 11)], 'device_traces': [[] for _ in range(12)]}",
        'sys.stdout.buffer.write(pickle.dumps(s, protocol=4))',
      ].join('\n'),
    ),
  );

  it('read alike by both paths, with one warning naming the keys not shown', () => {
    const fast = readSnapshot(bytes);
    expect(resolved(fast)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
    expect(fast.warnings).toEqual([
      '1 frame with keys memscope does not show ("fx_node_name", "fx_node_op", "fx_node_target", "fx_original_trace"), added by augment_with_fx_traces=True: the frame of the generated code is shown, not the model line it came from',
    ]);
  });

  it("summary's pool table lists devices in numeric order", () => {
    const pools = formatSnapshotSummary(readSnapshot(bytes)).split('\n').filter((l) => /^│ cuda:\d+ \(0, 0\) small/.test(l));
    expect(pools.map((l) => /cuda:(\d+)/.exec(l)![1])).toEqual(['0', '3', '10', '11']);
  });
});

describe('a fault inside the fast path', () => {
  it('in a stream of chunks (a gzipped file), falls back to the general path too', async () => {
    const bytes = bytesOf('oom_entries');
    const general = normaliseSnapshot(readPickle(bytes));
    let opened = 0;
    const open = async function* (): AsyncGenerator<Uint8Array> {
      opened++;
      for (let at = 0; at < bytes.length; at += 97) yield bytes.subarray(at, at + 97);
    };
    const spy = vi.spyOn(SnapshotBuilder.prototype, 'setItems').mockImplementation(() => {
      throw new TypeError('a fault of the fast path');
    });
    try {
      expect(resolved(await readSnapshotStream(open, { pieceBytes: 256 }))).toEqual(resolved(general));
      expect(opened).toBe(2);
      expect(spy).toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('falls back to the general path instead of reaching the caller', () => {
    const bytes = bytesOf('oom_entries');
    const general = normaliseSnapshot(readPickle(bytes));
    const spy = vi.spyOn(SnapshotBuilder.prototype, 'setItems').mockImplementation(() => {
      throw new TypeError('a fault of the fast path');
    });
    try {
      expect(resolved(readSnapshot(bytes))).toEqual(resolved(general));
      const { snap, starts } = readCountingStarts(bytes);
      expect(starts).toBe(2);
      expect(resolved(snap)).toEqual(resolved(general));
      expect(spy).toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });
});

describe('OOM as a first-class event', () => {
  it('each oom entry with its time, request, device free, allocated and reserved then, and the largest live allocations', () => {
    const s = readSnapshot(bytesOf('oom_entries'));
    const ooms = outOfMemoryEvents(s, 5, 2);
    expect(ooms).toEqual([
      {
        device: 0,
        index: 3,
        timeUs: 103,
        requestedSize: 80 * MB,
        deviceFree: 3 * MB,
        allocated: 62 * MB,
        reserved: 64 * MB,
        frames: ['train.py:30:step', 'train.py:60:main'],
        largestLive: [
          { address: 0x7f3000000000, size: 60 * MB, frames: ['train.py:21:big_alloc', 'train.py:50:main'] },
          { address: 0x7f3000000000 + 60 * MB, size: 2 * MB, frames: ['train.py:22:small_alloc', 'train.py:51:main'] },
        ],
      },
      expect.objectContaining({ index: 4, timeUs: 104, requestedSize: 40 * MB, deviceFree: 1 * MB }),
    ]);
    expect(outOfMemoryEvents(readSnapshot(bytesOf('torch20_history')))).toEqual([]);
  });

  it('summary shows each OOM, and its JSON carries them with the warnings', () => {
    const s = readSnapshot(bytesOf('oom_entries'));
    const text = formatSnapshotSummary(s, { frames: 2 });
    expect(text).toContain('Out-of-memory errors (2)');
    expect(text).toContain('cuda:0 trace entry 3, time_us 103: 80.00 MiB requested, 3.00 MiB free on the device; allocated 62.00 MiB, reserved 64.00 MiB');
    expect(text).toContain('60.00 MiB  0x7f3000000000  train.py:21:big_alloc ← train.py:50:main');
    const json = snapshotSummaryJson(s, 10, 2) as { outOfMemory: OomEvent[]; warnings: string[] };
    expect(json.outOfMemory.map((o) => o.index)).toEqual([3, 4]);
    expect(json.warnings).toEqual([]);
  });

  it('trace shows the state at each OOM and what was live then', () => {
    const lines = traceLines(readSnapshot(bytesOf('oom_entries')));
    const at = lines.findIndex((l) => l.startsWith('raise OutOfMemoryError()'));
    expect(lines[at]).toBe('raise OutOfMemoryError() # 80.00 MiB requested, 3.00 MiB free on the device; allocated 62.00 MiB, reserved 64.00 MiB');
    expect(lines[at + 1]).toBe('#   live then: 60.00 MiB at 0x7f3000000000 @ train.py:21:big_alloc ← train.py:50:main');
  });

  it('summary prints the warnings as notes', () => {
    const text = formatSnapshotSummary(readSnapshot(bytesOf('torch20_history')));
    expect(text).toContain('notes:\n  4 blocks without an address (PyTorch 2.0 layout)');
    expect(formatSnapshotSummary(readSnapshot(bytesOf('oom_entries')))).not.toContain('notes:');
  });
});

describe('the HTML report of a snapshot', () => {
  it('lists each OOM and the reading warnings among its notices', () => {
    const oom = snapshotToReport(readSnapshot(bytesOf('oom_entries')), 'oom_entries.pickle', DEFAULT_CAPS);
    expect(oom.notices).toContain(
      'Out of memory on cuda:0, trace entry 3 (time_us 103): 80.00 MiB requested, 3.00 MiB free on the device, allocated 62.00 MiB, reserved 64.00 MiB, ' +
        'requested at train.py:30:step ← train.py:60:main. Largest live then: 60.00 MiB at train.py:21:big_alloc; 2.00 MiB at train.py:22:small_alloc.',
    );
    const legacy = snapshotToReport(readSnapshot(bytesOf('torch20_history')), 'torch20_history.pickle', DEFAULT_CAPS);
    expect(legacy.notices).toContain('Reading note: device_traces[0]: 2 of 2 entries without time_us: their times are unknown.');
  });
});
