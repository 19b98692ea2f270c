/**
 * Which allocations each event of a device's trace makes and frees. An event can do several: on
 * the Active Cached Segment Timeline an unmap that cuts across mapped ranges of an expandable
 * segment ends each of them and begins the parts left outside it, all at that one event.
 *
 * Nothing is kept per event. A device lists its allocations in the order they were made
 * (report-data.ts), so those made at event i are one run of them; the allocations freed are
 * listed again in the order they were freed, so those freed at event i are one run of that list.
 * Each run is found from where the runs of its block of 64 events begin (`firstMadeAt`,
 * `firstFreedAt`): a value per block, not per event, because a report page pays for every
 * megabyte of fresh memory before its first frame.
 */

/** Events per block of the two indexes, as a power of two. */
const BLOCK_BITS = 6;
/** Frees in one block beyond which its run is put in order by a sort rather than by insertion. */
const INSERTION_RUN = 64;

export class EventLists {
  /** Allocations freed during the trace, by the event that frees them (ties in allocation order). */
  readonly freed: Int32Array;
  /** Per block b of 2^BLOCK_BITS events: the first allocation made at or after event b·2^BLOCK_BITS. */
  private readonly blockMade: Int32Array;
  /** Per block b: the first entry of `freed` freed at or after event b·2^BLOCK_BITS. */
  private readonly blockFreed: Int32Array;

  /**
   * @param start per allocation, the event that made it (-1: live before the trace), in allocation order
   * @param end per allocation, the event that freed it (`n`: live at the end)
   * @param n events
   */
  constructor(
    private readonly start: Int32Array,
    private readonly end: Int32Array,
    n: number,
  ) {
    const count = start.length;
    for (let a = 1; a < count; a++) {
      if (start[a]! < start[a - 1]!) throw new Error(`allocation ${a} is made at event ${start[a]}, before allocation ${a - 1} (event ${start[a - 1]}): a device's allocations must be listed in the order they were made`);
    }
    const blocks = (n >> BLOCK_BITS) + 1;
    const blockMade = (this.blockMade = new Int32Array(blocks + 1));
    for (let b = 0, a = 0; b <= blocks; b++) {
      while (a < count && start[a]! < b << BLOCK_BITS) a++;
      blockMade[b] = a;
    }
    // The frees by block (a counting sort on the block), then each block's run by event.
    const blockFreed = (this.blockFreed = new Int32Array(blocks + 1));
    for (let a = 0; a < count; a++) {
      const e = end[a]!;
      if (e >= 0 && e < n) blockFreed[(e >> BLOCK_BITS) + 1]++;
    }
    for (let b = 1; b <= blocks; b++) blockFreed[b] += blockFreed[b - 1]!;
    const freed = (this.freed = new Int32Array(blockFreed[blocks]!));
    const next = blockFreed.slice(0, blocks);
    for (let a = 0; a < count; a++) {
      const e = end[a]!;
      if (e >= 0 && e < n) freed[next[e >> BLOCK_BITS]!++] = a;
    }
    for (let b = 0; b < blocks; b++) {
      const lo = blockFreed[b]!;
      const hi = blockFreed[b + 1]!;
      if (hi - lo > INSERTION_RUN) {
        freed.subarray(lo, hi).sort((x, y) => end[x]! - end[y]! || x - y);
        continue;
      }
      // Insertion by event, moving only later events past: ties keep their allocation order.
      for (let k = lo + 1; k < hi; k++) {
        const a = freed[k]!;
        const e = end[a]!;
        let j = k;
        while (j > lo && end[freed[j - 1]!]! > e) {
          freed[j] = freed[j - 1]!;
          j--;
        }
        freed[j] = a;
      }
    }
  }

  /** The first allocation made at or after event `i` (the allocation count when there is none); 0 ≤ i ≤ n. */
  firstMadeAt(i: number): number {
    const start = this.start;
    const count = start.length;
    let a = this.blockMade[i >> BLOCK_BITS]!;
    while (a < count && start[a]! < i) a++;
    return a;
  }

  /** The first entry of `freed` freed at or after event `i` (`freed.length` when there is none); 0 ≤ i ≤ n. */
  firstFreedAt(i: number): number {
    const { freed, end } = this;
    const count = freed.length;
    let k = this.blockFreed[i >> BLOCK_BITS]!;
    while (k < count && end[freed[k]!]! < i) k++;
    return k;
  }
}
