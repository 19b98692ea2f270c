import { describe, it, expect, beforeAll } from 'vitest';
import * as tf from '@tensorflow/tfjs-core';
import type { StorageRef } from '../../src/core/events.js';
import { deviceSpec } from '../../src/core/device.js';
import { tfjsAdapter } from '../../src/tfjs/index.js';
import { useBackend } from './support/backends.js';

beforeAll(async () => {
  await useBackend('wasm');
});

describe('wasm device', () => {
  it('the wasm backend mallocs tensors 8-byte aligned (not 16): the granularity device.ts uses', () => {
    const backend = tf.backend() as unknown as { dataIdMap: { get(id: object): { memoryOffset: number } } };
    const tensors: tf.Tensor[] = [];
    for (let n = 1; n <= 100; n++) tensors.push(tf.zeros([n], 'bool'), tf.ones([n]));
    const offsets = tensors.map((t) => backend.dataIdMap.get(t.dataId).memoryOffset);
    expect(offsets.every((o) => o % 8 === 0)).toBe(true);
    expect(offsets.some((o) => o % 16 !== 0)).toBe(true);
    expect(deviceSpec('wasm').granularity).toBe(8);
    tf.dispose(tensors);
  });

  it('storages are on device "wasm"; deviceMemory reports the wasm heap size', () => {
    const s = tfjsAdapter.attach({});
    const t = tf.ones([1000]);
    expect(s.tensor(t).storage.device).toBe('wasm');
    expect(s.currentDevice()).toBe('wasm');
    const heap = (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.byteLength;
    expect(s.deviceMemory('wasm')).toEqual({ reservedBytes: heap, source: 'wasm heap (linear memory size)' });
    expect(heap).toBeGreaterThanOrEqual(4000);
    t.dispose();
    s.detach();
  });

  it('data moved between backends: free on the old device, alloc on the new one, tensors follow', async () => {
    const events: string[] = [];
    const s = tfjsAdapter.attach({
      onStorageAlloc: (st: StorageRef) => events.push(`alloc ${st.device} ${st.bytes}`),
      onStorageFree: (st: StorageRef) => events.push(`free ${st.device} ${st.bytes}`),
    });
    await useBackend('cpu');
    const a = tf.tensor1d([1, 2, 3]);
    const ref = s.tensor(a);
    const onCpu = ref.storage;
    await useBackend('wasm');
    const b = tf.add(a, 1); // reading `a` on wasm moves its data there
    expect(Array.from(b.dataSync())).toEqual([2, 3, 4]);
    expect(ref.storage).not.toBe(onCpu);
    expect(ref.storage.device).toBe('wasm');
    // (the scalar 1 is made on wasm first, then the kernel reads `a` and moves it: the moved
    // storage is told before the old one's free, naming it, so sinks carry its category over)
    expect(events.slice(0, 4)).toEqual(['alloc cpu 12', 'alloc wasm 4', 'alloc wasm 12', 'free cpu 12']);
    expect(ref.storage.movedFrom).toBe(onCpu.id);
    tf.dispose([a, b]);
    s.detach();
  });

  it('a move seen by a sink taking storage batches: the old storage freed, the moved one new, and the tensor follows it', async () => {
    // Two backends were initialised before this attach, so ids do not derive from dataIds here
    // (a move before installation could not have been seen): the events come as objects, and must
    // be consistent with the ids the tensor reports. invariant-byid-wasm.test.ts covers moves
    // while ids derive.
    const events: string[] = [];
    const ids: number[] = [];
    const seen = (id: number) => (ids.includes(id) ? ids.indexOf(id) : ids.push(id) - 1);
    const s = tfjsAdapter.attach({
      onStorageAlloc: (st: StorageRef) => events.push(`alloc ${st.device} ${st.bytes} #${seen(st.id)}`),
      onStorageFree: (st: StorageRef) => events.push(`free #${seen(st.id)}`),
      onStorageBatch: (batch: Float64Array, length: number, device: string) => {
        for (let at = 0; at < length; at += 2) {
          if (batch[at + 1]! >= 0) events.push(`alloc ${device} ${batch[at + 1]} #${seen(batch[at]!)}`);
          else events.push(`free #${seen(batch[at]!)}`);
        }
      },
    });
    await useBackend('cpu');
    const a = tf.tensor1d([1, 2, 3]);
    expect(Object.getOwnPropertySymbols(a.dataId)).toHaveLength(1); // kept: no derived id
    const ref = s.tensor(a);
    expect(ref.storage.id).toBe(ids[0]);
    await useBackend('wasm');
    const b = tf.add(a, 1);
    expect(Array.from(b.dataSync())).toEqual([2, 3, 4]);
    expect(ref.storage.device).toBe('wasm');
    expect(ref.storage.id).toBe(ids[2]);
    tf.dispose([a, b]);
    expect(events).toEqual(['alloc cpu 12 #0', 'alloc wasm 4 #1', 'alloc wasm 12 #2', 'free #0', 'alloc wasm 12 #3', 'free #1', 'free #2', 'free #3']);
    s.detach();
  });
});
