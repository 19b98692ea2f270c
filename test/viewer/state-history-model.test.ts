// The Allocator State History's model (src/viewer/app/state-history-model.ts) against an
// independent CPython reconstruction (test/viewer/state_history_truth.py): the segments and
// active blocks after event N, reached in any order through checkpoints and single steps.
import { describe, it, expect } from 'vitest';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { AllocatorHistory, checkpointInterval, stateSummary } from '../../src/viewer/app/state-history-model.js';
import { fixture } from '../support/fixtures.js';
import { pythonStates } from './state-history-truth.js';
import { segmentBands } from '../../src/viewer/app/segment-timeline-model.js';
import { DeviceTimeline } from '../../src/viewer/app/allocation-timeline.js';

const MiB = 2 ** 20;

async function report(file: string): Promise<ReportData> {
  const f = await openMemoryFile(file);
  if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
  return snapshotToReport(f.snapshot, file, DEFAULT_CAPS);
}

/** Visits `events` in the given order on a model with checkpoints every `interval` events, checking each against CPython. */
async function agrees(file: string, device: number, events: number[], interval?: number): Promise<AllocatorHistory> {
  const data = await report(file);
  const dev = data.history!.devices[device];
  const h = new AllocatorHistory(dev, data.history!.actions, interval);
  const want = pythonStates(file, Number(dev.device.split(':')[1]), events);
  for (const n of events) {
    h.goTo(n);
    expect(h.position).toBe(n);
    expect(stateSummary(h), `${file} after event ${n}`).toEqual(want[String(n)]);
  }
  return h;
}

describe('allocator state history model', () => {
  it('pools, pending frees, expandable segments, an OOM and empty_cache: every event, forwards and backwards', async () => {
    const file = fixture('torch/history_pools.pickle');
    const all = Array.from({ length: 26 }, (_, i) => i - 1);
    await agrees(file, 0, all, 4);
    await agrees(file, 0, [...all].reverse(), 4);
    // Jumps across checkpoints, both ways.
    await agrees(file, 0, [13, 2, 24, -1, 7, 20, 0, 14], 4);
  });

  it('an expandable-segment trace (segment_map / segment_unmap) and a three-device trace with an OOM', async () => {
    await agrees(fixture('torch/replay_expandable.pickle'), 0, [-1, 0, 1, 2, 3, 4, 5, 6, 7, 3, -1]);
    const data = await report(fixture('torch/replay_devices_oom.pickle'));
    expect(data.history!.devices.map((d) => d.device)).toEqual(['cuda:0', 'cuda:1', 'cuda:2']);
    await agrees(fixture('torch/replay_devices_oom.pickle'), 0, [7, 6, 5, 0, -1, 3]);
    await agrees(fixture('torch/replay_devices_oom.pickle'), 2, [-1, 0, 1, 2, 3, 4]);
  });

  it('the Active Cached Segment Timeline stacks to the reserved bytes after every event, also where one unmap ends two mapped ranges and keeps part of one', async () => {
    for (const name of ['replay_expandable_cut.pickle', 'replay_expandable.pickle', 'history_pools.pickle']) {
      const file = fixture(`torch/${name}`);
      const data = await report(file);
      const h = new AllocatorHistory(data.history!.devices[0], data.history!.actions);
      const all = Array.from({ length: h.n + 1 }, (_, i) => i - 1);
      const want = pythonStates(file, 0, all);
      const bands = segmentBands(h, data.memory!.devices[0].eventDt, 'cuda:0');
      const timeline = new DeviceTimeline(bands.memory, bands.group);
      // After the first m events: the sum of CPython's segments after event m - 1.
      const reserved = all.map((i) => want[String(i)].segments.reduce((sum, [, size]) => sum + size, 0));
      expect(all.map((i) => timeline.totalAt(i + 1)), name).toEqual(reserved);
      expect(bands.memory.peakReserved).toBe(Math.max(...reserved));
      // Each pixel column's total is the highest of its events'.
      const { total, first } = timeline.columnMoments(timeline.tMin, timeline.tMax, 7);
      for (let c = 0; c < 7; c++) expect(total[c]).toBe(Math.max(...reserved.slice(first[c]!, first[c + 1]! + 1)));
    }
    // The cut: at the unmap, the first mapping ends whole and the second ends, its last page kept as a band of its own.
    const data = await report(fixture('torch/replay_expandable_cut.pickle'));
    const h = new AllocatorHistory(data.history!.devices[0], data.history!.actions);
    const { memory } = segmentBands(h, data.memory!.devices[0].eventDt, 'cuda:0');
    const unmap = h.n - 1;
    expect(memory.start.map((s, b) => [s, memory.end[b], memory.bytes[b]])).toEqual([
      [0, unmap, 20 * MiB],
      [2, unmap, 40 * MiB],
      [unmap, -1, 20 * MiB],
    ]);
  });

  it('a 19,770-event training step: random events through checkpoints equal CPython', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const events = [19769, 0, -1, 9000, 9001, 8999, 15000, 123, 19000, 4567, 12345];
    const h = await agrees(file, 0, events, 512);
    // Any event costs at most half an interval of applications once a checkpoint is restored.
    const before = h.applied;
    h.goTo(10_000);
    h.goTo(3_333);
    expect(h.applied - before).toBeLessThanOrEqual(512);
    await agrees(file, 0, [5000, 5001, 5002, 4999]);
  });

  it('the checkpoint interval grows with the trace so the checkpoints stay within their budget', () => {
    expect(checkpointInterval(20_000, 2_000)).toBe(256);
    const k = checkpointInterval(632_000, 64_000);
    expect((632_000 / k) * 64_001).toBeLessThanOrEqual(4_000_000);
    expect((632_000 / (k / 2)) * 64_001).toBeGreaterThan(4_000_000);
  });
});
