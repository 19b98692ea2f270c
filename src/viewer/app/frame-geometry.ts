/**
 * Where things fall in a frame of the Active Memory Timeline: an event's pixel column, a byte
 * count's pixel row, a band's pixels, the next column with room for a band
 * (allocation-timeline.ts draws with them).
 */
// A frame's helpers are module functions, not closures made per frame: the engine's optimised
// frame code keeps its call targets, where a new closure each frame would throw that code away.

/** The first of `cols` columns whose moment is above event `m` (`cols` when none). */
export function columnAfter(moment: Int32Array, cols: number, m: number): number {
  let lo = 0;
  let hi = cols;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (moment[mid]! > m) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The pixel row of `bytes` in a plot of `rows` rows whose bottom is `y0` bytes, `scale` rows per byte. */
export function rowOf(bytes: number, rows: number, y0: number, scale: number): number {
  return rows - Math.round((bytes - y0) * scale);
}

/** Paints rows [topRow, bottomRow) of column `col`, clipped to the plot. */
export function fillBand(pixels: Uint32Array, cols: number, rows: number, col: number, topRow: number, bottomRow: number, color: number): void {
  const bottom = Math.min(rows, bottomRow);
  for (let y = Math.max(0, topRow); y < bottom; y++) pixels[y * cols + col] = color;
}

/** The first column at or after `c` whose stack is still inside the view: `open[c]` leads there (path-compressed skips). */
export function nextOpen(open: Int32Array, c: number): number {
  let r = c;
  while (open[r] !== r) r = open[r]!;
  while (open[c] !== r) {
    const n = open[c]!;
    open[c] = r;
    c = n;
  }
  return r;
}
