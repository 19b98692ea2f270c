import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// One backend per file (see invariant-cpu.test.ts). The sink takes storage events by id queued,
// as MemTracker's recorder does: the adapter holds them back and delivers them before any other
// event and on flush(), which the check calls between steps.
describe('storage invariant by id on cpu, events queued', () => {
  it('a sink taking storage events queued equals the engine at every kernel boundary and after every flush', async () => {
    await checkInvariantById('cpu', 8, 150, true, { queued: true });
  });
});
