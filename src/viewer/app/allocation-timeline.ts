/**
 * The Active Memory Timeline's model and its pixel renderer: one band per allocation, stacked in
 * allocation order on top of the blocks live before the trace (as PyTorch's
 * torch/utils/viz/MemoryViz.js stacks them: freeing one lowers every band above it).
 *
 * Level of detail: an allocation at least one pixel tall is drawn as its own band. The ones under
 * a pixel are summed per pixel column by allocating site, and a site's sum that reaches a pixel is
 * drawn as one lighter band of the site's colour; what is left (sites whose sum is under a pixel
 * too) is one hatched "smaller allocations" band at the bottom. MemoryViz.js summarises too (the
 * allocations beyond its `max_entries` become one band); here the cut is the pixel, so zooming the
 * byte axis turns summed bands back into allocations.
 *
 * Each pixel column shows the state at the column's highest total, so a short-lived peak is
 * never averaged away. A frame costs one binary search per column, a scan of block maxima, a
 * replay of at most CHECKPOINT events per column for the per-site sums, one pass over the
 * allocations at least a pixel tall, and the pixels drawn; never a replay of the whole trace.
 */
import type { ReportData, ReportDeviceMemory } from '../report-data.js';
import { LiveIndex, smallLiveAt, type SmallLive } from './live-index.js';
import { EventLists } from './event-lists.js';
import { FrameBands } from './frame-bands.js';
import { FrameScratch } from './frame-scratch.js';
import { ReservedLine } from './reserved-line.js';
import { blockColumnsLength, placeBands, rowOf, stackSummed, visitAllocations } from './frame-geometry.js';
import { MATCH_MARK_RGB, PINNED_RGB, RESERVED_RGB, SMALLER_HATCH_RGB, SMALLER_RGB, bandPalette, NO_SITE_COLOR, rankedColor, rgba, summedColor, towardWhite, type BandPalette } from './band-colors.js';

export { SUMMARISED, summedGroup } from './frame-geometry.js';

/** Sites with their own summed band; the rest share the last group. */
const MAX_GROUPS = 64;
/** Events per checkpoint of the per-group live bytes. */
const CHECKPOINT = 256;
/** Events per block of the running total's maxima, the event times and the running total kept. */
const BLOCK = 64;
/** Size classes: class c holds sizes in [2^(c-1), 2^c) (class 0: under one byte). */
const SIZE_CLASSES = 64;

function sizeClass(bytes: number): number {
  return bytes < 1 ? 0 : Math.min(SIZE_CLASSES - 1, Math.floor(Math.log2(bytes)) + 1);
}

export interface PlotView {
  /** Time of the view's left and right edges. */
  t0: number;
  t1: number;
  cols: number;
  rows: number;
  /** Bytes at the bottom and the top of the plot. */
  y0: number;
  yMax: number;
  /** Allocation drawn highlighted (-1: none). */
  pinned: number;
  /** Search matches (null: no search): matching bands keep their colour, the others fade. */
  matches: Uint8Array | null;
}

