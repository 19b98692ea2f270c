// The primer snapshot read before large files (src/torch/snapshot-primer.ts). Its own file, so that
// the process-wide "primed" state starts fresh here.
import { describe, it, expect } from 'vitest';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { writePickle } from '../../src/torch/pickle/writer.js';
import { normaliseSnapshot, readerOf, readSnapshot, readSnapshotPieces, snapshotReaderPrimed } from '../../src/torch/snapshot-decoder.js';
import { primerSnapshotBytes } from '../../src/torch/snapshot-primer.js';
import { writePrimerSnapshot } from '../../src/torch/snapshot-primer-source.js';
import { python } from './python.js';
import { resolved } from './resolved-snapshot.js';

const piecesOf = (bytes: Uint8Array, pieceBytes: number) => readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes });

describe('the primer snapshot', () => {
  const bytes = primerSnapshotBytes();

  it('is what its source writes (run `npm run gen:primer` after changing snapshot-primer-source.ts)', () => {
    expect(Buffer.from(bytes).equals(Buffer.from(writePrimerSnapshot()))).toBe(true);
  });

  it('is a standard pickle with the features big files reach late: memo indices past 256, several 4 KiB pieces', () => {
    const out = python(
      [
        'import pickle, pickletools, sys, collections',
        'b = sys.stdin.buffer.read()',
        'd = pickle.loads(b)',
        'ops = collections.Counter(op.name for op, _, _ in pickletools.genops(b))',
        'print(len(d["segments"]), sum(len(s["blocks"]) for s in d["segments"]), len(d["device_traces"][0]), ops["LONG_BINGET"] > 0, ops["MEMOIZE"] > 256)',
      ].join('\n'),
      bytes,
    )
      .toString()
      .trim();
    expect(out).toBe('24 60 301 True True');
    expect(bytes.length).toBeGreaterThan(4 * 4096);
  });

  it('reads the same through the fast lanes, the generic path and in pieces, with every action and block state', () => {
    const s = readSnapshot(bytes);
    expect(resolved(normaliseSnapshot(readPickle(bytes)))).toEqual(resolved(s));
    expect(resolved(piecesOf(bytes, 4096))).toEqual(resolved(s));
    expect([...new Set(Array.from(s.traces[0]!.action, (a) => s.actionNames[a]))].sort()).toEqual(
      ['alloc', 'free_completed', 'free_requested', 'oom', 'segment_alloc', 'segment_free', 'segment_map', 'segment_unmap'],
    );
    expect([...new Set(Array.from(s.blocks.state, (b) => s.stateNames[b]))].sort()).toEqual(['active_allocated', 'active_pending_free', 'inactive']);
  });

  it('reports progress after each piece, ending at the file size', () => {
    const seen: number[] = [];
    readSnapshotPieces(readerOf(bytes), bytes.length, {
      pieceBytes: 4096,
      onProgress: (done, total) => seen.push(total === bytes.length ? done : -1),
    });
    expect(seen.length).toBeGreaterThan(bytes.length / 4096 - 1);
    expect(seen.every((x, i) => x > 0 && (i === 0 || x > seen[i - 1]!))).toBe(true);
    expect(seen.at(-1)).toBe(bytes.length);
  });

  it('is read once, before the first snapshot of 16 MiB or more, and changes nothing in that read', () => {
    const small = writePickle(new Map<string, unknown>([['segments', []], ['device_traces', [[]]]]));
    readSnapshot(small);
    expect(snapshotReaderPrimed()).toBe(false);
    // A real layout with 16 MiB of allocator settings text: big enough to prime, cheap to write.
    const big = writePickle(
      new Map<string, unknown>([
        ['segments', (readPickle(bytes) as Map<string, unknown>).get('segments')],
        ['device_traces', [[]]],
        ['allocator_settings', new Map([['PYTORCH_CUDA_ALLOC_CONF', 'x'.repeat(16 << 20)]])],
      ]),
    );
    const first = piecesOf(big, 1 << 20);
    expect(snapshotReaderPrimed()).toBe(true);
    expect(resolved(first)).toEqual(resolved(normaliseSnapshot(readPickle(big))));
  });
});
