/**
 * What a frame of a band chart (the Active Memory Timeline, the Active Cached Segment Timeline)
 * drew in each pixel column, for hover and for finding an allocation's band. A frame keeps only
 * what it placed: per column its summed bands, and the allocations at least a pixel tall with
 * the columns they span. A column's bands are worked out when hover asks for that column, so a
 * frame that places a hundred thousand bands (the byte axis zoomed in) writes no list of them.
 */

/** The placement a frame leaves for hover; its arrays are the frame's own and stay as they are until the next frame. */
export interface Placement {
  readonly cols: number;
  /** Per allocation, its bytes. */
  readonly bytes: ArrayLike<number>;
  /** Allocations drawn as their own bands, in stacking order, and the columns [from, to) each spans. */
  readonly big: Int32Array;
  readonly bigFrom: Int32Array;
  readonly bigTo: Int32Array;
  readonly bigCount: number;
  /** Per column: only `big[k]` with k below this is drawn there (the stack passed the top of the view at the one before). */
  readonly closedAt: Int32Array;
  /** Per column c, entries [sumStart[c], sumStart[c+1]) of the summed bands at the bottom: their ids and the bytes at their tops. */
  readonly sumStart: Int32Array;
  readonly sumIds: Int32Array;
  readonly sumTops: Float64Array;
}

export class FrameBands {
  constructor(
    /** Per column: how many events are applied in the state it shows. */
    readonly moment: Int32Array,
    /** Bytes per pixel of the frame: allocations under this are summed. */
    readonly threshold: number,
    private readonly p: Placement | null = null,
  ) {}

  /** Column `col`'s bands, bottom first: [id, bytes at its top] (ids below zero are summed bands). */
  column(col: number): [number, number][] {
    const out: [number, number][] = [];
    this.walk(col, (id, top) => {
      out.push([id, top]);
      return false;
    });
    return out;
  }

  /** The band at `bytes` height in column `col`, or -1 above the stack. */
  at(col: number, bytes: number): number {
    let found = -1;
    this.walk(col, (id, top) => {
      if (top <= bytes) return false;
      found = id;
      return true;
    });
    return found;
  }

  /** The first column where allocation `id` is drawn as its own band, with the bytes at its bottom and top; null if nowhere. */
  find(id: number): { col: number; bottom: number; top: number } | null {
    const p = this.p;
    if (!p || id < 0) return null;
    // `big` is in stacking order, which is allocation order: ascending ids.
    let lo = 0;
    let hi = p.bigCount;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (p.big[mid]! < id) lo = mid + 1;
      else hi = mid;
    }
    if (lo === p.bigCount || p.big[lo] !== id) return null;
    for (let col = p.bigFrom[lo]!; col < p.bigTo[lo]!; col++) {
      if (p.closedAt[col]! <= lo) continue;
      let bottom = 0;
      this.walk(col, (band, top) => {
        if (band === id) return true;
        bottom = top;
        return false;
      });
      return { col, bottom, top: bottom + p.bytes[id]! };
    }
    return null;
  }

  /** Calls `visit` with column `col`'s bands bottom first, until it returns true. */
  private walk(col: number, visit: (id: number, top: number) => boolean): void {
    const p = this.p;
    if (!p || col < 0 || col >= p.cols) return;
    let y = 0;
    for (let k = p.sumStart[col]!; k < p.sumStart[col + 1]!; k++) {
      y = p.sumTops[k]!;
      if (visit(p.sumIds[k]!, y)) return;
    }
    // The same additions, in the same order, as the frame that stacked them.
    for (let k = 0; k < p.closedAt[col]!; k++) {
      if (p.bigFrom[k]! > col || p.bigTo[k]! <= col) continue;
      y += p.bytes[p.big[k]!]!;
      if (visit(p.big[k]!, y)) return;
    }
  }
}
