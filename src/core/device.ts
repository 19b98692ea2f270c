import type { DeviceName } from './events.js';

/**
 * How a device hands out memory. `granularity` is the unit every storage is
 * rounded up to when memscope reports device bytes (PyTorch rounds CUDA blocks
 * to 512 B). See docs/DEVICES.md for why each TFJS backend has the value it has.
 */
export interface DeviceSpec {
  readonly name: DeviceName;
  readonly granularity: number;
}

const KNOWN: Record<string, number> = {
  // TypedArrays on the JS heap: V8 allocates the backing store at byte granularity.
  cpu: 1,
  // The wasm backend mallocs from its linear memory; emscripten's dlmalloc
  // aligns chunks to 8 bytes (see docs/DEVICES.md).
  wasm: 8,
  // Textures and buffers are sized by the backend's own physical shapes;
  // memscope reports the logical bytes TFJS counts (no rounding it can verify).
  webgl: 1,
  webgpu: 1,
};

export function deviceSpec(name: DeviceName): DeviceSpec {
  if (name.startsWith('cuda')) return { name, granularity: 512 };
  return { name, granularity: KNOWN[name] ?? 1 };
}

/** Rounds `bytes` up to the device's granularity. */
export function roundToDevice(bytes: number, spec: DeviceSpec): number {
  const g = spec.granularity;
  return g <= 1 ? bytes : Math.ceil(bytes / g) * g;
}
