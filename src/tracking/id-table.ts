/**
 * A map from storage id to one number, for the allocation hot path of
 * MemRecorder (every tensor allocation inserts, every free looks up and
 * deletes). Why not a `Map<number, number>`: storage ids only ever grow, so a
 * Map's ordered table keeps filling with deleted entries and is rehashed into
 * a fresh table every few hundred allocations — garbage and copying on every
 * training step, plus a builtin call per operation. Here keys and values live
 * in two typed arrays with open addressing (linear probing, backward-shift
 * deletion, so no tombstones): nothing is allocated except when the live set
 * outgrows the table. Ids are scattered by Fibonacci hashing: storage ids are
 * near-consecutive, and placed at `id mod capacity` they would form one long
 * run of occupied slots, which every backward-shift deletion scans to its end
 * (that made frees cost O(live storages)).
 *
 * Keys are any numbers except NaN (the empty-slot marker).
 */
export class IdTable {
  private keys: Float64Array;
  private values: Float64Array;
  private mask: number;
  /** 32 − log2(capacity): Fibonacci hashing keeps the top bits of the product. */
  private shift: number;
  size = 0;

  constructor(initialCapacity = 1024) {
    let capacity = 16;
    while (capacity < initialCapacity) capacity *= 2;
    this.keys = new Float64Array(capacity).fill(NaN);
    this.values = new Float64Array(capacity);
    this.mask = capacity - 1;
    this.shift = 32 - Math.log2(capacity);
  }

  /** Home slot of `id`, from its low 32 bits times 2^32/φ (ids are integers; others still hash, less evenly). */
  private slot(id: number): number {
    return Math.imul(id, 0x9e3779b1) >>> this.shift;
  }

  /** The slot holding `id`, or -1. */
  private find(id: number): number {
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.slot(id); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === id) return i;
      if (k !== k) return -1; // NaN: an empty slot ends the probe
    }
  }

  has(id: number): boolean {
    return this.find(id) >= 0;
  }

  /** The value for `id`, or undefined. */
  get(id: number): number | undefined {
    const i = this.find(id);
    return i >= 0 ? this.values[i] : undefined;
  }

  set(id: number, value: number): void {
    const keys = this.keys;
    const mask = this.mask;
    let i = this.slot(id);
    for (;;) {
      const k = keys[i]!;
      if (k === id) {
        this.values[i] = value;
        return;
      }
      if (k !== k) break;
      i = (i + 1) & mask;
    }
    keys[i] = id;
    this.values[i] = value;
    // Load factor ≤ 1/2 keeps probes short.
    if (++this.size * 2 > keys.length) this.grow();
  }

  /** Removes `id`; returns whether it was there. */
  delete(id: number): boolean {
    let hole = this.find(id);
    if (hole < 0) return false;
    const keys = this.keys;
    const values = this.values;
    const mask = this.mask;
    // Backward-shift deletion: move later members of the probe run into the
    // hole when their home slot does not lie strictly between hole and them.
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const k = keys[j]!;
      if (k !== k) break;
      const home = this.slot(k);
      const between = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (between) continue;
      keys[hole] = k;
      values[hole] = values[j]!;
      hole = j;
    }
    keys[hole] = NaN;
    this.size--;
    return true;
  }

  /** Calls `f` for every entry; `f` must not change the table. */
  forEach(f: (value: number, id: number) => void): void {
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (k === k) f(this.values[i]!, k);
    }
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldValues = this.values;
    this.keys = new Float64Array(oldKeys.length * 2).fill(NaN);
    this.values = new Float64Array(oldKeys.length * 2);
    this.mask = this.keys.length - 1;
    this.shift = 32 - Math.log2(this.keys.length);
    this.size = 0;
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i]!;
      if (k === k) this.set(k, oldValues[i]!);
    }
  }
}