/** One device's allocations as typed arrays, with the sums a frame reads instead of replaying the trace. */
export class DeviceTimeline {
  readonly n: number;
  /** Per event, microseconds since the one before (the data's column; times are its running sums). */
  private readonly eventDt: ArrayLike<number>;
  /**
   * Per block b: microseconds from the start to event b·BLOCK. An event's time is its block's and
   * at most BLOCK - 1 steps of `eventDt` (`timeAt`), not a value per event.
   */
  private readonly blockUs: Float64Array;
  readonly count: number;
  /** Per allocation, the event that made it (-1: live before the trace), in allocation order. */
  readonly start: Int32Array;
  /** Event that frees each allocation; `n` when it is live at the end. */
  readonly end: Int32Array;
  readonly bytes: Float64Array;
  /** The allocations each event makes and frees (several at an event that cuts mapped ranges). */
  private readonly events: EventLists;
  /** The reserved line, where it changes. */
  private readonly reserved: ReservedLine;
  /**
   * Live bytes after the first b·BLOCK events, per block b: a moment's total is its block's base
   * and at most BLOCK - 1 events replayed (`totalAt`), not a value per event.
   */
  private readonly blockBase: Float64Array;
  /** Per block of BLOCK moments (m = b·BLOCK+1 … (b+1)·BLOCK): the highest total and its first moment. */
  private readonly blockMax: Float64Array;
  private readonly blockMaxAt: Int32Array;
  /** Per allocation: its size class (`sizeClass`); per class: how many allocations it holds. */
  private readonly classOf: Uint8Array;
  private readonly classCount = new Int32Array(SIZE_CLASSES);
  /** Per allocation: its site group; per group: the site (-1: the sites beyond the first MAX_GROUPS - 1). */
  readonly groupOf: Uint8Array;
  readonly groupSite: number[];
  /** Per group with a site of its own: the bytes its site allocates over the trace (0 for the shared group). */
  readonly groupBytes: number[];
  /** Per group, live bytes after every CHECKPOINT-th event. */
  private readonly groupCheckpoints: Float64Array;
  /** Per allocation: its colours' entry in `palette` (allocations share a handful of colours). */
  private readonly colorOf: Uint16Array;
  /** Per entry: a band's colour, its colour faded (not a search match), its top edge (darker, so neighbouring bands of one site stay apart). */
  private palette: BandPalette = { hex: [], color: new Uint32Array(0), faded: new Uint32Array(0), edge: new Uint32Array(0) };
  /** Per site (string index): its rank by bytes on this device, sites without frames left out (-1: none, or no allocation here). */
  private readonly siteRank: Int32Array;
  private readonly groupColor: Uint32Array;
  private readonly groupFaded: Uint32Array;
  readonly tMin: number;
  readonly tMax: number;
  /** Built on the first hover over a summed band. */
  private liveIndex: LiveIndex | null = null;
  /** The typed arrays frames work in, kept between frames (frame-scratch.ts). */
  private readonly scratch = new FrameScratch();
  /** What the last frame drew, for hover. */
  lastFrame = new FrameBands(new Int32Array(0), Infinity);

