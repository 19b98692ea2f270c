import { describe, it } from 'vitest';
import { checkInvariant } from './support/invariant.js';

// One backend per file: vitest forks a process per file, so the engine oracle
// sees this backend's engine from its very first tensor.
describe('storage invariant on wasm', () => {
  it('memscope live bytes per device equal the engine dedup figure at every kernel boundary (8 random programs)', async () => {
    await checkInvariant('wasm', 8, 150);
  });
});
