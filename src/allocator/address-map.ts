// Saves 16 % of replay's CPU on the 100 MB bench snapshot and ~88 % of the model's malloc+free with 50,000 cached small holes, against a Map: `npm run bench -- allocator`.
/**
 * Device address → value, for the allocator model's live blocks and replay's per-address tables
 * (every allocation inserts, every free looks up and deletes). Why not a `Map<number, …>`: device
 * addresses exceed 2^31, so each key a Map stores is a boxed heap number; a replay of a large trace
 * makes hundreds of thousands of them, and the Map's ordered table fills with deleted entries and
 * is rehashed again and again — garbage on every allocation and a builtin call per operation.
 * Here keys live in a Float64Array with open addressing (linear probing, backward-shift deletion,
 * so no tombstones) and values in a parallel array: nothing is allocated except when the live set
 * outgrows the table. The gain grows with the live set: on a real trace's replay (a few thousand
 * live addresses) a Map does as well. Memory: 8 bytes per slot plus a value reference, at most
 * half the slots full.
 *
 * Addresses are multiples of 512 spread over a 2^47 range, so the home slot mixes both 32-bit
 * halves of the key and takes the top bits of a Fibonacci product (the low bits of an aligned
 * address carry nothing).
 *
 * Keys are any numbers except NaN (the empty-slot marker); -0 and 0 are one key, as in a Map.
 * Iteration (`forEach`, `values`) is in slot order, not insertion order.
 */
export class AddressMap<V> {
  private keys: Float64Array;
  private vals: (V | undefined)[];
  private mask: number;
  private shift: number;
  size = 0;

  constructor(initialCapacity = 64) {
    let capacity = 16;
    while (capacity < initialCapacity * 2) capacity *= 2;
    this.keys = new Float64Array(capacity).fill(NaN);
    this.vals = new Array<V | undefined>(capacity);
    this.mask = capacity - 1;
    this.shift = 32 - Math.log2(capacity);
  }

  private home(key: number): number {
    const low = key >>> 0;
    const high = (key / 4294967296) >>> 0;
    return Math.imul(low ^ Math.imul(high, 0x85ebca6b), 0x9e3779b1) >>> this.shift;
  }

  /** The slot holding `key`, or -1. */
  private find(key: number): number {
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.home(key); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === key) return i;
      if (k !== k) return -1; // NaN: an empty slot ends the probe
    }
  }

  get(key: number): V | undefined {
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.home(key); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === key) return this.vals[i];
      if (k !== k) return undefined;
    }
  }

  has(key: number): boolean {
    return this.find(key) >= 0;
  }

  set(key: number, value: V): this {
    const keys = this.keys;
    const mask = this.mask;
    let i = this.home(key);
    for (;;) {
      const k = keys[i]!;
      if (k === key) {
        this.vals[i] = value;
        return this;
      }
      if (k !== k) break;
      i = (i + 1) & mask;
    }
    keys[i] = key;
    this.vals[i] = value;
    // Load factor ≤ 1/2 keeps probes short.
    if (++this.size * 2 > keys.length) this.grow();
    return this;
  }

  delete(key: number): boolean {
    const slot = this.find(key);
    if (slot < 0) return false;
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let hole = slot;
    // Backward-shift deletion: move later members of the probe run into the hole when their home
    // slot does not lie cyclically in (hole, j].
    for (let j = (hole + 1) & mask; ; j = (j + 1) & mask) {
      const k = keys[j]!;
      if (k !== k) break;
      const home = this.home(k);
      const between = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (between) continue;
      keys[hole] = k;
      vals[hole] = vals[j];
      hole = j;
    }
    keys[hole] = NaN;
    vals[hole] = undefined;
    this.size--;
    return true;
  }

  clear(): void {
    this.keys.fill(NaN);
    this.vals = new Array<V | undefined>(this.keys.length);
    this.size = 0;
  }

  /** Calls `f` for every entry; `f` must not change the map. */
  forEach(f: (value: V, key: number) => void): void {
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (k === k) f(this.vals[i] as V, k);
    }
  }

  /** Every value, in slot order (a copy). */
  values(): V[] {
    const out: V[] = [];
    this.forEach((v) => out.push(v));
    return out;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const capacity = oldKeys.length * 2;
    const keys = new Float64Array(capacity).fill(NaN);
    // Unfilled: a slot's value is read only where its key is set.
    const vals = new Array<V | undefined>(capacity);
    const mask = capacity - 1;
    this.keys = keys;
    this.vals = vals;
    this.mask = mask;
    this.shift = 32 - Math.log2(capacity);
    // Every key is distinct: each goes to the first empty slot of its probe run.
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i]!;
      if (k !== k) continue;
      let j = this.home(k);
      while (keys[j] === keys[j]) j = (j + 1) & mask;
      keys[j] = k;
      vals[j] = oldVals[i];
    }
  }
}
