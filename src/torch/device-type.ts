/**
 * The device type a snapshot's memory lives on, and how memscope names its devices.
 *
 * PyTorch's snapshots are CUDA's (`torch.cuda.memory._snapshot()`) and say nothing about it: a
 * segment's `device` is a bare index. memscope's WebGPU recorder writes the same schema for
 * `webgpu:N` devices and adds one top-level key, `device_type` (docs/SNAPSHOT_FORMAT.md), which
 * PyTorch's readers (`_memory_viz.py`, pytorch.org/memory_viz) never look up. A file without the
 * key is CUDA's. The name follows `torch.device`: the type, a colon, the index.
 */

import { SMALL_BUFFER, SMALL_SIZE } from './pytorch-vocabulary.js';

/** The snapshot dict's key naming the device type (`'webgpu'`); absent in PyTorch's own files. */
export const DEVICE_TYPE_KEY = 'device_type';

/** The device type of a file without `device_type`: every PyTorch snapshot. */
export const DEFAULT_DEVICE_TYPE = 'cuda';

/** What a device type may look like: torch.device's lower-case identifiers ('cuda', 'xpu', 'webgpu'). */
const DEVICE_TYPE_PATTERN = /^[a-z][a-z0-9_]{0,31}$/;

/** True when `value` can name a device type. */
export function isDeviceType(value: unknown): value is string {
  return typeof value === 'string' && DEVICE_TYPE_PATTERN.test(value);
}

/** 'cuda:0', 'webgpu:1'; the bare type for an unknown index (-1). */
export function deviceLabel(deviceType: string, index: number): string {
  return index >= 0 ? `${deviceType}:${index}` : deviceType;
}

const TITLES: Readonly<Record<string, string>> = { cuda: 'CUDA', webgpu: 'WebGPU', xpu: 'XPU', mps: 'MPS', mtia: 'MTIA' };

/** How prose names the device type: 'CUDA', 'WebGPU'; other types upper-cased. */
export function deviceTypeTitle(deviceType: string): string {
  return TITLES[deviceType] ?? deviceType.toUpperCase();
}

/**
 * The sizes of a small-pool segment, [least, most]: CUDA's caching allocator makes small-pool
 * segments of exactly 2 MiB (SMALL_BUFFER); memscope/webgpu calls a resource of up to 1 MiB
 * (SMALL_SIZE) a small segment, as it does a block.
 */
export function smallSegmentSizes(deviceType: string): readonly [number, number] {
  return deviceType === 'webgpu' ? [0, SMALL_SIZE] : [SMALL_BUFFER, SMALL_BUFFER];
}

/** The device index of a label of any type ('webgpu:2' → 2); -1 when it is not one. */
export function deviceIndexOfLabel(label: string): number {
  const m = /^[a-z][a-z0-9_]*:(\d+)$/.exec(label);
  return m ? Number(m[1]) : -1;
}
