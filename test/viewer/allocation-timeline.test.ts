// The Active Memory Timeline's renderer against its definition, event by event: each pixel
// column shows the state at its highest total; allocations a pixel tall or more are bands in
// allocation order, the rest are summed per site, and sites summing under a pixel go into one
// "smaller allocations" band at the bottom.
import { describe, it, expect } from 'vitest';
import { DeviceTimeline, SUMMARISED, summedGroup } from '../../src/viewer/app/allocation-timeline.js';
import type { ReportDeviceMemory } from '../../src/viewer/report-data.js';

/**
 * Random allocations over `n` events: some live before the trace, some still live at the end,
 * sizes spanning six orders. `crowded`: a tenth of the events free several allocations and make
 * several, as an unmap cutting across mapped ranges does on the Active Cached Segment Timeline.
 */
function randomDevice(n: number, seed: number, crowded = false): ReportDeviceMemory {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const start: number[] = [];
  const end: number[] = [];
  const bytes: number[] = [];
  const site: number[] = [];
  const size = () => Math.floor(10 ** (2 + rand() * 6));
  // Live before the trace: freed during it, or live throughout.
  for (let k = 0; k < 40; k++) {
    start.push(-1);
    end.push(rand() < 0.5 ? -1 : -2);
    bytes.push(size());
    site.push(1 + Math.floor(rand() * 90));
  }
  const open: number[] = start.map((_, a) => a).filter((a) => end[a] === -2);
  const eventDt: number[] = [];
  for (let i = 0; i < n; i++) {
    eventDt.push(rand() < 0.2 ? 0 : 1 + Math.floor(rand() * 40));
    if (crowded && open.length > 4 && rand() < 0.1) {
      for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) end[open.splice(Math.floor(rand() * open.length), 1)[0]!] = i;
      for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) {
        open.push(start.length);
        start.push(i);
        end.push(-2);
        bytes.push(size());
        site.push(1 + Math.floor(rand() * 90));
      }
    } else if (open.length && rand() < 0.45) {
      const a = open.splice(Math.floor(rand() * open.length), 1)[0];
      end[a] = i;
    } else {
      open.push(start.length);
      start.push(i);
      end.push(-2);
      bytes.push(size());
      // 90 sites: more than the renderer's own groups, so some share the "other sites" group.
      site.push(1 + Math.floor(rand() * 90));
    }
  }
  for (const a of open) end[a] = -1;
  return {
    device: 'cuda:0',
    eventDt,
    start,
    end,
    bytes,
    address: bytes.map((_, a) => 0x1000 * a),
    stack: bytes.map(() => -1),
    site,
    reservedBase: 0,
    reservedAt: [],
    reservedDelta: [],
    peakAllocated: 0,
    peakReserved: 0,
  };
}

/** What a column must show, replaying the events one by one. */
function expected(d: DeviceTimeline, t0: number, t1: number, cols: number, c: number, thr: number, yMax: number): [number, number][] {
  const span = t1 - t0;
  const firstEvent = (t: number) => {
    let i = 0;
    while (i < d.n && d.timeAt(i) < t) i++;
    return i;
  };
  const lo = firstEvent(t0 + (c / cols) * span);
  let hi = c === cols - 1 ? d.n : firstEvent(t0 + ((c + 1) / cols) * span);
  if (c === cols - 1) while (hi > 0 && d.timeAt(hi - 1) > t1) hi--;
  const liveAt = (m: number) => Array.from({ length: d.count }, (_, a) => a).filter((a) => d.start[a] < m && d.end[a] >= m);
  const totalAt = (m: number) => liveAt(m).reduce((s, a) => s + d.bytes[a], 0);
  let m = lo;
  for (let k = lo + 1; k <= Math.max(lo, hi); k++) if (totalAt(k) > totalAt(m)) m = k;
  const live = liveAt(m);
  const small = new Map<number, number>();
  for (const a of live) if (d.bytes[a] < thr) small.set(d.groupOf[a], (small.get(d.groupOf[a]) ?? 0) + d.bytes[a]);
  const out: [number, number][] = [];
  let y = 0;
  let rest = 0;
  for (const v of small.values()) if (v < thr) rest += v;
  if (rest > 0) out.push([SUMMARISED, (y += rest)]);
  for (const g of [...small.keys()].sort((p, q) => p - q)) if (small.get(g)! >= thr) out.push([-3 - g, (y += small.get(g)!)]);
  // Bands that would start at or above the top of the view are not drawn.
  for (const a of live) if (d.bytes[a] >= thr && y < yMax) out.push([a, (y += d.bytes[a])]);
  return out;
}

