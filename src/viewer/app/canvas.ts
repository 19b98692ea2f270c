/** What the report's canvas views share: one redraw per animation frame, and a backing store sized to the CSS box. */

/** Calls `draw` on the next animation frame, once however many times it is asked before then. */
export class FrameScheduler {
  private pending = false;
  constructor(private readonly draw: () => void) {}
  schedule(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }
}

/** Sizes the canvas's pixels to its CSS box at the device pixel ratio; returns that ratio. */
export function fitCanvas(c: HTMLCanvasElement): number {
  const dpr = window.devicePixelRatio || 1;
  const cssW = c.clientWidth || 800;
  const cssH = c.clientHeight || 320;
  if (c.width !== Math.round(cssW * dpr) || c.height !== Math.round(cssH * dpr)) {
    c.width = Math.round(cssW * dpr);
    c.height = Math.round(cssH * dpr);
  }
  return dpr;
}

/** Index of the first of the first `n` times at or after `t` (times ascending). */
export function lowerBound(time: ArrayLike<number>, n: number, t: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (time[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A chart's plotting area in canvas pixels: margins for the byte axis on the left and the time axis below. */
export interface PlotArea {
  x: number;
  y: number;
  w: number;
  h: number;
}

export function plotArea(c: HTMLCanvasElement): PlotArea {
  const dpr = window.devicePixelRatio || 1;
  return { x: Math.round(72 * dpr), y: Math.round(10 * dpr), w: Math.max(1, c.width - Math.round(84 * dpr)), h: Math.max(1, c.height - Math.round(34 * dpr)) };
}
