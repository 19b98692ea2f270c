import { describe, expect, it } from 'vitest';
import { IdTable, RecentIdTable } from '../../src/tracking/id-table.js';

describe.each([
  ['IdTable', () => new IdTable(16)],
  // Its ring holds 4,096 ids: the workload's long-lived and far-apart ids land on the slots of
  // later ones and move to the overflow, where they must still be found, retagged and freed.
  ['RecentIdTable', () => new RecentIdTable()],
])('%s', (_name, makeTable) => {
  it('agrees with a Map over a randomized allocate/retag/free workload with growing ids, wrap-around and growth', () => {
    const table = makeTable();
    const reference = new Map<number, { bytes: number; tag: number }>();
    let seed = 12345;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    let nextId = 1;
    const check = () => {
      expect(table.size).toBe(reference.size);
      for (const [id, v] of reference) {
        const slot = table.find(id);
        expect(slot).toBeGreaterThanOrEqual(0);
        expect({ bytes: table.bytesAt(slot), tag: table.tagAt(slot) }).toEqual(v);
      }
      const seen = new Map<number, { bytes: number; tag: number }>();
      table.forEach((bytes, tag, id) => seen.set(id, { bytes, tag }));
      expect(seen).toEqual(reference);
    };
    // Long-lived ids (weights) plus a churning window of recent ones, as in training;
    // some ids far apart collide on their low bits and must probe past each other.
    for (let k = 0; k < 40; k++) {
      expect(table.insert(k * 1024, k, k % 256)).toBe(true);
      reference.set(k * 1024, { bytes: k, tag: k % 256 });
    }
    for (let step = 0; step < 20000; step++) {
      const r = random();
      if (r < 0.45 || reference.size === 0) {
        const id = nextId++ + (random() < 0.05 ? 2 ** 40 : 0);
        const v = { bytes: Math.floor(random() * 1e12), tag: Math.floor(random() * 256) };
        expect(table.insert(id, v.bytes, v.tag)).toBe(true);
        // A second insert of a present id changes nothing.
        expect(table.insert(id, 1, 1)).toBe(false);
        reference.set(id, v);
      } else {
        const keys = [...reference.keys()];
        const id = keys[Math.floor(random() * keys.length)]!;
        if (r < 0.55) {
          const tag = Math.floor(random() * 256);
          table.setTagAt(table.find(id), tag);
          reference.get(id)!.tag = tag;
          // Inserting an id present anywhere (the ring or the overflow) changes nothing.
          expect(table.insert(id, 7, 7)).toBe(false);
        } else if ('take' in table && r < 0.75) {
          // A free through `take`: the entry's bytes, its tag beside them, and then it is gone.
          const v = reference.get(id)!;
          expect(table.take(id)).toBe(v.bytes);
          expect(table.takenTag).toBe(v.tag);
          reference.delete(id);
          expect(table.take(id)).toBe(-1);
          expect(table.find(id)).toBe(-1);
        } else {
          expect(table.delete(id)).toBe(true);
          reference.delete(id);
          expect(table.delete(id)).toBe(false);
          expect(table.find(id)).toBe(-1);
        }
      }
      if (step % 997 === 0) check();
    }
    check();
    expect(table.has(nextId + 1)).toBe(false);
    expect(table.has(0)).toBe(reference.has(0));
  });
});
