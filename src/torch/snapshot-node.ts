/**
 * Reads a pickled PyTorch memory snapshot from a path (Node only). Files up to 128 MiB are read
 * whole (fastest); bigger ones in 64 MiB pieces, so a 1 GB snapshot does not cost 1 GB of RAM
 * for its bytes on top of the model.
 */
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { readSnapshot, readSnapshotPieces, type ReadSnapshotPiecesOptions } from './snapshot-decoder.js';
import type { MemorySnapshot } from './snapshot.js';

const WHOLE_FILE_LIMIT = 128 << 20;

export function readSnapshotFile(path: string, options: ReadSnapshotPiecesOptions = {}): MemorySnapshot {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size <= WHOLE_FILE_LIMIT) return readSnapshot(readFileSync(fd), options);
    return readSnapshotPieces((into, offset) => readSync(fd, into, 0, into.length, offset), size, options);
  } finally {
    closeSync(fd);
  }
}
