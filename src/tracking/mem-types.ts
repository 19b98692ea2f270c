import type { DeviceName } from '../core/events.js';
import type { MemRefType } from '../core/mem-categories.js';

/** What a storage is used for (PyTorch's `_MemRefType`), in display order: see core/mem-categories.ts. */
export { MEM_REF_TYPES, type MemRefType } from '../core/mem-categories.js';

/** The key holding a device's sum over all categories (PyTorch's `_TOTAL_KEY`). */
export const TOTAL_KEY = 'Total';

/** A module's state when a snapshot is taken, with PyTorch's names (`_ModState`). */
export type ModState =
  | 'Pre-Forward'
  | 'Peak-Forward'
  | 'Post-Forward'
  | 'Pre-Backward'
  | 'Peak-Backward'
  | 'Post-Backward';

/** Chronological order, used by displays. */
export const MOD_STATES: readonly ModState[] = [
  'Pre-Forward',
  'Peak-Forward',
  'Post-Forward',
  'Pre-Backward',
  'Peak-Backward',
  'Post-Backward',
];

/** Bytes per category on one device, plus `Total`. */
export type DeviceSnapshot = Record<MemRefType | typeof TOTAL_KEY, number>;

/** Bytes per category per device. Devices holding no tracked bytes are absent. */
export type MemTrackerSnapshot = Record<DeviceName, DeviceSnapshot>;

export type SnapshotType = 'current' | 'peak';

/** Memory statistics of one module (PyTorch's `_ModMemStats`); a copy, safe to keep. */
export interface ModuleMemStats {
  /** Fully qualified name from the root model, e.g. 'sequential_1.dense_Dense1'. */
  readonly modFqn: string;
  /** The layer's class, e.g. 'Dense'. */
  readonly className: string;
  /** Depth in the module tree: the root is 1. */
  readonly depth: number;
  /** Bytes of the module's trainable weights, its children's included (device-rounded). */
  readonly parameterMem: number;
  /** Bytes of its non-trainable weights, its children's included. */
  readonly bufferMem: number;
  /** Bytes of tracked storages passed to its latest forward call. */
  readonly inputMem: number;
  /** Bytes of tracked storages its latest forward call returned. */
  readonly outputMem: number;
  /** Highest device total seen while the module's latest forward or backward ran, per device. */
  readonly localPeak: Record<DeviceName, number>;
  /** One snapshot per call, per state, in call order. */
  readonly snapshots: Partial<Record<ModState, MemTrackerSnapshot[]>>;
}
