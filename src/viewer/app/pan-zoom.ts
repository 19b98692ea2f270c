/**
 * The one pan/zoom binding of the report's time charts (the category timeline, the Active Memory
 * Timeline, the Active Cached Segment Timeline): the wheel zooms time around the pointer, a drag
 * pans, a double-click resets, and a press released without moving is a click. Each chart keeps
 * its own range and drawing; this module only turns pointer input into ranges, so the three read
 * and behave alike.
 */
import { plotArea } from './canvas.js';
import type { ViewRange } from './timeline.js';

/** How far (CSS pixels) a press may move before it is a drag rather than a click. */
const CLICK_SLOP = 2;

/** The range [t0, t1] moved and narrowed to fit in [tMin, tMax], at least `minSpan` wide (or the whole when that is narrower). */
export function clampRange(t0: number, t1: number, tMin: number, tMax: number, minSpan: number): ViewRange {
  const full = tMax - tMin;
  let span = Math.min(full, Math.max(t1 - t0, minSpan));
  if (!(span > 0)) span = full;
  const start = Math.max(tMin, Math.min(t0, tMax - span));
  return { t0: start, t1: start + span };
}

/** The range `factor` times as wide, around the view's middle. */
export function zoomedRange(view: ViewRange, factor: number): [number, number] {
  const mid = (view.t0 + view.t1) / 2;
  const half = ((view.t1 - view.t0) * factor) / 2;
  return [mid - half, mid + half];
}

/** The range `factor` times as wide, keeping `anchor` where it is on screen. */
export function zoomedAround(view: ViewRange, anchor: number, factor: number): [number, number] {
  return [anchor - (anchor - view.t0) * factor, anchor + (view.t1 - anchor) * factor];
}

/** The zoom factor of one wheel event: a notch of a mouse wheel (deltaY 100) zooms out by e^0.2, bounded for touchpads' bursts. */
export function wheelFactor(deltaY: number): number {
  return Math.exp(Math.max(-5, Math.min(5, deltaY * 0.002)));
}

/** The time under the pointer's x, clamped to the view. */
export function timeAtPointer(c: HTMLCanvasElement, view: ViewRange, clientX: number): number {
  const rect = c.getBoundingClientRect();
  const dpr = window.devicePixelRatio || 1;
  const p = plotArea(c);
  const frac = ((clientX - rect.left) * dpr - p.x) / p.w;
  return view.t0 + Math.max(0, Math.min(1, frac)) * (view.t1 - view.t0);
}

/** What a chart gives the binding. */
export interface PanZoomChart {
  /** The visible time range. */
  view(): ViewRange;
  /** Shows [t0, t1] (the chart clamps it) and schedules a redraw. */
  setRange(t0: number, t1: number): void;
  /** Back to the whole run (double-click). */
  reset(): void;
  /** The pointer moved over the chart while no drag was under way. */
  hover(e: MouseEvent): void;
  /** The pointer left the chart. */
  leave(): void;
  /** A press released on the chart without dragging. */
  click?(e: MouseEvent): void;
  /** Shift+wheel, when the chart zooms another axis with it (else shift+wheel zooms time). */
  shiftWheel?(e: WheelEvent, factor: number): void;
}

/**
 * Binds wheel, drag, click and double-click on `canvas` to `chart`. Returns what the chart calls
 * after each redraw: hover again where the pointer rests, since a zoom or a pan moves what is under
 * it without the pointer moving (the tooltip would describe what was there before). The hover runs
 * in a task of its own, after the frame is shown, so a zoom's frames do not wait for it.
 */
export function bindPanZoom(canvas: HTMLCanvasElement, chart: PanZoomChart): () => void {
  let drag: { x: number; range: ViewRange; moved: boolean } | null = null;
  /** The pointer's last event over the canvas; null once it has left. */
  let pointer: MouseEvent | null = null;
  canvas.addEventListener(
    'wheel',
    (e) => {
      e.preventDefault();
      pointer = e;
      const factor = wheelFactor(e.deltaY);
      if (e.shiftKey && chart.shiftWheel) {
        chart.shiftWheel(e, factor);
        return;
      }
      const view = chart.view();
      const [t0, t1] = zoomedAround(view, timeAtPointer(canvas, view, e.clientX), factor);
      chart.setRange(t0, t1);
    },
    { passive: false },
  );
  canvas.addEventListener('mousedown', (e) => {
    drag = { x: e.clientX, range: { ...chart.view() }, moved: false };
    canvas.classList.add('dragging');
  });
  window.addEventListener('mouseup', (e) => {
    const ended = drag;
    drag = null;
    canvas.classList.remove('dragging');
    if (ended && !ended.moved && e.target === canvas) chart.click?.(e);
  });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    if (Math.abs(e.clientX - drag.x) > CLICK_SLOP) drag.moved = true;
    if (!drag.moved) return;
    const dpr = window.devicePixelRatio || 1;
    const dt = (((e.clientX - drag.x) * dpr) / plotArea(canvas).w) * (drag.range.t1 - drag.range.t0);
    chart.setRange(drag.range.t0 - dt, drag.range.t1 - dt);
  });
  canvas.addEventListener('mousemove', (e) => {
    pointer = e;
    if (!drag?.moved) chart.hover(e);
  });
  canvas.addEventListener('mouseleave', () => {
    pointer = null;
    chart.leave();
  });
  canvas.addEventListener('dblclick', () => chart.reset());
  let pending = false;
  return () => {
    if (pending || !pointer || drag?.moved) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      if (pointer && !drag?.moved) chart.hover(pointer);
    }, 0);
  };
}
