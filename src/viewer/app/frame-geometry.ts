/**
 * Where things fall in a frame of the Active Memory Timeline: an event's pixel column, a byte
 * count's pixel row, a band's pixels, the next column with room for a band, and the bands
 * themselves (allocation-timeline.ts draws with them).
 */
// A frame's helpers are module functions, not closures made per frame: the engine's optimised
// frame code keeps its call targets, where a new closure each frame would throw that code away.

/** Entry id of the "smaller allocations" band in a column's hover list. */
export const SUMMARISED = -2;
/** Entry ids at or below this are a site's summed band: `SITE_SUM - id` is its group. */
const SITE_SUM = -3;

/** The group of a summed site band from its hover id, or -1 when the id is not one. */
export function summedGroup(id: number): number {
  return id <= SITE_SUM ? SITE_SUM - id : -1;
}

/** Events per block of `visitAllocations`'s table of columns. */
const EVENT_BLOCK = 64;

/** How long `visitAllocations`'s table of columns is for a frame's moments. */
export function blockColumnsLength(moment: Int32Array, cols: number): number {
  return cols ? Math.floor((moment[cols - 1]! - moment[0]!) / EVENT_BLOCK) + 2 : 1;
}

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

/** What `placeBands` stacks and where. */
export interface BandPlacement {
  readonly pixels: Uint32Array;
  readonly cols: number;
  readonly rows: number;
  readonly y0: number;
  readonly scale: number;
  readonly yMax: number;
  readonly pinned: number;
  readonly pinnedColor: number;
  readonly matches: Uint8Array | null;
  readonly palette: { readonly color: Uint32Array; readonly faded: Uint32Array; readonly edge: Uint32Array };
  readonly colorOf: Uint16Array;
  readonly bytes: Float64Array;
  /** The allocations at least a pixel tall in stacking order, and the columns [from, to) each spans. */
  readonly bigList: Int32Array;
  readonly bigFrom: Int32Array;
  readonly bigTo: Int32Array;
  readonly bigCount: number;
  /** Per column: the bytes its stack reaches so far, raised as bands are placed. */
  readonly stackTop: Float64Array;
  /** `nextOpen`'s skips over the columns whose stack has passed the top of the view. */
  readonly open: Int32Array;
  /** How many columns are open: when the last one closes, the rest of the bands are above the view everywhere. */
  readonly openCount: number;
  /** Per column: set to one past the band that takes its stack past the top. */
  readonly closedAt: Int32Array;
}

/**
 * Stacks the allocations at least a pixel tall, in order, into the columns whose stack is still
 * inside the view, painting each. A function of its own: on the first frames that place many
 * bands (zooming into the byte axis), the engine optimises this loop alone, sooner and faster
 * than the whole frame.
 */
export function placeBands(p: BandPlacement): void {
  const { pixels, cols, rows, y0, scale, yMax, pinned, pinnedColor, matches, palette, colorOf, bytes: sizes, bigList, bigFrom, bigTo, bigCount, stackTop, open, closedAt } = p;
  let openCount = p.openCount;
  for (let k = 0; k < bigCount; k++) {
    const a = bigList[k]!;
    const bytes = sizes[a]!;
    const faded = matches !== null && !matches[a];
    const entry = colorOf[a]!;
    const color = a === pinned ? pinnedColor : faded ? palette.faded[entry]! : palette.color[entry]!;
    const edged = !faded && a !== pinned;
    for (let col = nextOpen(open, bigFrom[k]!); col < bigTo[k]!; col = nextOpen(open, col + 1)) {
      const y = stackTop[col]!;
      const top = y + bytes;
      const edgeRow = rowOf(top, rows, y0, scale);
      const bottomRow = rowOf(y, rows, y0, scale);
      fillBand(pixels, cols, rows, col, edgeRow, bottomRow, color);
      if (edged && bottomRow - edgeRow >= 3 && edgeRow >= 0 && edgeRow < rows) pixels[edgeRow * cols + col] = palette.edge[entry]!;
      stackTop[col] = top;
      if (top >= yMax) {
        open[col] = col + 1;
        closedAt[col] = k + 1;
        if (--openCount === 0) return;
      }
    }
  }
}

/** What `visitAllocations` reads and fills. */
export interface AllocationVisit {
  readonly count: number;
  readonly start: Int32Array;
  readonly end: Int32Array;
  readonly bytes: Float64Array;
  readonly groupOf: Uint8Array;
  /** Per allocation its size class; without a search, classes under `minClass` cannot reach a pixel and are skipped. */
  readonly classOf: Uint8Array;
  readonly minClass: number;
  /** Bytes per pixel: allocations of at least this many are drawn as their own bands. */
  readonly threshold: number;
  readonly matches: Uint8Array | null;
  /** Per column, the moment it shows. */
  readonly moment: Int32Array;
  readonly cols: number;
  readonly bigList: Int32Array;
  readonly bigFrom: Int32Array;
  readonly bigTo: Int32Array;
  /** Per group, row of cols + 1, zero on entry: each listed allocation's bytes added at its first column, taken off after its last. */
  readonly bigGroup: Float64Array;
  /** Scratch of at least `blockColumnsLength(moment, cols)` values: where the columns fall in blocks of events. */
  readonly blockCol: Int32Array;
  /** Per column + 1, search matches under a pixel starting (+1) and ending (-1); null without a search. */
  readonly marks: Int32Array | null;
}

/**
 * Lists the allocations at least a pixel tall that a frame shows, in stacking (allocation) order,
 * with the columns they span and their bytes per group (as differences between columns), and notes
 * the matches under a pixel; returns how many it listed.
 * A function of its own for the reason `placeBands` is.
 */
