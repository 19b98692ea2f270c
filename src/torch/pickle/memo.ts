/**
 * The pickle memo (what MEMOIZE / BINPUT store and GET reads), kept as an index of references
 * plus a dense array of the values that are actually held.
 *
 * Why not one JavaScript array of values: a PyTorch snapshot memoizes every dict and list, so a
 * 97 MB file has ~1.15 M memo entries, and the snapshot builder stores nearly all of them in its
 * tables and drops the value ("releases" it). As one preallocated array of 2.4 M slots that is
 * 19 MB of V8 heap: 4,800 page faults to create, scanned by every full GC, and big enough to push
 * the old generation past its first limit, which costs a 35 ms mark-compact in the first MiB of
 * every large read (docs/PICKLE.md, "The memo"). Here the per-index part is an Int32Array
 * (outside the heap, pages touched only as the memo fills, no write barrier) and the heap holds
 * only the values still referenced: ~40 K of them for that file.
 */
import { MemscopeError } from '../../core/errors.js';

/** Indices up to this far beyond the dense part grow it; farther ones (only hand-made files put them) go to a Map. */
const DENSE_SLACK = 1 << 16;

export class PickleMemo {
  /**
   * Per memo index: 0, no entry; `n > 0`, the value is `values[n - 1]`; `n < 0`, released: the
   * builder stored the value's content elsewhere under id `-1 - n` and rebuilds it on demand.
   * Read past its end it gives `undefined`, which every test below treats as "no entry".
   */
  refs: Int32Array;
  /** The held values, in the order they were put (a released value's cell is emptied). */
  readonly values: unknown[] = [];
  /** Entries at indices far beyond `refs` (a hostile LONG_BINPUT must not size the arrays). */
  private sparse: Map<number, unknown> | null = null;

  constructor(capacity = 0) {
    // Zero-filled lazily by the OS: capacity that is never used costs address space only.
    this.refs = new Int32Array(Math.max(1024, Math.min(capacity, 1 << 28)));
  }

  /** Whether index i holds an entry (a value or a released one). */
  has(i: number): boolean {
    if (i < this.refs.length) return this.refs[i] !== 0;
    return this.sparse !== null && this.sparse.has(i);
  }

  // The lanes' accessors test the index against `refs` themselves: a read past its end would give
  // `undefined`, and comparing that makes V8 compile a generic comparison into every lane.

  /** Whether a lane may put an entry at i without growing anything: it is free and inside `refs`. */
  isFree(i: number): boolean {
    const refs = this.refs;
    return i < refs.length && refs[i] === 0;
  }

  /** The held value at i; `undefined` for no entry, a released one, or one outside `refs`. */
  valueAt(i: number): unknown {
    const refs = this.refs;
    if (i >= refs.length) return undefined;
    const r = refs[i]!;
    return r > 0 ? this.values[r - 1] : undefined;
  }

  /** The builder's id of the released entry at i, or -1 if i is not released. */
  releasedId(i: number): number {
    const refs = this.refs;
    if (i >= refs.length) return -1;
    const r = refs[i]!;
    return r < 0 ? -1 - r : -1;
  }

  /** Stores v at i (a re-PUT replaces what was there). */
  put(i: number, v: unknown): void {
    const refs = this.refs;
    if (i < refs.length) {
      const r = refs[i]!;
      if (r > 0) this.values[r - 1] = v;
      else refs[i] = this.values.push(v);
      return;
    }
    if (i < refs.length * 2 + DENSE_SLACK) {
      this.grow(i + 1);
      this.put(i, v);
      return;
    }
    (this.sparse ??= new Map()).set(i, v);
  }

  /** The builder stored the value at i under `id`: drop the value so it can be collected. */
  release(i: number, id: number): void {
    const r = this.refs[i]!;
    if (r > 0) this.values[r - 1] = undefined;
    this.refs[i] = -1 - id;
  }

  /**
   * Empties the entries [from, to), which a lane filled or released and then gave up on: they
   * must be free again when the general path puts the same values there. Only for indices a lane
   * found free (`isFree`), so inside `refs`.
   */
  forget(from: number, to: number): void {
    for (let i = from; i < to; i++) {
      const r = this.refs[i]!;
      if (r > 0) this.values[r - 1] = undefined;
      this.refs[i] = 0;
    }
  }

  /** The value in a sparse entry, or undefined. */
  sparseValue(i: number): unknown {
    return this.sparse?.get(i);
  }

  private grow(atLeast: number): void {
    const size = Math.max(atLeast, this.refs.length * 2);
    if (size > 1 << 30) throw new MemscopeError('pickle-limit', `pickle: memo index ${atLeast - 1} is too large (LONG_BINPUT)`);
    const refs = new Int32Array(size);
    refs.set(this.refs);
    this.refs = refs;
  }
}
