// The device type of a snapshot (`device_type`, written by memscope/webgpu): a small snapshot
// written here, read by both reading paths, named `webgpu:0` and "WebGPU memory snapshot" by every
// snapshot verb's text and JSON; a file without the key stays CUDA's.
import { describe, expect, it } from 'vitest';
import { encodeSnapshotPickle, type SnapshotDict } from '../../src/allocator/snapshot.js';
import { DEFAULT_SETTINGS, toSnapshotSettings } from '../../src/allocator/settings.js';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { writePickle } from '../../src/torch/pickle/writer.js';
import { normaliseSnapshot, readSnapshot } from '../../src/torch/snapshot-decoder.js';
import { compareSnapshots, fragmentation, snapshotMemoryStats, snapshotTimeline } from '../../src/torch/snapshot-analysis.js';
import { renderSnapshotFlameGraph } from '../../src/torch/snapshot-flamegraph.js';
import { traceLines } from '../../src/torch/analysis/trace-lines.js';
import { formatComparison, formatFragmentation, formatSnapshotSummary, snapshotSummaryJson } from '../../src/torch/text-reports.js';

const frame = (name: string) => ({ name, filename: '<webgpu>', line: 0 });

/** Two buffers on device 0, one freed in the trace; `deviceType` undefined leaves the key out. */
function written(deviceType?: unknown): Uint8Array {
  const dict: SnapshotDict = {
    segments: [4096, 2 << 20].map((size, i) => ({
      device: 0,
      address: 0x7e0000000000 + i * (4 << 20),
      total_size: size,
      allocated_size: size,
      active_size: size,
      requested_size: size,
      stream: 0,
      segment_type: size > 1 << 20 ? 'large' : 'small',
      segment_pool_id: [0, 0],
      is_expandable: false,
      frames: [],
      blocks: [{ address: 0x7e0000000000 + i * (4 << 20), size, requested_size: size, state: 'active_allocated', frames: [frame(`buffer "b${i}"`)] }],
    })),
    device_traces: [
      [
        { action: 'segment_alloc', addr: 0x7e0000000000, size: 4096, stream: 0, time_us: 1 },
        { action: 'alloc', addr: 0x7e0000000000, size: 4096, stream: 0, time_us: 2 },
        { action: 'segment_alloc', addr: 0x7e0000400000, size: 2 << 20, stream: 0, time_us: 3 },
        { action: 'alloc', addr: 0x7e0000400000, size: 2 << 20, stream: 0, time_us: 4 },
      ],
    ],
    allocator_settings: toSnapshotSettings(DEFAULT_SETTINGS),
    external_annotations: [],
  };
  if (deviceType === undefined) return encodeSnapshotPickle(dict);
  if (typeof deviceType === 'string') return encodeSnapshotPickle({ ...dict, device_type: deviceType });
  // A value memscope/webgpu never writes: through the pickle writer directly.
  const raw = readPickle(encodeSnapshotPickle(dict)) as Map<string, unknown>;
  raw.set('device_type', deviceType);
  return writePickle(raw as never);
}

