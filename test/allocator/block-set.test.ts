import { describe, expect, it } from 'vitest';
import { SortedSet } from '../../src/allocator/block-set.js';

describe('SortedSet', () => {
  it('behaves like a sorted array across chunk splits and removals', () => {
    const set = new SortedSet<number>((a, b) => a - b);
    const model: number[] = [];
    let x = 12345;
    const rand = (): number => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return x;
    };
    // 3,000 values first so the set spans several chunks before the random phase.
    for (let v = 0; v < 3000; v++) {
      set.insert(v * 2 + 10000);
      model.push(v * 2 + 10000);
    }
    for (let step = 0; step < 20000; step++) {
      const v = rand() % 5000;
      if (rand() % 3 !== 0) {
        const inserted = set.insert(v);
        expect(inserted).toBe(!model.includes(v));
        if (inserted) {
          model.push(v);
          model.sort((a, b) => a - b);
        }
      } else {
        const deleted = set.delete(v);
        expect(deleted).toBe(model.includes(v));
        if (deleted) model.splice(model.indexOf(v), 1);
      }
      // Positions right after a change: the counts before each chunk are adjusted in place between rebuilds.
      const probe = rand() % 5000;
      const want = model.findIndex((m) => m >= probe);
      expect(set.lowerBound(probe)).toBe(want === -1 ? model.length : want);
      expect(set.at(rand() % model.length)).toBe(model[x % model.length]);
      if (step % 997 === 0) {
        expect(set.toArray()).toEqual(model);
        expect([...set]).toEqual(model);
        for (const probe of [-1, 0, 1234, 2500, 4999, 6000, 10001, 12345, 15998, 20000]) {
          const i = set.lowerBound(probe);
          expect(i).toBe(model.findIndex((m) => m >= probe) === -1 ? model.length : model.findIndex((m) => m >= probe));
          expect(set.at(i)).toBe(model[i]);
        }
      }
    }
    expect(set.size).toBe(model.length);
    expect(model.length).toBeGreaterThan(3000);
  });
});
