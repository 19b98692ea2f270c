import { describe, expect, it } from 'vitest';
import { IdTable } from '../../src/tracking/id-table.js';

describe('IdTable', () => {
  it('agrees with a Map over a randomized allocate/free workload with growing ids, wrap-around and growth', () => {
    const table = new IdTable(16);
    const reference = new Map<number, number>();
    let seed = 12345;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    let nextId = 1;
    // Long-lived ids (weights) plus a churning window of recent ones, as in training;
    // some ids far apart collide on their low bits and must probe past each other.
    for (let k = 0; k < 40; k++) {
      table.set(k * 1024, k);
      reference.set(k * 1024, k);
    }
    for (let step = 0; step < 20000; step++) {
      const r = random();
      if (r < 0.5 || reference.size === 0) {
        const id = nextId++ + (random() < 0.05 ? 2 ** 40 : 0);
        const value = Math.floor(random() * 1e12);
        table.set(id, value);
        reference.set(id, value);
      } else {
        const keys = [...reference.keys()];
        const id = keys[Math.floor(random() * keys.length)]!;
        expect(table.delete(id)).toBe(true);
        reference.delete(id);
        expect(table.delete(id)).toBe(false);
      }
      if (step % 997 === 0) {
        expect(table.size).toBe(reference.size);
        for (const [id, value] of reference) expect(table.get(id)).toBe(value);
        const seen = new Map<number, number>();
        table.forEach((value, id) => seen.set(id, value));
        expect(seen).toEqual(reference);
      }
    }
    expect(table.get(nextId + 1)).toBeUndefined();
    expect(table.has(0)).toBe(reference.has(0));
    table.set(0, 7);
    expect(table.get(0)).toBe(7);
  });
});
