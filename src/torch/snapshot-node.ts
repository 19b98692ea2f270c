/**
 * Reads a pickled PyTorch memory snapshot from a path (Node only). Files up to 128 MiB are read
 * whole (fastest); bigger ones in 64 MiB pieces, so a 1 GB snapshot does not cost 1 GB of RAM
 * for its bytes on top of the model.
 */
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { readSnapshot, readSnapshotAsync, readSnapshotPieces, type ReadSnapshotPiecesOptions } from './snapshot-decoder.js';
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

/**
 * `readSnapshotFile`, with files up to 128 MiB read on libuv's thread pool in chunks that are
 * decoded while the next one is read (`readSnapshotAsync`): reading then costs the decoder almost
 * nothing (~55 ms of the 100 MB snapshot's ~60 ms read). Bigger files are read in pieces as by
 * `readSnapshotFile`. Same result and errors.
 */
export async function readSnapshotFileAsync(path: string, options: ReadSnapshotPiecesOptions = {}): Promise<MemorySnapshot> {
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    if (size > WHOLE_FILE_LIMIT) return readSnapshotPieces((into, offset) => readSync(file.fd, into, 0, into.length, offset), size, options);
    return await readSnapshotAsync(async (into, offset) => (await file.read(into, 0, into.length, offset)).bytesRead, size, options);
  } finally {
    await file.close();
  }
}
