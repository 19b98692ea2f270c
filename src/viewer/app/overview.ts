/**
 * The overview strip (mini-map) under a timeline: the whole run's live bytes (and reserved line)
 * in a short chart, the visible range as a window over it. Dragging the window pans, dragging
 * either edge resizes it (zooms), pressing outside it moves it there, the wheel zooms around the
 * pointer. The whole-run chart is drawn once per size and source; a range change redraws the
 * window only.
 */
import { fitCanvas } from './canvas.js';
import { wheelFactor, zoomedAround } from './pan-zoom.js';
import type { ViewRange } from './timeline.js';

export interface OverviewSource {
  /** The whole run's time range. */
  extent(): ViewRange;
  /** Per pixel column of the whole run: the highest live bytes, and reserved bytes (null: none). */
  profile(cols: number): { total: Float64Array; reserved: Float64Array | null };
  range(): ViewRange;
  setRange(t0: number, t1: number): void;
  /** Identifies what the profile shows (a device), so a change redraws it. */
  key(): string;
}

/** How close to an edge (CSS pixels) a press grabs the edge instead of the window. */
const EDGE_GRAB = 6;

export class OverviewStrip {
  private readonly ctx: CanvasRenderingContext2D;
  private cached: { key: string; w: number; h: number; image: ImageData } | null = null;
  private drag: { mode: 'move' | 'left' | 'right'; x: number; range: ViewRange } | null = null;

  constructor(
    readonly canvas: HTMLCanvasElement,
    private readonly source: OverviewSource,
  ) {
    // Its profile is pixels the app writes (putImageData), as the chart's are.
    this.ctx = canvas.getContext('2d', { willReadFrequently: true })!;
    this.bind();
  }

  /** Canvas x (device pixels) of time `t`. */
  private xOf(t: number): number {
    const e = this.source.extent();
    return ((t - e.t0) / (e.t1 - e.t0)) * this.canvas.width;
  }

  /** Time at a pointer's clientX. */
  private timeAt(clientX: number): number {
    const rect = this.canvas.getBoundingClientRect();
    const e = this.source.extent();
    const frac = Math.max(0, Math.min(1, (clientX - rect.left) / Math.max(1, rect.width)));
    return e.t0 + frac * (e.t1 - e.t0);
  }

  private bind(): void {
    const c = this.canvas;
    c.addEventListener('mousedown', (e) => {
      e.preventDefault();
      const r = this.source.range();
      const rect = c.getBoundingClientRect();
      const scale = rect.width / Math.max(1, c.width);
      const left = rect.left + this.xOf(r.t0) * scale;
      const right = rect.left + this.xOf(r.t1) * scale;
      let mode: 'move' | 'left' | 'right' = 'move';
      if (Math.abs(e.clientX - left) <= EDGE_GRAB && Math.abs(e.clientX - left) <= Math.abs(e.clientX - right)) mode = 'left';
      else if (Math.abs(e.clientX - right) <= EDGE_GRAB) mode = 'right';
      else if (e.clientX < left || e.clientX > right) {
        // Outside the window: centre it on the pointer, then drag from there.
        const span = r.t1 - r.t0;
        const t = this.timeAt(e.clientX);
        this.source.setRange(t - span / 2, t + span / 2);
      }
      this.drag = { mode, x: e.clientX, range: this.source.range() };
      c.classList.add('dragging');
    });
    window.addEventListener('mousemove', (e) => {
      const d = this.drag;
      if (!d) {
        if (e.target === c) c.style.cursor = this.edgeAt(e.clientX) ? 'ew-resize' : 'grab';
        return;
      }
      const rect = c.getBoundingClientRect();
      const ext = this.source.extent();
      const dt = ((e.clientX - d.x) / Math.max(1, rect.width)) * (ext.t1 - ext.t0);
      if (d.mode === 'move') this.source.setRange(d.range.t0 + dt, d.range.t1 + dt);
      else if (d.mode === 'left') this.source.setRange(Math.min(d.range.t0 + dt, d.range.t1 - 1e-9), d.range.t1);
      else this.source.setRange(d.range.t0, Math.max(d.range.t1 + dt, d.range.t0 + 1e-9));
    });
    window.addEventListener('mouseup', () => {
      this.drag = null;
      c.classList.remove('dragging');
    });
    c.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const r = this.source.range();
        const anchor = Math.max(r.t0, Math.min(r.t1, this.timeAt(e.clientX)));
        const [t0, t1] = zoomedAround(r, anchor, wheelFactor(e.deltaY));
        this.source.setRange(t0, t1);
      },
      { passive: false },
    );
  }

  /** Whether a pointer at `clientX` is on an edge of the window. */
  private edgeAt(clientX: number): boolean {
    const r = this.source.range();
    const rect = this.canvas.getBoundingClientRect();
    const scale = rect.width / Math.max(1, this.canvas.width);
    return Math.abs(clientX - (rect.left + this.xOf(r.t0) * scale)) <= EDGE_GRAB || Math.abs(clientX - (rect.left + this.xOf(r.t1) * scale)) <= EDGE_GRAB;
  }

  /** The whole-run chart at the canvas's size, drawn once per size and source. */
  private profileImage(): ImageData {
    const c = this.canvas;
    const key = this.source.key();
    if (this.cached && this.cached.key === key && this.cached.w === c.width && this.cached.h === c.height) return this.cached.image;
    const w = c.width;
    const h = c.height;
    const { total, reserved } = this.source.profile(w);
    let max = 1;
    for (let i = 0; i < w; i++) max = Math.max(max, total[i], reserved ? reserved[i] : 0);
    const image = this.ctx.createImageData(w, h);
    const px = new Uint32Array(image.data.buffer);
    px.fill(0xfff7f7f7);
    const fillColor = 0xffc0987a; // #7a98c0 as little-endian RGBA
    const lineColor = 0xff555555;
    const rows = h - 2;
    for (let x = 0; x < w; x++) {
      const top = h - 1 - Math.round((total[x] / max) * rows);
      for (let y = Math.max(0, top); y < h; y++) px[y * w + x] = fillColor;
      if (reserved) {
        const ry = h - 1 - Math.round((reserved[x] / max) * rows);
        if (ry >= 0 && ry < h) px[ry * w + x] = lineColor;
      }
    }
    this.cached = { key, w, h, image };
    return image;
  }

  /** Draws the whole run and the visible window. */
  draw(): void {
    const c = this.canvas;
    const dpr = fitCanvas(c);
    const ctx = this.ctx;
    ctx.putImageData(this.profileImage(), 0, 0);
    const r = this.source.range();
    const x0 = Math.max(0, Math.min(c.width, this.xOf(r.t0)));
    const x1 = Math.max(x0, Math.min(c.width, this.xOf(r.t1)));
    // Outside the window is dimmed; the window keeps at least a couple of pixels to grab.
    ctx.fillStyle = 'rgba(255,255,255,0.6)';
    ctx.fillRect(0, 0, x0, c.height);
    ctx.fillRect(x1, 0, c.width - x1, c.height);
    const left = Math.min(x0, c.width - 2 * dpr);
    const width = Math.max(x1 - x0, 2 * dpr);
    ctx.strokeStyle = '#1f4e8c';
    ctx.lineWidth = 2 * dpr;
    ctx.strokeRect(left + dpr, dpr, width - 2 * dpr, c.height - 2 * dpr);
    c.dataset.window = `${(x0 / c.width).toFixed(6)},${(x1 / c.width).toFixed(6)}`;
  }
}
