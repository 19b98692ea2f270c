import { writeFileSync } from 'node:fs';
import type { DeviceMemory } from './api.js';
import { encodeSnapshotPickle, type SnapshotDict } from './snapshot.js';
import { renderMemoryUsage, renderSegmentUsage } from './views.js';

/**
 * File I/O for the device API (Node only): dumpSnapshot, saveSegmentUsage,
 * saveMemoryUsage.
 */

/** Serialises a snapshot: JSON for *.json, otherwise a protocol-4 pickle (what pytorch.org/memory_viz opens). */
export function encodeSnapshot(snapshot: SnapshotDict, path: string): Uint8Array | string {
  if (/\.json$/i.test(path)) return JSON.stringify(snapshot);
  return encodeSnapshotPickle(snapshot);
}

/** torch.cuda.memory._dump_snapshot(filename). */
export function dumpSnapshot(memory: DeviceMemory, path = 'dump_snapshot.pickle'): void {
  writeFileSync(path, encodeSnapshot(memory.snapshot(), path));
}

/** torch.cuda.memory._save_segment_usage(filename). */
export function saveSegmentUsage(memory: DeviceMemory, path = 'output.svg', snapshot?: SnapshotDict): void {
  writeFileSync(path, renderSegmentUsage(snapshot ?? memory.snapshot()));
}

/** torch.cuda.memory._save_memory_usage(filename). */
export function saveMemoryUsage(memory: DeviceMemory, path = 'output.svg', snapshot?: SnapshotDict): void {
  writeFileSync(path, renderMemoryUsage(snapshot ?? memory.snapshot()));
}
