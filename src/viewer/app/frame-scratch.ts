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

  /**
   * An Int32Array of `length` holding whatever the last frame left in it. `most`: the longest this
   * use can ever ask for; when the array must grow it is made that long at once, so frames asking
   * for more and more (a zoom into the byte axis) do not each make and touch a new one.
   */
  int32(name: string, length: number, most = length): Int32Array {
    return this.get(name, 'int32', length, most) as Int32Array;
  }

  /** A Float64Array of `length` holding whatever the last frame left in it. */
  float64(name: string, length: number): Float64Array {
    return this.get(name, 'float64', length, length) as Float64Array;
  }

  private get(name: string, kind: Kind, length: number, most: number): Int32Array | Float64Array {
    const held = this.arrays.get(name);
    if (held && held.length >= length) return held.subarray(0, length);
    // Asked for nothing (no allocation is a pixel tall yet), it makes nothing of its longest.
    const size = length > 0 ? Math.max(length, most) : 0;
    const made = kind === 'int32' ? new Int32Array(size) : new Float64Array(size);
    this.arrays.set(name, made);
    return made.length === length ? made : made.subarray(0, length);
  }
}