  constructor(
    readonly data: ReportDeviceMemory,
    sitesOf: ArrayLike<number>,
  ) {
    // The columns as locals: `data`'s properties may be accessors (the page decodes a column on
    // first read), and a property read per element would cost more than the loops' own work.
    const eventDt = data.eventDt;
    const n = eventDt.length;
    this.n = n;
    this.eventDt = eventDt;
    const blockUs = (this.blockUs = new Float64Array(Math.ceil(n / BLOCK)));
    let us = 0;
    for (let i = 0; i < n; i++) {
      us += eventDt[i]!;
      if (i % BLOCK === 0) blockUs[i / BLOCK] = us;
    }
    const dataStart = data.start;
    const dataEnd = data.end;
    const dataBytes = data.bytes;
    const count = dataBytes.length;
    this.count = count;
    const start = (this.start = new Int32Array(count));
    const end = (this.end = new Int32Array(count));
    const bytes = (this.bytes = new Float64Array(count));
    let before = 0;
    for (let a = 0; a < count; a++) {
      const s = dataStart[a]!;
      const e = dataEnd[a]!;
      const b = dataBytes[a]!;
      start[a] = s < 0 ? -1 : s;
      end[a] = e < 0 ? n : e;
      bytes[a] = b;
      if (s < 0) before += b;
    }
    const events = (this.events = new EventLists(start, end, n));
    const freed = events.freed;
    const freedCount = freed.length;
    this.reserved = new ReservedLine(data.reservedBase, data.reservedAt, data.reservedDelta);

    // Site groups: the sites holding the most bytes over the device's allocations first.
    // Sites are small non-negative integers (string indexes): bytes per site in an array.
    let maxSite = -1;
    for (let a = 0; a < count; a++) if (sitesOf[a]! > maxSite) maxSite = sitesOf[a]!;
    const bySite = new Float64Array(maxSite + 1);
    const seen = new Uint8Array(maxSite + 1);
    for (let a = 0; a < count; a++) {
      bySite[sitesOf[a]!] += bytes[a]!;
      seen[sitesOf[a]!] = 1;
    }
    const sites: number[] = [];
    for (let site = 0; site <= maxSite; site++) if (seen[site]) sites.push(site);
    const ranked = sites.sort((x, y) => bySite[y]! - bySite[x]! || x - y);
    const siteRank = (this.siteRank = new Int32Array(maxSite + 1).fill(-1));
    let rank = 0;
    for (const site of ranked) if (site !== 0) siteRank[site] = rank++;
    const own = ranked.length <= MAX_GROUPS ? ranked : ranked.slice(0, MAX_GROUPS - 1);
    this.groupSite = ranked.length <= MAX_GROUPS ? own : [...own, -1];
    this.groupBytes = this.groupSite.map((site) => (site >= 0 ? bySite[site]! : 0));
    const G = this.groupSite.length;
    const groupOfSite = new Uint8Array(maxSite + 1).fill(G - 1);
    own.forEach((site, g) => (groupOfSite[site] = g));
    const groupOf = (this.groupOf = new Uint8Array(count));
    for (let a = 0; a < count; a++) groupOf[a] = groupOfSite[sitesOf[a]!]!;

    // One pass over the events: the running total at each block's start and its block maxima, and
    // per group the live bytes at every checkpoint.
    const nBlocks = Math.ceil(n / BLOCK);
    const blockBase = (this.blockBase = new Float64Array(nBlocks + 1));
    const blockMax = (this.blockMax = new Float64Array(nBlocks).fill(-Infinity));
    const blockMaxAt = (this.blockMaxAt = new Int32Array(nBlocks));
    const checkpoints = (this.groupCheckpoints = new Float64Array((Math.floor(n / CHECKPOINT) + 1) * G));
    const live = new Float64Array(G);
    let made = events.firstMadeAt(0);
    for (let a = 0; a < made; a++) live[groupOf[a]!] += bytes[a]!;
    let freedAt = 0;
    let total = before;
    for (let i = 0; i < n; i++) {
      if (i % CHECKPOINT === 0) checkpoints.set(live, (i / CHECKPOINT) * G);
      if (i % BLOCK === 0) blockBase[i / BLOCK] = total;
      for (; made < count && start[made] === i; made++) {
        total += bytes[made]!;
        live[groupOf[made]!] += bytes[made]!;
      }
      for (; freedAt < freedCount && end[freed[freedAt]!] === i; freedAt++) {
        const d = freed[freedAt]!;
        total -= bytes[d]!;
        live[groupOf[d]!] -= bytes[d]!;
      }
      const b = (i / BLOCK) | 0;
      if (total > blockMax[b]!) {
        blockMax[b] = total;
        blockMaxAt[b] = i + 1;
      }
    }
    blockBase[nBlocks] = total;
    if (n % CHECKPOINT === 0) checkpoints.set(live, (n / CHECKPOINT) * G);

    // Size classes: a frame skips, with one byte read, the allocations that cannot reach a pixel.
    const classOf = (this.classOf = new Uint8Array(count));
    for (let a = 0; a < count; a++) this.classCount[(classOf[a] = sizeClass(bytes[a]!))]++;

    this.colorOf = new Uint16Array(count);
    this.recolor(sitesOf, (site) => this.siteColor(site));
    this.groupColor = new Uint32Array(G);
    this.groupFaded = new Uint32Array(G);
    for (let g = 0; g < G; g++) {
      const rgb = parseInt(this.summedColor(g).slice(1), 16);
      this.groupColor[g] = rgba(rgb);
      this.groupFaded[g] = rgba(towardWhite(rgb, 0.7));
    }
    this.tMin = 0;
    this.tMax = Math.max(n ? (us / 1000) * 1.0001 : 1, 1e-3);
  }

  /** A site's colour on this device: the palette in the order of the sites' bytes. */
  siteColor(site: number): string {
    const rank = site >= 0 && site < this.siteRank.length ? this.siteRank[site]! : -1;
    return rank < 0 ? NO_SITE_COLOR : rankedColor(rank);
  }

  /** The colour of group `g`'s summed band. */
  summedColor(g: number): string {
    const site = this.groupSite[g]!;
    return summedColor(site < 0 ? null : this.siteColor(site));
  }

  /** The colour allocation `a` is drawn in now (by site, or by what the query box colours by). */
  colorHex(a: number): string {
    return this.palette.hex[this.colorOf[a]!] ?? NO_SITE_COLOR;
  }

  /** Colours each allocation by its key (a site, or an inferred category for the query box): `colorOf` gives "#rrggbb". */
  recolor(keys: ArrayLike<number>, colorOf: (key: number) => string): void {
    this.palette = bandPalette(keys, this.colorOf, colorOf);
  }

