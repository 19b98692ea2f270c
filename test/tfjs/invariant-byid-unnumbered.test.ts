import * as tf from '@tensorflow/tfjs-core';
import { MathBackendCPU } from '@tensorflow/tfjs-backend-cpu';
import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// A backend memscope does not know to number its dataIds (the cpu backend under another name,
// with the cpu kernels): its storages get counted ids and are kept as objects in either mode, and
// their events never come in batches, though the sink would take them so.
describe('storage invariant by id on a backend memscope does not know', () => {
  it('storages of unnumbered dataIds are kept as objects, and the account still equals the engine', async () => {
    tf.registerBackend('plaincpu', () => new MathBackendCPU(), 0);
    for (const k of tf.getKernelsForBackend('cpu')) tf.registerKernel({ ...k, backendName: 'plaincpu' });
    await checkInvariantById('plaincpu', 6, 150, false);
  });
});
