import { describe, expect, it } from 'vitest';
import { AddressMap } from '../../src/allocator/address-map.js';

describe('AddressMap', () => {
  it('agrees with a Map over a randomized set/get/delete workload of aligned device addresses, with growth and wrap-around', () => {
    const table = new AddressMap<{ v: number }>(4);
    const reference = new Map<number, { v: number }>();
    let seed = 987654321;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    // Addresses as PyTorch's allocator hands them out: 512-byte multiples near 0x7f.. in a few
    // regions 2^37 apart, so keys share their low bits and their high bits.
    const address = () => 0x7fe100000000 + Math.floor(random() * 4) * 2 ** 37 + Math.floor(random() * 3000) * 512;
    const check = () => {
      expect(table.size).toBe(reference.size);
      for (const [k, v] of reference) {
        expect(table.has(k)).toBe(true);
        expect(table.get(k)).toBe(v);
      }
      const seen = new Map<number, { v: number }>();
      table.forEach((v, k) => seen.set(k, v));
      expect(seen).toEqual(reference);
      expect(new Set(table.values())).toEqual(new Set(reference.values()));
    };
    for (let step = 0; step < 30000; step++) {
      const a = address();
      const r = random();
      if (r < 0.5) {
        const v = { v: step };
        expect(table.set(a, v)).toBe(table);
        reference.set(a, v);
      } else if (r < 0.8) {
        expect(table.delete(a)).toBe(reference.delete(a));
      } else {
        expect(table.get(a)).toBe(reference.get(a));
      }
      if (step % 5000 === 0) check();
    }
    check();
    // Emptied entry by entry, then reused.
    for (const k of [...reference.keys()]) {
      expect(table.delete(k)).toBe(true);
      expect(table.delete(k)).toBe(false);
      expect(table.get(k)).toBeUndefined();
    }
    expect(table.size).toBe(0);
    table.set(0, { v: 1 });
    expect(table.get(-0)).toEqual({ v: 1 });
    table.set(2 ** 53 - 512, { v: 2 });
    expect(table.get(2 ** 53 - 512)).toEqual({ v: 2 });
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get(0)).toBeUndefined();
  });

  it('finds keys that share a home slot after others of the run are deleted', () => {
    const table = new AddressMap<number>(8);
    // Keys 2^32 apart differ only in the high half: many land in the same probe run.
    const keys = Array.from({ length: 12 }, (_, k) => k * 2 ** 32 + 512);
    keys.forEach((k, i) => table.set(k, i));
    for (let i = 0; i < keys.length; i += 3) table.delete(keys[i]);
    keys.forEach((k, i) => expect(table.get(k)).toBe(i % 3 === 0 ? undefined : i));
    expect(table.size).toBe(8);
  });
});