describe.each([
  ['one allocation made or freed per event', false],
  ['several allocations freed and made at one event', true],
])('Active Memory Timeline renderer: %s', (_, crowded) => {
  it('each column holds the bands, site sums and smaller-allocations band of its highest moment', () => {
    const d = new DeviceTimeline(randomDevice(3000, 11, crowded), randomDevice(3000, 11, crowded).site);
    expect(d.groupSite.length).toBe(64);
    expect(d.groupSite[63]).toBe(-1);
    const full = d.timeAt(d.n - 1);
    let summed = 0;
    let smaller = 0;
    let bands = 0;
    for (const [t0, t1, cols, yMax] of [
      [0, full, 97, 4e8],
      [full * 0.25, full * 0.26, 40, 4e8],
      [full * 0.4, full * 0.7, 64, 5e7],
      [0, full, 13, 1e10],
    ] as const) {
      const rows = 100;
      const pixels = new Uint32Array(cols * rows);
      d.render({ t0, t1, cols, rows, y0: 0, yMax, pinned: -1, matches: null }, pixels);
      for (let c = 0; c < cols; c++) {
        const want = expected(d, t0, t1, cols, c, yMax / rows, yMax);
        const got = d.lastFrame.column(c);
        expect(got.map(([id]) => id)).toEqual(want.map(([id]) => id));
        got.forEach(([, top], k) => expect(top).toBeCloseTo(want[k][1], 0));
        // Hover's lookup: the band whose span holds a height, as a scan of the column finds it.
        for (const [k, [id, top]] of got.entries()) {
          const bottom = k ? got[k - 1]![1] : 0;
          expect(d.lastFrame.at(c, (bottom + top) / 2)).toBe(id);
        }
        expect(d.lastFrame.at(c, got.length ? got[got.length - 1]![1] : 0)).toBe(-1);
        for (const [id] of got) {
          if (id === SUMMARISED) smaller++;
          else if (summedGroup(id) >= 0) summed++;
          else bands++;
        }
      }
      // Finding an allocation's band: the first column listing it, with its bottom and top there.
      const firstSeen = new Map<number, { col: number; bottom: number; top: number }>();
      for (let c = 0; c < cols; c++) {
        d.lastFrame.column(c).forEach(([id, top], k, list) => {
          if (id >= 0 && !firstSeen.has(id)) firstSeen.set(id, { col: c, bottom: k ? list[k - 1]![1] : 0, top });
        });
      }
      for (const [id, where] of firstSeen) expect(d.lastFrame.find(id)).toEqual(where);
      const drawn = new Set(firstSeen.keys());
      const notDrawn = Array.from({ length: d.count }, (_, a) => a).find((a) => !drawn.has(a));
      if (notDrawn !== undefined) expect(d.lastFrame.find(notDrawn)).toBeNull();
    }
    // The cases reach all three kinds of entry.
    expect(smaller).toBeGreaterThan(0);
    expect(summed).toBeGreaterThan(0);
    expect(bands).toBeGreaterThan(0);
  });

  it('hover sums of a summed band equal the bytes the column stacked for it', () => {
    const dev = randomDevice(2000, 5, crowded);
    const d = new DeviceTimeline(dev, dev.site);
    const cols = 50;
    const rows = 80;
    d.render({ t0: 0, t1: d.tMax, cols, rows, y0: 0, yMax: 2e8, pinned: -1, matches: null }, new Uint32Array(cols * rows));
    let checked = 0;
    for (let c = 0; c < cols; c++) {
      let below = 0;
      for (const [id, top] of d.lastFrame.column(c)) {
        if (id === SUMMARISED || summedGroup(id) >= 0) {
          const s = d.smallLiveAt(d.lastFrame.moment[c], d.lastFrame.threshold, id === SUMMARISED ? -1 : summedGroup(id), 3);
          expect(s.bytes).toBeCloseTo(top - below, 0);
          expect(s.largest.length).toBe(Math.min(3, s.count));
          checked++;
        }
        below = top;
      }
    }
    expect(checked).toBeGreaterThan(cols);
  });

  it('hover lists of a summed band are the allocations live at that moment, at any distance from a checkpoint', () => {
    // Over 4096 events: the live index's checkpoints, not only its replay, are used.
    const dev = randomDevice(30_000, 11, crowded);
    const d = new DeviceTimeline(dev, dev.site);
    const threshold = 1e6;
    for (const m of [0, 1, 4095, 4096, 4097, 12_345, 29_999, 30_000]) {
      const live = dev.bytes.map((_, a) => a).filter((a) => d.start[a] < m && d.end[a] >= m && dev.bytes[a] < threshold);
      for (const group of [-1, 0, 3]) {
        const s = d.smallLiveAt(m, threshold, group, 4);
        // The definition, allocation by allocation: the band's groups, then its allocations.
        const sums = new Float64Array(d.groupSite.length);
        for (const a of live) sums[d.groupOf[a]] += dev.bytes[a];
        const mine = live.filter((a) => (group < 0 ? sums[d.groupOf[a]] < threshold : d.groupOf[a] === group));
        const largest = [...mine].sort((x, y) => dev.bytes[y] - dev.bytes[x] || x - y).slice(0, 4);
        expect(s.count).toBe(mine.length);
        expect(s.bytes).toBe(mine.reduce((t, a) => t + dev.bytes[a], 0));
        expect(s.largest).toEqual(largest);
      }
    }
  });

  it('the overview profile is each column\u2019s highest live bytes over the whole trace', () => {
    const dev = randomDevice(1500, 9, crowded);
    const d = new DeviceTimeline(dev, dev.site);
    const cols = 31;
    const { total } = d.profile(cols);
    for (let c = 0; c < cols; c++) {
      const top = expected(d, d.tMin, d.tMax, cols, c, Infinity, Infinity);
      expect(total[c]).toBe(top.length ? top[top.length - 1][1] : 0);
    }
  });

  it('refuses allocations not listed in the order they were made, naming the first out of place', () => {
    const dev = randomDevice(200, 3, crowded);
    const a = dev.start.findIndex((s) => s > 10);
    const start = [...dev.start];
    start[a + 1] = 2;
    expect(() => new DeviceTimeline({ ...dev, start }, dev.site)).toThrow(`allocation ${a + 1} is made at event 2, before allocation ${a} (event ${start[a]})`);
  });

  it('the reserved line: its highest value over any range of events, and before a range when it is empty', () => {
    const n = 3000;
    let x = 5;
    const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
    // Changes at a tenth of the events, some events with several (a segment freed and another mapped).
    const reservedAt: number[] = [];
    const reservedDelta: number[] = [];
    let level = 0;
    for (let i = 0; i < n; i++) {
      if (rand() >= 0.1) continue;
      for (let k = rand() < 0.2 ? 2 : 1; k > 0; k--) {
        const delta = level > 2 ** 22 && rand() < 0.5 ? -Math.floor(rand() * level) : Math.floor(rand() * 2 ** 22);
        level += delta;
        reservedAt.push(i);
        reservedDelta.push(delta);
      }
    }
    const dev = { ...randomDevice(n, 21, crowded), reservedBase: 3 * 2 ** 20, reservedAt, reservedDelta };
    const d = new DeviceTimeline(dev, dev.site);
    // Reserved bytes after each event, replayed.
    const after = new Float64Array(n);
    let r = dev.reservedBase;
    for (let i = 0, k = 0; i < n; i++) {
      while (k < reservedAt.length && reservedAt[k] === i) r += reservedDelta[k++]!;
      after[i] = r;
    }
    const highest = (lo: number, hi: number): number => {
      if (lo >= hi) return lo > 0 ? after[lo - 1]! : dev.reservedBase;
      let best = -Infinity;
      for (let i = lo; i < hi; i++) best = Math.max(best, after[i]!);
      return best;
    };
    const ranges: [number, number][] = [[0, 0], [0, 1], [0, n], [n, n], [n - 1, n], [5, 5], [64, 128], [63, 129]];
    for (let k = 0; k < 400; k++) {
      const a = Math.floor(rand() * (n + 1));
      const b = Math.floor(rand() * (n + 1));
      ranges.push([Math.min(a, b), Math.max(a, b)]);
    }
    for (const [lo, hi] of ranges) expect(d.maxReserved(lo, hi), `events [${lo}, ${hi})`).toBe(highest(lo, hi));
    const cols = 37;
    const { reserved } = d.profile(cols);
    const { first } = d.columnMoments(d.tMin, d.tMax, cols);
    for (let c = 0; c < cols; c++) expect(reserved[c]).toBe(highest(first[c]!, first[c + 1]!));
  });
});

