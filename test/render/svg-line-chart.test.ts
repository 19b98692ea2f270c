import { describe, expect, it } from 'vitest';
import { escapeXml } from '../../src/render/escape.js';
import { decimate, niceTicks, renderLineChart } from '../../src/render/svg-line-chart.js';
import { allElements, parseXml } from '../support/xml-wellformed.js';

describe('escapeXml', () => {
  it('escapes markup characters and replaces characters XML cannot carry', () => {
    expect(escapeXml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(escapeXml('bell\u0007 nul\u0000 lone\uD800 pair\uD83D\uDE00')).toBe('bell\uFFFD nul\uFFFD lone\uFFFD pair\uD83D\uDE00');
  });
});

describe('niceTicks', () => {
  it('covers the range with 1/2/5 steps', () => {
    expect(niceTicks(0.013, 0.0371, 5).ticks).toEqual([0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04]);
    expect(niceTicks(0, 137, 8, true).ticks).toEqual([0, 20, 40, 60, 80, 100, 120, 140]);
    expect(niceTicks(0, 3, 10, true).ticks).toEqual([0, 1, 2, 3]);
    // A flat series still gets a band.
    const flat = niceTicks(5, 5, 4);
    expect(flat.min).toBeLessThan(5);
    expect(flat.max).toBeGreaterThan(5);
  });
});

describe('decimate', () => {
  it('keeps every point when there are few, and the extremes of each pixel column when there are many', () => {
    expect(decimate([0, 1, 2], [1, 2, 3], (x) => x, 100)).toEqual([0, 1, 2]);
    const n = 10_000;
    const xs = Array.from({ length: n }, (_, i) => i);
    const ys = xs.map((i) => (i === 4321 ? 1000 : i === 777 ? -50 : i % 7));
    const kept = decimate(xs, ys, (x) => (x / n) * 100, 100);
    expect(kept.length).toBeLessThanOrEqual(400);
    expect(kept).toContain(4321);
    expect(kept).toContain(777);
    expect(kept[0]).toBe(0);
    expect(kept[kept.length - 1]).toBe(n - 1);
  });
});

describe('renderLineChart', () => {
  it('produces well-formed SVG with every series, marker, legend entry and escaped text', () => {
    const svg = renderLineChart({
      id: 'c1',
      title: 'Memory <of> "model" & co',
      xLabel: '# Operator Calls',
      yLabel: 'Memory (MiB)',
      series: [
        { label: 'allocated_memory', values: [1, 2, 3, 2] },
        { label: 'a<b', values: [0.5, 0.5, 4, 1], dash: '4 2' },
      ],
      markers: [
        { x: 0, label: 'fw_start (step 0)', group: 'fw_start' },
        { x: 2, label: 'fw_bw</text>', group: 'fw_bw_boundary', color: '#d62728' },
      ],
    });
    const root = parseXml(svg);
    expect(root.name).toBe('svg');
    expect(root.attrs.xmlns).toBe('http://www.w3.org/2000/svg');
    const els = allElements(root);
    expect(els.filter((e) => e.attrs.class === 'series').map((e) => e.attrs['data-label'])).toEqual(['allocated_memory', 'a<b']);
    expect(els.filter((e) => e.attrs.class === 'marker').map((e) => [e.attrs['data-label'], e.attrs['data-x']])).toEqual([
      ['fw_start (step 0)', '0'],
      ['fw_bw</text>', '2'],
    ]);
    expect(els.filter((e) => e.attrs.class === 'legend-item').map((e) => allElements(e).find((c) => c.name === 'text')!.text)).toEqual([
      'allocated_memory',
      'a<b',
      'fw_start',
      'fw_bw_boundary',
    ]);
    expect(els.find((e) => e.name === 'title')!.text).toBe('Memory <of> "model" & co');
    // y tick labels are readable numbers covering the data.
    const yTicks = els.find((e) => e.attrs.class === 'y-ticks')!.children.map((c) => Number(c.text));
    expect(Math.min(...yTicks)).toBeLessThanOrEqual(0.5);
    expect(Math.max(...yTicks)).toBeGreaterThanOrEqual(4);
    expect(yTicks.every(Number.isFinite)).toBe(true);
  });

  it('draws an empty chart as "no data" and a single point as a dot', () => {
    const empty = parseXml(renderLineChart({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ label: 's', values: [] }] }));
    expect(allElements(empty).some((e) => e.text === 'no data')).toBe(true);
    const one = parseXml(renderLineChart({ title: 't', xLabel: 'x', yLabel: 'y', series: [{ label: 's', values: [3] }] }));
    expect(allElements(one).some((e) => e.name === 'circle')).toBe(true);
  });
});
