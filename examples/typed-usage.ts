// memscope from a typed application: a TFJS model's memory by category, a PyTorch snapshot's
// segments, and the caching-allocator model, all through the package's own declarations.
// `npm run test:package` type-checks this file (tsc --noEmit) in a fresh app that installed
// memscope's tarball with @tensorflow/tfjs; the @ts-expect-error lines fail there if the
// declarations lose their types.
import * as tf from '@tensorflow/tfjs';
import type { DeviceSnapshot, MemRefType } from 'memscope';
import { DeviceMemory } from 'memscope/allocator';
import { MemTracker } from 'memscope/tfjs';
import { readSnapshot, type MemorySnapshot } from 'memscope/torch';

/** Trains one epoch under MemTracker; returns what is alive afterwards on the cpu backend, by category. */
export async function memoryAfterFit(model: tf.LayersModel, xs: tf.Tensor, ys: tf.Tensor): Promise<DeviceSnapshot | undefined> {
  const tracker = new MemTracker();
  tracker.trackExternal(model, xs, ys);
  await tracker.track(() => model.fit(xs, ys, { epochs: 1, verbose: 0 }));
  tracker.displaySnapshot('peak', { units: 'KiB', tabulate: true });
  return tracker.snapshot('current')['cpu'];
}

/** Bytes of one category, e.g. the weights: `bytesOf(snapshot, 'Parameter')`. */
export function bytesOf(snapshot: DeviceSnapshot, category: MemRefType): number {
  return snapshot[category];
}

/** Reserved bytes per segment of a PyTorch snapshot (the bytes of a `torch.cuda.memory._dump_snapshot` pickle). */
export function reservedPerSegment(pickle: Uint8Array): number[] {
  const snapshot: MemorySnapshot = readSnapshot(pickle);
  return snapshot.segments.map((segment) => segment.totalSize);
}

/** What PyTorch's caching allocator would reserve for these request sizes, in bytes. */
export function reservedFor(sizes: readonly number[]): number {
  const device = new DeviceMemory();
  for (const size of sizes) device.cachingAllocatorAlloc(size);
  return device.memoryReserved();
}

// @ts-expect-error 'Weights' is not one of memscope's categories (PyTorch calls them Parameter).
export const notACategory: MemRefType = 'Weights';
// @ts-expect-error MemTracker snapshots are 'current' or 'peak'.
export const notASnapshotType = () => new MemTracker().snapshot('latest');
