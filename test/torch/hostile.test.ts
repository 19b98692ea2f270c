// Hostile and malformed snapshots: each small file here is costly, unsafe or misleading if read
// naively. Every case must end in a result or one MemscopeError, quickly and in bounded memory.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { isMemscopeError, type MemscopeError } from '../../src/core/errors.js';
import { escapeControl } from '../../src/render/escape.js';
import { readPickle, toPlain } from '../../src/torch/pickle/reader.js';
import { fragmentation, formatFrame } from '../../src/torch/snapshot-analysis.js';
import { normaliseSnapshot, readSnapshot } from '../../src/torch/index.js';
import { readerOf, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { pythonFile } from './python.js';
import { fixture } from '../support/fixtures.js';

const script = resolve(import.meta.dirname, 'make-hostile-pickles.py');
const made = new Map<string, Uint8Array>();
function hostile(name: string): Uint8Array {
  let bytes = made.get(name);
  if (!bytes) made.set(name, (bytes = new Uint8Array(pythonFile(script, [name]))));
  return bytes;
}

function errorOf(f: () => unknown): MemscopeError {
  try {
    f();
  } catch (e) {
    if (isMemscopeError(e)) return e;
    throw e;
  }
  throw new Error('expected a MemscopeError, got a result');
}

/** Runs `f` and returns its wall time in ms. */
function timed(f: () => void): number {
  const t = performance.now();
  f();
  return performance.now() - t;
}

describe('sharing: a shared value costs what materialising it costs', () => {
  it('a segment of 1,000 blocks referenced a million times meets the maxBytes limit (fast path, whole and in pieces)', () => {
    const bytes = hostile('shared-segment');
    expect(bytes.length).toBeLessThan(3 << 20);
    let e!: MemscopeError;
    const ms = timed(() => (e = errorOf(() => readSnapshot(bytes))));
    expect(e.code).toBe('pickle-limit');
    expect(e.message).toMatch(/^pickle offset \d+: decoded data exceeds the memory limit of 8589934592 bytes/);
    expect(ms).toBeLessThan(30_000);
    expect(errorOf(() => readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes: 1 << 16 })).message).toBe(e.message);
  });

  it('the same with a segment the recogniser leaves generic', () => {
    const e = errorOf(() => readSnapshot(hostile('shared-generic-segment')));
    expect(e.code).toBe('pickle-limit');
    expect(e.message).toMatch(/exceeds the memory limit/);
  });

  it('a smaller budget is met proportionally sooner: 100 references fit in 8 MiB, the million do not', () => {
    // The real content (one segment, 1,000 blocks) fits a small budget; its sharing does not.
    const e = errorOf(() => readSnapshot(hostile('shared-segment'), { limits: { maxBytes: 8 << 20 } }));
    expect(e.message).toMatch(/memory limit of 8388608 bytes/);
  });

  it('a list shared 2^40 times in allocator_settings or an unknown key: a clear limit error, not a heap abort', () => {
    for (const name of ['shared-settings', 'shared-unknown-key']) {
      const bytes = hostile(name);
      expect(bytes.length).toBeLessThan(1024);
      // The fast path copies it for the model (toPlain counts the expansion); readPickle already
      // charges the heavy shared list each time it is placed again.
      const fast = errorOf(() => readSnapshot(bytes));
      expect(fast.code).toBe('pickle-limit');
      expect(fast.message).toMatch(/^pickle value expands to more than 67108864 values/);
      const generic = errorOf(() => normaliseSnapshot(readPickle(bytes)));
      expect(generic.code).toBe('pickle-limit');
      expect(generic.message).toMatch(/^pickle offset \d+: decoded data exceeds the memory limit of 8589934592 bytes/);
    }
  });

  it('toPlain copies a shared value once and counts it at every place', () => {
    const inner = [1, 2, 3];
    const outer = [inner, inner, inner];
    const plain = toPlain(outer) as unknown[][];
    expect(plain).toEqual([[1, 2, 3], [1, 2, 3], [1, 2, 3]]);
    expect(plain[0]).toBe(plain[1]);
    // 1 outer + 3 × (1 list + 3 ints) = 13 values
    expect(toPlain(outer, 1000, 13)).toEqual(plain);
    expect(errorOf(() => toPlain(outer, 1000, 12)).code).toBe('pickle-limit');
  });
});

