// The report names a WebGPU snapshot's devices `webgpu:N` (memory lines, segments, the state
// history) and calls it a WebGPU memory snapshot; PyTorch's files keep `cuda:N`.
import { describe, expect, it } from 'vitest';
import { encodeSnapshotPickle, type SnapshotDict } from '../../src/allocator/snapshot.js';
import { DEFAULT_SETTINGS, toSnapshotSettings } from '../../src/allocator/settings.js';
import { readSnapshot } from '../../src/torch/snapshot-decoder.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';

function snapshot(deviceType?: string): SnapshotDict {
  const address = 0x7e0000000000;
  return {
    segments: [
      {
        device: 0, address, total_size: 8192, allocated_size: 8192, active_size: 8192, requested_size: 8192, stream: 0,
        segment_type: 'small', segment_pool_id: [0, 0], is_expandable: false, frames: [],
        blocks: [{ address, size: 8192, requested_size: 8192, state: 'active_allocated', frames: [{ name: 'buffer "w"', filename: '<webgpu>', line: 0 }] }],
      },
    ],
    device_traces: [[
      { action: 'segment_alloc', addr: address, size: 8192, stream: 0, time_us: 10 },
      { action: 'alloc', addr: address, size: 8192, stream: 0, time_us: 11 },
    ]],
    allocator_settings: toSnapshotSettings(DEFAULT_SETTINGS),
    external_annotations: [],
    ...(deviceType ? { device_type: deviceType } : {}),
  };
}

describe('the report of a snapshot names its device type', () => {
  it('webgpu:0 and "WebGPU memory snapshot" for memscope/webgpu snapshots, cuda:0 otherwise', () => {
    for (const [type, name, detail] of [
      ['webgpu', 'webgpu:0', /^WebGPU memory snapshot · 1 segments/],
      [undefined, 'cuda:0', /^PyTorch memory snapshot · 1 segments/],
    ] as const) {
      const data = snapshotToReport(readSnapshot(encodeSnapshotPickle(snapshot(type))), 'x.pickle', DEFAULT_CAPS);
      expect(data.source.detail).toMatch(detail);
      expect(data.memory!.devices.map((d) => d.device)).toEqual([name]);
      expect(data.segments.map((s) => s.device)).toEqual([name]);
      expect(data.segments[0]!.label.startsWith(`${name} 0x7e0000000000`)).toBe(true);
      expect(data.history!.devices.map((d) => d.device)).toEqual([name]);
    }
  });
});