export function visitAllocations(v: AllocationVisit): number {
  const { count, start, end, bytes, groupOf, classOf, minClass, threshold, matches, moment, cols, bigList, bigFrom, bigTo, bigGroup, marks, blockCol } = v;
  const W = cols + 1;
  const lastMoment = cols ? moment[cols - 1]! : 0;
  const firstMoment = cols ? moment[0]! : 0;
  // The column after an allocation's end is found between the columns of its event's block: a
  // table per block of events in the view instead of a binary search over every column (on a
  // whole-trace view, most of the visit's time).
  const blocks = blockColumnsLength(moment, cols) - 1;
  for (let b = 0, c = 0; b <= blocks; b++) {
    const e = firstMoment + b * EVENT_BLOCK;
    while (c < cols && moment[c]! <= e) c++;
    blockCol[b] = c;
  }
  let bigCount = 0;
  // Allocations come in allocation order, so their starts rise: the first column follows a pointer.
  let startCol = 0;
  let lastStart = -Infinity;
  for (let a = 0; a < count; a++) {
    if (!matches && classOf[a]! < minClass) continue;
    const s = start[a]!;
    if (s >= lastMoment || end[a]! < firstMoment) continue;
    const big = bytes[a]! >= threshold;
    if (!big && !(marks && matches![a])) continue;
    let c0: number;
    if (s >= lastStart) {
      while (startCol < cols && moment[startCol]! <= s) startCol++;
      c0 = startCol;
      lastStart = s;
    } else c0 = columnAfter(moment, cols, s);
    const e = end[a]!;
    let c1: number;
    if (e >= lastMoment) c1 = cols;
    else {
      // e is in block b: the first column after it is after that of the block's first event and at most that of the next block's first event.
      const b = ((e - firstMoment) / EVENT_BLOCK) | 0;
      let lo = blockCol[b]!;
      let hi = blockCol[b + 1]!;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (moment[mid]! > e) hi = mid;
        else lo = mid + 1;
      }
      c1 = lo;
    }
    if (c0 >= c1) continue;
    if (big) {
      bigList[bigCount] = a;
      bigFrom[bigCount] = c0;
      bigTo[bigCount++] = c1;
      const g = groupOf[a]! * W;
      bigGroup[g + c0] += bytes[a]!;
      bigGroup[g + c1] -= bytes[a]!;
    } else {
      marks![c0]++;
      marks![c1]--;
    }
  }
  return bigCount;
}

/** What `stackSummed` reads and fills. */
export interface SummedStack {
  readonly pixels: Uint32Array;
  readonly cols: number;
  readonly rows: number;
  readonly y0: number;
  readonly scale: number;
  /** Bytes per pixel: a site's allocations under it are summed, and a sum under it goes into "smaller allocations". */
  readonly threshold: number;
  readonly groups: number;
  /** Per column, per group (column-major, `groups` a column): live bytes at the column's moment. */
  readonly live: Float64Array;
  /** Per group, row of cols + 1: the bytes of its allocations drawn as their own bands, as differences between columns (`visitAllocations`). */
  readonly bigGroup: Float64Array;
  /** Per group: scratch for those bytes at the current column. */
  readonly bigAt: Float64Array;
  readonly hatch: number;
  readonly smallerColor: number;
  /** Per group, its summed band's colour. */
  readonly groupColor: Uint32Array;
  /** Per column + 1: where its entries begin in `sumIds` / `sumTops`. */
  readonly sumStart: Int32Array;
  /** The summed bands, column by column: hover id, and the bytes their top reaches. */
  readonly sumIds: Int32Array;
  readonly sumTops: Float64Array;
  /** Per column: the bytes the summed bands reach, where the bands a pixel tall start. */
  readonly stackTop: Float64Array;
}

/**
 * Paints each column's summed bands at the bottom of its stack: the hatched "smaller allocations"
 * (the sites whose allocations under a pixel sum under a pixel too), then each site whose sum
 * reaches a pixel. A function of its own for the reason `placeBands` is: zooming into the byte
 * axis first draws many of these bands.
 */
export function stackSummed(p: SummedStack): void {
  const { pixels, cols, rows, y0, scale, threshold, groups: G, live, bigGroup, bigAt, hatch, smallerColor, groupColor, sumStart, sumIds, sumTops, stackTop } = p;
  const W = cols + 1;
  bigAt.fill(0);
  let sums = 0;
  sumStart[0] = 0;
  for (let col = 0; col < cols; col++) {
    const at = col * G;
    let rest = 0;
    for (let g = 0; g < G; g++) {
      bigAt[g] += bigGroup[g * W + col]!;
      const small = live[at + g]! - bigAt[g]!;
      if (small > 0 && small < threshold) rest += small;
    }
    let y = 0;
    if (rest > 0) {
      const top = Math.max(0, rowOf(rest, rows, y0, scale));
      const bottom = Math.min(rows, rowOf(0, rows, y0, scale));
      for (let yy = top; yy < bottom; yy++) pixels[yy * cols + col] = (yy + col) % 4 === 0 ? hatch : smallerColor;
      y = rest;
      sumIds[sums] = SUMMARISED;
      sumTops[sums++] = y;
    }
    for (let g = 0; g < G; g++) {
      const small = live[at + g]! - bigAt[g]!;
      if (!(small >= threshold)) continue;
      fillBand(pixels, cols, rows, col, rowOf(y + small, rows, y0, scale), rowOf(y, rows, y0, scale), groupColor[g]!);
      y += small;
      sumIds[sums] = SITE_SUM - g;
      sumTops[sums++] = y;
    }
    stackTop[col] = y;
    // Written in the loop, not after it: code the engine compiles while the loop runs has not
    // seen a statement after the loop, and would be thrown away there on every frame.
    sumStart[col + 1] = sums;
  }
}
