import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// One backend per file (see invariant-cpu.test.ts). The sink takes storage events by id, in
// batches, as MemTracker's recorder does; the check also compares between steps.
describe('storage invariant by id on cpu', () => {
  it('a sink taking storage batches stays equal to the engine at every kernel boundary and between steps, while the adapter goes between keeping storage objects and not', async () => {
    await checkInvariantById('cpu', 8, 150, true);
  });
});
