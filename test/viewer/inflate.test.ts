// The report page's synchronous raw inflater against zlib's deflater: every block type and
// strategy zlib writes, and damaged streams refused with InflateError (never another error or a hang).
import { describe, it, expect } from 'vitest';
import { constants, deflateRawSync } from 'node:zlib';
import { InflateError, inflateRaw } from '../../src/viewer/inflate.js';

/** Deterministic bytes: `kind` picks how compressible they are. */
function sample(n: number, seed: number, kind: 'random' | 'text' | 'varints'): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  const next = (): number => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) >>> 8) & 0xff;
  const words = ['tensor', 'alloc', 'free', 'segment', 'stream', 'python', ':', ' ', '\n', 'torch/nn/modules/linear.py'];
  for (let i = 0; i < n; ) {
    if (kind === 'random') out[i++] = next();
    else if (kind === 'text') {
      for (const c of words[next() % words.length]!) if (i < n) out[i++] = c.charCodeAt(0);
    } else {
      // Small deltas as zigzag varints, as the report's columns are written.
      const v = next() % 200;
      out[i++] = v < 128 ? v : (v & 127) | 128;
      if (v >= 128 && i < n) out[i++] = 1;
    }
  }
  return out;
}

describe('inflateRaw', () => {
  it('inflates what zlib deflates, at every level and strategy', () => {
    const strategies = [constants.Z_DEFAULT_STRATEGY, constants.Z_FIXED, constants.Z_HUFFMAN_ONLY, constants.Z_RLE, constants.Z_FILTERED];
    let cases = 0;
    for (const kind of ['random', 'text', 'varints'] as const) {
      for (const n of [0, 1, 100, 70_000, 300_000]) {
        const data = sample(n, n + kind.length, kind);
        for (const level of [0, 1, 6, 9]) {
          for (const strategy of strategies) {
            const deflated = deflateRawSync(data, { level, strategy });
            expect(Buffer.from(inflateRaw(deflated, n)).equals(Buffer.from(data)), `${kind} ${n} level ${level} strategy ${strategy}`).toBe(true);
            cases++;
          }
        }
      }
    }
    expect(cases).toBe(3 * 5 * 4 * 5);
  });

  it('refuses a stream that ends early, holds more or fewer bytes than said, or is damaged, with InflateError', () => {
    const data = sample(50_000, 7, 'text');
    const deflated = deflateRawSync(data, { level: 6 });
    expect(() => inflateRaw(deflated.subarray(0, deflated.length - 20), data.length)).toThrow(InflateError);
    expect(() => inflateRaw(deflated, data.length - 1)).toThrow(/holds more than 49999 bytes/);
    expect(() => inflateRaw(deflated, data.length + 1)).toThrow(/holds 50000 bytes, not 50001/);
    expect(() => inflateRaw(new Uint8Array([0xff, 0xff, 0xff]), 10)).toThrow(InflateError);
    expect(() => inflateRaw(new Uint8Array(0), 10)).toThrow(InflateError);
    // Bytes changed anywhere: a wrong result is caught by the length or by the caller's own checks,
    // but nothing other than InflateError is ever thrown, and every call returns.
    let refused = 0;
    let x = 12345;
    for (let k = 0; k < 400; k++) {
      const bad = Uint8Array.from(deflated);
      for (let j = 0; j < 1 + (k % 4); j++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        bad[x % bad.length] ^= 1 + ((x >>> 16) % 255);
      }
      try {
        inflateRaw(bad, data.length);
      } catch (err) {
        expect(err).toBeInstanceOf(InflateError);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(300);
  });
});
