// Saves 81 µs of MemTracker's own handling per training step at batch 1 (33 µs against 114 µs with a Map), ~7 % of a tracked step: `npm run bench -- memtracker`, part 2.
/**
 * Storage id → (bytes, tag), for the allocation hot path of MemRecorder (every tensor allocation
 * inserts, every free looks up and deletes). Why not a `Map<number, …>`: storage ids only ever
 * grow, so a Map's ordered table keeps filling with deleted entries and is rehashed into a fresh
 * table every few hundred allocations — garbage and copying on every training step, plus a
 * builtin call per operation. Here keys and values live in typed arrays with open addressing
 * (linear probing, backward-shift deletion, so no tombstones): nothing is allocated except when
 * the live set outgrows the table. Ids are scattered by Fibonacci hashing: storage ids are
 * near-consecutive, and placed at `id mod capacity` they would form one long run of occupied
 * slots, which every backward-shift deletion scans to its end (that made frees cost O(live
 * storages)).
 *
 * Bytes and the tag (a small integer, 0–255) are separate columns rather than one packed number:
 * unpacking a double with `%` and `/` costs a floating-point division and modulo per free, more
 * than the rest of the free. Callers work with slots (`find`, then read / change / remove at the
 * slot), so a free probes once.
 *
 * Keys are any numbers except NaN (the empty-slot marker).
 */
export class IdTable {
  private keys: Float64Array;
  private bytes: Float64Array;
  private tags: Uint8Array;
  private mask: number;
  private shift: number;
  size = 0;

  constructor(initialCapacity = 1024) {
    let capacity = 16;
    while (capacity < initialCapacity) capacity *= 2;
    this.keys = new Float64Array(capacity).fill(NaN);
    this.bytes = new Float64Array(capacity);
    this.tags = new Uint8Array(capacity);
    this.mask = capacity - 1;
    this.shift = 32 - Math.log2(capacity);
  }

  private home(id: number): number {
    return Math.imul(id, 0x9e3779b1) >>> this.shift;
  }

  /** The slot holding `id`, or -1. */
  find(id: number): number {
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.home(id); ; i = (i + 1) & mask) {
      const k = keys[i]!;
      if (k === id) return i;
      if (k !== k) return -1; // NaN: an empty slot ends the probe
    }
  }

  has(id: number): boolean {
    return this.find(id) >= 0;
  }

  bytesAt(slot: number): number {
    return this.bytes[slot]!;
  }

  tagAt(slot: number): number {
    return this.tags[slot]!;
  }

  setTagAt(slot: number, tag: number): void {
    this.tags[slot] = tag;
  }

  /** Adds `id` unless present; returns false (and changes nothing) if it was. */
  insert(id: number, bytes: number, tag: number): boolean {
    const keys = this.keys;
    const mask = this.mask;
    let i = this.home(id);
    for (;;) {
      const k = keys[i]!;
      if (k === id) return false;
      if (k !== k) break;
      i = (i + 1) & mask;
    }
    keys[i] = id;
    this.bytes[i] = bytes;
    this.tags[i] = tag;
    // Load factor ≤ 1/2 keeps probes short.
    if (++this.size * 2 > keys.length) this.grow();
    return true;
  }

  /** Removes the entry at `slot` (from `find`). Other entries may move: slots are invalid afterwards. */
  removeAt(slot: number): void {
    const keys = this.keys;
    const bytes = this.bytes;
    const tags = this.tags;
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
      bytes[hole] = bytes[j]!;
      tags[hole] = tags[j]!;
      hole = j;
    }
    keys[hole] = NaN;
    this.size--;
  }

  delete(id: number): boolean {
    const slot = this.find(id);
    if (slot < 0) return false;
    this.removeAt(slot);
    return true;
  }

  /** Calls `f` for every entry; `f` must not change the table. */
  forEach(f: (bytes: number, tag: number, id: number) => void): void {
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (k === k) f(this.bytes[i]!, this.tags[i]!, k);
    }
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldBytes = this.bytes;
    const oldTags = this.tags;
    const capacity = oldKeys.length * 2;
    this.keys = new Float64Array(capacity).fill(NaN);
    this.bytes = new Float64Array(capacity);
    this.tags = new Uint8Array(capacity);
    this.mask = capacity - 1;
    this.shift = 32 - Math.log2(capacity);
    this.size = 0;
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i]!;
      if (k === k) this.insert(k, oldBytes[i]!, oldTags[i]!);
    }
  }
}

/** Ring slots of RecentIdTable: ~16 training steps of the demo model's allocations. */
const RING_SLOTS = 4096;
const RING_MASK = RING_SLOTS - 1;

