/**
 * Which allocations each event of a device's trace makes and frees. An event can do several: on
 * the Active Cached Segment Timeline an unmap that cuts across mapped ranges of an expandable
 * segment ends each of them and begins the parts left outside it, all at that one event.
 *
 * Nothing is kept per event for the allocations made: a device lists its allocations in the order
 * they were made (report-data.ts), so those made at event i are one run of them, found from
 * where the runs of each block of 64 events begin (`firstMadeAt`). The allocations freed are listed again in the order they were
 * freed, with where each event's run begins.
 */
/** Events per block of `firstMadeAt`'s index, as a power of two. */
const BLOCK_BITS = 6;

export class EventLists {
  /** Allocations freed during the trace, by the event that frees them (ties in allocation order). */
  readonly freed: Int32Array;
  /** Event i frees `freed[freeFirst[i] … freeFirst[i + 1])`; `freeFirst[n]` is how many are freed. */
  readonly freeFirst: Int32Array;
  /** Per block b of 2^BLOCK_BITS events: the first allocation made at or after event b·2^BLOCK_BITS. */
  private readonly blockMade: Int32Array;

  /**
   * @param start per allocation, the event that made it (-1: live before the trace), in allocation order
   * @param end per allocation, the event that freed it (`n`: live at the end)
   * @param n events
   */
  constructor(
    private readonly start: Int32Array,
    end: Int32Array,
    n: number,
  ) {
    const count = start.length;
    for (let a = 1; a < count; a++) {
      if (start[a]! < start[a - 1]!) throw new Error(`allocation ${a} is made at event ${start[a]}, before allocation ${a - 1} (event ${start[a - 1]}): a device's allocations must be listed in the order they were made`);
    }
    const blockMade = (this.blockMade = new Int32Array((n >> BLOCK_BITS) + 1));
    for (let b = 0, a = 0; b < blockMade.length; b++) {
      while (a < count && start[a]! < b << BLOCK_BITS) a++;
      blockMade[b] = a;
    }
    // A counting sort by end: counts, their running sums (where each run ends), then each
    // allocation, last first, into the place before its run's end, which leaves the run's start.
    const freeFirst = (this.freeFirst = new Int32Array(n + 1));
    for (let a = 0; a < count; a++) {
      const e = end[a]!;
      if (e >= 0 && e < n) freeFirst[e]++;
    }
    for (let i = 1; i <= n; i++) freeFirst[i] += freeFirst[i - 1]!;
    const freed = (this.freed = new Int32Array(freeFirst[n]!));
    for (let a = count - 1; a >= 0; a--) {
      const e = end[a]!;
      if (e >= 0 && e < n) freed[--freeFirst[e]] = a;
    }
  }

  /** The first allocation made at or after event `i` (the allocation count when there is none). */
  firstMadeAt(i: number): number {
    const start = this.start;
    const count = start.length;
    let a = this.blockMade[i >> BLOCK_BITS]!;
    while (a < count && start[a]! < i) a++;
    return a;
  }
}
