// The test setup (test/support/setup.ts) keeps TFJS's "Hi, looks like you are running
// TensorFlow.js in Node.js" banner out of test logs: the cpu backend prints it on its first
// write in a process, which this file's process has not had yet.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { describe, expect, it, vi } from 'vitest';

describe('TFJS in tests', () => {
  it("the cpu backend's first write prints no Node.js banner", async () => {
    const warn = vi.spyOn(console, 'warn');
    const log = vi.spyOn(console, 'log');
    try {
      await tf.setBackend('cpu');
      const t = tf.tensor([1, 2, 3]);
      expect(Array.from(await t.data())).toEqual([1, 2, 3]);
      t.dispose();
      const printed = [...warn.mock.calls, ...log.mock.calls].map((args) => args.map(String).join(' '));
      expect(printed.filter((line) => /running TensorFlow\.js in Node\.js/.test(line))).toEqual([]);
    } finally {
      warn.mockRestore();
      log.mockRestore();
    }
  });
});