describe('site colours', () => {
  it('the twenty sites holding the most bytes each have a colour of their own, and the legend, bands and summed bands agree', () => {
    // Sites 1, 21 and 41 hold the most bytes: string indexes twenty apart, as real sites often are.
    const dev = randomDevice(2000, 11);
    const big = [1, 21, 41];
    big.forEach((site, k) => {
      dev.start.push(dev.eventDt.length - 1);
      dev.end.push(-1);
      dev.bytes.push((3 - k) * 1e12);
      dev.address.push(0x1000 * dev.address.length);
      dev.stack.push(-1);
      dev.site.push(site);
    });
    const d = new DeviceTimeline(dev, dev.site);
    const ranked = d.groupSite.filter((s) => s >= 0).slice(0, 20);
    expect(ranked.slice(0, 3)).toEqual(big);
    const colours = ranked.map((s) => d.siteColor(s));
    expect(new Set(colours).size).toBe(ranked.length);
    // An allocation is drawn in its site's colour, and a site's summed band in a lighter shade of it.
    const a = dev.site.length - 2;
    expect(d.colorHex(a)).toBe(d.siteColor(21));
    expect(d.summedColor(1)).not.toBe(d.summedColor(0));
    // Allocations without frames keep their own colour, whatever their bytes.
    const noFrames = dev.site.map(() => 0);
    expect(d.siteColor(0)).toBe(new DeviceTimeline({ ...dev, site: noFrames }, noFrames).colorHex(0));
    expect(colours).not.toContain(d.siteColor(0));
  });
});