describe('impossible sizes', () => {
  it('a total_size of 2^50 gives a bounded segment map, quickly', () => {
    const snap = readSnapshot(hostile('huge-total-size'));
    expect(snap.segments[0]!.totalSize).toBe(2 ** 50);
    let report!: ReturnType<typeof fragmentation>;
    const ms = timed(() => (report = fragmentation(snap)));
    expect(ms).toBeLessThan(5_000);
    expect(report.segments[0]!.map.length).toBeLessThanOrEqual(4097);
  });

  it('a negative total_size is refused, naming the segment', () => {
    const bytes = hostile('negative-total-size');
    for (const read of [() => readSnapshot(bytes), () => normaliseSnapshot(readPickle(bytes))]) {
      expect(errorOf(read).message).toMatch(/^snapshot: segments\[0\]\.total_size: -\d+ is negative/);
    }
  });

  it('a LONG4 of 16 MB is refused at once, in a one-line message', () => {
    const n = 16 << 20;
    const bytes = new Uint8Array(2 + 5 + n + 1);
    bytes.set([0x80, 0x04, 0x8b, n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24]);
    bytes.fill(0x41, 7, 7 + n);
    bytes[bytes.length - 1] = 0x2e;
    let e!: MemscopeError;
    const ms = timed(() => (e = errorOf(() => readPickle(bytes))));
    expect(ms).toBeLessThan(2_000);
    expect(e.code).toBe('pickle-limit');
    expect(e.message).toBe('pickle offset 2: LONG4 (0x8b) integer of 16777216 bytes; memscope reads integers of up to 256 bytes');
  });
});

describe('the fast lanes refuse what the general path refuses', () => {
  // Where a block dict's MEMOIZE or MARK belongs inside the segment lane, any other opcode must be
  // met by the machine (refused, or read as what it is), never stepped over.
  const planted = [0x93 /* STACK_GLOBAL */, 0x52 /* REDUCE */, 0x62 /* BUILD */, 0x84 /* EXT4 */, 0xff];
  const base = (): Uint8Array => hostile('small-segments');
  /** Offsets of each block dict's EMPTY_DICT MEMOIZE MARK inside the segments. */
  const blockDicts = (b: Uint8Array): number[] => {
    const out: number[] = [];
    for (let i = 0; i + 2 < b.length; i++) if (b[i] === 0x7d && b[i + 1] === 0x94 && b[i + 2] === 0x28) out.push(i);
    return out;
  };

  it('the untouched file reads (3 segments, 12 blocks)', () => {
    const snap = readSnapshot(base());
    expect(snap.segments.length).toBe(3);
    expect(snap.blocks.count).toBe(12);
  });

  it('an unsafe or unknown opcode in place of a block dict\'s MEMOIZE or MARK is an error on every path', () => {
    const dicts = blockDicts(base());
    expect(dicts.length).toBeGreaterThan(12);
    let cases = 0;
    for (const at of dicts) {
      for (const skip of [1, 2]) {
        for (const op of planted) {
          const b = Uint8Array.from(base());
          b[at + skip] = op;
          const fast = errorOf(() => readSnapshot(b));
          const pieces = errorOf(() => readSnapshotPieces(readerOf(b), b.length, { pieceBytes: 64 }));
          const generic = errorOf(() => normaliseSnapshot(readPickle(b)));
          expect(fast.message).toBe(generic.message);
          expect(pieces.message).toBe(generic.message);
          cases++;
        }
      }
    }
    expect(cases).toBe(dicts.length * 2 * planted.length);
  });

  it('a fault inside a lane sends the file to the general path instead of crashing (a 200-frame stack repeated)', () => {
    const bytes = hostile('long-stack');
    const generic = normaliseSnapshot(readPickle(bytes));
    for (const snap of [readSnapshot(bytes), readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes: 256 })]) {
      expect(snap.traces[0]!.count).toBe(4);
      expect(Array.from(snap.traces[0]!.stack, (s) => snap.stacks.offsets[s + 1]! - snap.stacks.offsets[s]!)).toEqual([200, 200, 200, 200]);
      expect(Array.from(snap.traces[0]!.addr)).toEqual(Array.from(generic.traces[0]!.addr));
    }
  });

  it('a FRAME longer than the rest of the file is "truncated", as CPython says, on every path', () => {
    const good = hostile('small-segments');
    expect(good[2]).toBe(0x95);
    const b = Uint8Array.from(good);
    // The first frame's length + 100: every opcode still completes, but the file is shorter than it says.
    const view = new DataView(b.buffer);
    view.setUint32(3, view.getUint32(3, true) + 100, true);
    for (const read of [() => readSnapshot(b), () => readPickle(b), () => readSnapshotPieces(readerOf(b), b.length, { pieceBytes: 64 })]) {
      const e = errorOf(read);
      expect(e.code).toBe('pickle-truncated');
      expect(e.message).toMatch(/^pickle offset 2: FRAME \(0x95\) of \d+ bytes runs past the end of the file/);
    }
  });
});

