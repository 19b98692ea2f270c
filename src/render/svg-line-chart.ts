import { escapeXml } from './escape.js';

/**
 * A dependency-free SVG line chart: a few series over a shared x axis, plus
 * labelled vertical marker lines. The output is a standalone, well-formed SVG
 * document (usable as a file or inlined into HTML); every caller-supplied
 * string is escaped.
 */

export interface LineSeries {
  readonly label: string;
  /** y values; x is the index unless `x` is given (same length, ascending). */
  readonly values: readonly number[];
  readonly x?: readonly number[];
  /** Any CSS colour; defaults to a palette entry by series position. */
  readonly color?: string;
  /** SVG stroke-dasharray, e.g. '6 4', so a series lying exactly on another stays visible. */
  readonly dash?: string;
  readonly strokeWidth?: number;
  readonly opacity?: number;
  /** Drawing order (higher is drawn later, on top); defaults to the series' position. The legend keeps series order. */
  readonly z?: number;
}

export interface ChartMarker {
  /** Position on the x axis (same scale as the series' x). */
  readonly x: number;
  /** Text written beside the line. */
  readonly label: string;
  /** Legend entry this marker belongs to (one entry per distinct group); defaults to `label`. */
  readonly group?: string;
  readonly color?: string;
  readonly dash?: string;
}

export interface LineChartOptions {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly LineSeries[];
  readonly markers?: readonly ChartMarker[];
  readonly width?: number;
  readonly height?: number;
  /** Start the y axis at 0 instead of fitting it tightly to the data. */
  readonly yFromZero?: boolean;
  readonly formatY?: (value: number) => string;
  readonly formatX?: (value: number) => string;
  /**
   * Prefix for ids inside the SVG (its clip path). Give each chart a distinct
   * one when several are inlined into one HTML page: ids share the page's namespace.
   */
  readonly id?: string;
  /** Longer text for <desc> (accessibility, and what a reader of the raw file sees). */
  readonly description?: string;
}

/** matplotlib's default cycle, so charts look like the PyTorch plots they mirror. */
export const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];

const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

/** A "nice" step (1, 2 or 5 × 10^k) giving about `target` intervals over `span`. */
export function niceStep(span: number, target: number): number {
  if (!(span > 0) || !Number.isFinite(span)) return 1;
  const raw = span / Math.max(1, target);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const residual = raw / magnitude;
  const factor = residual > 5 ? 10 : residual > 2 ? 5 : residual > 1 ? 2 : 1;
  return factor * magnitude;
}

/** Tick values covering [min, max] at a nice step; the domain is widened to whole steps. */
export function niceTicks(min: number, max: number, target: number, integer = false): { ticks: number[]; min: number; max: number } {
  let lo = min;
  let hi = max;
  if (hi === lo) {
    // A flat series still needs a visible band around it.
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  let step = niceStep(hi - lo, target);
  if (integer) step = Math.max(1, Math.round(step));
  const start = Math.floor(lo / step + 1e-9) * step;
  const end = Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  // Computing each tick from its index avoids accumulating float error.
  const count = Math.round((end - start) / step);
  for (let i = 0; i <= count; i++) ticks.push(start + i * step);
  return { ticks, min: start, max: end };
}

function defaultFormat(step: number): (v: number) => string {
  const decimals = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step) - 1e-9));
  return (v) => (Math.abs(v) < step / 1e6 ? 0 : v).toFixed(decimals);
}

function num(v: number): string {
  // One decimal is below a pixel's resolution at any zoom a reader uses.
  return (Math.round(v * 10) / 10).toString();
}

/**
 * Keeps a line's shape when it has far more points than pixels: per pixel
 * column, the first, minimum, maximum and last point (in x order). Peaks are
 * never lost, which matters for a memory trace.
 */
export function decimate(xs: readonly number[], ys: readonly number[], toPixel: (x: number) => number, columns: number): number[] {
  const n = ys.length;
  if (n <= columns * 4) return Array.from({ length: n }, (_, i) => i);
  const keep: number[] = [];
  let i = 0;
  while (i < n) {
    const column = Math.floor(toPixel(xs[i]!));
    const first = i;
    let minI = i;
    let maxI = i;
    let last = i;
    i++;
    while (i < n && Math.floor(toPixel(xs[i]!)) === column) {
      if (ys[i]! < ys[minI]!) minI = i;
      if (ys[i]! > ys[maxI]!) maxI = i;
      last = i;
      i++;
    }
    for (const k of [...new Set([first, minI, maxI, last])].sort((a, b) => a - b)) keep.push(k);
  }
  return keep;
}

