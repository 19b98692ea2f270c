/**
 * Builds the page data of the Allocator State History, the Active Cached Segment Timeline, the
 * allocator settings and the OOM marks from a PyTorch snapshot (types in
 * snapshot-history-data.ts). Framework-free and platform-free: the page runs it too when it
 * reads a dropped file.
 */
import { DEFAULT_SITE_RULE, type SiteRule } from '../core/site-rule.js';
import type { MemorySnapshot, TraceTable } from '../torch/snapshot.js';
import type { PlainValue } from '../torch/pickle/reader.js';
import type { ReportMemory, StringTable } from './report-data.js';
import type { HistorySegment, ReportHistory, ReportHistoryDevice, SettingValue } from './snapshot-history-data.js';
import { SnapshotStacks, deviceName, hasHistory } from './snapshot-memory.js';

/** Interns numbers into a table, for columns of values that repeat (addresses, stream handles). */
class NumberTable {
  readonly values: number[] = [];
  private readonly ids = new Map<number, number>();
  id(v: number): number {
    let id = this.ids.get(v);
    if (id === undefined) {
      id = this.values.length;
      this.values.push(v);
      this.ids.set(v, id);
    }
    return id;
  }
}

function deviceHistory(snap: MemorySnapshot, device: number, memoryIndex: number, trace: TraceTable | null, stacks: SnapshotStacks): ReportHistoryDevice {
  const allocated = snap.stateNames.indexOf('active_allocated');
  const pending = snap.stateNames.indexOf('active_pending_free');
  const oom = snap.actionNames.indexOf('oom');
  const segs = snap.segments.filter((s) => s.device === device).sort((a, b) => a.address - b.address);
  const segments: HistorySegment[] = segs.map((s) => ({
    address: s.address,
    size: s.totalSize,
    stream: s.stream,
    pool: s.poolId ? [s.poolId[0], s.poolId[1]] : null,
    expandable: s.isExpandable,
    kind: s.segmentType,
  }));
  const blocks: ReportHistoryDevice['blocks'] = { address: [], size: [], requested: [], pending: [], stack: [] };
  for (const s of segs) {
    for (let i = s.firstBlock; i < s.firstBlock + s.blockCount; i++) {
      const st = snap.blocks.state[i];
      if (st !== allocated && st !== pending) continue;
      blocks.address.push(snap.blocks.address[i]);
      blocks.size.push(snap.blocks.size[i]);
      blocks.requested.push(snap.blocks.requestedSize[i]);
      blocks.pending.push(st === pending ? 1 : 0);
      blocks.stack.push(stacks.stack(snap.blocks.stack[i]));
    }
  }
  const addresses = new NumberTable();
  const streams = new NumberTable();
  const n = trace?.count ?? 0;
  const events: ReportHistoryDevice['events'] = { action: new Array(n), addr: new Array(n), size: new Array(n), stream: new Array(n), stack: new Array(n) };
  const ooms: ReportHistoryDevice['ooms'] = { event: [], requested: [], deviceFree: [] };
  for (let i = 0; i < n; i++) {
    const t = trace!;
    const action = t.action[i];
    events.action[i] = action;
    const addr = t.addr[i];
    events.addr[i] = action === oom || !Number.isFinite(addr) ? -1 : addresses.id(addr);
    events.size[i] = t.size[i];
    events.stream[i] = streams.id(Number.isFinite(t.stream[i]) ? t.stream[i] : 0);
    events.stack[i] = stacks.stack(t.stack[i]);
    if (action === oom) {
      const free = t.deviceFree ? t.deviceFree[i] : NaN;
      ooms.event.push(i);
      ooms.requested.push(t.size[i]);
      ooms.deviceFree.push(Number.isNaN(free) ? -1 : free);
    }
  }
  return { device: deviceName(device, snap.deviceType), memory: memoryIndex, segments, blocks, events, addresses: addresses.values, streams: streams.values, ooms };
}

/** `allocator_settings` as JSON data (every key kept, unknown ones as they are). */
function settings(raw: { readonly [key: string]: PlainValue } | null): { [key: string]: SettingValue } | null {
  return raw ? (JSON.parse(JSON.stringify(raw)) as { [key: string]: SettingValue }) : null;
}

/**
 * The history of every device of `memory` (the report's Active Memory Timeline data, built on the
 * same `table`). Event stacks not yet in the table are interned and their folded-frame counts and
 * sites appended to `memory.stackFolded` and `memory.stackSite`, which stay parallel to `table.stacks`.
 */
export function snapshotHistory(snap: MemorySnapshot, table: StringTable, memory: ReportMemory, rule: SiteRule = DEFAULT_SITE_RULE): ReportHistory {
  const stacks = new SnapshotStacks(snap, table, rule);
  const firstNew = table.stacks.length;
  const devices: ReportHistoryDevice[] = [];
  memory.devices.forEach((m, index) => {
    const device = snap.segments.find((s) => deviceName(s.device, snap.deviceType) === m.device)?.device ?? snap.traces.find((t) => deviceName(t.device, snap.deviceType) === m.device)?.device;
    if (device === undefined) return;
    const trace = snap.traces.find((t) => t.device === device && hasHistory(snap, t)) ?? null;
    devices.push(deviceHistory(snap, device, index, trace, stacks));
  });
  // SnapshotStacks records a folded count and a site for each stack it is the first to intern, in table order.
  for (const [column, added] of [
    [memory.stackFolded, stacks.folded],
    [memory.stackSite, stacks.sites],
  ] as const) {
    while (column.length < firstNew) column.push(0);
    for (const v of added) column.push(v);
    while (column.length < table.stacks.length) column.push(0);
  }
  return { actions: [...snap.actionNames], devices, allocatorSettings: settings(snap.allocatorSettings) };
}