describe('terminal safety: file text is escaped in messages and frame labels', () => {
  it('escapeControl makes ESC, OSC, BEL, CR, DEL, C1 and bidi overrides visible', () => {
    expect(escapeControl('plain text, ünïcode')).toBe('plain text, ünïcode');
    expect(escapeControl('a\x1b]0;pwned\x07b\rc\x7f\x9b\u202e')).toBe('a\\x1b]0;pwned\\x07b\\x0dc\\x7f\\x9b\\u202e');
  });

  it('a global named with escape sequences is refused with the name escaped', () => {
    const name = 'os\x1b]0;owned\x07\x1b[2K\r';
    const bytes = Uint8Array.from([0x80, 0x02, 0x63, ...Buffer.from(`${name}\nsystem\n`, 'latin1'), 0x2e]);
    const e = errorOf(() => readPickle(bytes));
    expect(e.code).toBe('pickle-unsafe');
    expect(e.message).not.toMatch(/[\x00-\x1f\x7f]/);
    expect(e.message).toContain('os\\x1b]0;owned\\x07\\x1b[2K\\x0d.system');
  });

  it('a STACK_GLOBAL name of a megabyte is quoted shortened', () => {
    const long = 'x'.repeat(1 << 20);
    const e = errorOf(() =>
      readPickle(Uint8Array.from([0x80, 0x04, 0x8c, 2, ...Buffer.from('os'), 0x8d, ...new Uint8Array(new BigUint64Array([BigInt(long.length)]).buffer), ...Buffer.from(long), 0x93, 0x2e])),
    );
    expect(e.code).toBe('pickle-unsafe');
    expect(e.message.length).toBeLessThan(400);
    expect(e.message).toContain(`(${long.length + 3} characters)`);
  });

  it('formatFrame escapes control characters in a frame name and file name', () => {
    const label = formatFrame({ name: 'evil\x1b[31mred\r', filename: 'a\x07.py', line: 3 });
    expect(label).not.toMatch(/[\x00-\x1f\x7f]/);
    expect(label).toBe('a\\x07.py:3:evil\\x1b[31mred\\x0d');
  });
});

describe('gzipped snapshots are read as they inflate', () => {
  it('the same model as the plain file; the inflated data is read up to STOP, not held whole', async () => {
    const plain = new Uint8Array(readFileSync(fixture('torch/older_no_settings_6633blocks.pickle')));
    const dir = mkdtempSync(join(tmpdir(), 'memscope-gz-'));
    // 64 MiB of zeros after STOP: past the limit below, so a reader that inflates the whole file
    // first fails with gzip-limit; one that reads as it inflates stops at STOP.
    const tail = new Uint8Array(64 << 20);
    const file = join(dir, 'snapshot.pickle.gz');
    writeFileSync(file, gzipSync(Buffer.concat([plain, tail]), { level: 1 }));
    const opened = await openMemoryFile(file, { maxDecompressedBytes: plain.length + (16 << 20) });
    expect(opened.kind).toBe('snapshot');
    const expected = readSnapshot(plain);
    if (opened.kind !== 'snapshot') return;
    expect(opened.snapshot.segments).toEqual(expected.segments);
    expect(Array.from(opened.snapshot.blocks.size)).toEqual(Array.from(expected.blocks.size));
    expect(opened.snapshot.traces.map((t) => t.count)).toEqual(expected.traces.map((t) => t.count));
  });
});