export function renderLineChart(options: LineChartOptions): string {
  const width = options.width ?? 960;
  const height = options.height ?? 440;
  const series = options.series;
  const markers = options.markers ?? [];

  const xsOf = (s: LineSeries): readonly number[] => s.x ?? s.values.map((_, i) => i);
  let xMin = Infinity;
  let xMax = -Infinity;
  let yMin = Infinity;
  let yMax = -Infinity;
  for (const s of series) {
    const xs = xsOf(s);
    for (let i = 0; i < s.values.length; i++) {
      const y = s.values[i]!;
      if (!Number.isFinite(y)) continue;
      if (y < yMin) yMin = y;
      if (y > yMax) yMax = y;
      if (xs[i]! < xMin) xMin = xs[i]!;
      if (xs[i]! > xMax) xMax = xs[i]!;
    }
  }
  for (const m of markers) {
    if (m.x < xMin) xMin = m.x;
    if (m.x > xMax) xMax = m.x;
  }
  const empty = !Number.isFinite(yMin);
  if (empty) {
    yMin = 0;
    yMax = 1;
  }
  if (!Number.isFinite(xMin)) {
    xMin = 0;
    xMax = 1;
  }
  if (options.yFromZero && yMin > 0) yMin = 0;

  // Legend rows come first so the plot area can start below them.
  const legendItems: { label: string; color: string; dash?: string; width: number; opacity?: number }[] = series.map((s, i) => ({
    label: s.label,
    color: s.color ?? PALETTE[i % PALETTE.length]!,
    dash: s.dash,
    width: s.strokeWidth ?? 2,
    opacity: s.opacity,
  }));
  const seenGroups = new Set<string>();
  for (const m of markers) {
    const group = m.group ?? m.label;
    if (seenGroups.has(group)) continue;
    seenGroups.add(group);
    legendItems.push({ label: group, color: m.color ?? '#000', dash: m.dash, width: 1.5 });
  }
  // Approximate text width (no font metrics without a browser): 7 px per character at 12 px.
  const itemWidth = (label: string): number => 28 + label.length * 7 + 18;
  const left = 84;
  const right = 24;
  const legendRows: (typeof legendItems)[] = [[]];
  let rowWidth = 0;
  for (const item of legendItems) {
    const w = itemWidth(item.label);
    if (rowWidth + w > width - left - right && legendRows[legendRows.length - 1]!.length > 0) {
      legendRows.push([]);
      rowWidth = 0;
    }
    legendRows[legendRows.length - 1]!.push(item);
    rowWidth += w;
  }
  const top = 48 + legendRows.length * 20 + 8;
  const bottom = 56;
  const plotW = Math.max(10, width - left - right);
  const plotH = Math.max(10, height - top - bottom);

  const xTicks = niceTicks(xMin, xMax, Math.max(2, Math.floor(plotW / 90)), true);
  const yTicks = niceTicks(yMin, yMax, Math.max(2, Math.floor(plotH / 50)));
  const xPx = (x: number): number => left + ((x - xTicks.min) / (xTicks.max - xTicks.min)) * plotW;
  const yPx = (y: number): number => top + plotH - ((y - yTicks.min) / (yTicks.max - yTicks.min)) * plotH;
  const fmtY = options.formatY ?? defaultFormat(yTicks.ticks.length > 1 ? yTicks.ticks[1]! - yTicks.ticks[0]! : 1);
  const fmtX = options.formatX ?? defaultFormat(1);

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${escapeXml(options.title)}">`,
  );
  out.push(`<title>${escapeXml(options.title)}</title>`);
  if (options.description) out.push(`<desc>${escapeXml(options.description)}</desc>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${width / 2}" y="28" text-anchor="middle" font-size="17" font-weight="600" ${FONT} fill="#111">${escapeXml(options.title)}</text>`);

  // Legend.
  legendRows.forEach((row, r) => {
    let x = left;
    const y = 48 + r * 20;
    for (const item of row) {
      const dash = item.dash ? ` stroke-dasharray="${escapeXml(item.dash)}"` : '';
      out.push(
        `<g class="legend-item"><line x1="${x}" y1="${y}" x2="${x + 22}" y2="${y}" stroke="${escapeXml(item.color)}" stroke-width="${item.width + 0.5}"${item.opacity !== undefined ? ` stroke-opacity="${item.opacity}"` : ''}${dash}/>` +
          `<text x="${x + 28}" y="${y + 4}" font-size="12" ${FONT} fill="#222">${escapeXml(item.label)}</text></g>`,
      );
      x += itemWidth(item.label);
    }
  });

  // Grid and ticks.
  out.push(`<g class="grid" stroke="#e6e6e6" stroke-width="1">`);
  for (const t of yTicks.ticks) out.push(`<line x1="${left}" y1="${num(yPx(t))}" x2="${left + plotW}" y2="${num(yPx(t))}"/>`);
  for (const t of xTicks.ticks) out.push(`<line x1="${num(xPx(t))}" y1="${top}" x2="${num(xPx(t))}" y2="${top + plotH}"/>`);
  out.push(`</g>`);
  out.push(`<g class="y-ticks" font-size="12" ${FONT} fill="#333" text-anchor="end">`);
  for (const t of yTicks.ticks) out.push(`<text x="${left - 8}" y="${num(yPx(t) + 4)}">${escapeXml(fmtY(t))}</text>`);
  out.push(`</g>`);
  out.push(`<g class="x-ticks" font-size="12" ${FONT} fill="#333" text-anchor="middle">`);
  for (const t of xTicks.ticks) out.push(`<text x="${num(xPx(t))}" y="${top + plotH + 18}">${escapeXml(fmtX(t))}</text>`);
  out.push(`</g>`);
  out.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#555" stroke-width="1"/>`);
  out.push(`<text x="${left + plotW / 2}" y="${height - 12}" text-anchor="middle" font-size="13" ${FONT} fill="#111">${escapeXml(options.xLabel)}</text>`);
  out.push(
    `<text transform="translate(18 ${top + plotH / 2}) rotate(-90)" text-anchor="middle" font-size="13" ${FONT} fill="#111">${escapeXml(options.yLabel)}</text>`,
  );

  // Series, clipped to the plot area.
  const clipId = `${(options.id ?? 'chart').replace(/[^A-Za-z0-9_-]/g, '_')}-plot-area`;
  out.push(`<clipPath id="${clipId}"><rect x="${left}" y="${top}" width="${plotW}" height="${plotH}"/></clipPath>`);
  const drawOrder = series.map((s, i) => ({ s, i })).sort((a, b) => (a.s.z ?? a.i) - (b.s.z ?? b.i));
  for (const { s, i } of drawOrder) {
    const xs = xsOf(s);
    const color = s.color ?? PALETTE[i % PALETTE.length]!;
    const keep = decimate(xs, s.values, xPx, Math.ceil(plotW));
    const parts: string[] = [];
    let pen = 'M';
    for (const k of keep) {
      const y = s.values[k]!;
      if (!Number.isFinite(y)) {
        pen = 'M';
        continue;
      }
      parts.push(`${pen}${num(xPx(xs[k]!))} ${num(yPx(y))}`);
      pen = 'L';
    }
    // A one-point series would draw nothing as a path; show it as a dot.
    const dash = s.dash ? ` stroke-dasharray="${escapeXml(s.dash)}"` : '';
    out.push(
      `<g class="series" data-label="${escapeXml(s.label)}" clip-path="url(#${clipId})"><title>${escapeXml(s.label)}</title>` +
        (keep.length === 1
          ? `<circle cx="${num(xPx(xs[keep[0]!]!))}" cy="${num(yPx(s.values[keep[0]!]!))}" r="3" fill="${escapeXml(color)}"/>`
          : `<path d="${parts.join(' ')}" fill="none" stroke="${escapeXml(color)}" stroke-width="${s.strokeWidth ?? 2}"${s.opacity !== undefined ? ` stroke-opacity="${s.opacity}"` : ''} stroke-linejoin="round"${dash}/>`) +
        `</g>`,
    );
  }

  // Markers: full-height vertical lines; labels written along the line, skipped
  // when they would overprint the previous label (the <title> still names it).
  let lastLabelPx = -Infinity;
  const sorted = [...markers].sort((a, b) => a.x - b.x);
  for (const m of sorted) {
    const x = num(xPx(m.x));
    const color = escapeXml(m.color ?? '#000');
    const dash = m.dash ? ` stroke-dasharray="${escapeXml(m.dash)}"` : '';
    const px = xPx(m.x);
    const showLabel = px - lastLabelPx >= 14;
    if (showLabel) lastLabelPx = px;
    out.push(
      `<g class="marker" data-label="${escapeXml(m.label)}" data-x="${m.x}"><title>${escapeXml(`${m.label} at x = ${m.x}`)}</title>` +
        `<line x1="${x}" y1="${top}" x2="${x}" y2="${top + plotH}" stroke="${color}" stroke-width="1.5"${dash}/>` +
        (showLabel
          ? `<text transform="translate(${num(px + 6)} ${top + 6}) rotate(90)" font-size="11" ${FONT} fill="${color}">${escapeXml(m.label)}</text>`
          : '') +
        `</g>`,
    );
  }
  if (empty) {
    out.push(`<text x="${left + plotW / 2}" y="${top + plotH / 2}" text-anchor="middle" font-size="14" ${FONT} fill="#777">no data</text>`);
  }
  out.push(`</svg>`);
  return out.join('\n');
}
