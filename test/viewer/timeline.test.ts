import { describe, it, expect } from 'vitest';
import { TimelineModel, axisBytes, formatTick, niceBytesStep, timeStep, wholeNumber } from '../../src/viewer/app/timeline.js';
import type { ReportData } from '../../src/viewer/report-data.js';

/** A random alloc/free stream over 3 series; times strictly increasing in whole microseconds. */
function randomData(n: number, seed: number): ReportData {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const dt: number[] = [];
  const series: number[] = [];
  const bytes: number[] = [];
  const live = [0, 0, 0];
  for (let i = 0; i < n; i++) {
    dt.push(1 + Math.floor(rand() * 50));
    const s = Math.floor(rand() * 3);
    const b = rand() < 0.55 || live[s] < 1000 ? Math.floor(rand() * 1000) : -Math.floor(rand() * live[s]);
    live[s] += b;
    series.push(s);
    bytes.push(b);
  }
  return {
    series: [{ device: 'cpu', category: 'A' }, { device: 'cpu', category: 'B' }, { device: 'cpu', category: 'C' }],
    timeline: { dt, series, bytes },
    steps: [],
  } as unknown as ReportData;
}

/** The definition, event by event: per column the state at its highest total, empty columns carry the state. */
function naive(m: TimelineModel, t0: number, t1: number, cols: number): Float64Array {
  const S = m.nSeries;
  const out = new Float64Array(cols * S);
  const live = new Float64Array(S);
  let i = 0;
  for (; i < m.n && m.time[i] < t0; i++) live[m.series[i]] += m.bytes[i];
  for (let c = 0; c < cols; c++) {
    const end = t0 + ((c + 1) / cols) * (t1 - t0);
    let best = live.reduce((a, b) => a + b, 0);
    out.set(live, c * S);
    for (; i < m.n && m.time[i] <= t1 && (Math.floor(((m.time[i] - t0) / (t1 - t0)) * cols) <= c || c === cols - 1); i++) {
      live[m.series[i]] += m.bytes[i];
      const total = live.reduce((a, b) => a + b, 0);
      if (total > best) {
        best = total;
        out.set(live, c * S);
      }
    }
    void end;
  }
  return out;
}

describe('timeline buckets', () => {
  it('match the event-by-event definition at every zoom (block summaries included)', () => {
    const m = new TimelineModel(randomData(20_000, 7));
    const full = m.time[m.n - 1];
    for (const [a, b, cols] of [
      [0, full, 300],
      [0, full, 7],
      [full * 0.3, full * 0.31, 200],
      [full * 0.5, full * 0.9, 1000],
      [full * 0.123, full * 0.7, 64],
    ] as const) {
      const got = m.buckets({ t0: a, t1: b }, cols).values;
      const want = naive(m, a, b, cols);
      expect(Array.from(got)).toEqual(Array.from(want));
    }
  });

  it('live state at a time equals replaying the events up to it', () => {
    const m = new TimelineModel(randomData(5_000, 3));
    const t = m.time[3210];
    const want = [0, 0, 0];
    for (let i = 0; i <= 3210; i++) want[m.series[i]] += m.bytes[i];
    expect(Array.from(m.liveAt(t))).toEqual(want);
  });
});

describe('axis ticks', () => {
  it('byte steps are 1, 2 or 5 × 1024^k below 1000 of a unit, then the next unit', () => {
    expect(niceBytesStep(900 * 1024)).toBe(1024 ** 2);
    expect(niceBytesStep(1000)).toBe(1024);
    expect(niceBytesStep(3 * 1024 ** 3)).toBe(5 * 1024 ** 3);
    expect(niceBytesStep(150 * 1024 ** 2)).toBe(200 * 1024 ** 2);
    expect(axisBytes(1024 ** 2)).toBe('1 MiB');
    expect(axisBytes(1.5 * 1024 ** 3)).toBe('1.5 GiB');
    expect(axisBytes(512 * 1024)).toBe('512 KiB');
    expect(axisBytes(0)).toBe('0 B');
    // A tick of a step smaller than its value's unit is stated exactly in the step's unit.
    expect(axisBytes(7400 * 1024 ** 2)).toBe('7,400 MiB');
    expect(axisBytes(8 * 1024 ** 3)).toBe('8 GiB');
    expect(axisBytes(1500 * 1024)).toBe('1,500 KiB');
    expect(axisBytes(1000)).toBe('1,000 B');
  });

  it('time ticks differ from their neighbours at every zoom, down to one microsecond or one event', () => {
    for (const [t0, span] of [[0, 400], [155, 0.01], [155.0012, 0.004], [12_345, 3], [0, 9e6]] as const) {
      const step = timeStep(span, 6, 'ms');
      const labels: string[] = [];
      for (let k = Math.ceil(t0 / step); k * step <= t0 + span; k++) labels.push(formatTick(k * step, step, 'ms'));
      expect(labels.length).toBeGreaterThan(1);
      expect(new Set(labels).size).toBe(labels.length);
    }
    expect(timeStep(2, 6, 'event')).toBe(1);
    expect(formatTick(3, 1, 'event')).toBe('3');
  });
});

describe('counts', () => {
  it('group thousands with commas, as en-US writes whole numbers', () => {
    const counts = [0, 7, 42, 999, 1000, 1001, 12_345, 612_870, 1_000_000, 6_312_345, 2 ** 40, -5, -1234, -1_000_000];
    for (const n of counts) expect(wholeNumber(n), String(n)).toBe(n.toLocaleString('en-US'));
  });
});
