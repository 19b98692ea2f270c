import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MemscopeError } from '../../src/core/errors.js';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { readSnapshot } from '../../src/torch/index.js';
import { readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { pythonPickle } from './python.js';
import { mulberry32 } from '../support/prng.js';

const fixtures = resolve(import.meta.dirname, '../fixtures/torch');


// Bytes that are opcodes or interesting lengths, so mutations hit the machine's edge cases.
const INTERESTING = [0x00, 0x01, 0x28, 0x2e, 0x30, 0x31, 0x32, 0x4a, 0x4b, 0x52, 0x58, 0x5d, 0x61, 0x62, 0x63, 0x65, 0x68, 0x6a, 0x71, 0x72, 0x75, 0x7d, 0x7f, 0x80, 0x81, 0x85, 0x86, 0x87, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x91, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0xff];

function mutate(src: Uint8Array, r: () => number): Uint8Array {
  const pick = (n: number): number => Math.floor(r() * n);
  let b = Uint8Array.from(src);
  const edits = 1 + pick(4);
  for (let e = 0; e < edits; e++) {
    const at = pick(b.length);
    switch (pick(6)) {
      case 0: // flip bits
        b[at]! ^= 1 << pick(8);
        break;
      case 1: // plant an opcode / boundary byte
        b[at] = INTERESTING[pick(INTERESTING.length)]!;
        break;
      case 2: { // delete a range
        const n = 1 + pick(16);
        b = Uint8Array.from([...b.subarray(0, at), ...b.subarray(at + n)]);
        break;
      }
      case 3: { // duplicate a range (repeats opcodes, memo puts, marks)
        const n = 1 + pick(64);
        b = Uint8Array.from([...b.subarray(0, at + n), ...b.subarray(at, at + n), ...b.subarray(at + n)]);
        break;
      }
      case 4: // a huge length or memo index
        b.set([0xff, 0xff, 0xff, 0x7f].slice(0, Math.min(4, b.length - at)), at);
        break;
      default: // truncate
        b = b.subarray(0, at);
    }
    if (b.length === 0) break;
  }
  return b;
}

function outcome(fn: () => unknown): 'ok' | 'error' {
  try {
    fn();
    return 'ok';
  } catch (e) {
    if (e instanceof MemscopeError) return 'error';
    throw new Error(`not a MemscopeError: ${String(e)}`, { cause: e });
  }
}

describe('fuzz: mutated and truncated real pickles', () => {
  const seeds: [string, Uint8Array, number][] = [
    ['small_3seg', readFileSync(resolve(fixtures, 'small_3seg.pickle')), 2000],
    ['state_only_259seg', readFileSync(resolve(fixtures, 'state_only_259seg.pickle')), 60],
    [
      'synthetic trace (shared frames, big ints, floats, tuples)',
      pythonPickle(
        `{'segments': [{'address': 2**40 + i * 4096, 'total_size': 4096, 'allocated_size': 4096, 'active_size': 4096, 'requested_size': 4000, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': fr[:2], 'blocks': [{'address': 2**40 + i * 4096, 'size': 4096, 'requested_size': 4000, 'state': 'active_allocated', 'frames': fr}]} for i in range(3)],
          'device_traces': [[{'action': a, 'addr': 2**47 + i, 'size': 512 * i, 'stream': 0, 'time_us': 1748732571481678 + i, 'frames': fr[i % 3:]} for i, a in enumerate(['alloc', 'free_requested', 'free_completed', 'segment_alloc'] * 5)]],
          'allocator_settings': {'garbage_collection_threshold': 0.5, 'x': None, 'y': True, 'big': 2**70}}`,
        4,
        "fr = [{'name': 'f%d' % i, 'filename': '/a/b%d.py' % i, 'line': i} for i in range(5)]",
      ),
      1000,
    ],
  ];

  seeds.push([
    'protocol 2 (GLOBAL/REDUCE for bytes and sets, BINPUT, TUPLE)',
    pythonPickle(`{'b': b'\\x00\\xff' * 20, 's': {1, 2, 3}, 'f': frozenset([4]), 'ba': bytearray(b'xy'), 't': (1, (2, 3), 'x' * 300), 'big': 2**100}`, 2),
    600,
  ]);

  for (const [name, source, count] of seeds) {
    it(`${name}: ${count} mutants each parse or fail with MemscopeError, quickly`, () => {
      expect(readPickle(source)).toBeTruthy();
      const r = mulberry32(0x5eed + count);
      const tally = { ok: 0, error: 0 };
      let slowest = 0;
      for (let i = 0; i < count; i++) {
        const m = mutate(source, r);
        const t0 = performance.now();
        tally[outcome(() => readPickle(m))]++;
        tally[outcome(() => readSnapshot(m))]++;
        slowest = Math.max(slowest, performance.now() - t0);
      }
      // Both outcomes occur (the mutations are neither all fatal nor all harmless), nothing hangs.
      expect(tally.error).toBeGreaterThan(count / 4);
      expect(tally.ok).toBeGreaterThan(0);
      expect(slowest).toBeLessThan(1000);
    });
  }

  it('reading in pieces gives the same result or the same error (same offset) as reading whole', () => {
    const source = readFileSync(resolve(fixtures, 'state_only_259seg.pickle'));
    const r = mulberry32(0xb10c);
    const message = (fn: () => unknown): string => {
      try {
        fn();
        return 'ok';
      } catch (e) {
        if (!(e instanceof MemscopeError)) throw e;
        return e.message;
      }
    };
    for (let i = 0; i < 40; i++) {
      const m = i === 0 ? source : mutate(source, r);
      const whole = message(() => readSnapshot(m));
      const pieces = message(() =>
        readSnapshotPieces((into, at) => {
          const n = Math.min(into.length, m.length - at);
          into.set(m.subarray(at, at + n));
          return n;
        }, m.length, { pieceBytes: 1000 }),
      );
      expect(pieces).toBe(whole);
    }
  });

  it('every truncation of a real snapshot fails with the offset', () => {
    const source = readFileSync(resolve(fixtures, 'small_3seg.pickle'));
    for (let n = 0; n < source.length; n++) {
      let error: unknown;
      try {
        readSnapshot(source.subarray(0, n));
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(MemscopeError);
      expect((error as Error).message).toMatch(/^pickle offset \d+: /);
    }
  });
});
