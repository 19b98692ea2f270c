// Text renderings of MemTracker snapshots, in the layout of PyTorch's
// MemTracker displays (`_print_snapshot`, `_print_state_snapshots` and their
// tabular forms), with tables drawn by renderTable.
import { bytesIn, formatBytes, type Unit } from '../core/units.js';
import {
  MOD_STATES,
  TOTAL_KEY,
  type DeviceSnapshot,
  type MemTrackerSnapshot,
  type ModuleMemStats,
} from './mem-types.js';
import { renderTable } from '../render/table.js';

const NO_MEMORY = 'No memory tracked.';

/** A device whose total shows as 0 in `unit` (two decimals) is left out, as PyTorch does. */
function shown(dev: DeviceSnapshot, unit: Unit): boolean {
  return Math.round(bytesIn(dev[TOTAL_KEY], unit) * 100) > 0;
}

export function formatSnapshotText(snapshot: MemTrackerSnapshot, unit: Unit): string {
  const devices = Object.keys(snapshot);
  if (devices.length === 0) return NO_MEMORY;
  const lines: string[] = [];
  for (const name of devices) {
    const dev = snapshot[name]!;
    if (!shown(dev, unit)) continue;
    lines.push(`Device: ${name}`);
    for (const [key, bytes] of Object.entries(dev)) lines.push(`\t${key}: ${formatBytes(bytes, unit)}`);
  }
  return lines.join('\n');
}

export function formatSnapshotTable(snapshot: MemTrackerSnapshot, unit: Unit): string {
  const devices = Object.keys(snapshot);
  if (devices.length === 0) return NO_MEMORY;
  const keys = Object.keys(snapshot[devices[0]!]!);
  const rows: string[][] = [];
  for (const name of devices) {
    const dev = snapshot[name]!;
    if (!shown(dev, unit)) continue;
    rows.push([name, ...Object.values(dev).map((b) => formatBytes(b, unit))]);
  }
  return renderTable(['Device', ...keys], rows, { align: ['left', ...keys.map(() => 'right' as const)] });
}

/** Splits digit runs out so 'dense_10' sorts after 'dense_9' (PyTorch's natural_sort_key). */
export function naturalCompare(a: string, b: string): number {
  const pa = a.toLowerCase().split(/(\d+)/);
  const pb = b.toLowerCase().split(/(\d+)/);
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    // Odd positions of a split on a capturing group are the digit runs.
    if (i % 2 === 1) {
      const d = Number(x) - Number(y);
      if (d !== 0) return d;
      return x.length - y.length;
    }
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

function stateCalls(stats: ModuleMemStats): [string, MemTrackerSnapshot[]][] {
  const out: [string, MemTrackerSnapshot[]][] = [];
  for (const state of MOD_STATES) {
    const list = stats.snapshots[state];
    if (list && list.length > 0) out.push([state, list]);
  }
  return out;
}

function moduleText(stats: ModuleMemStats, unit: Unit): string {
  const lines = [`Module:  ${stats.modFqn}`];
  for (const [state, list] of stateCalls(stats)) {
    lines.push(state);
    list.forEach((snap, i) => {
      lines.push(`# ${i + 1}:`);
      lines.push(formatSnapshotText(snap, unit));
    });
  }
  return lines.join('\n') + '\n';
}

function moduleTable(stats: ModuleMemStats, unit: Unit): string {
  let keys: string[] | null = null;
  const rows: string[][] = [];
  for (const [state, list] of stateCalls(stats)) {
    list.forEach((snap, i) => {
      let first = true;
      for (const [device, dev] of Object.entries(snap)) {
        // Memory that rounds to 0 in this unit is still memory tracked: the table's columns stay.
        keys ??= Object.keys(dev);
        if (!shown(dev, unit)) continue;
        rows.push([first ? `${state} # ${i + 1}` : '', device, ...Object.values(dev).map((b) => formatBytes(b, unit))]);
        first = false;
      }
    });
  }
  const header = `Module:  ${stats.modFqn}`;
  if (keys === null) return `${header}\n${NO_MEMORY}`;
  const k: string[] = keys;
  const table = renderTable(['State & Call', 'Device', ...k], rows, { align: ['left', 'left', ...k.map(() => 'right' as const)] });
  return `${header}\n${table}${rows.length === 0 ? `\n(every total rounds to 0.00 ${unit})` : ''}`;
}

/** Every module up to `depth` (the root is depth 1), in natural order of its name. */
export function formatModulewise(
  modules: readonly ModuleMemStats[],
  options: { depth: number; unit: Unit; tabulate: boolean },
): string {
  const selected = modules
    .filter((m) => m.depth <= options.depth)
    .sort((a, b) => naturalCompare(a.modFqn, b.modFqn));
  if (selected.length === 0) return 'No modules tracked.';
  return selected.map((m) => (options.tabulate ? moduleTable(m, options.unit) : moduleText(m, options.unit))).join('\n');
}
