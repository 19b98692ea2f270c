/**
 * Typed arrays a chart's frames work in, kept from one frame to the next. A large array made
 * afresh for every frame costs its pages on first touch every time (on a 100 MB snapshot, a few
 * megabytes a frame, more than the frame's own work while zooming); kept, a frame pays only to
 * clear what it reads before it writes. Each array is named by its use, so two uses in one frame
 * never share one.
 */
type Kind = 'int32' | 'float64';

export class FrameScratch {
  private readonly arrays = new Map<string, Int32Array | Float64Array>();

  /** An Int32Array of `length` holding whatever the last frame left in it. */
  int32(name: string, length: number): Int32Array {
    return this.get(name, 'int32', length, 0) as Int32Array;
  }

  /** A Float64Array of `length` holding whatever the last frame left in it. */
  float64(name: string, length: number): Float64Array {
    return this.get(name, 'float64', length, 0) as Float64Array;
  }

  /** `current` (this scratch's array `name`) grown to at least `length`, its first `keep` values kept. */
  grown<T extends Int32Array | Float64Array>(name: string, current: T, length: number, keep: number): T {
    return this.get(name, current instanceof Int32Array ? 'int32' : 'float64', Math.max(length, current.length * 2), keep) as T;
  }

  private get(name: string, kind: Kind, length: number, keep: number): Int32Array | Float64Array {
    const held = this.arrays.get(name);
    if (held && held.length >= length) return held.subarray(0, length);
    const made = kind === 'int32' ? new Int32Array(length) : new Float64Array(length);
    if (held && keep > 0) made.set(held.subarray(0, keep));
    this.arrays.set(name, made);
    return made;
  }
}
