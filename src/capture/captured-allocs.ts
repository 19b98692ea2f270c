/**
 * The allocations a capture recorded, as columns: allocation `i` is the i-th `a` record. A long
 * run records millions of them; an object of thirteen fields each (about 230 bytes of heap) capped
 * what could be opened at Node's heap limit, where these columns take about 80 bytes an
 * allocation, outside the heap. Strings (device, category, layer, phase, kernel) are ids into the
 * capture's interned strings (0: none).
 */

/** One allocation, as an object: `CapturedAllocs.at` makes one for the few places that want it. */
export interface CapturedAlloc {
  readonly id: number;
  /** Allocation time, ms since the capture began. */
  readonly t: number;
  /** Free time, or null if still alive when the capture ended. */
  readonly freeT: number | null;
  readonly device: string;
  readonly bytes: number;
  /** Latest category (a storage can be re-categorised after its allocation). */
  readonly category: string;
  readonly layer: string | null;
  readonly phase: string;
  readonly kernel: string | null;
  /** Stack id (see `Capture.stacks`), 0 for none (a `t` record can set it after the alloc record). */
  readonly stack: number;
  /** Optimizer steps completed when it was allocated: it belongs to step `step + 1`. */
  readonly step: number;
  /** Index of its alloc event in the timeline (`Capture.eventCount`): orders it against step ends exactly. */
  readonly seq: number;
  /** Index of its free event in the timeline, or null while alive. */
  readonly freeSeq: number | null;
}

const INITIAL = 1024;

function grown<T extends Float64Array | Int32Array>(a: T, length: number): T {
  const b = new (a.constructor as new (n: number) => T)(length);
  b.set(a);
  return b;
}

export class CapturedAllocs {
  length = 0;
  id = new Float64Array(INITIAL);
  t = new Float64Array(INITIAL);
  /** NaN while alive. */
  freeT = new Float64Array(INITIAL);
  bytes = new Float64Array(INITIAL);
  stack = new Float64Array(INITIAL);
  step = new Float64Array(INITIAL);
  device = new Int32Array(INITIAL);
  category = new Int32Array(INITIAL);
  layer = new Int32Array(INITIAL);
  phase = new Int32Array(INITIAL);
  kernel = new Int32Array(INITIAL);
  seq = new Int32Array(INITIAL);
  /** -1 while alive. */
  freeSeq = new Int32Array(INITIAL);

  /** `strings`: the capture's interned strings, which the string columns index. */
  constructor(readonly strings: readonly string[]) {}

  /** Appends an allocation; string arguments are ids (0, or one not yet declared: none). Returns its index. */
  add(t: number, id: number, device: number, bytes: number, category: number, layer: number, phase: number, kernel: number, stack: number, step: number, seq: number): number {
    const i = this.length;
    if (i === this.t.length) this.grow();
    this.id[i] = id;
    this.t[i] = t;
    this.freeT[i] = NaN;
    this.bytes[i] = bytes;
    this.stack[i] = stack;
    this.step[i] = step;
    this.device[i] = this.known(device);
    this.category[i] = this.known(category);
    this.layer[i] = this.known(layer);
    this.phase[i] = this.known(phase);
    this.kernel[i] = this.known(kernel);
    this.seq[i] = seq;
    this.freeSeq[i] = -1;
    this.length = i + 1;
    return i;
  }

  /** A string id as a record gives it: 0 unless it names a declared string. */
  known(id: number): number {
    return id > 0 && this.strings[id] !== undefined ? id : 0;
  }

  private grow(): void {
    const n = this.t.length * 2;
    this.id = grown(this.id, n);
    this.t = grown(this.t, n);
    this.freeT = grown(this.freeT, n);
    this.bytes = grown(this.bytes, n);
    this.stack = grown(this.stack, n);
    this.step = grown(this.step, n);
    this.device = grown(this.device, n);
    this.category = grown(this.category, n);
    this.layer = grown(this.layer, n);
    this.phase = grown(this.phase, n);
    this.kernel = grown(this.kernel, n);
    this.seq = grown(this.seq, n);
    this.freeSeq = grown(this.freeSeq, n);
  }

  isFreed(i: number): boolean {
    return this.freeSeq[i]! >= 0;
  }

  deviceOf(i: number): string {
    return this.strings[this.device[i]!] ?? '';
  }

  categoryOf(i: number): string {
    return this.strings[this.category[i]!] ?? '';
  }

  layerOf(i: number): string | null {
    return this.strings[this.layer[i]!] || null;
  }

  phaseOf(i: number): string {
    return this.strings[this.phase[i]!] || 'none';
  }

  kernelOf(i: number): string | null {
    return this.strings[this.kernel[i]!] || null;
  }

  at(i: number): CapturedAlloc {
    return {
      id: this.id[i]!,
      t: this.t[i]!,
      freeT: this.isFreed(i) ? this.freeT[i]! : null,
      device: this.deviceOf(i),
      bytes: this.bytes[i]!,
      category: this.categoryOf(i),
      layer: this.layerOf(i),
      phase: this.phaseOf(i),
      kernel: this.kernelOf(i),
      stack: this.stack[i]!,
      step: this.step[i]!,
      seq: this.seq[i]!,
      freeSeq: this.isFreed(i) ? this.freeSeq[i]! : null,
    };
  }

  /** Every allocation as an object (tests, small captures). */
  toArray(): CapturedAlloc[] {
    return Array.from({ length: this.length }, (_, i) => this.at(i));
  }
}