  /** Applies events [from, to) to per-group live bytes `live`. One loop per call rather than a call per event: a frame replays up to CHECKPOINT events per pixel column, and its first frames run before the engine has optimised them. */
  private replayGroups(from: number, to: number, live: Float64Array): void {
    const { start, end, groupOf, bytes, count } = this;
    const freed = this.events.freed;
    for (let a = this.events.firstMadeAt(from); a < count && start[a]! < to; a++) live[groupOf[a]!] += bytes[a]!;
    for (let k = this.events.firstFreedAt(from); k < freed.length && end[freed[k]!]! < to; k++) live[groupOf[freed[k]!]!] -= bytes[freed[k]!]!;
  }

  /** Time of event `i` (0 ≤ i < n), in the data's unit: the running sum of `eventDt` over 1000. */
  timeAt(i: number): number {
    const b = Math.floor(i / BLOCK);
    let us = this.blockUs[b]!;
    for (let j = b * BLOCK + 1; j <= i; j++) us += this.eventDt[j]!;
    return us / 1000;
  }

  /** Index of the first event at or after `t`. */
  lowerBound(t: number): number {
    // The first block whose first event is at or after t; the answer is in the block before it, or is that first event.
    const blocks = this.blockUs.length;
    let lo = 0;
    let hi = blocks;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.blockUs[mid]! / 1000 < t) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return 0;
    const dt = this.eventDt;
    const end = Math.min(this.n, lo * BLOCK);
    let us = this.blockUs[lo - 1]!;
    for (let i = (lo - 1) * BLOCK + 1; i < end; i++) {
      us += dt[i]!;
      if (us / 1000 >= t) return i;
    }
    return end;
  }

  /** Live bytes after the first `m` events. */
  totalAt(m: number): number {
    const b = Math.floor(m / BLOCK);
    return this.replayTotal(b * BLOCK, m, this.blockBase[b]!);
  }

  /** `total` with events [from, to) applied. */
  private replayTotal(from: number, to: number, total: number): number {
    const { start, end, bytes, count } = this;
    const freed = this.events.freed;
    for (let a = this.events.firstMadeAt(from); a < count && start[a]! < to; a++) total += bytes[a]!;
    for (let k = this.events.firstFreedAt(from); k < freed.length && end[freed[k]!]! < to; k++) total -= bytes[freed[k]!]!;
    return total;
  }

  /** The first moment with the highest total found by the last `argmaxTotal`, and that total. */
  private best = 0;
  private bestTotal = 0;

  /** Moments `from` … `to` one by one, `total` being the total at `from - 1`: the first higher than `bestTotal` goes into `best`. */
  private scanMoments(from: number, to: number, total: number): void {
    const { start, end, bytes, count } = this;
    const freed = this.events.freed;
    let made = this.events.firstMadeAt(from - 1);
    let k = this.events.firstFreedAt(from - 1);
    for (let m = from; m <= to; m++) {
      for (; made < count && start[made] === m - 1; made++) total += bytes[made]!;
      for (; k < freed.length && end[freed[k]!] === m - 1; k++) total -= bytes[freed[k]!]!;
      if (total > this.bestTotal) {
        this.best = m;
        this.bestTotal = total;
      }
    }
  }

  /** The first moment in [lo, hi] (events applied) with the highest total; its total is then `bestTotal`. */
  argmaxTotal(lo: number, hi: number): number {
    this.best = lo;
    this.bestTotal = this.totalAt(lo);
    // Moments one by one up to a block boundary, whole blocks, then the rest one by one.
    const head = Math.min(hi, Math.ceil(lo / BLOCK) * BLOCK);
    this.scanMoments(lo + 1, head, this.bestTotal);
    let m = head + 1;
    for (; m + BLOCK - 1 <= hi; m += BLOCK) {
      const b = (m - 1) / BLOCK;
      if (this.blockMax[b]! > this.bestTotal) {
        this.best = this.blockMaxAt[b]!;
        this.bestTotal = this.blockMax[b]!;
      }
    }
    if (m <= hi) this.scanMoments(m, hi, this.blockBase[(m - 1) / BLOCK]!);
    return this.best;
  }

  /** The highest reserved bytes after any of events [lo, hi), or before them when the range is empty. */
  maxReserved(lo: number, hi: number): number {
    return this.reserved.max(lo, hi);
  }

  /** Per group, live bytes after the first `m` events, into `out`. */
  groupsAfter(m: number, out: Float64Array): Float64Array {
    const G = this.groupSite.length;
    const c = Math.floor(m / CHECKPOINT);
    out.set(this.groupCheckpoints.subarray(c * G, (c + 1) * G));
    this.replayGroups(c * CHECKPOINT, m, out);
    return out;
  }

  /**
   * Allocations under `threshold` bytes live after the first `m` events, in group `group` (-1:
   * in the groups whose sum there is under the threshold too, the "smaller allocations" band):
   * how many, their bytes, the `k` largest.
   */
  smallLiveAt(m: number, threshold: number, group: number, k: number): SmallLive {
    return smallLiveAt(this.live(), this.bytes, this.groupOf, this.groupSite.length, { m, threshold, group, k });
  }

  private live(): LiveIndex {
    return (this.liveIndex ??= new LiveIndex(this.n, this.start, this.end, this.events));
  }

  /** Per pixel column of [t0, t1]: the moment shown (the first with the column's highest total), its total, and the event range it covers. */
  columnMoments(t0: number, t1: number, cols: number): { moment: Int32Array; total: Float64Array; first: Int32Array } {
    const moment = new Int32Array(cols);
    const total = new Float64Array(cols);
    const first = new Int32Array(cols + 1);
    const span = t1 - t0;
    first[0] = this.lowerBound(t0);
    for (let c = 0; c < cols; c++) {
      // The last column takes the events at exactly t1 too.
      first[c + 1] = c === cols - 1 ? this.lowerBound(t1 + Math.max(1e-9, span * 1e-12)) : this.lowerBound(t0 + ((c + 1) / cols) * span);
      if (first[c + 1] < first[c]) first[c + 1] = first[c];
      moment[c] = this.argmaxTotal(first[c], first[c + 1]);
      total[c] = this.bestTotal;
    }
    return { moment, total, first };
  }

  /** Per pixel column of the whole trace: the highest live bytes and reserved bytes (the overview strip). */
  profile(cols: number): { total: Float64Array; reserved: Float64Array } {
    const { total, first } = this.columnMoments(this.tMin, this.tMax, cols);
    const reserved = new Float64Array(cols);
    for (let c = 0; c < cols; c++) reserved[c] = this.maxReserved(first[c], first[c + 1]);
    return { total, reserved };
  }

  /**
   * Draws the bands into `pixels` (cols × rows, row 0 at the top) and leaves in `lastFrame` what
   * it placed, for hover. Bands that would start above the view are not drawn: a column stops
   * taking bands once its stack passes the top, so a frame zoomed far into the byte axis costs
   * the pixels it fills, not every live allocation in every column.
   */
  render(f: PlotView, pixels: Uint32Array): { totals: Float64Array } {
    const { cols, rows } = f;
    const scale = rows / (f.yMax - f.y0);
    const thr = (f.yMax - f.y0) / rows;
    const { moment, total: totals, first } = this.columnMoments(f.t0, f.t1, cols);
    const G = this.groupSite.length;
    const matches = f.matches;

    // Allocations at least a pixel tall, in stacking order (allocation order), with their column
    // spans; per group, their bytes per column (as differences), which the summed bands leave
    // out. Search matches under a pixel mark their columns.
    const W = cols + 1;
    const scratch = this.scratch;
    const bigGroup = scratch.float64('bigGroup', G * W).fill(0);
    const marks = matches ? new Int32Array(W) : null;
    // Without a search, only allocations of a size class that can reach a pixel are visited;
    // a search visits every allocation for its marks.
    const minClass = sizeClass(thr);
    const classOf = this.classOf;
    // Every allocation at least a pixel tall is of a class from minClass up: that bounds the lists.
    let bigBound = 0;
    for (let c = minClass; c < SIZE_CLASSES; c++) bigBound += this.classCount[c]!;
    const bigList = scratch.int32('bigList', bigBound, this.count);
    const bigFrom = scratch.int32('bigFrom', bigBound, this.count);
    const bigTo = scratch.int32('bigTo', bigBound, this.count);
    // Nothing to visit when no allocation is a pixel tall and there is no search. Skipping the call
    // matters beyond its pass over every allocation: the engine would optimise the loop for an
    // empty body, then throw that code away on the first frame that lists allocations.
    const bigCount = bigBound > 0 || matches ? visitAllocations({ count: this.count, start: this.start, end: this.end, bytes: this.bytes, groupOf: this.groupOf, classOf, minClass, threshold: thr, matches, moment, cols, bigList, bigFrom, bigTo, bigGroup, marks, blockCol: scratch.int32('blockCol', blockColumnsLength(moment, cols)) }) : 0;

    const hatch = rgba(matches ? towardWhite(SMALLER_HATCH_RGB, 0.6) : SMALLER_HATCH_RGB);
    const smallerColor = rgba(matches ? towardWhite(SMALLER_RGB, 0.6) : SMALLER_RGB);
    const reservedColor = rgba(RESERVED_RGB);
    const pinnedColor = rgba(PINNED_RGB);
    const markColor = rgba(MATCH_MARK_RGB);
    const y0 = f.y0;

    // Per column, per group: the live bytes at its moment, replayed from the last column's moment
    // when near, else from a checkpoint.
    const live = scratch.float64('live', cols * G);
    const groups = new Float64Array(G);
    let groupsAt = -1;
    for (let col = 0; col < cols; col++) {
      const m = moment[col]!;
      if (groupsAt >= 0 && m >= groupsAt && m - groupsAt <= CHECKPOINT) this.replayGroups(groupsAt, m, groups);
      else this.groupsAfter(m, groups);
      groupsAt = m;
      live.set(groups, col * G);
    }
    // The summed bands at the bottom of each column: "smaller allocations", then per site.
    const stackTop = new Float64Array(cols);
    const sumStart = new Int32Array(W);
    // At most one summed band per group and the "smaller allocations" band per column.
    const sumIds = scratch.int32('sumIds', cols * (G + 1));
    const sumTops = scratch.float64('sumTops', cols * (G + 1));
    stackSummed({ pixels, cols, rows, y0, scale, threshold: thr, groups: G, live, bigGroup, bigAt: scratch.float64('bigAt', G), hatch, smallerColor, groupColor: matches ? this.groupFaded : this.groupColor, sumStart, sumIds, sumTops, stackTop });

    // The bands, allocation by allocation, into the columns whose stack is still inside the view.
    // `open[c]` leads to the first such column at or after c (path-compressed skips).
    const open = new Int32Array(W);
    for (let c = 0; c <= cols; c++) open[c] = c < cols && stackTop[c] >= f.yMax ? c + 1 : c;
    // Per column, the bands placed there are bigList[k] for k below closedAt (FrameBands).
    const closedAt = scratch.int32('closedAt', cols);
    let openCount = 0;
    for (let c = 0; c < cols; c++) {
      closedAt[c] = open[c] === c ? bigCount : 0;
      if (open[c] === c) openCount++;
    }
    if (bigCount > 0 && openCount > 0) placeBands({ pixels, cols, rows, y0, scale, yMax: f.yMax, pinned: f.pinned, pinnedColor, matches, palette: this.palette, colorOf: this.colorOf, bytes: this.bytes, bigList, bigFrom, bigTo, bigCount, stackTop, open, openCount, closedAt });
    this.lastFrame = new FrameBands(moment, thr, { cols, bytes: this.bytes, big: bigList, bigFrom, bigTo, bigCount, closedAt, sumStart, sumIds, sumTops });

    // The reserved line and the marks of search matches under a pixel, column by column.
    let marked = 0;
    for (let col = 0; col < cols; col++) {
      const r = rowOf(this.maxReserved(first[col]!, first[col + 1]!), rows, y0, scale);
      if (r >= 0 && r < rows) pixels[r * cols + col] = reservedColor;
      if (marks) {
        marked += marks[col];
        if (marked > 0) for (let yy = 0; yy < Math.min(4, rows); yy++) pixels[yy * cols + col] = markColor;
      }
    }
    return { totals };
  }
}

/** The devices of a snapshot report, with their allocations' sites as string indexes. */
export function deviceTimelines(data: ReportData): DeviceTimeline[] {
  return (data.memory?.devices ?? []).map((d) => new DeviceTimeline(d, d.site));
}
