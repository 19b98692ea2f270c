/** What a band chart drew in each pixel column, for hover (the Active Memory Timeline and the Active Cached Segment Timeline). */

/** Per pixel column, the bands drawn there bottom first: allocation id and the bytes at its top. */
export class ColumnHits {
  private offsets = new Int32Array(1);
  private ids = new Int32Array(1024);
  private tops = new Float64Array(1024);
  private size = 0;
  private current = -1;

  /** Starts a frame of `cols` columns; `entries`, when known, sizes the lists once instead of doubling them entry by entry. */
  reset(cols: number, entries = 0): void {
    if (this.offsets.length < cols + 1) this.offsets = new Int32Array(cols + 1);
    if (this.ids.length < entries) {
      this.ids = new Int32Array(entries);
      this.tops = new Float64Array(entries);
    }
    this.offsets.fill(-1);
    this.size = 0;
    this.current = -1;
  }

  begin(col: number): void {
    this.offsets[col] = this.size;
    this.current = col;
    this.offsets[col + 1] = this.size;
  }

  push(id: number, top: number): void {
    if (this.size === this.ids.length) {
      const ids = new Int32Array(this.size * 2);
      ids.set(this.ids);
      this.ids = ids;
      const tops = new Float64Array(this.size * 2);
      tops.set(this.tops);
      this.tops = tops;
    }
    this.ids[this.size] = id;
    this.tops[this.size] = top;
    this.size++;
    this.offsets[this.current + 1] = this.size;
  }

  /** The first column where `id` is drawn, with the bytes at its bottom and top; null if nowhere. */
  find(id: number, cols: number): { col: number; bottom: number; top: number } | null {
    for (let col = 0; col < cols; col++) {
      const from = this.offsets[col];
      if (from < 0) continue;
      for (let k = from; k < this.offsets[col + 1]; k++) {
        if (this.ids[k] === id) return { col, bottom: k > from ? this.tops[k - 1] : 0, top: this.tops[k] };
      }
    }
    return null;
  }

  /** Column `col`'s entries, bottom first: [id, bytes at its top]. */
  column(col: number): [number, number][] {
    const from = this.offsets[col];
    if (from < 0) return [];
    const out: [number, number][] = [];
    for (let k = from; k < this.offsets[col + 1]; k++) out.push([this.ids[k], this.tops[k]]);
    return out;
  }

  /** The band at `bytes` height in column `col`, or -1 above the stack. */
  at(col: number, bytes: number): number {
    const from = this.offsets[col];
    if (from < 0) return -1;
    const to = this.offsets[col + 1];
    let lo = from;
    let hi = to;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.tops[mid] <= bytes) lo = mid + 1;
      else hi = mid;
    }
    return lo < to ? this.ids[lo] : -1;
  }
}
