import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// One backend per file (see invariant-cpu.test.ts). wasm numbers dataIds per backend instance;
// from the second program on, tensors are also moved to the cpu backend and back. The sink takes
// storage events by id, in batches (as MemTracker's recorder does).
describe('storage invariant by id on wasm, with moves to cpu', () => {
  it('a sink taking storage batches stays equal to the engine while the adapter goes between keeping storage objects and not', async () => {
    await checkInvariantById('wasm', 8, 150, true, { moveTo: 'cpu' });
  });
});
