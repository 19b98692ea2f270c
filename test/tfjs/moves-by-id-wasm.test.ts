// Storage events by id and moves between backends: a dataId moved onto another backend keeps the
// number its first backend gave it, so its free must go by the storage's own (counted) id, never
// by one derived on the backend it moved to. Its own file: ids derive only when wasm is the one
// backend initialised at the attach.
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import type { StorageBatchSink, StorageRef } from '../../src/core/events.js';
import { tfjsAdapter } from '../../src/tfjs/adapter.js';
import { useBackend } from './support/backends.js';

beforeAll(async () => {
  await useBackend('wasm');
});

/** Live bytes by storage id, from batches or as objects. */
class IdAccount implements StorageBatchSink {
  readonly live = new Map<number, number>();
  onStorageAlloc(s: StorageRef): void {
    this.alloc(s.id, s.bytes);
  }
  onStorageFree(s: StorageRef): void {
    this.live.delete(s.id);
  }
  onStorageBatch(batch: Float64Array, length: number): void {
    for (let at = 0; at < length; at += 2) {
      if (batch[at + 1]! >= 0) this.alloc(batch[at]!, batch[at + 1]!);
      else this.live.delete(batch[at]!);
    }
  }
  private alloc(id: number, bytes: number): void {
    if (!this.live.has(id)) this.live.set(id, bytes);
  }
  bytes(): number {
    let total = 0;
    for (const b of this.live.values()) total += b;
    return total;
  }
}

describe('storage events by id and moves between backends', () => {
  it('a storage moved onto wasm is freed by its own id, also after a sink came and went', async () => {
    const account = new IdAccount();
    const session = tfjsAdapter.attach(account);
    try {
      const kept = tf.ones([5]); // 20 B on wasm
      const started = tf.ones([2]); // 8 B
      // Twice: the second time after a sink came and went, which re-applies what the sinks need.
      for (let round = 0; round < 2; round++) {
        await useBackend('cpu'); // initialised after the attach: ids still derive
        const onCpu = tf.tensor1d([1, 2, 3]); // numbered by the cpu backend
        await useBackend('wasm');
        const sum = tf.add(onCpu, 1); // moves onCpu's data to wasm
        expect(Array.from(sum.dataSync())).toEqual([2, 3, 4]);
        tf.dispose([onCpu, sum]);
        expect(account.bytes()).toBe(28);
        expect(account.live.size).toBe(2);
        const other = tfjsAdapter.attach({ onStorageAlloc() {}, onStorageFree() {}, onStorageBatch() {} } satisfies StorageBatchSink);
        other.detach();
        const after = tf.zeros([1]);
        after.dispose();
        expect(account.bytes()).toBe(28);
      }
      tf.dispose([kept, started]);
      expect(account.live.size).toBe(0);
    } finally {
      session.detach();
    }
  });
});
