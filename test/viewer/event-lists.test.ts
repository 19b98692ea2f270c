// Which allocations each event makes and frees (src/viewer/app/event-lists.ts), against the
// definition over every allocation: runs of the allocation order, and the frees in event order.
import { describe, it, expect } from 'vitest';
import { EventLists } from '../../src/viewer/app/event-lists.js';

/** Allocations over `n` events; `crowdedAt`: an event that frees `crowd` allocations at once. */
function device(n: number, seed: number, crowdedAt = -1, crowd = 0): { start: Int32Array; end: Int32Array } {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const start: number[] = [];
  const end: number[] = [];
  for (let k = 0; k < 30; k++) {
    start.push(-1);
    end.push(rand() < 0.3 ? n : Math.floor(rand() * n));
  }
  for (let i = 0; i < n; i++) {
    for (let k = rand() < 0.3 ? 0 : 1 + Math.floor(rand() * 3); k > 0; k--) {
      start.push(i);
      end.push(rand() < 0.2 ? n : Math.min(n - 1, i + Math.floor(rand() * 300)));
    }
  }
  if (crowdedAt >= 0) {
    for (let k = 0; k < crowd; k++) {
      start.push(crowdedAt);
      end.push(crowdedAt + 1 + (k % 3));
    }
    // Back into allocation order: the crowd was made at crowdedAt.
    const order = start.map((_, a) => a).sort((p, q) => start[p]! - start[q]! || p - q);
    return { start: Int32Array.from(order, (a) => start[a]!), end: Int32Array.from(order, (a) => end[a]!) };
  }
  return { start: Int32Array.from(start), end: Int32Array.from(end) };
}

describe('EventLists', () => {
  it.each([
    ['one to three allocations per event', 2000, 1, -1, 0],
    ['one event freeing 500 at once, in one block of events', 2000, 2, 700, 500],
    ['a trace shorter than a block', 40, 3, -1, 0],
  ])('%s: the frees in event order and the first made and freed at every event', (_, n, seed, at, crowd) => {
    const { start, end } = device(n, seed, at, crowd);
    const lists = new EventLists(start, end, n);
    const ids = Array.from(start, (_s, a) => a);
    const freed = ids.filter((a) => end[a]! < n).sort((p, q) => end[p]! - end[q]! || p - q);
    expect(Array.from(lists.freed)).toEqual(freed);
    for (let i = 0; i <= n; i++) {
      const made = ids.findIndex((a) => start[a]! >= i);
      expect(lists.firstMadeAt(i), `made at ${i}`).toBe(made < 0 ? start.length : made);
      const f = freed.findIndex((a) => end[a]! >= i);
      expect(lists.firstFreedAt(i), `freed at ${i}`).toBe(f < 0 ? freed.length : f);
    }
  });
});