describe('the device type of a snapshot', () => {
  it('reads device_type on both paths, as a modelled key, without warnings', () => {
    const bytes = written('webgpu');
    for (const s of [readSnapshot(bytes), normaliseSnapshot(readPickle(bytes))]) {
      expect(s.deviceType).toBe('webgpu');
      expect(s.warnings).toEqual([]);
      expect(s.format.unknownKeys).toEqual([]);
      expect(s.extra).toEqual({});
    }
  });

  it('names a WebGPU snapshot and its devices in summary, stats, segments, compare and the timeline', () => {
    const s = readSnapshot(written('webgpu'));
    const text = formatSnapshotSummary(s);
    expect(text).toMatch(/^WebGPU memory snapshot: 2 segments, 2 blocks, 4 trace events\n/);
    expect(text).toContain('WebGPU memory summary, device ID 0');
    expect(text).not.toContain('CUDA memory summary');
    expect(text).toContain('webgpu:0 (0, 0) large');
    expect(text).toMatch(/│ webgpu:0 +│ 0x7e0000400000 │/);
    expect(text).not.toMatch(/cuda:\d/);
    const json = snapshotSummaryJson(s) as { deviceType: string; devices: { device: number; name: string }[] };
    expect(json.deviceType).toBe('webgpu');
    expect(json.devices.map((d) => [d.device, d.name])).toEqual([[0, 'webgpu:0']]);
    const frag = fragmentation(s);
    expect(frag.deviceType).toBe('webgpu');
    expect(frag.segments.map((x) => x.deviceName)).toEqual(['webgpu:0', 'webgpu:0']);
    expect(formatFragmentation(s)).toMatch(/^WebGPU memory snapshot: webgpu:0\n/);
    expect(renderSnapshotFlameGraph(s, 'segments')).toContain('WebGPU segments: what each allocator segment holds');
    expect(snapshotTimeline(s).devices.map((d) => d.device)).toEqual(['webgpu:0']);
    const empty = readSnapshot(encodeSnapshotPickle({ segments: [], device_traces: [], allocator_settings: toSnapshotSettings(DEFAULT_SETTINGS), external_annotations: [], device_type: 'webgpu' }));
    const cmp = compareSnapshots(empty, s);
    expect([cmp.deviceTypeBefore, cmp.deviceTypeAfter]).toEqual(['webgpu', 'webgpu']);
    expect(cmp.segmentsOnlyAfter.map((x) => x.device)).toEqual(['webgpu:0', 'webgpu:0']);
    expect(formatComparison(cmp, { before: 'a.pickle', after: 'b.pickle' })).toMatch(/^WebGPU memory snapshots: a\.pickle → b\.pickle\n/);
  });

  it("splits the trace's segments by pool with each device type's rule: WebGPU's 1 MiB, CUDA's 2 MiB segments", () => {
    const pools = (bytes: Uint8Array): number[] => {
      const { stats } = snapshotMemoryStats(readSnapshot(bytes), 0);
      return ['small_pool', 'large_pool'].map((p) => stats[`reserved_bytes.${p}.allocated`]!);
    };
    // memscope/webgpu calls a resource of up to 1 MiB small, as the segments' own segment_type says.
    expect(pools(written('webgpu'))).toEqual([4096, 2 << 20]);
    // PyTorch's small pool is made of 2 MiB segments.
    expect(pools(written())).toEqual([2 << 20, 4096]);
  });

  it("keeps PyTorch's files (no device_type) CUDA's, as before", () => {
    const s = readSnapshot(written());
    expect(s.deviceType).toBe('cuda');
    const text = formatSnapshotSummary(s);
    expect(text).toMatch(/^CUDA memory snapshot: /);
    expect(text).toContain('PyTorch CUDA memory summary, device ID 0');
    expect(text).toMatch(/│ cuda:0 +│ 0x7e0000400000 │/);
    expect((snapshotSummaryJson(s) as { devices: { name: string }[] }).devices[0]!.name).toBe('cuda:0');
    expect(renderSnapshotFlameGraph(s, 'segments')).toContain('Segments: what each allocator segment holds');
    expect(snapshotTimeline(s).devices.map((d) => d.device)).toEqual(['cuda:0']);
  });

  it('reads a device_type that cannot name a device type as CUDA, with one warning', () => {
    for (const [value, shown] of [
      ['Web GPU', '"Web GPU"'],
      [7, 'int 7'],
      [['webgpu'], 'a list'],
    ] as const) {
      const bytes = written(value);
      for (const s of [readSnapshot(bytes), normaliseSnapshot(readPickle(bytes))]) {
        expect(s.deviceType).toBe('cuda');
        expect(s.warnings).toEqual([`device_type: ${shown} is not a device type (lower-case letters, digits, _): read as cuda`]);
      }
    }
  });

  it("writes a WebGPU trace's segments as the resources they are (create, destroy), a CUDA trace's as _memory_viz does", () => {
    const webgpu = traceLines(readSnapshot(written('webgpu')));
    expect(webgpu[0]).toBe('Device webgpu:0 ---------------- 4 entries');
    expect(webgpu[1]).toBe('a = create(0x7e0000000000, 4.00 KiB)');
    expect(webgpu.join('\n')).not.toMatch(/cuda/i);
    const cuda = traceLines(readSnapshot(written()));
    expect(cuda[0]).toBe('Device 0 ---------------- 4 entries');
    expect(cuda[1]).toBe('a = cudaMalloc(0x7e0000000000, 4.00 KiB)');
  });
});
