/**
 * Which allocations are live after the first m events, without a pass over every allocation,
 * and what a summed band of the Active Memory Timeline holds at a moment (`smallLiveAt`).
 * Hovering a summed band of the Active Memory Timeline lists the allocations under a pixel live
 * at that moment; on a 1 GB snapshot (2M allocations) a pass over all of them per pointer move
 * takes longer than a frame. The index keeps the live set every `step` events (one Int32Array
 * for all of them, at most LIVE_BUDGET ids in all); a query filters the nearest earlier set by
 * the allocations' ends and adds the allocations made since, so it costs the live set's size plus
 * at most `step` events.
 */
import type { EventLists } from './event-lists.js';

/** Most allocation ids the index stores over all its checkpoints (16 MiB). */
const LIVE_BUDGET = 4 << 20;
/** The fewest events between checkpoints. */
const MIN_STEP = 4096;

export class LiveIndex {
  private readonly step: number;
  /** Live ids at each checkpoint, one after another; checkpoint c's run is `ids[offsets[c] … offsets[c+1])`. */
  private readonly ids: Int32Array;
  private readonly offsets: Int32Array;

  /**
   * @param n events
   * @param start per allocation, the event that made it (-1: live before the trace), in allocation order
   * @param end per allocation, the event that freed it (`n`: live at the end)
   * @param events the allocations each event makes and frees
   */
  constructor(
    private readonly n: number,
    private readonly start: Int32Array,
    private readonly end: Int32Array,
    private readonly events: EventLists,
  ) {
    const count = start.length;
    const freed = events.freed;
    // Live counts at every MIN_STEP-th moment pick the step that keeps the checkpoints in budget.
    const before = events.firstMadeAt(0);
    const counts: number[] = [];
    for (let i = 0; i <= n; i += MIN_STEP) counts.push(events.firstMadeAt(i) - events.firstFreedAt(i));
    let step = MIN_STEP;
    const stored = (s: number): number => counts.reduce((sum, c, k) => (k % (s / MIN_STEP) === 0 ? sum + c : sum), 0);
    while (step < n && stored(step) > LIVE_BUDGET) step *= 2;
    this.step = step;
    const checkpoints = Math.floor(n / step) + 1;
    this.offsets = new Int32Array(checkpoints + 1);
    this.ids = new Int32Array(stored(step));
    // The live set as a dense list with each member's place, so a free removes in constant time.
    const set = new Int32Array(count);
    const place = new Int32Array(count).fill(-1);
    let size = 0;
    let made = 0;
    for (; made < before; made++) {
      place[made] = size;
      set[size++] = made;
    }
    let at = 0;
    let freedAt = 0;
    for (let i = 0; i <= n; i++) {
      if (i % step === 0) {
        const c = i / step;
        this.offsets[c] = at;
        this.ids.set(set.subarray(0, size), at);
        at += size;
        this.offsets[c + 1] = at;
      }
      if (i === n) break;
      for (; made < count && start[made] === i; made++) {
        place[made] = size;
        set[size++] = made;
      }
      for (; freedAt < freed.length && end[freed[freedAt]!] === i; freedAt++) {
        const d = freed[freedAt]!;
        if (place[d]! < 0) continue;
        const last = set[--size]!;
        set[place[d]!] = last;
        place[last] = place[d]!;
        place[d] = -1;
      }
    }
  }

  /** Calls `visit` with each allocation live after the first `m` events (made before event m, freed at or after it). */
  forEachLive(m: number, visit: (a: number) => void): void {
    const moment = Math.max(0, Math.min(this.n, m));
    const c = Math.floor(moment / this.step);
    const { ids, end, start } = this;
    for (let k = this.offsets[c]!; k < this.offsets[c + 1]!; k++) {
      const a = ids[k]!;
      if (end[a]! >= moment) visit(a);
    }
    for (let a = this.events.firstMadeAt(c * this.step); a < start.length && start[a]! < moment; a++) if (end[a]! >= moment) visit(a);
  }
}

/** What a summed band holds at a moment: how many allocations, their bytes, the largest of them. */
export interface SmallLive {
  readonly count: number;
  readonly bytes: number;
  /** Allocation ids, largest first (ties: the earlier allocation first). */
  readonly largest: number[];
}

/**
 * Allocations under `threshold` bytes live after the first `m` events in site group `group` (-1:
 * in the groups whose sum there is under the threshold too, the "smaller allocations" band of the
 * Active Memory Timeline), with the `k` largest.
 */
export function smallLiveAt(
  live: LiveIndex,
  bytes: Float64Array,
  groupOf: Uint8Array,
  groupCount: number,
  { m, threshold, group, k }: { m: number; threshold: number; group: number; k: number },
): SmallLive {
  const small: number[] = [];
  live.forEachLive(m, (a) => {
    if (bytes[a]! < threshold) small.push(a);
  });
  let groups: Uint8Array | null = null;
  if (group < 0) {
    // The groups the band holds: their allocations under a pixel sum to under a pixel.
    const sums = new Float64Array(groupCount);
    for (const a of small) sums[groupOf[a]!] += bytes[a]!;
    groups = new Uint8Array(sums.length);
    for (let g = 0; g < sums.length; g++) groups[g] = sums[g]! < threshold ? 1 : 0;
  }
  let count = 0;
  let sum = 0;
  const largest: number[] = [];
  // Ties go to the earlier allocation, whatever order the live set lists them in.
  const before = (x: number, y: number): boolean => bytes[x]! > bytes[y]! || (bytes[x] === bytes[y] && x < y);
  for (const a of small) {
    if (groups ? !groups[groupOf[a]!] : groupOf[a] !== group) continue;
    count++;
    sum += bytes[a]!;
    if (largest.length < k || before(a, largest[largest.length - 1]!)) {
      let p = largest.length < k ? largest.length : k - 1;
      while (p > 0 && before(a, largest[p - 1]!)) p--;
      largest.splice(p, 0, a);
      if (largest.length > k) largest.pop();
    }
  }
  return { count, bytes: sum, largest };
}
