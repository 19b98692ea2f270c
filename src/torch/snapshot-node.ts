/**
 * Reads a pickled PyTorch memory snapshot from a path (Node only), in 8 MiB pieces through one
 * reused buffer: a 1 GB snapshot does not cost 1 GB of RAM for its bytes on top of the model, and
 * even a 100 MB file reads faster than whole (filling a fresh file-sized buffer page-faults every
 * page; docs/PICKLE.md, "Reading big files in pieces").
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { readSnapshotPieces, type ReadSnapshotPiecesOptions } from './snapshot-decoder.js';
import type { MemorySnapshot } from './snapshot.js';

export function readSnapshotFile(path: string, options: ReadSnapshotPiecesOptions = {}): MemorySnapshot {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    return readSnapshotPieces((into, offset) => readSync(fd, into, 0, into.length, offset), size, options);
  } finally {
    closeSync(fd);
  }
}