describe('sharing on the generic path', () => {
  it('readPickle charges a heavy value placed again: the million-times segment meets maxBytes', () => {
    const e = errorOf(() => readPickle(hostile('shared-segment')));
    expect(e.code).toBe('pickle-limit');
    expect(e.message).toMatch(/decoded data exceeds the memory limit/);
  });

  it('the sharing every snapshot has (frames, stacks) stays free: a real traced snapshot reads the same on both paths', () => {
    const bytes = new Uint8Array(readFileSync(fixture('torch/newest_format_trace.pickle')));
    const generic = normaliseSnapshot(readPickle(bytes, { maxBytes: bytes.length * 16 }));
    const fast = readSnapshot(bytes);
    expect(generic.blocks.count).toBe(fast.blocks.count);
    expect(generic.traces.map((t) => t.count)).toEqual(fast.traces.map((t) => t.count));
    expect(generic.traces[0]!.count).toBeGreaterThan(1000);
  });
});

describe('a stack shared by every entry and block costs one stack id on both paths', () => {
  // PyTorch shares one frames list between the entries and blocks a call site makes; both paths
  // intern it, so placing it again takes nothing from maxBytes on either (docs/PICKLE.md, Safety model).
  const outcome = (read: () => unknown): string => {
    try {
      read();
      return 'ok';
    } catch (e) {
      if (!isMemscopeError(e)) throw e;
      return `${e.code}: ${e.message}`;
    }
  };

  it('a 1,000-frame stack placed 31,000 times reads within a budget of 16 times the file, alike on both paths', () => {
    const bytes = hostile('shared-stack');
    const limits = { maxBytes: bytes.length * 16 };
    const generic = normaliseSnapshot(readPickle(bytes, limits));
    const fast = readSnapshot(bytes, { limits });
    for (const snap of [generic, fast]) {
      // The empty stack and the one shared stack.
      expect(snap.stacks.count).toBe(2);
      expect(snap.traces[0]!.count).toBe(30_000);
      expect(new Set(snap.traces[0]!.stack)).toEqual(new Set([1]));
      expect(new Set(snap.blocks.stack)).toEqual(new Set([1]));
      expect(snap.stacks.offsets[2]! - snap.stacks.offsets[1]!).toBe(1000);
    }
    expect(generic.frames.map((f) => formatFrame(f))).toEqual(fast.frames.map((f) => formatFrame(f)));
  });

  it('the same limit errors, at the same offsets, on both paths', () => {
    const bytes = hostile('shared-stack');
    const results = new Set<string>();
    for (const f of [0.05, 0.3, 0.8, 1.5, 3, 6, 16]) {
      const limits = { maxBytes: Math.round(bytes.length * f) };
      const generic = outcome(() => readPickle(bytes, limits));
      expect({ f, result: outcome(() => readSnapshot(bytes, { limits })) }).toEqual({ f, result: generic });
      results.add(generic);
    }
    expect(results.has('ok')).toBe(true);
    expect(results.size).toBeGreaterThan(3);
  });

  it('a heavy list shared under any other key is still charged', () => {
    // The same frames list, also placed 30,000 times as an unknown top-level key's items.
    const e = errorOf(() => readPickle(hostile('shared-stack-elsewhere'), { maxBytes: hostile('shared-stack-elsewhere').length * 16 }));
    expect(e.code).toBe('pickle-limit');
    expect(e.message).toMatch(/decoded data exceeds the memory limit/);
  });
});
