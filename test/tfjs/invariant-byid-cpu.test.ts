import { describe, it } from 'vitest';
import { checkInvariantById } from './support/invariant.js';

// One backend per file (see invariant-cpu.test.ts).
describe('storage invariant by id on cpu', () => {
  it('a sink taking storages by id stays equal to the engine while the adapter goes between keeping storage objects and not', async () => {
    await checkInvariantById('cpu', 8, 150, true);
  });
});
