/**
 * An ordered set of blocks (PyTorch uses std::set with a comparator): a
 * sorted array with binary search. Pools hold at most a few thousand free
 * blocks, where array moves beat a tree in JS.
 */
export class SortedSet<T> {
  private readonly items: T[] = [];
  constructor(private readonly compare: (a: T, b: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  at(index: number): T | undefined {
    return this.items[index];
  }

  /** Index of the first item not less than `key`. */
  lowerBound(key: T): number {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(this.items[mid], key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(item: T): boolean {
    const i = this.lowerBound(item);
    if (i < this.items.length && this.compare(this.items[i], item) === 0) return false;
    this.items.splice(i, 0, item);
    return true;
  }

  delete(item: T): boolean {
    const i = this.lowerBound(item);
    if (i < this.items.length && this.items[i] === item) {
      this.items.splice(i, 1);
      return true;
    }
    return false;
  }

  has(item: T): boolean {
    const i = this.lowerBound(item);
    return i < this.items.length && this.items[i] === item;
  }

  /** A copy, in order (safe to iterate while mutating the set). */
  toArray(): T[] {
    return this.items.slice();
  }

  [Symbol.iterator](): Iterator<T> {
    return this.items[Symbol.iterator]();
  }
}
