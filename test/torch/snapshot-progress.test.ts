// readSnapshotPieces reports its progress after each piece it has read (src/torch/snapshot-decoder.ts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readerOf, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { fixture } from '../support/fixtures.js';

describe('readSnapshotPieces progress', () => {
  it('is reported after each piece, rising, ending at the file size', () => {
    const bytes = new Uint8Array(readFileSync(fixture('torch/older_no_settings_6633blocks.pickle')));
    const seen: number[] = [];
    readSnapshotPieces(readerOf(bytes), bytes.length, {
      pieceBytes: 4096,
      onProgress: (done, total) => seen.push(total === bytes.length ? done : -1),
    });
    expect(seen.length).toBeGreaterThan(bytes.length / 4096 - 1);
    expect(seen.every((x, i) => x > 0 && (i === 0 || x > seen[i - 1]!))).toBe(true);
    expect(seen.at(-1)).toBe(bytes.length);
  });
});
