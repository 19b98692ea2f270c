// The arrays a frame works in (src/viewer/app/frame-scratch.ts): kept between frames, made at
// their longest once a use asks for something, and never made long for a use that asks for nothing.
import { describe, it, expect } from 'vitest';
import { FrameScratch } from '../../src/viewer/app/frame-scratch.js';

describe('FrameScratch', () => {
  it('makes nothing for an empty ask, then the longest at once, then keeps it', () => {
    const s = new FrameScratch();
    const none = s.int32('list', 0, 1000);
    expect(none.length).toBe(0);
    expect(none.buffer.byteLength).toBe(0);
    const some = s.int32('list', 10, 1000);
    expect(some.length).toBe(10);
    expect(some.buffer.byteLength).toBe(4000);
    some[3] = 7;
    const more = s.int32('list', 600, 1000);
    expect(more.buffer).toBe(some.buffer);
    expect(more[3]).toBe(7);
    // Another name is another array.
    expect(s.int32('other', 10, 1000).buffer).not.toBe(some.buffer);
    // Without a longest, an array grows to what is asked.
    const f = s.float64('sums', 8);
    expect(f.buffer.byteLength).toBe(64);
    expect(s.float64('sums', 4).buffer).toBe(f.buffer);
    expect(s.float64('sums', 9).buffer.byteLength).toBe(72);
  });
});
