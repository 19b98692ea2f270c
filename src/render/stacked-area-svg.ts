/**
 * A stacked-area SVG chart of memory over time (PyTorch's
 * export_memory_timeline_html figure): bands stacked bottom-up, a byte axis
 * in the binary unit that fits the peak, and a legend. Every caller-supplied
 * string is escaped.
 */
import type { Unit } from '../core/units.js';
import { escapeXml } from './escape.js';
import { niceStep } from './svg-line-chart.js';

const UNIT_BYTES: [Unit, number][] = [
  ['GiB', 1024 ** 3],
  ['MiB', 1024 ** 2],
  ['KiB', 1024],
  ['B', 1],
];

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(Math.min(6, Math.max(0, -Math.floor(Math.log10(Math.abs(n) || 1)) + 2))).replace(/\.?0+$/, '');
}

/** Bands stacked bottom-up in the order given, over shared sample times. */
export interface StackedAreaData {
  /** Sample times in microseconds, ascending; drawn as milliseconds from the first. */
  readonly times: readonly number[];
  /** `values[i][k]`: bytes of band `k` at `times[i]`. */
  readonly values: readonly (readonly number[])[];
  readonly bands: readonly { readonly label: string; readonly color: string }[];
}

/** The chart: one filled band each, stacked in the given order, time (ms) across, memory up, legend at the right. */
export function renderStackedAreaSvg(data: StackedAreaData, titleLines: readonly string[], width: number, height: number): string {
  const left = 90;
  const right = 190;
  const top = 24 + 20 * titleLines.length;
  const bottom = 56;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const t0 = Math.min(...data.times);
  const xs = data.times.map((t) => (t - t0) / 1e3); // ms
  // cumulative[j][k] is the bottom edge of band k at sample j, cumulative[j][k + 1] its top.
  const cumulative = data.values.map((row) => {
    const acc: number[] = [0];
    let sum = 0;
    for (const v of row) acc.push((sum += v));
    return acc;
  });
  const maxBytes = Math.max(1, ...cumulative.map((c) => c[c.length - 1]!));
  const [unit, divisor] = UNIT_BYTES.find(([, d]) => maxBytes >= d) ?? UNIT_BYTES[UNIT_BYTES.length - 1]!;
  const yMax = maxBytes / divisor;
  const xMax = Math.max(xs[xs.length - 1]!, 1e-3);
  const px = (x: number) => left + (x / xMax) * plotW;
  const py = (y: number) => top + plotH - (y / divisor / yMax) * plotH;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img">`);
  titleLines.forEach((line, i) => {
    parts.push(`<text x="${left + plotW / 2}" y="${20 + 20 * i}" text-anchor="middle" font-size="15">${escapeXml(line)}</text>`);
  });
  data.bands.forEach((c, i) => {
    const upper = xs.map((x, j) => `${px(x).toFixed(2)},${py(cumulative[j]![i + 1]!).toFixed(2)}`);
    const lower = xs.map((x, j) => `${px(x).toFixed(2)},${py(cumulative[j]![i]!).toFixed(2)}`).reverse();
    // A single sample would draw nothing; widen it to a sliver so it shows.
    if (xs.length === 1) {
      upper.push(`${(px(xs[0]!) + 2).toFixed(2)},${py(cumulative[0]![i + 1]!).toFixed(2)}`);
      lower.unshift(`${(px(xs[0]!) + 2).toFixed(2)},${py(cumulative[0]![i]!).toFixed(2)}`);
    }
    parts.push(
      `<polygon points="${[...upper, ...lower].join(' ')}" fill="${escapeXml(c.color)}" fill-opacity="0.7" stroke="none"><title>${escapeXml(c.label)}</title></polygon>`,
    );
  });
  // Axes and ticks.
  parts.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  const yStep = niceStep(yMax, 6);
  for (let y = 0; y <= yMax + 1e-9; y += yStep) {
    const yy = py(y * divisor).toFixed(2);
    parts.push(`<line x1="${left - 5}" y1="${yy}" x2="${left}" y2="${yy}" stroke="#333"/>`);
    parts.push(`<text x="${left - 8}" y="${yy}" text-anchor="end" dominant-baseline="middle" font-size="12">${escapeXml(fmt(y))}</text>`);
  }
  const xStep = niceStep(xMax, 8);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    const xx = px(x).toFixed(2);
    parts.push(`<line x1="${xx}" y1="${top + plotH}" x2="${xx}" y2="${top + plotH + 5}" stroke="#333"/>`);
    parts.push(`<text x="${xx}" y="${top + plotH + 20}" text-anchor="middle" font-size="12">${escapeXml(fmt(x))}</text>`);
  }
  parts.push(`<text x="${left + plotW / 2}" y="${height - 12}" text-anchor="middle" font-size="13">Time (ms)</text>`);
  parts.push(
    `<text x="18" y="${top + plotH / 2}" text-anchor="middle" font-size="13" transform="rotate(-90 18 ${top + plotH / 2})">${escapeXml(`Memory (${unit})`)}</text>`,
  );
  // Legend, in the stacking order.
  data.bands.forEach((c, i) => {
    const y = top + 10 + i * 22;
    parts.push(`<rect x="${left + plotW + 16}" y="${y}" width="14" height="14" fill="${escapeXml(c.color)}" fill-opacity="0.7"/>`);
    parts.push(`<text x="${left + plotW + 36}" y="${y + 11}" font-size="12">${escapeXml(c.label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}
