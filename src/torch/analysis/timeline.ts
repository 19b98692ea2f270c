/** A snapshot's device traces as memory timelines (the model plots draw). */
import { EMPTY_OPERATORS, type DeviceMemoryTimeline, type MemoryTrace } from '../memory-trace.js';
import type { MemorySnapshot } from '../snapshot.js';
import { snapshotTotals } from './totals.js';
import { deviceLabel } from '../device-type.js';

/**
 * The snapshot's device traces as memory timelines (for plots): allocated
 * moves on alloc / free_completed, reserved on segment events. Both are
 * anchored so they end at the snapshot's current state; events without
 * `time_us` (older PyTorch) are placed at their index.
 */
export function snapshotTimeline(snapshot: MemorySnapshot): MemoryTrace {
  const devices: DeviceMemoryTimeline[] = [];
  let count = 0;
  for (const t of snapshot.traces) {
    if (t.count === 0) continue;
    const n = t.count;
    const time = new Float64Array(n);
    const bytes = new Float64Array(n);
    const allocated = new Float64Array(n);
    const reserved = new Float64Array(n);
    const addr = new Float64Array(n);
    let net = 0;
    let reservedNet = 0;
    const reservedDelta = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const action = snapshot.actionNames[t.action[i]!];
      const size = t.size[i]!;
      time[i] = Number.isNaN(t.timeUs[i]!) ? i : t.timeUs[i]!;
      addr[i] = t.addr[i]!;
      if (action === 'alloc') bytes[i] = size;
      else if (action === 'free_completed') bytes[i] = -size;
      if (action === 'segment_alloc' || action === 'segment_map') reservedDelta[i] = size;
      else if (action === 'segment_free' || action === 'segment_unmap') reservedDelta[i] = -size;
      net += bytes[i]!;
      reservedNet += reservedDelta[i]!;
    }
    const totals = snapshotTotals(snapshot, t.device);
    const baseline = totals.all.allocatedFromBlocks - net;
    let a = baseline;
    let r = totals.all.reserved - reservedNet;
    for (let i = 0; i < n; i++) {
      a += bytes[i]!;
      r += reservedDelta[i]!;
      allocated[i] = a;
      reserved[i] = r;
    }
    devices.push({
      device: deviceLabel(snapshot.deviceType, t.device),
      count: n,
      time,
      bytes,
      allocated,
      reserved,
      addr,
      operator: new Int32Array(n).fill(-1),
      baseline,
      allocatedIsRelative: false,
      inconsistentTotals: 0,
    });
    count += n;
  }
  return {
    source: 'snapshot',
    devices,
    operators: EMPTY_OPERATORS,
    eventCount: count,
    memoryEventCount: count,
    outOfMemory: [],
    eventsByCategory: {},
    deviceNames: {},
  };
}
