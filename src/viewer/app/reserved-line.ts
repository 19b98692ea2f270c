/**
 * The Active Memory Timeline's reserved line, kept only where it changes: segment events are a
 * small share of a snapshot's events, so this is far smaller than a value per event, and the
 * highest value over a range of events costs two binary searches and a scan of block maxima.
 */
import { lowerBound } from './canvas.js';

/** Entries per block of the line's maxima. */
const BLOCK = 64;

export class ReservedLine {
  /** After event `event[k]` the line is `after[k]` bytes (events ascending, one entry per event); `base` before the first. */
  private readonly event: Int32Array;
  private readonly after: Float64Array;
  /** Per block of BLOCK entries: the highest value. */
  private readonly blockMax: Float64Array;

  /** From the data's changes: `delta[k]` bytes at event `at[k]` (events ascending), from `base`. */
  constructor(
    readonly base: number,
    at: ArrayLike<number>,
    delta: ArrayLike<number>,
  ) {
    const changes = at.length;
    const event = new Int32Array(changes);
    const after = new Float64Array(changes);
    let r = base;
    let kept = 0;
    for (let k = 0; k < changes; k++) {
      r += delta[k]!;
      // Changes at one event are one entry: the line's value after all of them.
      if (kept > 0 && event[kept - 1] === at[k]) after[kept - 1] = r;
      else {
        event[kept] = at[k]!;
        after[kept++] = r;
      }
    }
    this.event = event.subarray(0, kept);
    this.after = after.subarray(0, kept);
    const blockMax = (this.blockMax = new Float64Array(Math.ceil(kept / BLOCK)).fill(-Infinity));
    for (let k = 0; k < kept; k++) {
      const b = (k / BLOCK) | 0;
      if (after[k]! > blockMax[b]!) blockMax[b] = after[k]!;
    }
  }

  /** Reserved bytes after event `i` (before the first event when `i` < 0). */
  afterEvent(i: number): number {
    // The last change at or before event i.
    const k = lowerBound(this.event, this.event.length, i + 1) - 1;
    return k >= 0 ? this.after[k]! : this.base;
  }

  /** The highest reserved bytes after any of events [lo, hi), or before them when the range is empty. */
  max(lo: number, hi: number): number {
    if (lo >= hi) return this.afterEvent(lo - 1);
    let best = this.afterEvent(lo);
    // The changes at events lo+1 … hi-1: one by one up to a block boundary, whole blocks, then the rest.
    const events = this.event;
    const values = this.after;
    let k = lowerBound(events, events.length, lo + 1);
    const end = lowerBound(events, events.length, hi);
    while (k < end && k % BLOCK !== 0) best = Math.max(best, values[k++]!);
    while (k + BLOCK <= end) {
      best = Math.max(best, this.blockMax[k / BLOCK]!);
      k += BLOCK;
    }
    for (; k < end; k++) best = Math.max(best, values[k]!);
    return best;
  }
}