/**
 * IdTable's interface for ids that are handed out in increasing order and mostly die young, as
 * storage ids do (one per tensor allocation, most freed within the same training step). Recent ids
 * sit directly at `id & mask` in a ring of RING_SLOTS entries: an insert or a free touches one slot
 * and hashes and probes nothing, and consecutive allocations fill neighbouring slots, so the
 * columns' cache lines are shared. An id still alive when a later id needs its slot (a weight or an
 * input kept for thousands of allocations) moves to a hashed IdTable, where it stays until freed.
 *
 * Slots returned by `find` are ring indices below RING_SLOTS and overflow slots offset by it.
 * Correct for any ids but NaN; only the cost assumes the order.
 */
export class RecentIdTable {
  private readonly keys = new Float64Array(RING_SLOTS).fill(NaN);
  private readonly bytes = new Float64Array(RING_SLOTS);
  private readonly tags = new Uint8Array(RING_SLOTS);
  private readonly overflow = new IdTable();
  /** Entries in the ring (the overflow counts its own). */
  private inRing = 0;
  /** The largest id ever moved to the overflow. */
  private overflowMax = -Infinity;
  /** The tag of the entry the last `take` removed. */
  takenTag = 0;

  get size(): number {
    return this.inRing + this.overflow.size;
  }

  /** The slot holding `id`, or -1. */
  find(id: number): number {
    const slot = id & RING_MASK;
    if (this.keys[slot] === id) return slot;
    const far = this.overflow.find(id);
    return far < 0 ? -1 : far + RING_SLOTS;
  }

  has(id: number): boolean {
    return this.find(id) >= 0;
  }

  bytesAt(slot: number): number {
    return slot < RING_SLOTS ? this.bytes[slot]! : this.overflow.bytesAt(slot - RING_SLOTS);
  }

  tagAt(slot: number): number {
    return slot < RING_SLOTS ? this.tags[slot]! : this.overflow.tagAt(slot - RING_SLOTS);
  }

  setTagAt(slot: number, tag: number): void {
    if (slot < RING_SLOTS) this.tags[slot] = tag;
    else this.overflow.setTagAt(slot - RING_SLOTS, tag);
  }

  /** Adds `id` unless present; returns false (and changes nothing) if it was. */
  insert(id: number, bytes: number, tag: number): boolean {
    const keys = this.keys;
    const slot = id & RING_MASK;
    const held = keys[slot]!;
    if (held === id) return false;
    // Only an id that is not above every id ever moved out can be in the overflow.
    if (id <= this.overflowMax && this.overflow.has(id)) return false;
    if (held === held) this.moveOut(slot, held);
    else this.inRing++;
    keys[slot] = id;
    this.bytes[slot] = bytes;
    this.tags[slot] = tag;
    return true;
  }

  /** Moves the ring entry at `slot` (id `held`), which outlived a whole ring of allocations, to the overflow. */
  private moveOut(slot: number, held: number): void {
    this.overflow.insert(held, this.bytes[slot]!, this.tags[slot]!);
    if (held > this.overflowMax) this.overflowMax = held;
  }

  /** Removes `id`; false if it was absent. */
  delete(id: number): boolean {
    return this.take(id) >= 0;
  }

  /**
   * Removes `id` and returns its bytes, leaving its tag in `takenTag`; -1 if absent. A free as one
   * call rather than `find`, `bytesAt` and `tagAt` and a removal: small enough for V8 to inline it,
   * and the rest of the recorder's batch loop with it, into that loop.
   */
  take(id: number): number {
    const keys = this.keys;
    const slot = id & RING_MASK;
    if (keys[slot] !== id) return this.takeFar(id);
    keys[slot] = NaN;
    this.inRing--;
    this.takenTag = this.tags[slot]!;
    return this.bytes[slot]!;
  }

  private takeFar(id: number): number {
    const slot = this.overflow.find(id);
    if (slot < 0) return -1;
    this.takenTag = this.overflow.tagAt(slot);
    const bytes = this.overflow.bytesAt(slot);
    this.overflow.removeAt(slot);
    return bytes;
  }

  /** Calls `f` for every entry; `f` must not change the table. */
  forEach(f: (bytes: number, tag: number, id: number) => void): void {
    const keys = this.keys;
    for (let i = 0; i < RING_SLOTS; i++) {
      const k = keys[i]!;
      if (k === k) f(this.bytes[i]!, this.tags[i]!, k);
    }
    this.overflow.forEach(f);
  }
}
