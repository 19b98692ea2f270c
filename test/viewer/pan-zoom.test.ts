import { describe, it, expect } from 'vitest';
import { clampRange, wheelFactor, zoomedAround, zoomedRange } from '../../src/viewer/app/pan-zoom.js';

describe('pan/zoom ranges shared by the time charts', () => {
  it('clamps a range into the run, at least the minimum span and at most the whole', () => {
    expect(clampRange(10, 20, 0, 100, 4)).toEqual({ t0: 10, t1: 20 });
    // Panned past either end: moved back inside, width kept.
    expect(clampRange(-5, 5, 0, 100, 4)).toEqual({ t0: 0, t1: 10 });
    expect(clampRange(95, 105, 0, 100, 4)).toEqual({ t0: 90, t1: 100 });
    // Zoomed in past the minimum span: widened to it.
    expect(clampRange(50, 51, 0, 100, 4)).toEqual({ t0: 50, t1: 54 });
    // Zoomed out past the whole: the whole.
    expect(clampRange(-1000, 1000, 0, 100, 4)).toEqual({ t0: 0, t1: 100 });
    // A run of one instant stays that instant.
    expect(clampRange(3, 9, 7, 7, 4)).toEqual({ t0: 7, t1: 7 });
  });

  it('zooms around the pointer keeping the time under it in place, and around the middle for buttons', () => {
    const [t0, t1] = zoomedAround({ t0: 0, t1: 100 }, 80, 0.5);
    expect([t0, t1]).toEqual([40, 90]);
    // The anchor sits at the same fraction of the view before and after.
    expect((80 - t0) / (t1 - t0)).toBeCloseTo(0.8, 12);
    expect(zoomedRange({ t0: 0, t1: 100 }, 2)).toEqual([-50, 150]);
  });

  it('turns wheel deltas into zoom factors: down zooms out, up zooms in, bursts bounded', () => {
    expect(wheelFactor(100)).toBeCloseTo(Math.exp(0.2), 12);
    expect(wheelFactor(-100)).toBeCloseTo(Math.exp(-0.2), 12);
    expect(wheelFactor(0)).toBe(1);
    expect(wheelFactor(1e6)).toBeCloseTo(Math.exp(5), 9);
    expect(wheelFactor(-1e6)).toBeCloseTo(Math.exp(-5), 9);
  });
});
