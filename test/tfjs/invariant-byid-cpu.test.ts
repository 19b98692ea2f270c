import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// One backend per file (see invariant-cpu.test.ts). The sink takes storage events in batches, as
// MemTracker's recorder does: the adapter holds them back and delivers them before any other event
// and on flush(), which the check calls between steps.
describe('storage invariant by id on cpu', () => {
  it('a sink taking storage batches stays equal to the engine at every kernel boundary and after every flush, while the adapter goes between keeping storage objects and not', async () => {
    await checkInvariantById('cpu', 8, 150, true);
  });
});
